import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_RESTART, DEFAULT_TIMEOUTS, loadToolsConfig, parseToolsConfig, ToolsConfigError } from '../../src/tools/config.ts';
import { formatDuration, parseDuration } from '../../src/tools/duration.ts';

const parse = (yaml: string, env: NodeJS.ProcessEnv = {}) => parseToolsConfig(yaml, 'tools.yaml', env);
const failure = (yaml: string, env: NodeJS.ProcessEnv = {}) => {
  try {
    parse(yaml, env);
  } catch (error) {
    expect(error).toBeInstanceOf(ToolsConfigError);
    return (error as Error).message;
  }
  throw new Error('expected a ToolsConfigError');
};

describe('tools configuration', () => {
  it('reads stdio and Streamable HTTP servers with defaults, in file order', () => {
    const config = parse(`
servers:
  local:
    command: node
    args: [server.js, --flag]
    env: {A: b}
    cwd: /tmp
  remote:
    url: https://mcp.example.com/mcp
    headers: {Authorization: Bearer x}
    tools: [search]
`);
    expect(config.servers).toEqual([
      { name: 'local', transport: 'stdio', command: 'node', args: ['server.js', '--flag'], env: { A: 'b' }, cwd: '/tmp', tools: undefined, timeouts: DEFAULT_TIMEOUTS, restart: DEFAULT_RESTART },
      { name: 'remote', transport: 'http', url: 'https://mcp.example.com/mcp', headers: { Authorization: 'Bearer x' }, tools: ['search'], timeouts: DEFAULT_TIMEOUTS, restart: DEFAULT_RESTART },
    ]);
  });

  it('takes timeouts from defaults, then from the server entry', () => {
    const config = parse(`
defaults:
  timeouts: {request: 2m, healthInterval: 1m30s}
  restart: {maxDelay: 5s}
servers:
  a: {command: a, timeouts: {request: 250ms}}
  b: {command: b}
`);
    expect(config.servers[0].timeouts).toEqual({ ...DEFAULT_TIMEOUTS, request: 250, healthInterval: 90_000 });
    expect(config.servers[1].timeouts).toEqual({ ...DEFAULT_TIMEOUTS, request: 120_000, healthInterval: 90_000 });
    expect(config.servers[1].restart).toEqual({ ...DEFAULT_RESTART, maxDelay: 5000 });
  });

  it('substitutes ${ENV} in values, $${ writes a literal ${, and an unset variable is an error naming it', () => {
    const config = parse(
      `
servers:
  remote:
    url: https://\${HOST}/mcp
    headers: {Authorization: "Bearer \${TOKEN}", Literal: "$\${NOT_A_VARIABLE}"}
`,
      { HOST: 'mcp.example.com', TOKEN: 's3cret' },
    );
    expect(config.servers[0]).toMatchObject({ url: 'https://mcp.example.com/mcp', headers: { Authorization: 'Bearer s3cret', Literal: '${NOT_A_VARIABLE}' } });
    expect(failure('servers:\n  a: {command: "${MISSING_BINARY}"}\n')).toBe('tools.yaml: /servers/a/command: environment variable MISSING_BINARY is not set');
    expect(failure('servers:\n  a: {command: "${not valid}"}\n')).toContain('not a valid environment variable reference');
  });

  it('rejects invalid configurations with one clear line per problem', () => {
    expect(failure('servers:\n  a: {args: [x]}\n')).toContain('/servers/a: a server needs "command" (stdio) or "url" (Streamable HTTP)');
    expect(failure('servers:\n  a: {url: "http://x/mcp", command: x}\n')).toContain('/servers/a/command: not allowed here');
    expect(failure('servers:\n  a: {command: x, headers: {A: b}}\n')).toContain('/servers/a/headers: not allowed here');
    expect(failure('servers:\n  a: {url: "ftp://x"}\n')).toContain('/servers/a/url: must match pattern');
    expect(failure('servers:\n  a: {url: "http://exa mple.com/mcp"}\n')).toContain('/servers/a/url: "http://exa mple.com/mcp" is not a valid URL');
    expect(failure('servers:\n  a: {url: "http://"}\n')).toContain('/servers/a/url: "http://" is not a valid URL');
    expect(failure('servers:\n  a: {command: x, timeouts: {request: 5}}\n')).toContain('/servers/a/timeouts/request: must be string');
    expect(failure('servers:\n  a: {command: x, timeouts: {request: soon}}\n')).toContain('"soon" is not a duration');
    expect(failure('servers:\n  a: {command: x, timeout: 5s}\n')).toContain('/servers/a: unknown property "timeout"');
    expect(failure('servers:\n  "bad name": {command: x}\n')).toContain('server names use letters');
    expect(failure('server: {}\n')).toContain('must have required property \'servers\'');
    expect(failure('servers: [\n')).toContain('not valid YAML');
    // an alias inside its own anchor makes a cycle: a configuration error, not a stack overflow
    expect(failure('servers:\n  a: &a {command: x, args: [*a]}\n')).toContain('/servers/a/args/0: a YAML alias that contains itself');
    expect(failure('servers: &s\n  a: {command: x}\n  b: *s\n')).toContain('/servers/b: a YAML alias that contains itself');
    const several = failure('servers:\n  a: {args: 1}\n  b: {url: 3}\n');
    expect(several.split('\n').length).toBeGreaterThanOrEqual(4);
  });

  it('rejects durations a timer cannot hold: zero (a ping or restart loop) and over 2^31-1 ms (Node fires those after 1 ms)', () => {
    expect(failure('servers:\n  a: {command: x, timeouts: {healthInterval: 0s}}\n')).toContain('/servers/a/timeouts/healthInterval: "0s" is too short (at least 1ms)');
    expect(failure('defaults:\n  restart: {initialDelay: 500us}\nservers: {}\n')).toContain('/defaults/restart/initialDelay: "500us" is too short');
    expect(failure('servers:\n  a: {command: x, timeouts: {request: 1000h}}\n')).toContain('/servers/a/timeouts/request: "1000h" is too long (at most 596h)');
    expect(failure('defaults:\n  restart: {maxDelay: 597h}\nservers: {}\n')).toContain('/defaults/restart/maxDelay: "597h" is too long');
    expect(parse('servers:\n  a: {command: x, timeouts: {request: 596h, startup: 1ms}}\n').servers[0].timeouts).toMatchObject({ request: 596 * 3_600_000, startup: 1 });
  });

  it('restarts a server after 3 ping timeouts in a row by default; restart.afterPingTimeouts changes it, 0 never restarts', () => {
    expect(DEFAULT_RESTART.afterPingTimeouts).toBe(3);
    const config = parse(`
defaults:
  restart: {afterPingTimeouts: 5}
servers:
  a: {command: a}
  b: {command: b, restart: {afterPingTimeouts: 0, maxDelay: 2s}}
`);
    expect(config.servers[0].restart).toEqual({ ...DEFAULT_RESTART, afterPingTimeouts: 5 });
    expect(config.servers[1].restart).toEqual({ ...DEFAULT_RESTART, afterPingTimeouts: 0, maxDelay: 2000 });
    expect(failure('servers:\n  a: {command: x, restart: {afterPingTimeouts: 2.5}}\n')).toContain('/servers/a/restart/afterPingTimeouts: must be integer');
    expect(failure('servers:\n  a: {command: x, restart: {afterPingTimeouts: -1}}\n')).toContain('/servers/a/restart/afterPingTimeouts: must be >= 0');
    expect(failure('defaults:\n  restart: {afterPingTimeouts: 1001}\nservers: {}\n')).toContain('/defaults/restart/afterPingTimeouts: must be <= 1000');
    expect(failure('servers:\n  a: {command: x, restart: {afterPingTimeouts: 3s}}\n')).toContain('/servers/a/restart/afterPingTimeouts: must be integer');
  });

  describe('files', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'tools-config-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    it('names a file it cannot read', () => {
      expect(() => loadToolsConfig(path.join(dir, 'absent.yaml'))).toThrow(/cannot read the tools configuration .*absent\.yaml/);
    });

    it('reads a file', () => {
      const file = path.join(dir, 'tools.yaml');
      writeFileSync(file, 'servers:\n  a: {command: x}\n');
      expect(loadToolsConfig(file, {}).servers.map((server) => server.name)).toEqual(['a']);
    });
  });
});

describe('durations', () => {
  it('parses Go-style durations and rejects others', () => {
    expect(parseDuration('500ms')).toBe(500);
    expect(parseDuration('1m30s')).toBe(90_000);
    expect(parseDuration('1.5h')).toBe(5_400_000);
    expect(parseDuration('250us')).toBe(0.25);
    for (const bad of ['', '5', 's', '-1s', '1 s', '1d']) expect(parseDuration(bad), bad).toBeUndefined();
  });

  it('formats like Go time.Duration.String()', () => {
    expect(formatDuration(0)).toBe('0s');
    expect(formatDuration(0.0005)).toBe('500ns');
    expect(formatDuration(0.842115)).toBe('842.115µs');
    expect(formatDuration(1.234567)).toBe('1.234567ms');
    expect(formatDuration(2500)).toBe('2.5s');
    expect(formatDuration(90_000)).toBe('1m30s');
    expect(formatDuration(3_723_000)).toBe('1h2m3s');
    for (const ms of [0.0005, 0.842115, 1.234567, 2500, 90_000, 3_723_000]) expect(parseDuration(formatDuration(ms))).toBeCloseTo(ms, 9);
  });
});
