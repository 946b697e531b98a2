import { chmodSync, closeSync, fsyncSync, openSync, readFileSync, realpathSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Document, isMap, isScalar, parse as parseYaml, parseDocument, visit, type Pair, type ParsedNode, type YAMLMap } from 'yaml';
import { parseToolsConfig, TOOLS_CONFIG_SCHEMA, ToolsConfigError } from './config.ts';

// Editing tools.yaml for `encoder tools init|add|remove|list`. The file is changed by splicing text at the places
// the yaml package's Document API locates (an entry's key and value ranges), never by re-printing the document:
// re-printing keeps comments but not their columns, quoting, blank lines or flow spacing, and users hand-edit this
// file. So everything outside the entry added, replaced or removed keeps its bytes, and `add` then `remove` gives
// the original file back.

/** A server entry as written in tools.yaml (before `${ENV}` substitution). */
export type ServerEntry =
  | { command: string; args?: string[]; env?: Record<string, string>; cwd?: string; tools?: string[] }
  | { url: string; headers?: Record<string, string>; tools?: string[] };

/** One server of `tools list`, as the file writes it (no `${ENV}` substitution: secrets stay references). */
export interface ServerListing {
  name: string;
  transport: 'stdio' | 'http' | 'invalid';
  /** stdio: the command and its arguments; http: the URL. */
  command?: string;
  args?: string[];
  url?: string;
}

/** What `tools init` writes: nothing runs until servers are added; the comments show the format. */
export const STARTER_TOOLS_CONFIG = `# Configuration of \`encoder tools serve\` (docs/tools.md).
# Add servers with \`encoder tools add NAME -- command args…\` (stdio) or \`encoder tools add NAME --url URL\`
# (Streamable HTTP), remove them with \`encoder tools remove NAME\`; a running server reads this file again on SIGHUP.
# Comments and layout are kept by those commands, so this file can also be edited by hand.
#
# defaults:                    # applies to every server; each server may override it
#   timeouts: {startup: 30s, request: 60s, healthInterval: 10s, healthTimeout: 5s}
#   restart: {initialDelay: 1s, maxDelay: 1m, afterPingTimeouts: 3}
#
# auth:                        # API keys; \`encoder tools keygen --name NAME\` prints a key and its entry
#   keys:
#     admin: {sha256: <hex digest of the key>, servers: "*"}
#
# audit: {file: audit.jsonl}   # one JSON line per request; "-": stderr
#
# servers:
#   everything:                # stdio: command, args, env, cwd
#     command: npx
#     args: [-y, "@modelcontextprotocol/server-everything"]
#     env: {LOG_LEVEL: info}
#   github:                    # Streamable HTTP: url, headers
#     url: https://api.example.com/mcp
#     headers: {Authorization: "Bearer \${GITHUB_TOKEN}"}   # \${NAME}: an environment variable of the server
#     tools: [search_issues, get_issue]                     # only these tools are listed and callable
servers:
`;

const NAME = new RegExp(TOOLS_CONFIG_SCHEMA.properties.servers.propertyNames.pattern);

/** `tools init`: writes the starter configuration; an existing file is replaced only with `force`. */
export function initToolsConfigFile(file: string, options: { force?: boolean } = {}): void {
  if (options.force) {
    writeFileAtomically(file, STARTER_TOOLS_CONFIG);
    return;
  }
  // 'wx' creates the file or fails if it exists, with no window between checking and writing
  let fd: number;
  try {
    fd = openSync(file, 'wx', 0o644);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') throw new ToolsConfigError(`${file} already exists; use --force to replace it with the starter configuration`);
    throw new ToolsConfigError(`cannot write ${file}: ${(error as Error).message}`, { cause: error });
  }
  try {
    writeFileSync(fd, STARTER_TOOLS_CONFIG);
  } finally {
    closeSync(fd);
  }
}

/** `tools add`: adds (or with `replace`, replaces in place) one server; returns whether an entry was replaced. */
export function addServerToFile(file: string, name: string, entry: ServerEntry, options: { replace?: boolean } = {}): { replaced: boolean } {
  const result = addServer(readConfigText(file), file, name, entry, options);
  writeFileAtomically(file, result.text);
  return { replaced: result.replaced };
}

