/**
 * The environment Node's own agents and `fetch` take their proxy from (HTTP_PROXY, HTTPS_PROXY, NO_PROXY) when its
 * switch is on (NODE_USE_ENV_PROXY=1, or --use-env-proxy), else undefined. Agents that SDKs and the gateway make
 * themselves do not follow that switch unless given this as `proxyEnv`: with it, every provider call goes the same
 * way.
 */
export function nodeProxyEnv(): NodeJS.ProcessEnv | undefined {
  const on = process.env.NODE_USE_ENV_PROXY === '1' || [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)].includes('--use-env-proxy');
  return on ? process.env : undefined;
}
