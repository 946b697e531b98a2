/**
 * mozilla-ai/encoderfile's build configuration (0.7.0, top-level `encoderfile:`) read as it is: its section is turned
 * into this project's `encoder:` section (same keys where they mean the same) plus what only encoderfile has. Its
 * defaults are kept: version 0.2.0 (its source's `DEFAULT_VERSION`), output `./<name>.encoderfile`, relative paths
 * from the working directory (encoderfile opens them as given). Keys that have no effect here are accepted and named,
 * with why, in `notes` (build prints them); keys encoderfile itself does not know are ignored, as encoderfile ignores
 * them, and named too. Only type imports from config.ts: config.ts imports this file.
 */
import { isImageModelType, LUA_LIBRARIES, MODEL_TYPES, type LuaLibraryName } from './config-names.ts';
import type { RawEncoderSection } from './config.ts';

/** encoderfile's model types (0.7.0): its four text types and image_classification (image_embedding is ours only). */
export const ENCODERFILE_MODEL_TYPES = [...MODEL_TYPES, 'image_classification'] as const;

/** encoderfile's default `version` (its `DEFAULT_VERSION`; its docs and JSON schema still say 0.1.0). */
export const ENCODERFILE_DEFAULT_VERSION = '0.2.0';

/** Keys of encoderfile's EncoderfileConfig. */
const ENCODERFILE_KEYS = [
  'name',
  'version',
  'path',
  'model_type',
  'output_path',
  'cache_dir',
  'base_binary_path',
  'transform',
  'lua_libs',
  'tokenizer',
  'validate_transform',
  'target',
];

/** This project's own keys, which an `encoderfile:` section may use too, with their meaning here. */
const OWN_KEYS = ['session', 'pooling', 'normalize', 'rerank_label', 'quantize', 'quantize_check_texts', 'quantize_min_cosine', 'quantize_min_label_agreement'];

interface RawEncoderfileSection extends Omit<RawEncoderSection, 'model_type' | 'lua_libs'> {
  model_type: string;
  lua_libs?: string[];
  base_binary_path?: string;
  validate_transform?: boolean;
  target?: string;
}

export interface EncoderfileTranslation {
  encoder: RawEncoderSection;
  extras: { format: 'encoderfile'; target: string | null; baseBinaryPath: string | null; notes: string[] };
}

/** The `encoder:` section and the extras of a validated `encoderfile:` document. */
export function fromEncoderfileSection(document: Record<string, unknown>): EncoderfileTranslation {
  const section = document.encoderfile as RawEncoderfileSection & Record<string, unknown>;
  const notes: string[] = [];
  const ignored = [
    ...Object.keys(document).filter((key) => key !== 'encoderfile'),
    ...Object.keys(section)
      .filter((key) => !ENCODERFILE_KEYS.includes(key) && !OWN_KEYS.includes(key))
      .map((key) => `encoderfile.${key}`),
  ];
  if (ignored.length > 0) notes.push(`${ignored.join(', ')}: ignored, as encoderfile ignores keys it does not know`);

  const { path: modelPath, lua_libs: luaLibs, base_binary_path: baseBinaryPath, validate_transform: validateTransform, target } = section;
  let encoderPath: RawEncoderSection['path'] = typeof modelPath === 'string' ? modelPath : { ...modelPath };
  if (typeof encoderPath !== 'string' && encoderPath.preprocessor_config_path !== undefined && !isImageModelType(section.model_type)) {
    const { preprocessor_config_path: _unused, ...rest } = encoderPath;
    encoderPath = rest;
    notes.push(`path.preprocessor_config_path: no effect, only image models read it, not a ${section.model_type} model`);
  }
  let libraries: LuaLibraryName[] | undefined;
  if (luaLibs !== undefined) {
    libraries = [...new Set(luaLibs.filter((lib): lib is LuaLibraryName => (LUA_LIBRARIES as readonly string[]).includes(lib)))];
    if (luaLibs.includes('debug')) notes.push('lua_libs debug: not opened, a transform never gets the debug library here (it can escape the sandbox)');
  }
  if (validateTransform === false) {
    notes.push('validate_transform false: no effect, the transform is run once on a sample of the output whenever the model loads (at build and at start), so one that fails that run cannot be served');
  }

  const encoder: RawEncoderSection = {
    ...pick(section, [...ENCODERFILE_KEYS, ...OWN_KEYS]),
    version: section.version ?? ENCODERFILE_DEFAULT_VERSION,
    path: encoderPath,
    model_type: section.model_type as RawEncoderSection['model_type'],
    output_path: section.output_path ?? `${section.name}.encoderfile`,
    ...(libraries !== undefined ? { lua_libs: libraries } : {}),
    ...(section.model_type === 'sentence_embedding' ? encoderfileSentencePooling(section) : {}),
  } as RawEncoderSection;
  for (const key of ['base_binary_path', 'validate_transform', 'target'] as const) delete (encoder as unknown as Record<string, unknown>)[key];
  return { encoder, extras: { format: 'encoderfile', target: target ?? null, baseBinaryPath: baseBinaryPath ?? null, notes } };
}

/**
 * encoderfile's sentence_embedding model without a transform mean-pools and does not normalise (its
 * `Transform<SentenceEmbedding>` default, and its template's `arr:mean_pool(mask)`), whatever a sentence-transformers
 * layout beside the model says: an `encoderfile:` file gets those vectors unless it sets this project's own `pooling`
 * or `normalize`. A request may still ask for unit length (`normalize: true` on /predict).
 */
function encoderfileSentencePooling(section: RawEncoderfileSection): Pick<RawEncoderSection, 'pooling' | 'normalize'> {
  return { pooling: section.pooling ?? 'mean', normalize: section.normalize ?? false };
}

function pick(section: Record<string, unknown>, keys: string[]): Record<string, unknown> {
  return Object.fromEntries(Object.entries(section).filter(([key]) => keys.includes(key)));
}
