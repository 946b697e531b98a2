import { invalidRequest } from './errors.ts';

/** Response timestamps: ISO 8601 in UTC without a zone designator, as spec 1 shows them ("2026-05-18T12:00:00.000"). */
export function isoTime(ms: number): string {
  return new Date(ms).toISOString().slice(0, -1);
}

export function isoTimeOrNull(ms: number | null): string | null {
  return ms === null ? null : isoTime(ms);
}

const ISO_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})?$/;

/**
 * Request timestamps: ISO 8601, with Z (as spec 1 gives them) or an offset; without a designator they are read as
 * UTC, so a timestamp copied from a response means what it says.
 */
export function parseTimestamp(text: string, param: string): number {
  if (!ISO_TIMESTAMP.test(text)) throw invalidRequest(`${param} must be an ISO 8601 timestamp such as 2026-05-18T12:00:00Z, got "${text}"`, param);
  const zoned = /(Z|[+-]\d{2}:\d{2})$/.test(text) ? text : `${text}Z`;
  const ms = Date.parse(zoned);
  // Date.parse rolls 2099-02-31 over to March 3; a date that does not exist is a typo, not a request for another.
  const [year, month, day] = text.slice(0, 10).split('-').map(Number);
  if (Number.isNaN(ms) || new Date(Date.UTC(year, month - 1, day)).getUTCDate() !== day) {
    throw invalidRequest(`${param} is not a valid date: "${text}"`, param);
  }
  return ms;
}