/** `tools remove`: removes one server. */
export function removeServerFromFile(file: string, name: string): void {
  writeFileAtomically(file, removeServer(readConfigText(file), file, name));
}

/** `tools list`: the servers of the file, in its order. */
export function listServersOfFile(file: string): ServerListing[] {
  return listServers(readConfigText(file), file);
}

/** The text with server `name` added at the end of `servers` (or replacing its entry); validated. */
export function addServer(text: string, source: string, name: string, entry: ServerEntry, options: { replace?: boolean } = {}): { text: string; replaced: boolean } {
  checkName(name);
  const file = parseConfigText(text, source);
  const existing = file.servers?.items.find((pair) => keyName(pair) === name);
  if (existing && !options.replace) throw new ToolsConfigError(`${source}: server "${name}" already exists; use --force to replace it`);
  let edited: string;
  if (existing) edited = replaceEntry(file, existing, name, entry);
  else if (file.servers && file.servers.items.length > 0) edited = appendEntry(file, file.servers, name, entry);
  else edited = firstEntry(file, name, entry);
  validateEdited(edited, source);
  return { text: edited, replaced: existing !== undefined };
}

/** The text without server `name`; validated. */
export function removeServer(text: string, source: string, name: string): string {
  const file = parseConfigText(text, source);
  const items = file.servers?.items ?? [];
  const index = items.findIndex((pair) => keyName(pair) === name);
  if (index < 0) {
    const names = items.map(keyName);
    throw new ToolsConfigError(`${source}: no server "${name}" (${names.length ? `servers: ${names.join(', ')}` : 'no servers configured'})`);
  }
  let edited: string;
  if (file.servers!.flow) {
    // `{a: …, b: …}`: the pair and the comma before it (after it, for the first pair)
    const pair = items[index];
    const [start, end] =
      index > 0 ? [valueEnd(items[index - 1]), valueEnd(pair)] : items.length > 1 ? [keyStart(pair), keyStart(items[1])] : [keyStart(pair), valueEnd(pair)];
    edited = text.slice(0, start) + text.slice(end);
  } else {
    const lines = splitLines(text);
    const { first, last } = entryLines(file, lines, items[index]);
    let [from, to] = [first, last];
    // one blank line that separated it from its neighbours goes with it, so that entries stay evenly spaced
    if (index > 0 && isBlank(lines[first - 1])) from = first - 1;
    else if (index < items.length - 1 && last + 1 < lines.length && isBlank(lines[last + 1])) to = last + 1;
    edited = text.slice(0, lines[from].start) + text.slice(lines[to].next);
  }
  validateEdited(edited, source);
  return edited;
}

/** The servers of configuration text, without validating it beyond its YAML syntax. */
export function listServers(text: string, source: string): ServerListing[] {
  const file = parseConfigText(text, source);
  return (file.servers?.items ?? []).map((pair) => {
    const name = keyName(pair);
    const value: unknown = (pair.value as ParsedNode | null)?.toJSON();
    if (typeof value !== 'object' || value === null) return { name, transport: 'invalid' };
    const entry = value as { command?: unknown; args?: unknown; url?: unknown };
    if (typeof entry.url === 'string') return { name, transport: 'http', url: entry.url };
    if (typeof entry.command === 'string') {
      const args = Array.isArray(entry.args) ? entry.args.map(String) : [];
      return { name, transport: 'stdio', command: entry.command, args };
    }
    return { name, transport: 'invalid' };
  });
}

// ---- reading and validating -------------------------------------------------------------------------------

interface ConfigText {
  text: string;
  /** The file's name in messages. */
  source: string;
  /** The top-level mapping; undefined for an empty document (or one with only comments). */
  top?: YAMLMap.Parsed;
  /** The `servers` pair of the top level, when there is one. */
  serversPair?: Pair<ParsedNode, ParsedNode | null>;
  /** Its value when it is a mapping. */
  servers?: YAMLMap.Parsed;
}

