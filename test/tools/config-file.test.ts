import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseToolsConfig, ToolsConfigError } from '../../src/tools/config.ts';
import {
  addServer,
  addServerToFile,
  initToolsConfigFile,
  listServers,
  removeServer,
  removeServerFromFile,
  STARTER_TOOLS_CONFIG,
} from '../../src/tools/config-file.ts';

// tools.yaml edited by `tools add` / `tools remove`: only the entry changes, every other byte (comments and their
// columns, quoting, blank lines, flow spacing) stays, and add then remove gives the original file back.

/** A hand-written file: aligned comments, comments inside and between entries, blank lines, flow and block styles. */
const COMMENTED = `# Tool servers of the team; see docs/tools.md.
defaults:                      # applies to every server
  timeouts: { request: 2m }    # flow map with padding

servers:                       # in the order the API lists them
  # the reference server
  everything:                  # stdio
    command: npx
    args: [ -y, '@modelcontextprotocol/server-everything' ]
    env: {LOG_LEVEL: "info"}
    # cwd: /srv/mcp            (commented out on purpose)

  github:   # Streamable HTTP
    url: "https://api.example.com/mcp"
    headers: {Authorization: "Bearer \${GITHUB_TOKEN}"}
    tools:
      - search_issues
      - get_issue
  # retired:
  #   command: old-server

# end of file
`;

const MEMORY_ENTRY = { command: 'node', args: ['/opt/mcp/memory.js', 'a b'], env: { MEMORY_FILE_PATH: '${HOME}/memory.jsonl' }, tools: ['read_graph'] };

