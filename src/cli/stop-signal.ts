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
  const signals = stopSignals(platform);
  return new Promise((resolve) => {
    const onSignal = (signal: NodeJS.Signals) => {
      for (const each of signals) source.off(each, onSignal);
      resolve(signal);
    };
    for (const signal of signals) source.on(signal, onSignal);
  });
}
