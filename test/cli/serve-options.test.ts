/**
 * serve's network options as the real `serve` command defines them (registerServeCommand), resolved by
 * serveNetworkSettings: gRPC follows a given --http-hostname (commander's value source tells given from default),
 * the defaults of the timeouts and limits, and the combinations refused.
 */
import { Command, CommanderError } from 'commander';
import { describe, expect, it } from 'vitest';
import { DEFAULT_SHUTDOWN_GRACE_MS, DEFAULT_SHUTDOWN_TIMEOUT_MS, serveNetworkSettings, type ServeNetworkOptions, type ServeNetworkSettings } from '../../src/cli/serve-network.ts';
import { registerServeCommand } from '../../src/cli/serve-command.ts';
import type { CliContext } from '../../src/cli/program.ts';
import { ConfigError } from '../../src/encoder/errors.ts';

class Loaded extends Error {}

/**
 * Parses `serve args` with the real command and resolves its network settings as the action does; the model is
 * never loaded (the source stops the action there). Rejects with what the command throws instead.
 */
async function settingsOf(args: string[]): Promise<ServeNetworkSettings> {
  const quiet = { writeErr: () => {}, writeOut: () => {} };
  const program = new Command().exitOverride().configureOutput(quiet);
  let captured: ServeNetworkOptions | undefined;
  const source = {
    configOption: false,
    load: (options: object) => {
      captured = options as ServeNetworkOptions;
      throw new Loaded();
    },
  };
  registerServeCommand(program, { stdout: () => {}, stderr: () => {} }, source, { protoText: () => '' } as unknown as CliContext);
  const serve = program.commands.find((command) => command.name() === 'serve')!;
  serve.exitOverride().configureOutput(quiet);
  const error = await program.parseAsync(['serve', ...args], { from: 'user' }).then(
    () => new Error('the action ended without loading the model'),
    (thrown: unknown) => thrown,
  );
  if (!(error instanceof Loaded)) throw error;
  return serveNetworkSettings(captured!, (key) => serve.getOptionValueSource(key));
}

async function refusal(args: string[]): Promise<Error> {
  return settingsOf(args).then(
    () => expect.fail('expected a refusal'),
    (error: unknown) => error as Error,
  );
}

describe('--grpc-hostname', () => {
  it('is :: by default', async () => {
    expect((await settingsOf([])).grpcHostname).toBe('::');
  });

  it('follows --http-hostname when only that is given', async () => {
    expect((await settingsOf(['--http-hostname', '127.0.0.1'])).grpcHostname).toBe('127.0.0.1');
    expect((await settingsOf(['--http-hostname', '::1'])).grpcHostname).toBe('::1');
    // given as its default value, it is still given
    expect((await settingsOf(['--http-hostname', '0.0.0.0'])).grpcHostname).toBe('0.0.0.0');
  });

  it("takes IPv6 literals in brackets, as encoderfile's [::] default is written", async () => {
    expect((await settingsOf(['--grpc-hostname', '[::]'])).grpcHostname).toBe('::');
    expect((await settingsOf(['--http-hostname', '[::1]'])).grpcHostname).toBe('::1');
    expect((await settingsOf(['--grpc-hostname', '::1'])).grpcHostname).toBe('::1');
    expect((await refusal(['--grpc-hostname', '[]'])).message).toMatch(/host name is empty|argument '\[\]' is invalid/);
  });

  it('is its own when given, with or without --http-hostname', async () => {
    expect((await settingsOf(['--http-hostname', '127.0.0.1', '--grpc-hostname', '0.0.0.0'])).grpcHostname).toBe('0.0.0.0');
    expect((await settingsOf(['--grpc-hostname', '127.0.0.1'])).grpcHostname).toBe('127.0.0.1');
    expect((await settingsOf(['--grpc-hostname', '::'])).grpcHostname).toBe('::');
  });
});

