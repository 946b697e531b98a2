// A forward proxy on loopback, as a company network puts between a gateway and its providers: plain HTTP requests in
// absolute form are passed on, HTTPS goes through CONNECT tunnels. It records what it was asked for, so a test can
// tell that a call went through it (and which did not).
import { createServer, request as httpRequest, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';

export class ForwardProxy {
  /** `GET http://host:port/path` for plain requests, `CONNECT host:port` for tunnels, in arrival order. */
  readonly requests: string[] = [];
  readonly #server: Server;
  /** CONNECT tunnels: the server lets go of their sockets, so closing it does not end them. */
  readonly #tunnels = new Set<Socket>();

  private constructor(server: Server) {
    this.#server = server;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  static async start(): Promise<ForwardProxy> {
    const server = createServer();
    const proxy = new ForwardProxy(server);
    server.on('request', (incoming, outgoing) => {
      proxy.requests.push(`${incoming.method} ${incoming.url}`);
      const target = new URL(incoming.url ?? '');
      const forwarded = httpRequest({ host: target.hostname, port: target.port, path: target.pathname + target.search, method: incoming.method, headers: incoming.headers }, (answer) => {
        outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(outgoing);
      });
      forwarded.on('error', () => outgoing.writeHead(502).end());
      incoming.pipe(forwarded);
    });
    server.on('connect', (incoming, client, head) => {
      proxy.requests.push(`CONNECT ${incoming.url}`);
      const { hostname, port } = new URL(`http://${incoming.url}`);
      const upstream = connect(Number(port), hostname, () => {
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        upstream.write(head);
        upstream.pipe(client);
        client.pipe(upstream);
      });
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
      for (const socket of [client, upstream] as Socket[]) {
        proxy.#tunnels.add(socket);
        socket.on('close', () => proxy.#tunnels.delete(socket));
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  async close(): Promise<void> {
    for (const socket of this.#tunnels) socket.destroy();
    this.#server.closeAllConnections();
    await new Promise((resolve) => this.#server.close(resolve));
  }
}
