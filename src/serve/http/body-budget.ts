import { HttpError } from './errors.ts';

/**
 * The bytes of request bodies the server holds at once while they arrive, over every connection together
 * (`serve --body-buffer-limit`). `--body-limit` bounds one body; without this bound, many slow clients each sending
 * a body of nearly that size would hold their sum (100 bodies of 8 MiB held 1.0 GB until the request timeout).
 * A body that would take the total over the limit is answered 503 at once, its bytes given back.
 */
export class BodyBudget {
  readonly limitBytes: number;
  #held = 0;

  constructor(limitBytes: number) {
    this.limitBytes = limitBytes;
  }

  /** Bytes held now by bodies still arriving (or being parsed). */
  get heldBytes(): number {
    return this.#held;
  }

  /** Takes `bytes` if they fit under the limit; false (nothing taken) when they do not. */
  take(bytes: number): boolean {
    if (this.#held + bytes > this.limitBytes) return false;
    this.#held += bytes;
    return true;
  }

  give(bytes: number): void {
    this.#held -= bytes;
  }

  /** The 503 of a body refused because the budget is spent. */
  refusal(): HttpError {
    return new HttpError(
      503,
      `Service Unavailable: the request bodies being received already hold the server's limit of ${this.limitBytes} bytes (--body-buffer-limit); retry shortly`,
    );
  }
}
