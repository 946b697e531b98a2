/**
 * Durations as Go writes them (`1.5s`, `250ms`, `1m30s`): the configuration's timeouts and the `latency` of
 * ServerHealth use the same notation, so what a user reads is what they can write.
 */

const UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, 'µs': 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** One or more `<number><unit>` parts, units ns, us (µs), ms, s, m, h; e.g. `500ms`, `2s`, `1m30s`. */
export const DURATION_PATTERN = '^([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$';
const DURATION_RE = new RegExp(DURATION_PATTERN);
const PART_RE = /([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)/g;

/** Milliseconds of a duration string; undefined when it is not one. */
export function parseDuration(text: string): number | undefined {
  if (!DURATION_RE.test(text)) return undefined;
  let ms = 0;
  for (const match of text.matchAll(PART_RE)) ms += Number(match[1]) * UNIT_MS[match[2]];
  return ms;
}

/** A duration in Go's `time.Duration.String()` form: `812.345µs`, `1.234567ms`, `2.5s`, `1m30s`, `0s`. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms <= 0) return '0s';
  const nanos = Math.round(ms * 1e6);
  if (nanos < 1000) return `${nanos}ns`;
  if (nanos < 1e6) return `${trim(nanos / 1e3)}µs`;
  if (nanos < 1e9) return `${trim(nanos / 1e6)}ms`;
  const totalSeconds = nanos / 1e9;
  const hours = Math.floor(totalSeconds / 3600);
  const minutes = Math.floor((totalSeconds - hours * 3600) / 60);
  const seconds = totalSeconds - hours * 3600 - minutes * 60;
  return `${hours ? `${hours}h` : ''}${hours || minutes ? `${minutes}m` : ''}${trim(seconds)}s`;
}

/** At most nine decimals, no trailing zeros. */
function trim(value: number): string {
  return Number(value.toFixed(9)).toString();
}
