/**
 * The solo session's loading, shared by the text workers (inference-workers.ts) and the image threads
 * (image-workers.ts): a thread is asked to load a second session of its model and answers whether it did; a pool
 * that fails to get one goes on without it, with a warning.
 */
import type { ErrorMessage } from './errors.ts';
import { errorFromMessage } from './errors.ts';

/** One thread's solo session as its owner on the main thread sees it: loading, loaded, or not. */
export class SoloSessionState {
  /** Set while the solo session loads; resolves to whether it did. */
  #loading: ((error: Error | null) => void) | null = null;
  #loaded = false;

  get loaded(): boolean {
    return this.#loaded;
  }

  /** Sends the load (`send`) and waits for the thread's answer (answered) or its end (failed); rejects when it did not load. */
  async load(send: () => void): Promise<void> {
    const { promise, resolve } = Promise.withResolvers<Error | null>();
    this.#loading = resolve;
    send();
    const error = await promise;
    this.#loading = null;
    if (error) throw error;
    this.#loaded = true;
  }

  /** The thread's `solo-loaded` answer. */
  answered(error: ErrorMessage | null): void {
    this.#loading?.(error ? errorFromMessage(error) : null);
  }

  /** The thread ended or is being closed: a load under way fails with `error`. */
  failed(error: Error): void {
    this.#loading?.(error);
  }
}

/**
 * Loads a pool's solo session with `options` (`load`); true once it has, false when it did not (a warning unless the
 * pool is closing), when the pool has none (options null) or is closing. `fallback` says where a lone batch runs
 * instead.
 */
export async function loadSoloOrWarn<O>(options: O | null, load: (options: O) => Promise<void>, closing: () => boolean, fallback: string): Promise<boolean> {
  if (options === null || closing()) return false;
  try {
    await load(options);
    return true;
  } catch (error) {
    if (!closing()) process.emitWarning(`the solo session did not load (${(error as Error).message}); a lone batch runs on ${fallback}`);
    return false;
  }
}
