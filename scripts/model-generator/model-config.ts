/** config.json of the generated model, as transformers writes it for a BERT of the same shape. */
import { formatJson } from './json-format.ts';
import type { JsonObject } from './json-format.ts';
import type { GeneratorOptions, ModelType } from './options.ts';
import { INITIALIZER_RANGE, LAYER_NORM_EPS, TYPE_VOCAB_SIZE } from './weights.ts';

const ARCHITECTURES: Readonly<Record<ModelType, string>> = {
  embedding: 'BertModel',
  sentence_embedding: 'BertModel',
  sequence_classification: 'BertForSequenceClassification',
  token_classification: 'BertForTokenClassification',
};

/** `options` must be normalised (classification models carry their labels). */
export function modelConfigJson(options: GeneratorOptions): string {
  const config: JsonObject = {
    architectures: [ARCHITECTURES[options.modelType]],
    attention_probs_dropout_prob: 0.1,
    classifier_dropout: null,
    dtype: 'float32',
    hidden_act: 'gelu',
    hidden_dropout_prob: 0.1,
    hidden_size: options.hidden,
    initializer_range: INITIALIZER_RANGE,
    intermediate_size: options.intermediate,
    layer_norm_eps: LAYER_NORM_EPS,
    max_position_embeddings: options.maxPositions,
    model_type: 'bert',
    num_attention_heads: options.heads,
    num_hidden_layers: options.layers,
    pad_token_id: 0,
    position_embedding_type: 'absolute',
    type_vocab_size: TYPE_VOCAB_SIZE,
    use_cache: true,
    vocab_size: options.vocabSize,
  };
  if (options.labels) {
    const id2label: JsonObject = {};
    const label2id: JsonObject = {};
    options.labels.forEach((label, id) => {
      id2label[String(id)] = label;
      label2id[label] = id;
    });
    config.id2label = id2label;
    config.label2id = label2id;
  }
  // transformers: json.dumps(indent=2, sort_keys=True) + "\n", ASCII-escaped.
  return formatJson(config, { sortKeys: true, asciiOnly: true }) + '\n';
}