function readConfigText(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    const hint = (error as NodeJS.ErrnoException).code === 'ENOENT' ? ' (create it with "encoder tools init")' : '';
    throw new ToolsConfigError(`cannot read the tools configuration ${file}: ${(error as Error).message}${hint}`, { cause: error });
  }
}

function parseConfigText(text: string, source: string): ConfigText {
  const doc = parseDocument(text);
  if (doc.errors.length > 0) throw new ToolsConfigError(`${source}: not valid YAML: ${doc.errors[0].message}`);
  const contents = doc.contents;
  if (contents === null || (isScalar(contents) && contents.value === null)) return { text, source };
  if (!isMap(contents) || contents.flow) throw new ToolsConfigError(`${source}: the top level is not a block mapping (servers: …), so it cannot be edited`);
  const top = contents as YAMLMap.Parsed;
  const serversPair = top.items.find((pair) => keyName(pair) === 'servers');
  if (!serversPair) return { text, source, top };
  const value = serversPair.value;
  if (value === null || (isScalar(value) && value.value === null)) return { text, source, top, serversPair };
  if (!isMap(value)) throw new ToolsConfigError(`${source}: /servers: must be a mapping of server names to entries`);
  return { text, source, top, serversPair, servers: value as YAMLMap.Parsed };
}

function checkName(name: string): void {
  if (!NAME.test(name)) {
    throw new ToolsConfigError(`"${name}" is not a valid server name: use letters, digits, "_", "." and "-", starting with a letter or digit`);
  }
}

/** A key as the configuration sees it (the yaml package's JS conversion: `1.50` is "1.5", `null` is ""). */
function keyName(pair: Pair<unknown, unknown>): string {
  const key = pair.key;
  const value = isScalar(key) ? key.value : key;
  return value === null || value === undefined ? '' : String(value);
}

/**
 * The check `tools serve` makes when it reads the file (parseToolsConfig). A `${NAME}` whose variable is not set
 * here is no error: the file is edited where the server's secrets may not be set. Such a variable stands for a
 * value of the shape its place needs (a URL, a duration or a word), so the rest of the entry is still checked.
 */
function validateEdited(text: string, source: string): void {
  let standIns: Record<string, string> = {};
  try {
    standIns = standInsForUnset(parseYaml(text, { maxAliasCount: -1 }), process.env);
  } catch {
    // an edit that broke the YAML (an alias whose anchor was in the removed entry): parseToolsConfig reports it
  }
  try {
    // secrets are not read when editing: each stands in like an unset variable
    parseToolsConfig(text, source, { ...process.env, ...standIns }, () => ({ source: 'the secrets file', get: (name) => standIns[`secret:${name}`] }));
  } catch (error) {
    if (error instanceof ToolsConfigError) throw new ToolsConfigError(`${error.message}\n(${source} not changed)`, { cause: error });
    throw error;
  }
}

const DURATION_KEYS = new Set(['startup', 'request', 'healthInterval', 'healthTimeout', 'initialDelay', 'maxDelay']);

function standInsForUnset(raw: unknown, env: NodeJS.ProcessEnv): Record<string, string> {
  const standIns: Record<string, string> = {};
  const seen = new Set<object>();
  const walk = (value: unknown, key: string) => {
    if (typeof value === 'string') {
      for (const match of value.matchAll(/\$(\$)?\{((?:secret:)?[A-Za-z_][A-Za-z0-9_]*)\}/g)) {
        const name = match[2];
        if (match[1] || env[name] !== undefined || name in standIns) continue;
        standIns[name] = key === 'url' && match.index === 0 ? 'http://0' : DURATION_KEYS.has(key) ? '1s' : '0';
      }
    } else if (typeof value === 'object' && value !== null && !seen.has(value)) {
      seen.add(value);
      if (Array.isArray(value)) for (const item of value) walk(item, key);
      else for (const [name, item] of Object.entries(value)) walk(item, name);
    }
  };
  walk(raw, '');
  return standIns;
}

// ---- editing ----------------------------------------------------------------------------------------------

interface Line {
  start: number;
  /** Start of the next line (text.length for the last). */
  next: number;
  /** Without its line end (`\n` or `\r\n`). */
  text: string;
}

