/**
 * `serve --cert-file --key-file`: HTTPS and gRPC over TLS with throwaway certificates made by openssl, trusted by the
 * clients as their CA; SIGHUP reads the files again, so that a new connection gets the new certificate while a
 * request in flight on an old connection finishes; a pair that cannot be used is refused at start (exit 2) and left
 * aside at a reload. `serve` runs from the sources in a child process (signals are the process's).
 */
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import type { TLSSocket } from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { selfSignedCertificate } from '../helpers/certificates.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { serveRefusal } from '../helpers/run-cli.ts';
import { grpcClient, serveFromSource, type ServedModel } from '../helpers/served-model.ts';

const work = mkdtempSync(path.join(os.tmpdir(), 'serve-tls-'));
const certFile = path.join(work, 'server.pem');
const keyFile = path.join(work, 'server.key');
/**
 * grpc-js sets the TLS server name from the target, and Node refuses an IP address there: a client reaches 127.0.0.1
 * under the certificate's other name.
 */
const BY_NAME = { 'grpc.ssl_target_name_override': 'localhost', 'grpc.default_authority': 'localhost' };
const first = selfSignedCertificate(work, 'first');
const second = selfSignedCertificate(work, 'second');
let config: string;
let served: ServedModel;

/** Installs a pair as the files serve reads. */
function install(pair: { certFile: string }, keyOf: { certFile: string } = pair): void {
  copyFileSync(pair.certFile, certFile);
  copyFileSync(keyOf.certFile.replace(/\.pem$/, '.key'), keyFile);
}

interface Answer {
  status: number;
  body: string;
  /** CN of the certificate the server presented on the connection. */
  peer: string;
  reusedSocket: boolean;
}

/** An HTTPS request that trusts `ca` only; `body` written in two halves, `between` awaited in the middle. */
function request(ca: Buffer, options: { path?: string; body?: string; agent?: https.Agent; between?: () => Promise<void> } = {}): Promise<Answer> {
  const url = new URL(options.path ?? '/health', served.httpUrl);
  return new Promise((resolve, reject) => {
    const req = https.request(
      url,
      { ca, method: options.body === undefined ? 'GET' : 'POST', agent: options.agent ?? false, headers: options.body === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(options.body) } },
      (res) => {
        const peer = String((res.socket as TLSSocket).getPeerCertificate().subject?.CN);
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode!, body, peer, reusedSocket: req.reusedSocket }));
      },
    );
    req.on('error', reject);
    if (options.body === undefined) {
      req.end();
      return;
    }
    const half = Math.floor(options.body.length / 2);
    req.write(options.body.slice(0, half));
    void (options.between ?? (async () => {}))().then(() => req.end(options.body!.slice(half)), reject);
  });
}

async function sighup(expected: RegExp): Promise<void> {
  const before = served.stderr().length;
  served.child.kill('SIGHUP');
  await expect.poll(() => served.stderr().slice(before), { timeout: 10_000 }).toMatch(expected);
}

beforeAll(async () => {
  const model = await generateTinyModel({ modelType: 'embedding' });
  config = path.join(work, 'tls.yaml');
  writeFileSync(config, `encoder:\n  name: tls-model\n  path: ${model}\n  model_type: embedding\n`);
  install(first);
  served = await serveFromSource(config, { cacheDir: path.join(work, 'cache'), args: ['--cert-file', certFile, '--key-file', keyFile] });
}, 120_000);

