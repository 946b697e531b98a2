/**
 * Test-model generator: BERT-architecture ONNX models with deterministic random weights, plus the
 * HF tokenizer and config files that make a complete model directory.
 */
export { DEFAULT_LABELS, MODEL_TYPES, PRESETS, PRESET_NAMES, normalizeOptions, numberedLabels } from './options.ts';
export type { GeneratorOptions, ModelType, PresetName } from './options.ts';
export { LAYER_NORM_EPS, TYPE_VOCAB_SIZE, generateWeights } from './weights.ts';
export type { BertWeights, WeightTensor } from './weights.ts';
export { IR_VERSION, OPSET_VERSION, buildOnnxModel } from './bert-onnx-model.ts';
export { MODEL_DIRECTORY_FILES, modelDirectoryFiles, writeModelDirectory } from './model-directory.ts';
export { NORMALIZE_MODULE_FOLDER, SENTENCE_TRANSFORMERS_FILES, sentenceTransformersFiles } from './sentence-transformers-files.ts';
export type { SentenceTransformersFile } from './sentence-transformers-files.ts';
export { BASE_VOCABULARY, BASE_VOCABULARY_SIZE, SPECIAL_TOKENS, buildVocabulary } from './vocabulary.ts';
export { TINY_VIT, TINY_VIT_EMBEDDING, VIT_MODEL_DIRECTORY_FILES, buildVitOnnxModel, generateVitWeights, vitConfigJson, vitPreprocessorConfigJson, writeVitModelDirectory } from './vit-onnx-model.ts';
export type { VitOptions } from './vit-onnx-model.ts';
