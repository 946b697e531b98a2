/**
 * Gives memory back after a large request. V8 collects garbage when JavaScript allocates, so a server that goes idle
 * after a few requests of megabytes keeps their dead strings (hundreds of MB of RSS, measured) until the next burst
 * of allocation. A full collection once the large work has settled lets it return those pages to the system.
 */

/** After the last large piece of work, how long to wait for quiet before collecting. */
const QUIET_MS = 1000;

let collect: Promise<(() => void) | null> | undefined;
let timer: ReturnType<typeof setTimeout> | undefined;

/** gc(), which only a flag exposes: set now, it is visible to contexts made after it. Loaded when first needed. */
function collector(): Promise<(() => void) | null> {
  collect ??= Promise.all([import('node:v8'), import('node:vm')]).then(
    ([v8, vm]) => {
      v8.setFlagsFromString('--expose-gc');
      return vm.runInNewContext('gc') as () => void;
    },
    () => null,
  );
  return collect;
}

/** Runs a full garbage collection QUIET_MS after the last call (debounced); the timer never keeps a process alive. */
export function releaseMemorySoon(): void {
  if (timer !== undefined) clearTimeout(timer);
  timer = setTimeout(() => {
    timer = undefined;
    void collector().then((gc) => gc?.());
  }, QUIET_MS);
  timer.unref();
}
