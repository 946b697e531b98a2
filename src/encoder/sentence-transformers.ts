/**
 * The sentence-transformers layout of a model folder: `modules.json` lists the modules that turn the transformer's
 * token vectors into one vector per text (Pooling with its `1_Pooling/config.json`, optionally Normalize). Read so
 * that a model exported from sentence-transformers is served the way `model.encode()` computes its vectors, without
 * the user restating pooling and normalisation in the build configuration.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Pooling } from './config.ts';
import { ConfigError } from './errors.ts';

export interface SentenceTransformersLayout {
  pooling: Pooling;
  normalize: boolean;
}

const POOLING_MODULE = 'sentence_transformers.models.Pooling';
const NORMALIZE_MODULE = 'sentence_transformers.models.Normalize';

/** The `pooling_mode_*` flags of 1_Pooling/config.json that this server computes, by the pooling they name. */
const SUPPORTED_FLAGS: Record<string, Pooling> = {
  pooling_mode_mean_tokens: 'mean',
  pooling_mode_cls_token: 'cls',
  pooling_mode_max_tokens: 'max',
  pooling_mode_lasttoken: 'last',
};
const UNSUPPORTED_FLAGS = ['pooling_mode_mean_sqrt_len_tokens', 'pooling_mode_weightedmean_tokens'];

interface ModuleEntry {
  path?: unknown;
  type?: unknown;
}

/**
 * Pooling and normalisation of the sentence-transformers layout in `modelDir`, or null when the folder has no
 * `modules.json`. A layout this server cannot reproduce (several pooling modes at once, which sentence-transformers
 * concatenates; weighted or sqrt-length means) is a ConfigError that says to set `pooling` in the configuration.
 */
export function readSentenceTransformersLayout(modelDir: string): SentenceTransformersLayout | null {
  const modulesFile = path.join(modelDir, 'modules.json');
  if (!existsSync(modulesFile)) return null;
  const modules = readJson(modulesFile);
  if (!Array.isArray(modules)) throw new ConfigError(`${modulesFile}: expected a list of modules`);
  const entries = modules as ModuleEntry[];
  const normalize = entries.some((entry) => entry?.type === NORMALIZE_MODULE);
  const poolingModule = entries.find((entry) => entry?.type === POOLING_MODULE);
  // A layout without a Pooling module (e.g. a bare Transformer) pools nothing itself: the server's default applies.
  if (poolingModule === undefined) return { pooling: 'mean', normalize };
  if (typeof poolingModule.path !== 'string') throw new ConfigError(`${modulesFile}: the Pooling module has no "path"`);
  const configFile = path.join(modelDir, poolingModule.path, 'config.json');
  if (!existsSync(configFile)) throw new ConfigError(`${modulesFile} names a Pooling module, but ${configFile} is missing`);
  return { pooling: poolingOf(readJson(configFile), configFile), normalize };
}

function poolingOf(config: unknown, file: string): Pooling {
  if (config === null || typeof config !== 'object' || Array.isArray(config)) throw new ConfigError(`${file}: expected a JSON object`);
  const flags = config as Record<string, unknown>;
  const unsupported = UNSUPPORTED_FLAGS.filter((flag) => flags[flag] === true);
  const chosen = Object.keys(SUPPORTED_FLAGS).filter((flag) => flags[flag] === true);
  const fix = 'set "pooling" (mean, cls, max or last) in the build configuration to serve another pooling';
  if (unsupported.length > 0) throw new ConfigError(`${file}: ${unsupported.join(', ')} is not supported; ${fix}`);
  if (chosen.length > 1) {
    throw new ConfigError(`${file}: ${chosen.join(' and ')} are both set (sentence-transformers concatenates them); ${fix}`);
  }
  if (chosen.length === 0) throw new ConfigError(`${file}: no pooling_mode_* flag is true; ${fix}`);
  return SUPPORTED_FLAGS[chosen[0]];
}

function readJson(file: string): unknown {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new ConfigError(`${file} is not valid JSON: ${(error as Error).message}`, { cause: error });
  }
}
