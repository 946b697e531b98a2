export { createHttpApp, type HttpAppOptions } from './app.ts';
export { MCP_PROTOCOL_VERSION, RUN_ENCODER_TOOL } from './mcp-server.ts';
