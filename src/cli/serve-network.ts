import { type Command, InvalidArgumentError, Option } from 'commander';
import { ConfigError } from '../encoder/errors.ts';
import { DEFAULT_BODY_BUFFER_FACTOR, DEFAULT_REQUEST_TIMEOUT_MS } from '../serve/http/network-limits.ts';

/**
 * After SIGTERM, how long `serve` goes on accepting (`--shutdown-grace`). Kubernetes sends SIGTERM and takes the pod
 * out of its Services' endpoints at the same time, and kube-proxy, ingresses and other clients learn of the change
 * a moment later: connections still arrive for a few seconds. Closing the listener at once would refuse them (or
 * reset those in the accept queue). 5 s covers the propagation in a usual cluster, as the `preStop: sleep 5` that
 * Kubernetes' documentation suggests would.
 */
export const DEFAULT_SHUTDOWN_GRACE_MS = 5_000;

/**
 * From the signal, how long `serve` waits for what is in flight before cutting it (`--shutdown-timeout`). 25 s: under
 * Kubernetes' default terminationGracePeriodSeconds of 30, so that `serve` ends by itself, having said what it cut,
 * before the SIGKILL; a client stalled in its request no longer keeps a stopping server alive for minutes.
 */
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 25_000;

/** What commander's options give for the options of this module (and the address and body options they depend on). */
export interface ServeNetworkOptions {
  httpHostname: string;
  grpcHostname: string;
  bodyLimit: number;
  requestTimeout: number;
  bodyBufferLimit?: number;
  allowedHosts?: string[];
  allowedOrigins?: string[];
  shutdownGrace: number;
  shutdownTimeout: number;
  certFile?: string;
  keyFile?: string;
}

export interface ServeNetworkSettings {
  /** `--grpc-hostname`, else `--http-hostname` when that was given, else `::`. */
  grpcHostname: string;
  http: { requestTimeoutMs: number; bodyBufferLimitBytes: number; allowedHosts: string[]; allowedOrigins: string[] };
  shutdown: { graceMs: number; timeoutMs: number };
  /** `--cert-file` and `--key-file`: HTTPS and gRPC over TLS; null: plain. */
  tls: { certFile: string; keyFile: string } | null;
}

/** Adds serve's timeout, body-memory, Host/Origin and shutdown options. */
export function addServeNetworkOptions(command: Command): Command {
  return command
    .option('--request-timeout <ms>', 'longest a client may take to send a whole request (headers and body); then 408 and the connection is closed', parseWholeNumber(1), DEFAULT_REQUEST_TIMEOUT_MS)
    .addOption(
      new Option(
        '--body-buffer-limit <bytes>',
        `most bytes of request bodies held at once while they arrive, all connections together; more get 503 (default: ${DEFAULT_BODY_BUFFER_FACTOR} x --body-limit)`,
      ).argParser(parseWholeNumber(1, 'bytes')),
    )
    .option('--allowed-hosts <names>', 'comma-separated Host names accepted besides localhost, 127.0.0.1 and [::1] when listening on loopback without --api-key ("*": any)', parseList('host'))
    .option('--allowed-origins <origins>', 'comma-separated Origins (scheme://host[:port]) accepted besides loopback ones ("*": any)', parseList('origin'))
    .option('--shutdown-grace <ms>', 'after SIGTERM/SIGINT: /health answers 503 at once, requests are still accepted this long, then in-flight ones finish', parseWholeNumber(0), DEFAULT_SHUTDOWN_GRACE_MS)
    .option('--shutdown-timeout <ms>', 'after SIGTERM/SIGINT: what is still in flight this long after the signal is cut', parseWholeNumber(1), DEFAULT_SHUTDOWN_TIMEOUT_MS)
    .option('--cert-file <file>', 'serve HTTPS and gRPC over TLS with this PEM certificate (chain); read again at SIGHUP; needs --key-file', parsePemFileName)
    .option('--key-file <file>', "the PEM private key of --cert-file's certificate", parsePemFileName);
}

/**
 * The settings of these options. `valueSource` is commander's getOptionValueSource: gRPC follows an `--http-hostname`
 * that was given (`--http-hostname 127.0.0.1` alone would otherwise leave gRPC open on every interface), unless
 * `--grpc-hostname` was given too.
 */
