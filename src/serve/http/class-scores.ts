/**
 * One text's class scores with their labels, best first (ties in label order): how text-embeddings-inference's
 * /predict and Infinity's /classify answer a sequence classification. A model without labels gets HuggingFace's
 * default names, `LABEL_<index>`, as both servers would read from its config.
 */
export function labelledScores(values: ArrayLike<number>, id2label: Readonly<Record<string, string>> | undefined): { score: number; label: string }[] {
  return Array.from(values, (score, index) => ({ score, label: id2label?.[String(index)] ?? `LABEL_${index}` })).sort((a, b) => b.score - a.score);
}
