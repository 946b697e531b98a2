/** How numbers, money and times read on the page: US dollars, thousands separated, times in UTC like the API's. */

const integer = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

export const count = (value: number): string => integer.format(value);

/** Dollars with enough decimals that a small spend is not shown as $0.00. */
export function money(value: number): string {
  if (value === 0) return '$0';
  const abs = Math.abs(value);
  const digits = abs >= 100 ? 0 : abs >= 1 ? 2 : abs >= 0.01 ? 4 : 6;
  return `$${value.toLocaleString('en-US', { minimumFractionDigits: Math.min(digits, 2), maximumFractionDigits: digits })}`;
}

export const percent = (ratio: number): string => `${(ratio * 100).toLocaleString('en-US', { maximumFractionDigits: ratio < 0.1 ? 1 : 0 })}%`;

/** An API time (ISO 8601 in UTC without designator) as epoch milliseconds. */
export const apiTime = (value: string): number => Date.parse(/[zZ]|[+-]\d\d:\d\d$/.test(value) ? value : `${value}Z`);

/** "2026-05-18 12:04 UTC" (or "—" for none). */
export function utc(value: string | number | null): string {
  if (value === null) return '—';
  const iso = new Date(typeof value === 'number' ? value : apiTime(value)).toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;
}

/** "2026-05-18 12:04" in a column headed as UTC (or "—" for none). */
export const utcShort = (value: string | number | null): string => (value === null ? '—' : utc(value).slice(0, -' UTC'.length));

/** A model as the tables show it: provider:model; a call refused before any model was chosen has none. */
export const modelLabel = (provider: string, model: string): string => (provider && model ? `${provider}:${model}` : model || '—');

/** When a budget starts again, in words: its calendar alignment (and zone) or its period. */
export function resetSchedule(budget: { reset_every_seconds: number | null; reset_alignment: string | null; reset_time_zone: string | null }): string {
  return budget.reset_alignment === null ? period(budget.reset_every_seconds) : `${budget.reset_alignment} (${budget.reset_time_zone ?? 'UTC'})`;
}

/** A reset period in words. */
export function period(seconds: number | null): string {
  if (seconds === null) return 'never';
  const units: [number, string][] = [
    [86_400, 'day'],
    [3_600, 'hour'],
    [60, 'minute'],
  ];
  for (const [size, name] of units) {
    if (seconds % size === 0) {
      const n = seconds / size;
      return n === 1 ? `every ${name}` : `every ${n} ${name}s`;
    }
  }
  return `every ${seconds} s`;
}

/** An allowed-models list in words; null means every model. */
export const modelList = (models: string[] | null): string => (models === null ? 'all models' : models.length === 0 ? 'none' : models.join(', '));

/** A comma- or space-separated models field: empty means every model (null). */
export function parseModelList(text: string): string[] | null {
  const models = text
    .split(/[\s,]+/)
    .map((model) => model.trim())
    .filter(Boolean);
  return models.length === 0 ? null : models;
}

/** How long something has run: "850 ms", "12 s", "3 min 04 s", "2 h 05 min". */
export function age(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const seconds = Math.floor(ms / 1000);
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${String(seconds % 60).padStart(2, '0')} s`;
  return `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, '0')} min`;
}
