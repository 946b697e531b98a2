import { NodeHttpHandler } from '@smithy/node-http-handler';
import { nodeProxyEnv } from './proxy-env.ts';

/**
 * The request handler of the Hub's AWS clients (Bedrock, SageMaker): HTTP/1.1 with keep-alive (the Bedrock runtime
 * client's default opens a new HTTP/2 session, a new TLS connection, for every request: it isolates sessions for
 * bidirectional streams, which the Hub does not use), through the environment's proxy when Node's switch is on.
 */
export function awsRequestHandler(): NodeHttpHandler {
  const proxyEnv = nodeProxyEnv();
  return new NodeHttpHandler({ httpAgent: { keepAlive: true, proxyEnv }, httpsAgent: { keepAlive: true, proxyEnv } });
}
