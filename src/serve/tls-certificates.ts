import { readFile } from 'node:fs/promises';
import tls from 'node:tls';
import type { experimental } from '@grpc/grpc-js';
import { ConfigError } from '../encoder/errors.ts';

/** A PEM certificate chain and its private key, as read from `--cert-file` and `--key-file`. */
export interface KeyAndCertificate {
  cert: Buffer;
  key: Buffer;
}

/**
 * The server's certificate and key, read from PEM files and read again on `reload()` (SIGHUP): HTTPS and gRPC take
 * the new pair for new connections, while connections already open go on with the one they were made with.
 * A pair that cannot be used (a file missing or unreadable, not PEM, a key that does not match the certificate) is a
 * ConfigError at start-up; at a reload it leaves the pair in use as it is.
 */
export class TlsCertificates {
  readonly certFile: string;
  readonly keyFile: string;
  #current: KeyAndCertificate;
  readonly #listeners = new Set<(pair: KeyAndCertificate) => void>();

  private constructor(certFile: string, keyFile: string, current: KeyAndCertificate) {
    this.certFile = certFile;
    this.keyFile = keyFile;
    this.#current = current;
  }

  static async load(certFile: string, keyFile: string): Promise<TlsCertificates> {
    return new TlsCertificates(certFile, keyFile, await readPair(certFile, keyFile));
  }

  get current(): KeyAndCertificate {
    return this.#current;
  }

  /** Reads both files again; throws a ConfigError (and changes nothing) when the new pair cannot be used. */
  async reload(): Promise<void> {
    this.#current = await readPair(this.certFile, this.keyFile);
    for (const listener of this.#listeners) listener(this.#current);
  }

  /** Calls `listener` with each pair a reload brings; returns the function that stops it. */
  onReload(listener: (pair: KeyAndCertificate) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** The pair as grpc-js's certificate-provider credentials take it: the current one, then each reload's. */
  grpcIdentityProvider(): experimental.CertificateProvider {
    const stops = new Map<experimental.IdentityCertificateUpdateListener, () => void>();
    return {
      addCaCertificateListener: () => {},
      removeCaCertificateListener: () => {},
      addIdentityCertificateListener: (listener) => {
        // not in this call: grpc-js adds its server's watcher after adding this listener, and a pair delivered before
        // then would never reach the server (its connections would be dropped as having no credentials)
        queueMicrotask(() => {
          if (stops.has(listener)) listener({ certificate: this.#current.cert, privateKey: this.#current.key });
        });
        stops.set(listener, this.onReload((pair) => listener({ certificate: pair.cert, privateKey: pair.key })));
      },
      removeIdentityCertificateListener: (listener) => {
        stops.get(listener)?.();
        stops.delete(listener);
      },
    };
  }
}

async function readPair(certFile: string, keyFile: string): Promise<KeyAndCertificate> {
  const [cert, key] = await Promise.all([readPem(certFile, '--cert-file', 'certificate'), readPem(keyFile, '--key-file', 'private key')]);
  try {
    // what a TLS server would do with them: parses both and checks that the key is the certificate's
    tls.createSecureContext({ cert, key });
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === 'ERR_OSSL_X509_KEY_VALUES_MISMATCH' ? 'the private key does not match the certificate' : (error as Error).message;
    throw new ConfigError(`TLS: ${reason} (--cert-file ${certFile}, --key-file ${keyFile})`, { cause: error });
  }
  return { cert, key };
}

async function readPem(file: string, option: string, what: string): Promise<Buffer> {
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason = code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : code === 'EISDIR' ? 'it is a directory' : (error as Error).message;
    throw new ConfigError(`TLS: cannot read the ${what} ${file} (${option}): ${reason}`, { cause: error });
  }
  if (!bytes.includes('-----BEGIN ')) throw new ConfigError(`TLS: ${file} (${option}) is not a PEM file: no "-----BEGIN" line`);
  return bytes;
}