const dir = mkdtempSync(path.join(tmpdir(), 'tools-config-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('add and remove', () => {
  it('add inserts only the new entry, after the last one and in its style; remove gives the original bytes back', () => {
    const added = addServer(COMMENTED, 'tools.yaml', 'memory', MEMORY_ENTRY);
    expect(added.replaced).toBe(false);
    const insertion =
      '\n  memory:\n    command: node\n    args: [/opt/mcp/memory.js, a b]\n    env:\n      MEMORY_FILE_PATH: ${HOME}/memory.jsonl\n    tools: [read_graph]\n';
    const at = COMMENTED.indexOf('  # retired:');
    expect(added.text).toBe(COMMENTED.slice(0, at) + insertion + COMMENTED.slice(at));
    const config = parseToolsConfig(added.text, 'tools.yaml', { HOME: '/home/me', GITHUB_TOKEN: 't' });
    expect(config.servers.map((server) => server.name)).toEqual(['everything', 'github', 'memory']);
    expect(config.servers[2]).toMatchObject({
      transport: 'stdio',
      command: 'node',
      args: ['/opt/mcp/memory.js', 'a b'],
      env: { MEMORY_FILE_PATH: '/home/me/memory.jsonl' },
      tools: ['read_graph'],
    });
    expect(removeServer(added.text, 'tools.yaml', 'memory')).toBe(COMMENTED);
  });

  it('round-trips files of other shapes byte for byte', () => {
    const shapes = {
      compact: 'servers:\n  a:\n    command: x\n  b: {url: "http://b"}\n',
      fourSpaces: 'servers:\n    a:\n        command: x\n',
      crlf: '# windows\r\nservers:\r\n  a:\r\n    command: x\r\n\r\n  b:\r\n    command: y\r\n',
      flow: 'servers: {a: {command: x}, b: {url: "http://b"}}   # flow\n',
      blockScalar: 'servers:\n  a:\n    command: sh\n    args:\n      - -c\n      - |\n        echo one\n\n        echo two\n  # trailing\n',
      starter: STARTER_TOOLS_CONFIG,
      emptyWithComment: 'servers:   # none yet\n# more\n',
    };
    for (const [shape, text] of Object.entries(shapes)) {
      for (const entry of [MEMORY_ENTRY, { url: 'https://${HOST}/mcp', headers: { Authorization: 'Bearer ${TOKEN}' } }]) {
        const added = addServer(text, `${shape}.yaml`, 'new-one', entry).text;
        expect(added, shape).not.toBe(text);
        const config = parseToolsConfig(added, shape, { HOME: '/h', HOST: 'h', TOKEN: 't' });
        expect(config.servers.at(-1)?.name, shape).toBe('new-one');
        expect(removeServer(added, `${shape}.yaml`, 'new-one'), shape).toBe(text);
      }
    }
  });

  it('follows the file: four-space indentation, CRLF line ends, a flow mapping', () => {
    expect(addServer('servers:\n    a:\n        command: x\n', 'f', 'b', { command: 'y', args: ['1'] }).text).toBe(
      'servers:\n    a:\n        command: x\n    b:\n        command: y\n        args: ["1"]\n',
    );
    expect(addServer('servers:\r\n  a:\r\n    command: x\r\n', 'f', 'b', { command: 'y' }).text).toBe('servers:\r\n  a:\r\n    command: x\r\n  b:\r\n    command: y\r\n');
    expect(addServer('servers: {a: {command: x}}  # c\n', 'f', 'b', { url: 'http://b' }).text).toBe('servers: {a: {command: x}, b: {url: http://b}}  # c\n');
  });

  it('adds the first server under an empty servers key, or a new servers key at the end', () => {
    const entry = { command: 'x' };
    expect(addServer('', 'f', 'a', entry).text).toBe('servers:\n  a:\n    command: x\n');
    expect(addServer('defaults: {timeouts: {request: 5s}}  # keep\n', 'f', 'a', entry).text).toBe(
      'defaults: {timeouts: {request: 5s}}  # keep\nservers:\n  a:\n    command: x\n',
    );
    expect(addServer('servers: {}\n# after\n', 'f', 'a', entry).text).toBe('servers:\n  a:\n    command: x\n# after\n');
    expect(addServer('servers: ~  # none\n', 'f', 'a', entry).text).toBe('servers:  # none\n  a:\n    command: x\n');
    expect(addServer(STARTER_TOOLS_CONFIG, 'f', 'a', entry).text).toBe(`${STARTER_TOOLS_CONFIG}  a:\n    command: x\n`);
  });

  it('remove takes only the entry (and one blank line that separated it); comments around it stay', () => {
    expect(removeServer(COMMENTED, 'f', 'everything')).toBe(COMMENTED.replace(/ {2}everything:.*?\n\n/s, ''));
    expect(removeServer(COMMENTED, 'f', 'github')).toBe(COMMENTED.replace(/\n {2}github:.*?(?= {2}# retired)/s, ''));
    expect(removeServer('servers:\n  a:\n    command: x\n  b:\n    command: y\n', 'f', 'a')).toBe('servers:\n  b:\n    command: y\n');
    expect(removeServer('servers: {a: {command: x}, b: {command: y}}\n', 'f', 'a')).toBe('servers: {b: {command: y}}\n');
    expect(removeServer('servers: {a: {command: x}, b: {command: y}}\n', 'f', 'b')).toBe('servers: {a: {command: x}}\n');
    // the last server: an empty servers key, which is a valid configuration without servers
    const none = removeServer('servers:\n  a:\n    command: x\n', 'f', 'a');
    expect(none).toBe('servers:\n');
    expect(parseToolsConfig(none, 'f').servers).toEqual([]);
  });

  it('replaces an existing server in place only when asked', () => {
    expect(() => addServer(COMMENTED, 'tools.yaml', 'github', { url: 'http://other' })).toThrow(
      new ToolsConfigError('tools.yaml: server "github" already exists; use --force to replace it'),
    );
    const replaced = addServer(COMMENTED, 'tools.yaml', 'github', { url: 'http://other/mcp' }, { replace: true });
    expect(replaced.replaced).toBe(true);
    const start = COMMENTED.indexOf('  github:');
    expect(replaced.text).toBe(`${COMMENTED.slice(0, start)}  github:\n    url: http://other/mcp\n${COMMENTED.slice(COMMENTED.indexOf('  # retired:'))}`);
  });
});

describe('errors: nothing is changed', () => {
  it('refuses an invalid name, naming the rule', () => {
    for (const name of ['', 'a b', '-a', 'a/b', 'é']) {
      expect(() => addServer(COMMENTED, 'f', name, { command: 'x' })).toThrow(/is not a valid server name: use letters, digits/);
    }
  });

  it('refuses to remove a server that is not there, listing those that are', () => {
    expect(() => removeServer(COMMENTED, 'tools.yaml', 'nope')).toThrow(new ToolsConfigError('tools.yaml: no server "nope" (servers: everything, github)'));
    expect(() => removeServer('servers:\n', 'tools.yaml', 'nope')).toThrow(new ToolsConfigError('tools.yaml: no server "nope" (no servers configured)'));
  });

  it('refuses a file that is not valid YAML, or not a mapping', () => {
    for (const text of ['servers: [a\n', 'servers:\n  a: {command: x}\n  a: {command: y}\n', 'a: 1\n---\nb: 2\n']) {
      expect(() => addServer(text, 'bad.yaml', 'n', { command: 'x' })).toThrow(/^bad\.yaml: not valid YAML: /);
      expect(() => removeServer(text, 'bad.yaml', 'a')).toThrow(/^bad\.yaml: not valid YAML: /);
      expect(() => listServers(text, 'bad.yaml')).toThrow(/^bad\.yaml: not valid YAML: /);
    }
    expect(() => addServer('- a\n- b\n', 'list.yaml', 'n', { command: 'x' })).toThrow(/list\.yaml: the top level is not a block mapping/);
    expect(() => addServer('servers: [a]\n', 's.yaml', 'n', { command: 'x' })).toThrow('s.yaml: /servers: must be a mapping');
  });

  it('refuses a result tools serve would refuse, with the same message', () => {
    expect(() => addServer(COMMENTED, 'tools.yaml', 'ftp', { url: 'ftp://example.com' })).toThrow(
      'tools.yaml: invalid tools configuration:\n  - /servers/ftp/url: must match pattern "^https?://"\n(tools.yaml not changed)',
    );
    // the file was already broken elsewhere: the edit does not make it valid, so it is refused too
    const broken = 'servers:\n  a:\n    command: x\n    timeout: 5s\n';
    expect(() => addServer(broken, 't.yaml', 'b', { command: 'y' })).toThrow('/servers/a: unknown property "timeout"');
    // removing the broken entry is allowed: the result is valid
    expect(removeServer(broken, 't.yaml', 'a')).toBe('servers:\n');
    // a server an API key names: the key would name a server that is not configured
    const keyed = `servers:\n  a: {command: x}\n  b: {command: y}\nauth:\n  keys:\n    ci: {sha256: ${'a'.repeat(64)}, servers: [a]}\n`;
    expect(() => removeServer(keyed, 'k.yaml', 'a')).toThrow('/auth/keys/ci/servers: no server "a" is configured');
    expect(removeServer(keyed, 'k.yaml', 'b')).toBe(keyed.replace('  b: {command: y}\n', ''));
    // an entry whose anchor another entry uses: removing it would leave an alias to nothing
    expect(() => removeServer('servers:\n  a: &base\n    command: x\n  b: *base\n', 't.yaml', 'a')).toThrow(
      't.yaml: not valid YAML: Unresolved alias (the anchor must be set before the alias): base\n(t.yaml not changed)',
    );
  });

  it('does not require the environment variables of the server, but still checks the rest of the entry', () => {
    const unset = 'TOOLS_CONFIG_FILE_TEST_UNSET';
    expect(process.env[unset]).toBeUndefined();
    const text = `servers:\n  a:\n    url: "\${${unset}}"\n    timeouts: {request: "\${${unset}_TIMEOUT}"}\n`;
    expect(addServer(text, 'f', 'b', { command: 'x', env: { KEY: `\${${unset}}` } }).text).toContain('KEY: ${TOOLS_CONFIG_FILE_TEST_UNSET}');
    expect(() => addServer(text, 'f', 'c', { url: 'not a url' })).toThrow('/servers/c/url: must match pattern');
  });
});

describe('listing', () => {
  it('lists servers in file order, as written (no substitution)', () => {
    expect(listServers(COMMENTED, 'f')).toEqual([
      { name: 'everything', transport: 'stdio', command: 'npx', args: ['-y', '@modelcontextprotocol/server-everything'] },
      { name: 'github', transport: 'http', url: 'https://api.example.com/mcp' },
    ]);
    expect(listServers('servers:\n  odd: 3\n  half: {args: [x]}\n', 'f')).toEqual([
      { name: 'odd', transport: 'invalid' },
      { name: 'half', transport: 'invalid' },
    ]);
    expect(listServers('', 'f')).toEqual([]);
  });
});

describe('files', () => {
  it('init writes a starter that tools serve accepts, and refuses to overwrite unless forced', () => {
    const file = path.join(dir, 'init.yaml');
    initToolsConfigFile(file);
    expect(readFileSync(file, 'utf8')).toBe(STARTER_TOOLS_CONFIG);
    expect(parseToolsConfig(STARTER_TOOLS_CONFIG, file).servers).toEqual([]);
    writeFileSync(file, 'servers:\n  mine: {command: x}\n');
    expect(() => initToolsConfigFile(file)).toThrow(`${file} already exists; use --force to replace it with the starter configuration`);
    expect(readFileSync(file, 'utf8')).toBe('servers:\n  mine: {command: x}\n');
    initToolsConfigFile(file, { force: true });
    expect(readFileSync(file, 'utf8')).toBe(STARTER_TOOLS_CONFIG);
    expect(() => initToolsConfigFile(path.join(dir, 'no-such-dir', 'tools.yaml'))).toThrow(/cannot write .*no-such-dir.*ENOENT/);
  });

  it('writes by renaming a complete temporary file: the mode stays, a symbolic link stays and its target changes', () => {
    const target = path.join(dir, 'target.yaml');
    const link = path.join(dir, 'link.yaml');
    writeFileSync(target, COMMENTED);
    chmodSync(target, 0o600);
    symlinkSync(target, link);
    const inodeBefore = statSync(target).ino;
    addServerToFile(link, 'memory', MEMORY_ENTRY);
    expect(statSync(link, { throwIfNoEntry: true }).isFile()).toBe(true);
    expect(readFileSync(target, 'utf8')).toBe(addServer(COMMENTED, 'x', 'memory', MEMORY_ENTRY).text);
    expect(statSync(target).mode & 0o777).toBe(0o600);
    expect(statSync(target).ino).not.toBe(inodeBefore); // replaced by rename, not rewritten in place
    removeServerFromFile(link, 'memory');
    expect(readFileSync(target, 'utf8')).toBe(COMMENTED);
    expect(readdirSync(dir).filter((name) => name.endsWith('.tmp'))).toEqual([]);
  });

  it('leaves the file untouched when the edit is refused, and names a missing file', () => {
    const file = path.join(dir, 'untouched.yaml');
    writeFileSync(file, COMMENTED);
    expect(() => addServerToFile(file, 'github', { command: 'x' })).toThrow(/already exists/);
    expect(() => removeServerFromFile(file, 'nope')).toThrow(/no server "nope"/);
    expect(readFileSync(file, 'utf8')).toBe(COMMENTED);
    expect(() => addServerToFile(path.join(dir, 'absent.yaml'), 'a', { command: 'x' })).toThrow(/cannot read the tools configuration .*absent\.yaml.*create it with "encoder tools init"/);
  });
});