function splitLines(text: string): Line[] {
  const lines: Line[] = [];
  let start = 0;
  while (start < text.length) {
    const newline = text.indexOf('\n', start);
    const next = newline < 0 ? text.length : newline + 1;
    const end = newline < 0 ? text.length : newline > start && text[newline - 1] === '\r' ? newline - 1 : newline;
    lines.push({ start, next, text: text.slice(start, end) });
    start = next;
  }
  return lines;
}

const isBlank = (line: Line) => line.text.trim() === '';
const isComment = (line: Line) => line.text.trimStart().startsWith('#');
const indentOf = (line: Line) => line.text.length - line.text.trimStart().length;

function lineOf(lines: Line[], offset: number): number {
  let low = 0;
  let high = lines.length - 1;
  while (low < high) {
    const middle = (low + high + 1) >> 1;
    if (lines[middle].start <= offset) low = middle;
    else high = middle - 1;
  }
  return low;
}

const columnOf = (lines: Line[], offset: number) => offset - lines[lineOf(lines, offset)].start;
const keyStart = (pair: Pair<unknown, unknown>) => (pair.key as ParsedNode).range[0];
const valueEnd = (pair: Pair<unknown, unknown>) => ((pair.value as ParsedNode | null) ?? (pair.key as ParsedNode)).range[1];

/**
 * The lines of one entry of a block mapping: from its key's line to the last line indented deeper than the key
 * (its value, and comments inside it) before the next line at the key's indentation or less. Comment lines at the
 * key's indentation after it belong to what follows (they usually describe the next entry), so they are not part
 * of it.
 */
function entryLines(file: ConfigText, lines: Line[], pair: Pair<unknown, unknown>): { first: number; last: number; keyColumn: number } {
  const first = lineOf(lines, keyStart(pair));
  const keyColumn = columnOf(lines, keyStart(pair));
  if (lines[first].text.slice(0, keyColumn).trim() !== '') {
    throw new ToolsConfigError(`${file.source}: line ${first + 1}: the entry does not start its own line, so it cannot be edited`);
  }
  let last = first;
  for (let index = first + 1; index < lines.length; index++) {
    const line = lines[index];
    if (isBlank(line)) continue;
    if (indentOf(line) > keyColumn) last = index;
    else if (!isComment(line)) break;
  }
  return { first, last, keyColumn };
}

/** Whether a blank line (above any comment lines at its indentation) comes before an entry. */
function blankBefore(lines: Line[], first: number, keyColumn: number, after: number): boolean {
  let index = first - 1;
  while (index > after && isComment(lines[index]) && indentOf(lines[index]) <= keyColumn) index--;
  return index > after && isBlank(lines[index]);
}

/** The entry as block YAML at `column`, sequences in flow style (`args: [-y, pkg]`) as the documentation writes them. */
function renderBlockEntry(name: string, entry: ServerEntry, column: number, indent: number, newline: string): string {
  const doc = new Document({ [name]: entry });
  visit(doc, {
    Seq(_, node) {
      node.flow = true;
    },
  });
  const text = doc.toString({ indent, lineWidth: 0, flowCollectionPadding: false });
  return (
    text
      .replace(/\n$/, '')
      .split('\n')
      .map((line) => (line === '' ? '' : ' '.repeat(column) + line))
      .join(newline) + newline
  );
}

/** The entry as one flow pair (`name: {command: x, args: [y]}`), for a `servers: {…}` mapping. */
function renderFlowPair(name: string, entry: ServerEntry): string {
  const doc = new Document({ [name]: entry });
  (doc.contents as YAMLMap).flow = true;
  return doc.toString({ lineWidth: 0, flowCollectionPadding: false }).trim().slice(1, -1);
}

const newlineOf = (text: string) => (text.includes('\r\n') ? '\r\n' : '\n');

