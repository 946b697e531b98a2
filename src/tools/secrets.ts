import { readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { ToolsConfigError } from './config.ts';

/** `${secret:NAME}` in tools.yaml: NAME's value in the secrets file. */
export interface SecretLookup {
  /** Where the values come from, for messages (never a value). */
  readonly source: string;
  get(name: string): string | undefined;
}

/** ENCODER_TOOLS_SECRETS, else $XDG_CONFIG_HOME/encoder/tools.secrets.yaml, else ~/.config/encoder/tools.secrets.yaml. */
export function defaultSecretsFile(env: NodeJS.ProcessEnv = process.env): string {
  if (env.ENCODER_TOOLS_SECRETS) return env.ENCODER_TOOLS_SECRETS;
  return path.join(env.XDG_CONFIG_HOME || path.join(homedir(), '.config'), 'encoder', 'tools.secrets.yaml');
}

const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Reads a secrets file: `secrets:` mapping names to string values. On Linux and macOS a file that other users may
 * read or write (any group or other permission bit) is refused, as ssh refuses such a private key: the values would
 * not be secret. Errors name the file and the entry, never a value.
 */
export function loadSecrets(file: string): SecretLookup {
  let text: string;
  try {
    if (process.platform !== 'win32') {
      const mode = statSync(file).mode & 0o777;
      if (mode & 0o077) {
        throw new ToolsConfigError(`${file}: other users may read or change this secrets file (mode ${mode.toString(8).padStart(4, '0')}); run: chmod 600 ${file}`);
      }
    }
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if (error instanceof ToolsConfigError) throw error;
    throw new ToolsConfigError(`cannot read the secrets file ${file} (tools.yaml uses \${secret:…}): ${(error as Error).message}`, { cause: error });
  }
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch {
    // the parser's message quotes the text, which holds secrets
    throw new ToolsConfigError(`${file}: not valid YAML`);
  }
  const secrets = (raw as { secrets?: unknown } | null)?.secrets;
  if (typeof raw !== 'object' || raw === null || Object.keys(raw).some((key) => key !== 'secrets') || typeof secrets !== 'object' || secrets === null || Array.isArray(secrets)) {
    throw new ToolsConfigError(`${file}: must be a mapping with one key, "secrets", holding NAME: value pairs`);
  }
  const values = new Map<string, string>();
  for (const [name, value] of Object.entries(secrets)) {
    if (!SECRET_NAME.test(name)) throw new ToolsConfigError(`${file}: /secrets/${name}: secret names use letters, digits and "_" and do not start with a digit`);
    if (typeof value !== 'string') throw new ToolsConfigError(`${file}: /secrets/${name}: must be a string (quote it)`);
    values.set(name, value);
  }
  return { source: file, get: (name) => values.get(name) };
}
