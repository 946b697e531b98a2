/**
 * JSON text in the exact layout HF tools write: 2-space indentation, `[]`/`{}` for empty
 * containers, Maps written in insertion order (JS objects would move integer-like keys such as
 * the vocabulary's "0".."9" to the front), optional sorted keys (Python's sort_keys=True) and
 * optional \uXXXX escapes for non-ASCII (Python's ensure_ascii=True).
 */

export type JsonValue = null | boolean | number | string | JsonValue[] | JsonObject | Map<string, JsonValue>;
export interface JsonObject {
  [key: string]: JsonValue;
}

export interface JsonFormat {
  sortKeys?: boolean;
  asciiOnly?: boolean;
}

export function formatJson(value: JsonValue, format: JsonFormat = {}): string {
  return render(value, '', format);
}

function render(value: JsonValue, indent: string, format: JsonFormat): string {
  if (value === null || typeof value === 'boolean') return String(value);
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TypeError(`cannot write ${value} as JSON`);
    return JSON.stringify(value);
  }
  if (typeof value === 'string') return renderString(value, format);
  const inner = indent + '  ';
  if (Array.isArray(value)) {
    if (value.length === 0) return '[]';
    return `[\n${value.map((item) => inner + render(item, inner, format)).join(',\n')}\n${indent}]`;
  }
  let entries = value instanceof Map ? [...value.entries()] : Object.entries(value);
  if (entries.length === 0) return '{}';
  if (format.sortKeys && !(value instanceof Map)) {
    entries = entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  }
  const lines = entries.map(([key, item]) => `${inner}${renderString(key, format)}: ${render(item, inner, format)}`);
  return `{\n${lines.join(',\n')}\n${indent}}`;
}

function renderString(text: string, format: JsonFormat): string {
  const json = JSON.stringify(text);
  if (!format.asciiOnly) return json;
  return json.replace(/[\u0080-\uffff]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
