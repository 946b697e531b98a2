import { h, svg } from './dom.ts';

/**
 * Two chart kinds in plain SVG: columns over time (stacked series) and a ranking of horizontal bars. Every column
 * and bar carries a <title> (the browser shows it on hover) with its exact value and unit; axes have units. Plain
 * SVG keeps the bundle small and needs no inline styles (the CSP allows none): colours come from classes in
 * dashboard.css.
 */

/** Axis ticks at 1, 2 or 5 × a power of ten, from 0 to at least `max`. */
export function niceTicks(max: number, count = 4): number[] {
  if (!(max > 0)) return [0, 1];
  const rough = max / count;
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map((factor) => factor * power).find((candidate) => candidate >= rough)!;
  const ticks: number[] = [];
  for (let value = 0; value < max + step / 2; value += step) ticks.push(Number(value.toPrecision(12)));
  if (ticks.at(-1)! < max) ticks.push(Number((ticks.at(-1)! + step).toPrecision(12)));
  return ticks;
}

export interface Series {
  name: string;
  /** A class of dashboard.css giving the colour. */
  className: string;
  values: number[];
}

export interface ColumnChart {
  /** What is measured, with its unit: "Spend (US$ per hour)". */
  title: string;
  /** One label per column, e.g. its start time. */
  labels: string[];
  /** A short axis label for a column, or null to leave it unlabelled (long series label every n-th). */
  axisLabel: (index: number) => string | null;
  series: Series[];
  format: (value: number) => string;
}

// viewBox units: a chart box is about 500 px wide on a laptop screen, so 12-unit text reads at about 11 px
const WIDTH = 560;
const HEIGHT = 210;
const LEFT = 60;
const RIGHT = 8;
const TOP = 10;
const BOTTOM = 28;

export function columnChart(chart: ColumnChart): HTMLElement {
  const n = chart.labels.length;
  const totals = chart.labels.map((_, i) => chart.series.reduce((sum, series) => sum + series.values[i], 0));
  const ticks = niceTicks(Math.max(0, ...totals));
  const top = ticks.at(-1)!;
  const plotHeight = HEIGHT - TOP - BOTTOM;
  const y = (value: number) => TOP + plotHeight - (value / top) * plotHeight;
  const slot = (WIDTH - LEFT - RIGHT) / Math.max(1, n);
  const gap = Math.min(4, slot * 0.2);

  const grid = ticks.map((tick) =>
    svg('g', { class: 'tick' }, svg('line', { x1: LEFT, x2: WIDTH - RIGHT, y1: y(tick), y2: y(tick) }), svg('text', { x: LEFT - 6, y: y(tick) + 4, 'text-anchor': 'end' }, chart.format(tick))),
  );
  const columns = chart.labels.map((label, i) => {
    let base = 0;
    const parts = chart.series.map((series) => {
      const value = series.values[i];
      const rect = svg('rect', { class: series.className, x: LEFT + i * slot + gap / 2, width: Math.max(1, slot - gap), y: y(base + value), height: Math.max(0, y(base) - y(base + value)) });
      base += value;
      return rect;
    });
    const detail = chart.series.map((series) => `${series.name}: ${chart.format(series.values[i])}`).join(', ');
    // a transparent full-height target: thin or empty columns still show their numbers on hover
    const target = svg('rect', { class: 'hover-target', x: LEFT + i * slot, width: slot, y: TOP, height: plotHeight });
    return svg('g', { class: 'column', 'data-total': totals[i] }, svg('title', {}, `${label} — ${detail}`), target, ...parts);
  });
  const axisLabels = chart.labels.map((_, i) => {
    const text = chart.axisLabel(i);
    return text === null ? null : svg('text', { class: 'axis-label', x: LEFT + (i + 0.5) * slot, y: HEIGHT - 8, 'text-anchor': 'middle' }, text);
  });
  const picture = svg(
    'svg',
    { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-label': chart.title, class: 'chart' },
    ...grid,
    svg('line', { class: 'axis', x1: LEFT, x2: WIDTH - RIGHT, y1: y(0), y2: y(0) }),
    ...columns,
    ...axisLabels,
  );
  const legend =
    chart.series.length > 1
      ? h('ul', { class: 'legend' }, ...chart.series.map((series) => h('li', {}, svg('svg', { viewBox: '0 0 10 10', class: 'swatch' }, svg('rect', { class: series.className, width: 10, height: 10 })), series.name)))
      : null;
  return h('figure', { class: 'chart-box' }, h('figcaption', {}, chart.title), picture, legend);
}

export interface Bar {
  label: string;
  value: number;
  /** More on hover, e.g. the requests behind a spend. */
  detail?: string;
}

/** A ranking: one horizontal bar per entry, longest first as given, the value written beside it. */
export function barList(title: string, bars: Bar[], format: (value: number) => string, empty = 'No calls in this range.'): HTMLElement {
  if (bars.length === 0) return h('figure', { class: 'chart-box' }, h('figcaption', {}, title), h('p', { class: 'empty' }, empty));
  const row = 26;
  const labelWidth = 170;
  const valueWidth = 80;
  const max = Math.max(...bars.map((bar) => bar.value)) || 1;
  const span = WIDTH - labelWidth - valueWidth;
  const rows = bars.map((bar, i) =>
    svg(
      'g',
      { class: 'bar' },
      svg('title', {}, `${bar.label}: ${format(bar.value)}${bar.detail ? ` (${bar.detail})` : ''}`),
      svg('text', { x: labelWidth - 8, y: i * row + 17, 'text-anchor': 'end', class: 'bar-label' }, bar.label.length > 24 ? `${bar.label.slice(0, 23)}…` : bar.label),
      svg('rect', { class: 'series-a', x: labelWidth, y: i * row + 5, height: row - 10, width: Math.max(1, (bar.value / max) * span) }),
      svg('text', { x: labelWidth + Math.max(1, (bar.value / max) * span) + 6, y: i * row + 17, class: 'bar-value' }, format(bar.value)),
    ),
  );
  return h('figure', { class: 'chart-box' }, h('figcaption', {}, title), svg('svg', { viewBox: `0 0 ${WIDTH} ${bars.length * row}`, role: 'img', 'aria-label': title, class: 'chart' }, ...rows));
}
