/**
 * One text's class scores with their labels, best first (ties in label order): how text-embeddings-inference's
 * /predict and Infinity's /classify answer a sequence classification. A model without labels gets HuggingFace's
 * default names, `LABEL_<index>`, as both servers would read from its config.
 */
export function labelledScores(values: ArrayLike<number>, id2label: Readonly<Record<string, string>> | undefined): { score: number; label: string }[] {
  return Array.from(values, (score, index) => ({ score, label: id2label?.[String(index)] ?? `LABEL_${index}` })).sort((a, b) => b.score - a.score);
}

/**
 * The scores a classification answers per label: the logits when asked for raw scores; else the softmax
 * probabilities, but for a one-logit model its sigmoid (softmax of one logit is always 1), as HuggingFace's
 * text-classification pipeline, which TEI and Infinity follow, scores it.
 */
export function classScoresOf(result: { logits: ArrayLike<number>; scores: ArrayLike<number> }, raw: boolean): ArrayLike<number> {
  if (raw) return result.logits;
  return result.logits.length === 1 ? [1 / (1 + Math.exp(-result.logits[0]))] : result.scores;
}