describe('timeouts, limits, hosts and origins', () => {
  it('have defaults', async () => {
    expect(await settingsOf([])).toEqual({
      grpcHostname: '::',
      http: { requestTimeoutMs: 30_000, bodyBufferLimitBytes: 16 * 8 * 2 ** 20, allowedHosts: [], allowedOrigins: [] },
      shutdown: { graceMs: DEFAULT_SHUTDOWN_GRACE_MS, timeoutMs: DEFAULT_SHUTDOWN_TIMEOUT_MS },
      tls: null,
    });
    expect(DEFAULT_SHUTDOWN_GRACE_MS).toBe(5000);
    expect(DEFAULT_SHUTDOWN_TIMEOUT_MS).toBe(25_000);
  });

  it('take what is given; the body buffer follows --body-limit; lists add up and origins are normalised', async () => {
    const settings = await settingsOf([
      '--request-timeout', '2000',
      '--body-limit', '1000',
      '--shutdown-grace', '0',
      '--shutdown-timeout', '1',
      '--allowed-hosts', 'model.internal, [fd00::1]',
      '--allowed-hosts', '10.0.0.5',
      '--allowed-origins', 'HTTPS://App.Example:443/,http://localhost:3000',
    ]);
    expect(settings).toEqual({
      grpcHostname: '::',
      http: { requestTimeoutMs: 2000, bodyBufferLimitBytes: 16_000, allowedHosts: ['model.internal', '[fd00::1]', '10.0.0.5'], allowedOrigins: ['https://app.example', 'http://localhost:3000'] },
      shutdown: { graceMs: 0, timeoutMs: 1 },
      tls: null,
    });
    expect((await settingsOf(['--body-buffer-limit', '9000000'])).http.bodyBufferLimitBytes).toBe(9_000_000);
  });

  it('carry --cert-file and --key-file together (test/serve/tls.test.ts serves with them)', () => {
    const options = { httpHostname: '0.0.0.0', grpcHostname: '::', bodyLimit: 1000, requestTimeout: 1, shutdownGrace: 0, shutdownTimeout: 1 };
    expect(serveNetworkSettings({ ...options, certFile: 'server.pem', keyFile: 'server.key' }, () => 'default').tls).toEqual({ certFile: 'server.pem', keyFile: 'server.key' });
    expect(() => serveNetworkSettings({ ...options, keyFile: 'server.key' }, () => 'default')).toThrow(/^--key-file needs --cert-file: /);
  });

  it('refuse a grace that leaves no time before the timeout, and a body buffer smaller than one body', async () => {
    const grace = await refusal(['--shutdown-grace', '30000']);
    expect(grace).toBeInstanceOf(ConfigError);
    expect(grace.message).toMatch(/^--shutdown-grace 30000 is not less than --shutdown-timeout 25000: /);
    const buffer = await refusal(['--body-limit', '2000', '--body-buffer-limit', '1000']);
    expect(buffer).toBeInstanceOf(ConfigError);
    expect(buffer.message).toMatch(/^--body-buffer-limit 1000 is less than --body-limit 2000/);
  });

  it.each([
    [['--request-timeout', '0'], '"0" is not a whole number of ms >= 1'],
    [['--shutdown-grace', '-1'], '"-1" is not a whole number of ms >= 0'],
    [['--shutdown-timeout', '1.5'], '"1.5" is not a whole number of ms >= 1'],
    [['--body-buffer-limit', 'lots'], '"lots" is not a whole number of bytes >= 1'],
    [['--allowed-hosts', 'http://model.internal'], '"http://model.internal" is not a host name'],
    [['--allowed-hosts', 'model.internal:8080'], '"model.internal:8080" is not a host name'],
    [['--allowed-hosts', ' , '], 'names no host'],
    [['--allowed-origins', 'https://app.example/path'], '"https://app.example/path" is not an origin'],
    [['--allowed-origins', 'app.example'], '"app.example" is not an origin'],
    [['--allowed-origins', 'ftp://app.example'], '"ftp://app.example" is not an origin'],
  ])('refuse %j as a usage error', async (args, message) => {
    const error = await refusal(args);
    expect(error).toBeInstanceOf(CommanderError);
    expect(error.message).toContain(message);
  });
});
