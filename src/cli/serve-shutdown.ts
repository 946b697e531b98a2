import type { RunningServer } from '../serve/encoder-server.ts';
import type { CliIo } from './program.ts';
import { ignoreSighup, onStopSignals } from './stop-signal.ts';

export interface ShutdownSettings {
  /** After the signal, how long requests are still accepted (`--shutdown-grace`). */
  graceMs: number;
  /** After the signal, when whatever is still open is cut (`--shutdown-timeout`); more than graceMs. */
  timeoutMs: number;
}

/** What SIGHUP reloads (Linux and macOS), e.g. the TLS certificate: `what` names it in the lines on stderr. */
export interface Reload {
  what: string;
  run(): Promise<void>;
}

/** Where signals come from, and the platform (which signals stop): the process's, unless a test gives its own. */
export interface SignalEnvironment {
  source?: Pick<NodeJS.EventEmitter, 'on' | 'off'>;
  platform?: NodeJS.Platform;
}

/**
 * Serves until SIGTERM or SIGINT (and, on Windows, SIGBREAK or SIGHUP), then stops as Kubernetes expects
 * (docs/http-api.md, "Shutdown"):
 *
 * 1. at once, readiness goes: GET /health answers 503, gRPC health NOT_SERVING; nothing else changes;
 * 2. for `graceMs`, requests are still accepted and served (the pod is still being sent traffic while its removal
 *    from the endpoints propagates);
 * 3. then the listeners close and what is in flight finishes;
 * 4. `timeoutMs` after the signal, whatever is still open (a client stalled in its request, a slow response) is cut.
 *
 * A second stop signal skips to the cut. SIGHUP on Linux and macOS runs `reload` (the TLS certificate), with a line
 * on stderr saying whether it worked; without one it is ignored with a line on stderr (its default action would end
 * the process with its requests in flight). Resolves once the front
 * ends have closed; the signal handlers are removed then, so a later signal has its default effect.
 */
export async function serveUntilStopped(server: RunningServer, settings: ShutdownSettings, io: CliIo, signals: SignalEnvironment = {}, reload?: Reload): Promise<void> {
  const stopIgnoringHup = ignoreSighup(
    reload
      ? () => {
          reload.run().then(
            () => io.stderr(`SIGHUP: reloaded ${reload.what}; new connections use it, open ones keep theirs\n`),
            (error: unknown) => io.stderr(`SIGHUP: ${reload.what} not reloaded, still serving the previous one: ${(error as Error).message}\n`),
          );
        }
      : () => io.stderr('SIGHUP: ignored; serve has nothing to reload (SIGTERM or SIGINT stops it)\n'),
    signals.source,
    signals.platform,
  );
  const first = Promise.withResolvers<NodeJS.Signals>();
  const again = Promise.withResolvers<NodeJS.Signals>();
  let received = 0;
  let signalledAt = 0;
  const stopListening = onStopSignals(
    (signal) => {
      received += 1;
      if (received === 1) {
        // readiness goes in the signal's own turn
        signalledAt = Date.now();
        server.drain();
        io.stderr(
          `${signal}: stopping; finishing requests in flight. /health answers 503 now; requests are still accepted for ${settings.graceMs} ms ` +
            `(--shutdown-grace), what remains ${settings.timeoutMs} ms after the signal is cut (--shutdown-timeout); ${signal} again cuts it now\n`,
        );
        first.resolve(signal);
        return;
      }
      if (received === 2) io.stderr(`${signal} again: cutting what is still open\n`);
      again.resolve(signal);
      server.cut();
    },
    signals.source,
    signals.platform,
  );
  try {
    await first.promise;
    let graceTimer: NodeJS.Timeout | undefined;
    await Promise.race([new Promise((resolve) => (graceTimer = setTimeout(resolve, settings.graceMs))), again.promise]);
    clearTimeout(graceTimer);
    const inFlight = server.httpRequestsInFlight;
    if (received === 1) io.stderr(`no longer accepting; ${inFlight} HTTP request${inFlight === 1 ? '' : 's'} in flight\n`);
    const { cut } = await server.close({ deadlineMs: received > 1 ? 0 : Math.max(0, settings.timeoutMs - (Date.now() - signalledAt)) });
    if (cut && received === 1) io.stderr(`shutdown timeout: cut what was still open ${settings.timeoutMs} ms after the signal\n`);
  } finally {
    stopListening();
    stopIgnoringHup();
  }
}
