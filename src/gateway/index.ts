export { loadGatewayConfig, type GatewayConfig } from './config.ts';
export { GatewayConfigError, GatewayError } from './errors.ts';
export { startGateway, type RunningGateway } from './gateway.ts';
export { generateMasterKey } from './keys.ts';
export { openStore, redactUrl } from './storage/index.ts';
