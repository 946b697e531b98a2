import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * A throwaway self-signed certificate for 127.0.0.1 and localhost (valid one day), made by openssl(1) in `dir`: it is its own
 * authority, so trusting `certFile` (tls.setDefaultCACertificates, NODE_EXTRA_CA_CERTS) trusts it.
 */
export function selfSignedCertificate(dir: string, name: string): { key: Buffer; cert: Buffer; certFile: string } {
  const [keyFile, certFile] = [path.join(dir, `${name}.key`), path.join(dir, `${name}.pem`)];
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '1', '-subj', `/CN=${name}`, '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost'],
    { stdio: 'pipe' },
  );
  return { key: readFileSync(keyFile), cert: readFileSync(certFile), certFile };
}
