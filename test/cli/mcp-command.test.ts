/**
 * `encoder mcp -c <config>`, encoderfile's `mcp` command run from source in a child process: MCP over Streamable HTTP
 * at /mcp on --hostname/--port, called with the MCP SDK's own client; the tool answers as POST /predict does on the
 * same port; over HTTPS with encoderfile's --cert-file/--key-file. A port in use is a clear error with serve's exit code
 * (2); SIGTERM stops it. The built executable's
 * `mcp`: test/e2e/encoderfile-config-executable.test.ts.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runExecutableAsync, startListening, type ListeningExecutable } from '../helpers/executables.ts';
import { selfSignedCertificate } from '../helpers/certificates.ts';
import { generateTinySentenceEmbeddingModel } from '../helpers/generated-models.ts';
import { runCliCaptured } from '../helpers/run-cli.ts';
import { mcpClient } from '../helpers/served-model.ts';
import { repoRoot } from '../helpers/shared-fixtures.ts';

const main = path.join(repoRoot, 'src', 'cli', 'main.ts');
let work: string;
let configFile: string;
let server: ListeningExecutable;
let url: string;
let client: Client;

beforeAll(async () => {
  work = mkdtempSync(path.join(os.tmpdir(), 'cli-mcp-'));
  // the layout asks for unit-length vectors; an encoderfile: file gives encoderfile's (not normalised)
  const model = await generateTinySentenceEmbeddingModel({ normalize: true });
  configFile = path.join(work, 'encoderfile.yml');
  writeFileSync(configFile, `encoderfile:\n  name: minilm-like\n  path: ${model}\n  model_type: sentence_embedding\n`);
  server = await startListening(
    process.execPath,
    [main, 'mcp', '-c', configFile, '--hostname', '127.0.0.1', '--port', '0', '--shutdown-grace', '0', '--workers', '1'],
    { cacheDir: path.join(work, 'cache') },
    /MCP +(http:\/\/\S+)\/mcp [\s\S]*batching: .*\n/,
  );
  url = server.address;
  client = await mcpClient(url);
}, 90_000);

afterAll(async () => {
  await client?.close();
  await server?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe('encoder mcp', () => {
  it('serves the model\'s tool at /mcp; its result is POST /predict\'s', async () => {
    expect(server.stderr()).toMatch(/^serving minilm-like \(sentence_embedding\)\n {2}MCP {3}http:\/\/127\.0\.0\.1:\d+\/mcp {2}the model's one tool, run_encoder/m);
    expect(server.stderr()).not.toContain('gRPC');
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toEqual(['run_encoder']);
    const args = { inputs: ['hello world', 'a second text'] };
    const result = (await client.callTool({ name: 'run_encoder', arguments: args })) as CallToolResult;
    const structured = result.structuredContent as { model_id: string; results: { embedding: number[] }[] };
    expect(structured.model_id).toBe('minilm-like');
    expect(structured.results).toHaveLength(2);
    const predicted = await fetch(`${url}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(args) });
    expect(predicted.status).toBe(200);
    expect(structured).toEqual(await predicted.json());
    // encoderfile's sentence vectors: mean-pooled, not unit length
    for (const { embedding } of structured.results) expect(Math.abs(Math.hypot(...embedding) - 1)).toBeGreaterThan(1e-3);
  });

  it('answers bad arguments with an MCP error, and keeps serving', async () => {
    const error = (await client.callTool({ name: 'run_encoder', arguments: { inputs: [] } }).catch((e: unknown) => e)) as McpError;
    expect(error).toBeInstanceOf(McpError);
    expect(error.code).toBe(-32600);
    expect(error.message).toBe('MCP error -32600: Invalid input: inputs must not be empty');
    const again = (await client.callTool({ name: 'run_encoder', arguments: { inputs: ['still here'] } })) as CallToolResult;
    expect((again.structuredContent as { results: unknown[] }).results).toHaveLength(1);
  });

  it('refuses a port in use, naming it and the flags, with exit code 2', async () => {
    const port = new URL(url).port;
    const busy = await runExecutableAsync(process.execPath, [main, 'mcp', '-c', configFile, '--hostname', '127.0.0.1', '--port', port, '--workers', '1'], { cacheDir: path.join(work, 'cache') });
    expect(busy.status).toBe(2);
    expect(busy.stderr).toContain(`error: HTTP cannot listen on 127.0.0.1:${port}: the address is already in use (--port, --hostname)\n`);
    expect(busy.stderr).not.toContain('    at ');
  }, 60_000);

  it("takes encoderfile's flags and defaults (--hostname 0.0.0.0, --port 9100) and refuses bad ones", async () => {
    const help = await runCliCaptured(['mcp', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/--hostname <host> +address to listen on \(default: "0\.0\.0\.0"\)/);
    expect(help.stdout).toMatch(/--port <port> +port \(default: 9100\)/);
    expect(help.stdout.replace(/\s+/g, ' ')).toContain('encoderfile: a mozilla-ai/encoderfile configuration');
    // serve's options that are not about addresses are shared
    expect(help.stdout).toContain('--max-batch-tokens');
    expect(help.stdout).toContain('--shutdown-grace');
    // and the deployment ones: TLS (encoderfile's mcp has them), onnxruntime's session, OpenTelemetry
    for (const flag of ['--cert-file', '--key-file', '--graph-optimization-level', '--execution-provider', '--disable-cpu-fallback', '--enable-otel']) expect(help.stdout).toContain(flag);
    expect(help.stdout).not.toContain('--grpc-port');
    const badPort = await runCliCaptured(['mcp', '-c', configFile, '--port', '70000']);
    expect(badPort.code).toBe(2);
    expect(badPort.stderr).toContain("option '--port <port>' argument '70000' is invalid");
    const grpcFlag = await runCliCaptured(['mcp', '-c', configFile, '--grpc-port', '1']);
    expect(grpcFlag.code).toBe(2);
    expect(grpcFlag.stderr).toContain("unknown option '--grpc-port'");
  });

  it("takes encoderfile's --cert-file and --key-file: MCP over HTTPS to the SDK's client; one without the other exits 2", async () => {
    const { certFile, cert } = selfSignedCertificate(work, 'mcp');
    const keyFile = path.join(work, 'mcp.key');
    const secure = await startListening(
      process.execPath,
      [main, 'mcp', '-c', configFile, '--hostname', '127.0.0.1', '--port', '0', '--shutdown-grace', '0', '--workers', '1', '--cert-file', certFile, '--key-file', keyFile],
      { cacheDir: path.join(work, 'cache') },
      /MCP +(https:\/\/\S+)\/mcp [\s\S]*batching: .*\n/,
    );
    const defaults = tls.getCACertificates('default');
    tls.setDefaultCACertificates([...defaults, cert.toString()]);
    try {
      const secureClient = await mcpClient(secure.address);
      const result = (await secureClient.callTool({ name: 'run_encoder', arguments: { inputs: ['over TLS'] } })) as CallToolResult;
      expect((result.structuredContent as { results: unknown[] }).results).toHaveLength(1);
      await secureClient.close();
    } finally {
      tls.setDefaultCACertificates(defaults);
      expect(await secure.stop()).toBe(0);
    }
    expect(secure.stderr()).toContain(`TLS: certificate ${certFile}, key ${keyFile}`);
    const alone = await runCliCaptured(['mcp', '-c', configFile, '--cert-file', certFile]);
    expect(alone.code).toBe(2);
    expect(alone.stderr).toContain('error: --cert-file needs --key-file');
  }, 90_000);

  it('stops at SIGTERM with exit code 0', async () => {
    await client.close();
    expect(await server.stop()).toBe(0);
    expect(server.stderr()).toMatch(/stopped\n$/);
  });
});

describe('encoder serve --help, infer --help', () => {
  it('say that --config takes an encoderfile: file too', async () => {
    for (const command of ['serve', 'infer']) {
      const { stdout } = await runCliCaptured([command, '--help']);
      expect(stdout.replace(/\s+/g, ' ')).toContain('-c, --config <file> build configuration (YAML, top-level key encoder, or encoderfile: a mozilla-ai/encoderfile configuration as it is)');
    }
  });
});
