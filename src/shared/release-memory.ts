/**
 * Gives memory back after a large request. V8 collects garbage when JavaScript allocates, so a server that goes idle
 * after a few requests of megabytes keeps their dead strings (hundreds of MB of RSS, measured) until the next burst
 * of allocation. A full collection once the large work has settled lets it return those pages to the system.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** After the last large piece of work, how long to wait for quiet before collecting. */
const QUIET_MS = 1000;

let collect: (() => void) | null | undefined;
let timer: ReturnType<typeof setTimeout> | undefined;

function collector(): (() => void) | null {
  if (collect === undefined) {
    try {
      // gc() is only exposed by a flag; set now, it is visible to contexts made after it
      setFlagsFromString('--expose-gc');
      collect = runInNewContext('gc') as () => void;
    } catch {
      collect = null;
    }
  }
  return collect;
}

/** Runs a full garbage collection QUIET_MS after the last call (debounced); the timer never keeps a process alive. */
export function releaseMemorySoon(): void {
  if (timer !== undefined) clearTimeout(timer);
  timer = setTimeout(() => {
    timer = undefined;
    collector()?.();
  }, QUIET_MS);
  timer.unref();
}
