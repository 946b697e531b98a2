/**
 * Signals that stop a server gracefully: SIGTERM and SIGINT (Ctrl+C) everywhere. On Windows also SIGBREAK
 * (Ctrl+Break) and SIGHUP, which Node emits there when the console window closes (Windows ends the process about
 * 10 s later): there it means "stop", never "reload".
 */
export function stopSignals(platform: NodeJS.Platform = process.platform): NodeJS.Signals[] {
  return platform === 'win32' ? ['SIGTERM', 'SIGINT', 'SIGBREAK', 'SIGHUP'] : ['SIGTERM', 'SIGINT'];
}

/** SIGHUP reloads a configuration on Linux and macOS only (see stopSignals). */
export function reloadsOnSighup(platform: NodeJS.Platform = process.platform): boolean {
  return platform !== 'win32';
}

type SignalSource = Pick<NodeJS.EventEmitter, 'on' | 'off'>;

/** Resolves with the first stop signal received; the handlers are removed then. */
export function waitForStopSignal(source: SignalSource = process, platform: NodeJS.Platform = process.platform): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const stop = onStopSignals((signal) => {
      stop();
      resolve(signal);
    }, source, platform);
  });
}

/**
 * Calls `handler` at every stop signal until the returned function is called (which removes the handlers). While
 * they are installed a signal no longer ends the process by itself: a second Ctrl+C reaches the handler.
 */
export function onStopSignals(handler: (signal: NodeJS.Signals) => void, source: SignalSource = process, platform: NodeJS.Platform = process.platform): () => void {
  const signals = stopSignals(platform);
  const onSignal = (signal: NodeJS.Signals) => handler(signal);
  for (const signal of signals) source.on(signal, onSignal);
  return () => {
    for (const signal of signals) source.off(signal, onSignal);
  };
}

/**
 * On Linux and macOS, SIGHUP's default action ends the process (exit status 129) with its requests in flight: a
 * closed terminal or a `kill -HUP` meant as "reload" would drop them. A program with nothing to reload installs
 * this: it calls `onSighup` (to say that the signal is ignored) and goes on. On Windows SIGHUP is a stop signal
 * (stopSignals), and this does nothing. Returns the function that removes the handler.
 */
export function ignoreSighup(onSighup: () => void, source: SignalSource = process, platform: NodeJS.Platform = process.platform): () => void {
  if (!reloadsOnSighup(platform)) return () => {};
  const handler = () => onSighup();
  source.on('SIGHUP', handler);
  return () => source.off('SIGHUP', handler);
}