afterAll(async () => {
  await served?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe('serve over TLS', () => {
  it('answers HTTPS to a client that trusts the certificate, and refuses the handshake to one that does not', async () => {
    expect(served.httpUrl).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(served.stderr()).toContain(`TLS: certificate ${certFile}, key ${keyFile}`);
    const health = await request(first.cert);
    expect(health).toMatchObject({ status: 200, peer: 'first' });
    const predicted = await request(first.cert, { path: '/predict', body: JSON.stringify({ inputs: ['over tls'], normalize: true }) });
    expect(predicted.status).toBe(200);
    expect(JSON.parse(predicted.body).results).toHaveLength(1);
    await expect(request(second.cert)).rejects.toThrow(/self[- ]signed|unable to verify|certificate/i);
    // plain HTTP on the TLS port is no request
    await expect(fetch(served.httpUrl.replace('https:', 'http:') + '/health')).rejects.toThrow();
  });

  it('answers gRPC to a client with createSsl and the certificate as root, and not to an insecure one', async () => {
    const client = grpcClient(served.grpcAddress, 'embedding', grpc.credentials.createSsl(first.cert), BY_NAME);
    try {
      const answer = await client.predict({ inputs: ['over tls'], normalize: true });
      expect((answer.results as unknown[]).length).toBe(1);
    } finally {
      client.close();
    }
    const insecure = grpcClient(served.grpcAddress, 'embedding', grpc.credentials.createInsecure(), { 'grpc.initial_reconnect_backoff_ms': 100 });
    try {
      const error = (await insecure.predict({ inputs: ['x'] }, new grpc.Metadata()).catch((e: unknown) => e)) as grpc.ServiceError;
      expect(error.code).toBe(grpc.status.UNAVAILABLE);
    } finally {
      insecure.close();
    }
  });

  it('reloads the pair at SIGHUP: new connections get the new certificate, a request in flight on an old one finishes', async () => {
    const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      expect(await request(first.cert, { agent })).toMatchObject({ status: 200, peer: 'first', reusedSocket: false });
      // a request whose body is half sent when the certificate changes
      const inFlight = request(first.cert, {
        agent,
        path: '/predict',
        body: JSON.stringify({ inputs: ['sent across the reload'], normalize: true }),
        between: async () => {
          install(second);
          await sighup(/SIGHUP: reloaded the TLS certificate/);
        },
      });
      const finished = await inFlight;
      expect(finished).toMatchObject({ status: 200, peer: 'first', reusedSocket: true });
      expect(served.child.exitCode).toBeNull();

      expect(await request(second.cert)).toMatchObject({ status: 200, peer: 'second' });
      await expect(request(first.cert)).rejects.toThrow(/self[- ]signed|unable to verify|certificate/i);

      const client = grpcClient(served.grpcAddress, 'embedding', grpc.credentials.createSsl(second.cert), BY_NAME);
      try {
        expect(((await client.predict({ inputs: ['new channel'], normalize: true })).results as unknown[]).length).toBe(1);
      } finally {
        client.close();
      }
    } finally {
      agent.destroy();
    }
  });

  it('keeps serving the pair it has when the files at SIGHUP cannot be used', async () => {
    install(first, second); // first's certificate with second's key
    await sighup(/SIGHUP: the TLS certificate .* not reloaded, still serving the previous one: TLS: the private key does not match the certificate/);
    expect(await request(second.cert)).toMatchObject({ status: 200, peer: 'second' });
    rmSync(certFile);
    await sighup(/not reloaded, still serving the previous one: TLS: cannot read the certificate .*server\.pem \(--cert-file\): no such file/);
    expect(await request(second.cert)).toMatchObject({ status: 200, peer: 'second' });
  });
});

describe('TLS options refused at start (exit 2)', () => {
  const refusal = (args: string[]) => serveRefusal(config, args);

  it('only one of --cert-file and --key-file', async () => {
    expect(await refusal(['--cert-file', first.certFile])).toMatch(/--cert-file needs --key-file: TLS takes a certificate and its private key/);
    expect(await refusal(['--key-file', first.certFile.replace(/\.pem$/, '.key')])).toMatch(/--key-file needs --cert-file/);
  });

  it('a file that is missing or not PEM', async () => {
    expect(await refusal(['--cert-file', path.join(work, 'absent.pem'), '--key-file', keyFile])).toMatch(/TLS: cannot read the certificate .*absent\.pem \(--cert-file\): no such file/);
    const notPem = path.join(work, 'not.pem');
    writeFileSync(notPem, 'hello');
    expect(await refusal(['--cert-file', first.certFile, '--key-file', notPem])).toMatch(/TLS: .*not\.pem \(--key-file\) is not a PEM file/);
  });

  it('a key that does not match the certificate', async () => {
    expect(await refusal(['--cert-file', first.certFile, '--key-file', second.certFile.replace(/\.pem$/, '.key')])).toMatch(
      /TLS: the private key does not match the certificate \(--cert-file .*first\.pem, --key-file .*second\.key\)/,
    );
  });
});
