import { randomBytes } from 'node:crypto';
import type { SqlValue } from './driver.ts';
import type { ConfigSource, Metadata } from './records.ts';

// Helpers shared by the store's aggregates: values to and from their SQL columns, and database errors.

export const json = (value: unknown) => JSON.stringify(value ?? {});
/**
 * JSON with bigints (money) as strings, which PostgreSQL's json_to_recordset reads into BIGINT columns. The value is
 * copied with its bigints as strings and then stringified without a replacer: about twice as fast as a replacer,
 * which JSON.stringify calls for every value (this runs several times per call on PostgreSQL).
 */
export const bigintJson = (value: unknown) => JSON.stringify(withBigintStrings(value));

function withBigintStrings(value: unknown): unknown {
  if (typeof value === 'bigint') return String(value);
  if (Array.isArray(value)) return value.map(withBigintStrings);
  if (value === null || typeof value !== 'object') return value;
  const copy: Record<string, unknown> = {};
  for (const key in value) copy[key] = withBigintStrings((value as Record<string, unknown>)[key]);
  return copy;
}
export const parseJson = (text: unknown): Metadata => (typeof text === 'string' ? (JSON.parse(text) as Metadata) : {});
export const num = (value: unknown) => (value === null || value === undefined ? null : Number(value));
/** A money column (nano-dollars) as read: a number or a bigint (see Row); a REAL stored by an old version is rounded. */
export const nanos = (value: unknown): bigint =>
  typeof value === 'bigint' ? value : typeof value === 'number' ? BigInt(Math.round(value)) : BigInt((value as string | null) ?? 0);

export function newId(prefix: string): string {
  return `${prefix}_${randomBytes(12).toString('base64url')}`;
}

/** Whether a PostgreSQL error is a foreign-key violation (a hold whose instance row is gone). */
export function isForeignKeyViolation(error: unknown): boolean {
  return (error as { code?: unknown })?.code === '23503';
}

/** Whether a database error is a unique-key violation (SQLite and PostgreSQL word it differently). */
export function isUniqueViolation(error: unknown): boolean {
  const e = error as { code?: unknown; errcode?: unknown; message?: unknown };
  return e?.code === '23505' || (typeof e?.message === 'string' && e.message.includes('UNIQUE constraint failed'));
}

/** `column = ?` for each defined field (undefined = leave as is, null = clear). */
export function assignments(fields: Record<string, SqlValue | undefined>): { sets: string[]; params: SqlValue[] } {
  const sets: string[] = [];
  const params: SqlValue[] = [];
  for (const [column, value] of Object.entries(fields)) {
    if (value === undefined) continue;
    sets.push(`${column} = ?`);
    params.push(value);
  }
  return { sets, params };
}

/** An allowed-models list as stored: JSON text, or NULL for every model. */
export function modelList(models: string[] | null | undefined): string | null {
  return models === undefined || models === null ? null : JSON.stringify(models);
}

export function modelListOf(value: unknown): string[] | null {
  return typeof value === 'string' ? (JSON.parse(value) as string[]) : null;
}

/** A runtime configuration entry's source column: rows older than migration 14 were written through the API. */
export const sourceOf = (value: unknown): ConfigSource => (value === 'config' ? 'config' : 'api');
