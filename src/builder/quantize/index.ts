/** int8 quantization at build: the graph rewrite, the accuracy arithmetic, and the gate that runs both models. */
export { quantizeInt8, type QuantizationReport } from './quantize-int8.ts';
export {
  compareEmbeddings,
  compareLogits,
  compareOutputs,
  compareScores,
  type EmbeddingComparison,
  type LabelComparison,
  type OutputComparison,
  type OutputTensor,
  type TokenMask,
} from './accuracy.ts';
export { compareModels, DEFAULT_CHECK_TEXTS, describeGate, enforceGate, type GateResult } from './accuracy-gate.ts';
export { decodeModel, encodeModel, type Model } from './onnx-format.ts';