export function serveNetworkSettings(options: ServeNetworkOptions, valueSource: (key: string) => string | undefined): ServeNetworkSettings {
  const given = (key: string) => (valueSource(key) ?? 'default') !== 'default';
  const grpcHostname = !given('grpcHostname') && given('httpHostname') ? options.httpHostname : options.grpcHostname;
  const bodyBufferLimitBytes = options.bodyBufferLimit ?? DEFAULT_BODY_BUFFER_FACTOR * options.bodyLimit;
  if (bodyBufferLimitBytes < options.bodyLimit) {
    throw new ConfigError(`--body-buffer-limit ${bodyBufferLimitBytes} is less than --body-limit ${options.bodyLimit}: no body of the largest size could be received`);
  }
  if (options.shutdownGrace >= options.shutdownTimeout) {
    throw new ConfigError(
      `--shutdown-grace ${options.shutdownGrace} is not less than --shutdown-timeout ${options.shutdownTimeout}: the timeout counts from the signal and must leave time to finish the requests accepted during the grace`,
    );
  }
  if ((options.certFile === undefined) !== (options.keyFile === undefined)) {
    const [given, missing] = options.certFile === undefined ? ['--key-file', '--cert-file'] : ['--cert-file', '--key-file'];
    throw new ConfigError(`${given} needs ${missing}: TLS takes a certificate and its private key, give both (or neither to serve without TLS)`);
  }
  return {
    grpcHostname,
    http: {
      requestTimeoutMs: options.requestTimeout,
      bodyBufferLimitBytes,
      allowedHosts: options.allowedHosts ?? [],
      allowedOrigins: options.allowedOrigins ?? [],
    },
    shutdown: { graceMs: options.shutdownGrace, timeoutMs: options.shutdownTimeout },
    tls: options.certFile !== undefined && options.keyFile !== undefined ? { certFile: options.certFile, keyFile: options.keyFile } : null,
  };
}

/** `--cert-file "$CERT"` with CERT unset would otherwise read as no TLS asked for. */
function parsePemFileName(value: string): string {
  if (value === '') throw new InvalidArgumentError('the file name is empty');
  return value;
}

/** An integer of at least `min`, in `unit`. */
function parseWholeNumber(min: number, unit = 'ms'): (value: string) => number {
  return (value) => {
    const parsed = Number(value);
    if (value.trim() === '' || !Number.isInteger(parsed) || parsed < min) throw new InvalidArgumentError(`"${value}" is not a whole number of ${unit} >= ${min}`);
    return parsed;
  };
}

/** A comma-separated list of Host names or origins; an origin must be `http(s)://host[:port]` and nothing more, or `*`. */
function parseList(kind: 'host' | 'origin'): (value: string, previous?: string[]) => string[] {
  return (value, previous = []) => {
    const items = value.split(',').map((item) => item.trim()).filter((item) => item !== '');
    if (items.length === 0) throw new InvalidArgumentError(`"${value}" names no ${kind}`);
    for (const item of items) {
      if (item === '*') continue;
      if (kind === 'host' && !/^(\[[0-9a-f:.]+\]|[^\s/:@[\]]+)$/i.test(item)) {
        throw new InvalidArgumentError(`"${item}" is not a host name (no scheme, port or path: example.internal, 10.0.0.5, [fd00::1])`);
      }
    }
    return [...previous, ...(kind === 'origin' ? items.map(originOf) : items)];
  };
}

/** `*`, or the origin as browsers send it (lowercase, default port left out); anything with more than an origin throws. */
function originOf(text: string): string {
  if (text === '*') return text;
  let url: URL | null = null;
  try {
    url = new URL(text);
  } catch {
    // not a URL at all
  }
  const bare = url && (url.protocol === 'http:' || url.protocol === 'https:') && url.username === '' && url.password === '' && url.pathname === '/' && !/[?#]/.test(text);
  if (!url || !bare) throw new InvalidArgumentError(`"${text}" is not an origin (scheme://host[:port], no path: https://app.example.com)`);
  return url.origin;
}
