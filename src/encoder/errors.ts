/**
 * The three error kinds of spec 2's error table. Front ends map `kind` to their codes
 * (HTTP 422/500, gRPC INVALID_ARGUMENT/INTERNAL, MCP INVALID_REQUEST/INTERNAL_ERROR).
 */
export type EncoderErrorKind = 'input' | 'internal' | 'config';

export abstract class EncoderError extends Error {
  abstract readonly kind: EncoderErrorKind;
}

/** Bad request data. The message always reads `Invalid input: <reason>`. */
export class InputError extends EncoderError {
  readonly kind = 'input';
  readonly reason: string;
  /** The request field at fault, when one is (e.g. `input`, `dimensions`): OpenAI-style errors name it as `param`. */
  readonly field: string | null;
  constructor(reason: string, options: { field?: string } = {}) {
    super(`Invalid input: ${reason}`);
    this.name = 'InputError';
    this.reason = reason;
    this.field = options.field ?? null;
  }
}

/** A failure while running the model or a transform on valid input. */
export class InternalError extends EncoderError {
  readonly kind = 'internal';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'InternalError';
  }
}

/** A build configuration, model package or transform that cannot be used. */
export class ConfigError extends EncoderError {
  readonly kind = 'config';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ConfigError';
  }
}

export function isEncoderError(error: unknown): error is EncoderError {
  return error instanceof EncoderError;
}

/** An error as it crosses between threads: a structured clone keeps no class, so the kind travels as data. */
export interface ErrorMessage {
  kind: EncoderErrorKind;
  message: string;
  field?: string | null;
}

export function errorMessageOf(error: unknown): ErrorMessage {
  if (error instanceof InputError) return { kind: 'input', message: error.reason, field: error.field };
  if (isEncoderError(error)) return { kind: error.kind, message: error.message };
  return { kind: 'internal', message: error instanceof Error ? error.message : String(error) };
}

export function errorFromMessage(message: ErrorMessage): EncoderError {
  if (message.kind === 'config') return new ConfigError(message.message);
  if (message.kind === 'input') return new InputError(message.message, { field: message.field ?? undefined });
  return new InternalError(message.message);
}
