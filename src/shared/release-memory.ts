/**
 * Gives memory back after a large request. V8 collects garbage when JavaScript allocates, so a server that goes idle
 * after a few requests of megabytes keeps their dead strings (hundreds of MB of RSS, measured) until the next burst
 * of allocation. A full collection once the large work has settled lets it return those pages to the system.
 */

/** After the last large piece of work, how long to wait for quiet before collecting. */
const QUIET_MS = 1000;

/**
 * What to collect. `full`: the whole heap, where large strings died (a thread that tokenized or parsed them, or an
 * event loop without tokenizer threads). `young`: only the young generation — where an event loop that never held a
 * large text finds what held one (the wrappers of shared bytes, large-texts.ts) — in a few milliseconds, where a full
 * collection of its ~40 MB heap of code, tokenizer and server objects held it 100–150 ms on a busy machine.
 */
export type Collection = 'full' | 'young';

type Gc = (options?: { type: 'major' | 'minor' }) => void;

let collect: Promise<Gc | null> | undefined;
let pending: Collection | undefined;
let timer: ReturnType<typeof setTimeout> | undefined;

/** gc(), which only a flag exposes: set now, it is visible to contexts made after it. Loaded when first needed. */
function collector(): Promise<Gc | null> {
  collect ??= Promise.all([import('node:v8'), import('node:vm')]).then(
    ([v8, vm]) => {
      v8.setFlagsFromString('--expose-gc');
      return vm.runInNewContext('gc') as Gc;
    },
    () => null,
  );
  return collect;
}

/**
 * Runs a garbage collection QUIET_MS after the last call (debounced; a full one if any call asked for it); the timer
 * never keeps a process alive.
 */
export function releaseMemorySoon(collection: Collection = 'full'): void {
  if (timer !== undefined) clearTimeout(timer);
  pending = pending === 'full' ? 'full' : collection;
  timer = setTimeout(() => {
    const type = pending === 'young' ? 'minor' : 'major';
    timer = undefined;
    pending = undefined;
    void collector().then((gc) => gc?.({ type }));
  }, QUIET_MS);
  timer.unref();
}
