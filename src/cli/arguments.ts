import { InvalidArgumentError } from 'commander';

/** Option value parsers; commander turns their errors into usage errors (exit code 2). */

export function parsePositiveInteger(value: string): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 1) throw new InvalidArgumentError(`"${value}" is not a positive integer`);
  return parsed;
}

export function parseNonNegativeInteger(value: string): number {
  const parsed = Number(value);
  if (value.trim() === '' || !Number.isInteger(parsed) || parsed < 0) throw new InvalidArgumentError(`"${value}" is not an integer >= 0`);
  return parsed;
}

export function parseNonNegativeNumber(value: string): number {
  const parsed = Number(value);
  if (value.trim() === '' || !Number.isFinite(parsed) || parsed < 0) throw new InvalidArgumentError(`"${value}" is not a number >= 0`);
  return parsed;
}

export function parsePositiveNumber(value: string): number {
  const parsed = Number(value);
  if (value.trim() === '' || !Number.isFinite(parsed) || parsed <= 0) throw new InvalidArgumentError(`"${value}" is not a number > 0`);
  return parsed;
}

export function parsePort(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new InvalidArgumentError(`"${value}" is not a port (0-65535)`);
  return port;
}

/** A file name that is not empty: `-o "$OUT"` with OUT unset would otherwise quietly mean "no -o". */
export function parseFileName(value: string): string {
  if (value === '') throw new InvalidArgumentError('the output file name is empty');
  return value;
}

/**
 * An address to listen on. An IPv6 literal may be written in brackets, as encoderfile's `--grpc-hostname [::]`
 * default is: the brackets are dropped (Node and grpc-js take the bare address, and add them where a URL needs them).
 */
export function parseHostname(value: string): string {
  const host = /^\[(.*)\]$/.exec(value)?.[1] ?? value;
  if (host.trim() === '') throw new InvalidArgumentError('the host name is empty');
  return host;
}
