import type { Command } from 'commander';
import { parseHostname, parsePort } from './arguments.ts';
import { addConfigOption, type ModelSource } from './model-source.ts';
import type { CliContext, CliIo } from './program.ts';
import { addDeploymentOptions, addModelServingOptions, serveModel, type ModelServingOptions } from './serve-command.ts';
import { serveNetworkSettings } from './serve-network.ts';

interface McpCommandOptions extends Omit<ModelServingOptions, 'httpHostname' | 'grpcHostname'> {
  hostname: string;
  port: number;
}

/**
 * `mcp`: mozilla-ai/encoderfile's command of that name (same flags and defaults: `--hostname 0.0.0.0`, `--port 9100`,
 * MCP over Streamable HTTP at /mcp). It is `serve` with HTTP only on that address: the same HTTP app (so /health and
 * the REST routes answer beside /mcp), no gRPC, and every serve option that is not about addresses.
 */
export function registerMcpCommand(program: Command, io: CliIo, source: ModelSource, context: CliContext): void {
  const command = program.command('mcp').description("Serve the model's MCP tool (run_encoder) over Streamable HTTP at /mcp, as encoderfile's mcp command; no gRPC");
  addConfigOption(command, source);
  command.option('--hostname <host>', 'address to listen on', parseHostname, '0.0.0.0').option('--port <port>', 'port', parsePort, 9100);
  addModelServingOptions(command).action(async (options: McpCommandOptions) => {
    // one address, the HTTP one: the network settings' gRPC host is unused
    const addressed = { ...options, httpHostname: options.hostname, grpcHostname: options.hostname };
    await serveModel({ io, source, context }, addressed, serveNetworkSettings(addressed, () => undefined), {
      http: { host: options.hostname, port: options.port, flags: '--port, --hostname' },
      grpc: null,
      mcpFirst: true,
    });
  });
  // timeouts, body memory, Host and Origin, shutdown, TLS, onnxruntime's session, OpenTelemetry
  addDeploymentOptions(command);
}
