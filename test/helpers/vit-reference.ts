/**
 * An independent ViT forward pass in plain TypeScript (float64) from HuggingFace's ViTForImageClassification weight
 * names, to check the generated ONNX graph: the patch embedding as explicit sums over each patch (not a convolution),
 * pre-norm blocks, the classifier on the [CLS] token. The block pieces are the BERT reference's.
 */
import type { WeightTensor } from '../../scripts/model-generator/index.ts';
import { add, gelu, layerNorm, linear, selfAttention, type Matrix } from './bert-reference.ts';

/** logits [batch][labels] for `pixels` [batch, 3, size, size] (channels first, as pixel_values). */
export function vitReferenceForward(weights: ReadonlyMap<string, WeightTensor>, heads: number, pixels: Float32Array, batch: number): number[][] {
  const tensor = (name: string) => {
    const found = weights.get(name);
    if (!found) throw new Error(`reference: weight ${name} missing`);
    return found;
  };
  const projection = tensor('vit.embeddings.patch_embeddings.projection.weight');
  const [hidden, channels, patch] = projection.dims;
  const size = Math.round(Math.sqrt(pixels.length / batch / channels));
  const grid = size / patch;
  let layers = 0;
  while (weights.has(`vit.encoder.layer.${layers}.layernorm_before.weight`)) layers++;
  const allKeys = Array.from({ length: grid * grid + 1 }, () => 1);
  const norm = (x: Matrix, name: string) => layerNorm(x, tensor(`${name}.weight`).data, tensor(`${name}.bias`).data);
  const dense = (x: Matrix, name: string) => linear(x, tensor(`${name}.weight`), tensor(`${name}.bias`).data);

  const logits: number[][] = [];
  for (let b = 0; b < batch; b++) {
    const pixel = (c: number, y: number, x: number) => pixels[((b * channels + c) * size + y) * size + x];
    const tokens: Matrix = [Float64Array.from(tensor('vit.embeddings.cls_token').data)];
    for (let py = 0; py < grid; py++) {
      for (let px = 0; px < grid; px++) {
        const token = new Float64Array(hidden);
        for (let h = 0; h < hidden; h++) {
          let sum = tensor('vit.embeddings.patch_embeddings.projection.bias').data[h];
          for (let c = 0; c < channels; c++) {
            for (let i = 0; i < patch; i++) {
              for (let j = 0; j < patch; j++) sum += projection.data[((h * channels + c) * patch + i) * patch + j] * pixel(c, py * patch + i, px * patch + j);
            }
          }
          token[h] = sum;
        }
        tokens.push(token);
      }
    }
    const positions = tensor('vit.embeddings.position_embeddings').data;
    let x: Matrix = tokens.map((token, t) => token.map((value, h) => value + positions[t * hidden + h]));
    for (let l = 0; l < layers; l++) {
      const p = `vit.encoder.layer.${l}`;
      const a = `${p}.attention.attention`;
      const normed = norm(x, `${p}.layernorm_before`);
      const context = selfAttention(dense(normed, `${a}.query`), dense(normed, `${a}.key`), dense(normed, `${a}.value`), allKeys, heads);
      x = add(dense(context, `${p}.attention.output.dense`), x);
      const up = dense(norm(x, `${p}.layernorm_after`), `${p}.intermediate.dense`).map((row) => row.map(gelu));
      x = add(dense(up, `${p}.output.dense`), x);
    }
    const final = norm(x, 'vit.layernorm');
    logits.push([...dense([final[0]], 'classifier')[0]]);
  }
  return logits;
}
