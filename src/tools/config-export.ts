import { readFileSync } from 'node:fs';
import { isMap, isScalar, parseDocument, type YAMLMap } from 'yaml';
import { ToolsConfigError } from './config.ts';

/** A `${NAME}` or `${secret:NAME}` reference (not `$${`, which is a literal). */
const REFERENCE = /(?<!\$)\$\{((?:secret:)?[A-Za-z_][A-Za-z0-9_]*)\}/g;

export interface ExportedConfig {
  /** The configuration with every value that may be secret replaced by a `${secret:…}` reference. */
  text: string;
  /** What the exported file needs where it runs: secret names (the secrets file) and environment variables. */
  secrets: string[];
  environment: string[];
  /** The values replaced, by where they were: `/servers/github/headers/Authorization` → the secret that stands for it. */
  replaced: Record<string, string>;
}

/**
 * A copy of a configuration that can be shared or committed (as mcpd's `config export`): every `env` and `headers`
 * value written out in the file — a literal that may be a token — becomes `${secret:SERVER_KEY}`, a `url` with a
 * password or a query string becomes `${secret:SERVER_URL}`; values that are references already (`${NAME}`,
 * `${secret:NAME}`) stay, since they hold no value. `args` are exported as written (keep secrets out of them: use
 * `env` or `${secret:…}`). Nothing is substituted: no secret or environment value is read,
 * so none can appear in the copy. Comments and layout are kept.
 */
export function exportToolsConfig(file: string): ExportedConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ToolsConfigError(`cannot read the tools configuration ${file}: ${(error as Error).message}`, { cause: error });
  }
  const document = parseDocument(text);
  if (document.errors.length > 0) throw new ToolsConfigError(`${file}: not valid YAML: ${document.errors[0].message}`);
  const replaced: Record<string, string> = {};
  const taken = new Set<string>(references(text).filter((name) => name.startsWith('secret:')).map((name) => name.slice(7)));
  const secretFor = (server: string, key: string): string => {
    const base = `${server}_${key}`.toUpperCase().replace(/[^A-Z0-9_]/g, '_').replace(/^(\d)/, '_$1');
    let name = base;
    for (let n = 2; taken.has(name); n++) name = `${base}_${n}`;
    taken.add(name);
    return name;
  };
  const servers = document.get('servers');
  if (isMap(servers)) {
    for (const pair of servers.items) {
      const server = String(isScalar(pair.key) ? pair.key.value : pair.key);
      if (!isMap(pair.value)) continue;
      const entry = pair.value as YAMLMap;
      for (const section of ['env', 'headers']) {
        const values = entry.get(section, true);
        if (!isMap(values)) continue;
        for (const item of values.items) {
          const key = String(isScalar(item.key) ? item.key.value : item.key);
          if (!isScalar(item.value) || holdsReference(String(item.value.value ?? ''))) continue;
          const name = secretFor(server, key);
          replaced[`/servers/${server}/${section}/${key}`] = name;
          item.value = document.createNode(`\${secret:${name}}`);
        }
      }
      const url = entry.get('url', true);
      if (isScalar(url) && typeof url.value === 'string' && !holdsReference(url.value) && carriesCredentials(url.value)) {
        const name = secretFor(server, 'URL');
        replaced[`/servers/${server}/url`] = name;
        entry.set('url', document.createNode(`\${secret:${name}}`));
      }
    }
  }
  const exported = document.toString();
  const all = references(exported);
  return {
    text: exported,
    secrets: all.filter((name) => name.startsWith('secret:')).map((name) => name.slice(7)),
    environment: all.filter((name) => !name.startsWith('secret:')),
    replaced,
  };
}

function references(text: string): string[] {
  return [...new Set([...text.matchAll(REFERENCE)].map((match) => match[1]))].sort();
}

function holdsReference(value: string): boolean {
  return new RegExp(REFERENCE.source).test(value);
}

function carriesCredentials(value: string): boolean {
  if (!URL.canParse(value)) return true; // cannot tell: treat as secret
  const url = new URL(value);
  return url.username !== '' || url.password !== '' || url.search !== '';
}
