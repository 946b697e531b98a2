/**
 * The names a build configuration may use for model types and Lua libraries. They live apart from config.ts (which
 * re-exports them), which parses YAML: the inference worker's bundle needs these names for the Lua transform it runs,
 * and importing config.ts put the whole YAML library (~120 KB minified) into that bundle, which every worker thread
 * compiles when it starts.
 */
export const MODEL_TYPES = ['embedding', 'sentence_embedding', 'sequence_classification', 'token_classification'] as const;
export type ModelType = (typeof MODEL_TYPES)[number];

/**
 * Model types whose inputs are images: no tokenizer, a preprocessor_config.json instead (docs/image-models.md). Apart
 * from MODEL_TYPES, which the text pipeline and its front ends (gRPC services, MCP tools, OpenAPI schemas) cover each.
 */
export const IMAGE_MODEL_TYPES = ['image_classification', 'image_embedding'] as const;
export type ImageModelType = (typeof IMAGE_MODEL_TYPES)[number];
/** Every model type a build configuration may name. */
export const BUILD_MODEL_TYPES = [...MODEL_TYPES, ...IMAGE_MODEL_TYPES] as const;
export type BuildModelType = (typeof BUILD_MODEL_TYPES)[number];

export function isImageModelType(modelType: string): modelType is ImageModelType {
  return (IMAGE_MODEL_TYPES as readonly string[]).includes(modelType);
}

export const LUA_LIBRARIES = ['coroutine', 'table', 'io', 'os', 'string', 'utf8', 'math', 'package'] as const;
export type LuaLibraryName = (typeof LUA_LIBRARIES)[number];
export const DEFAULT_LUA_LIBRARIES: readonly LuaLibraryName[] = ['table', 'string', 'math'];
