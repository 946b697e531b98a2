/**
 * Counts turns of the event loop (one setImmediate after another) until stopped: work that holds the loop shows as
 * no turns while it runs.
 */
export function countTurns(): { readonly turns: number; stop(): void } {
  let turns = 0;
  let ticking = true;
  const tick = () => {
    turns++;
    if (ticking) setImmediate(tick);
  };
  setImmediate(tick);
  return {
    get turns() {
      return turns;
    },
    stop() {
      ticking = false;
    },
  };
}