function appendEntry(file: ConfigText, servers: YAMLMap.Parsed, name: string, entry: ServerEntry): string {
  const { text } = file;
  const items = servers.items;
  const lastPair = items[items.length - 1];
  if (servers.flow) {
    const at = valueEnd(lastPair);
    return `${text.slice(0, at)}, ${renderFlowPair(name, entry)}${text.slice(at)}`;
  }
  const lines = splitLines(text);
  const { first, last, keyColumn } = entryLines(file, lines, lastPair);
  // the new entry's own lines are indented by as much as the entries are under `servers:`
  const indent = Math.max(1, keyColumn - columnOf(lines, keyStart(file.serversPair!)));
  const newline = newlineOf(text);
  const separator = blankBefore(lines, first, keyColumn, lineOf(lines, keyStart(file.serversPair!))) ? newline : '';
  const at = lines[last].next;
  const endsLine = at > 0 && text[at - 1] === '\n';
  return `${text.slice(0, at)}${endsLine ? '' : newline}${separator}${renderBlockEntry(name, entry, keyColumn, indent, newline)}${text.slice(at)}`;
}

function replaceEntry(file: ConfigText, pair: Pair<ParsedNode, ParsedNode | null>, name: string, entry: ServerEntry): string {
  const { text } = file;
  if (file.servers!.flow) return text.slice(0, keyStart(pair)) + renderFlowPair(name, entry) + text.slice(valueEnd(pair));
  const lines = splitLines(text);
  const { first, last, keyColumn } = entryLines(file, lines, pair);
  const indent = Math.max(1, keyColumn - columnOf(lines, keyStart(file.serversPair!)));
  return text.slice(0, lines[first].start) + renderBlockEntry(name, entry, keyColumn, indent, newlineOf(text)) + text.slice(lines[last].next);
}

/** The first server: under an empty `servers:` (its `~`, `null` or `{}` dropped), or a new `servers:` at the end. */
function firstEntry(file: ConfigText, name: string, entry: ServerEntry): string {
  const { text, top, serversPair } = file;
  const newline = newlineOf(text);
  const lines = splitLines(text);
  if (!serversPair) {
    const column = top ? columnOf(lines, keyStart(top.items[0])) : 0;
    const ending = text === '' || text.endsWith('\n') ? '' : newline;
    return `${text}${ending}${' '.repeat(column)}servers:${newline}${renderBlockEntry(name, entry, column + 2, 2, newline)}`;
  }
  const keyLine = lineOf(lines, keyStart(serversPair));
  const column = columnOf(lines, keyStart(serversPair));
  const value = serversPair.value;
  let before = text;
  let valueLine = keyLine;
  if (value && value.range[1] > value.range[0]) {
    // `servers: ~`, `servers: null`, `servers: {}`: the explicit empty value goes, the block comes below
    valueLine = lineOf(lines, value.range[1] - 1);
    before = text.slice(0, value.range[0]).replace(/[ \t]+$/, '') + text.slice(value.range[1]);
  }
  const offsetChange = before.length - text.length;
  const at = lines[valueLine].next + offsetChange;
  const endsLine = at > 0 && before[at - 1] === '\n';
  return `${before.slice(0, at)}${endsLine ? '' : newline}${renderBlockEntry(name, entry, column + 2, 2, newline)}${before.slice(at)}`;
}

// ---- writing ----------------------------------------------------------------------------------------------

/**
 * Replaces the file's content at once: a temporary file in the same directory, flushed, then renamed over it, so a
 * reader (a server reloading on SIGHUP) sees the old or the new file, never a part. A symbolic link is followed
 * (its target is replaced, the link stays) and the file keeps its permissions.
 */
function writeFileAtomically(file: string, text: string): void {
  let target = path.resolve(file);
  let mode = 0o644;
  let exists = false;
  try {
    target = realpathSync(file);
    mode = statSync(target).mode & 0o777;
    exists = true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw new ToolsConfigError(`cannot write ${file}: ${(error as Error).message}`, { cause: error });
  }
  const temp = path.join(path.dirname(target), `.${path.basename(target)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    const fd = openSync(temp, 'wx', mode);
    try {
      writeFileSync(fd, text);
      if (exists) chmodSync(temp, mode); // the umask applied when it was created
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, target);
  } catch (error) {
    rmSync(temp, { force: true });
    throw new ToolsConfigError(`cannot write ${file}: ${(error as Error).message}`, { cause: error });
  }
}
