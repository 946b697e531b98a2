/**
 * serveUntilStopped (src/cli/serve-shutdown.ts): the order and timing of a shutdown as Kubernetes expects it, on a
 * recording RunningServer and signals emitted by the test: drain at once, close after the grace with the rest of
 * the timeout as its deadline, a second signal cuts, SIGHUP is ignored (or reloads what serve was given to reload)
 * on Linux and stops on Windows.
 */
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { serveUntilStopped } from '../../src/cli/serve-shutdown.ts';
import type { RunningServer } from '../../src/serve/encoder-server.ts';

/** A server that records what is asked of it and when; close() waits until `finishClose` (or cut()). */
function recordingServer() {
  const events: { what: string; at: number; deadlineMs?: number }[] = [];
  const started = Date.now();
  let finish: (() => void) | undefined;
  let cut = false;
  const server: RunningServer = {
    httpUrl: 'http://127.0.0.1:1',
    grpcAddress: null,
    grpcServices: [],
    httpPort: 1,
    grpcPort: null,
    httpRequestsInFlight: 2,
    drain: () => events.push({ what: 'drain', at: Date.now() - started }),
    close: ({ deadlineMs } = {}) => {
      events.push({ what: 'close', at: Date.now() - started, deadlineMs });
      return new Promise((resolve) => {
        finish = () => resolve({ cut });
        if (deadlineMs === 0) server.cut();
      });
    },
    cut: () => {
      events.push({ what: 'cut', at: Date.now() - started });
      cut = true;
      finish?.();
    },
  };
  return { server, events, finishClose: () => finish?.(), closing: () => finish !== undefined };
}

function io() {
  let text = '';
  return { io: { stdout: () => {}, stderr: (line: string) => (text += line) }, stderr: () => text };
}

async function until(condition: () => boolean): Promise<void> {
  const started = Date.now();
  while (!condition()) {
    if (Date.now() - started > 5000) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('serveUntilStopped', () => {
  it('drains at the signal, closes after the grace with the rest of the timeout as deadline, then removes its handlers', async () => {
    const { server, events, finishClose, closing } = recordingServer();
    const source = new EventEmitter();
    const out = io();
    const serving = serveUntilStopped(server, { graceMs: 300, timeoutMs: 2000 }, out.io, { source, platform: 'linux' });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(events).toEqual([]);
    const signalled = Date.now();
    source.emit('SIGTERM', 'SIGTERM');
    expect(events.map((event) => event.what)).toEqual(['drain']);
    expect(out.stderr()).toMatch(/^SIGTERM: stopping; finishing requests in flight\. \/health answers 503 now; requests are still accepted for 300 ms \(--shutdown-grace\), what remains 2000 ms after the signal is cut \(--shutdown-timeout\); SIGTERM again cuts it now\n$/);
    await until(closing);
    const close = events[1];
    expect(close.what).toBe('close');
    expect(Date.now() - signalled).toBeGreaterThanOrEqual(290);
    // what remains of the 2000 ms after the grace; timers may fire a few ms early against Date.now (1701 seen)
    expect(close.deadlineMs).toBeGreaterThan(1500);
    expect(close.deadlineMs).toBeLessThanOrEqual(2000 - 290);
    expect(out.stderr()).toContain('no longer accepting; 2 HTTP requests in flight\n');
    finishClose();
    await serving;
    expect(events.map((event) => event.what)).toEqual(['drain', 'close']);
    for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) expect(source.listenerCount(signal), signal).toBe(0);
  });

  it('a second signal during the grace closes with no deadline left: everything still open is cut', async () => {
    const { server, events } = recordingServer();
    const source = new EventEmitter();
    const out = io();
    const serving = serveUntilStopped(server, { graceMs: 60_000, timeoutMs: 120_000 }, out.io, { source, platform: 'linux' });
    source.emit('SIGINT', 'SIGINT');
    source.emit('SIGINT', 'SIGINT');
    await serving;
    expect(events.map((event) => [event.what, event.deadlineMs])).toEqual([['drain', undefined], ['cut', undefined], ['close', 0], ['cut', undefined]]);
    expect(out.stderr()).toContain('SIGINT again: cutting what is still open\n');
  });

  it('a second signal while closing cuts what close() waits for', async () => {
    const { server, events, closing } = recordingServer();
    const source = new EventEmitter();
    const out = io();
    const serving = serveUntilStopped(server, { graceMs: 0, timeoutMs: 120_000 }, out.io, { source, platform: 'linux' });
    source.emit('SIGTERM', 'SIGTERM');
    await until(closing);
    source.emit('SIGTERM', 'SIGTERM');
    await serving;
    expect(events.map((event) => event.what)).toEqual(['drain', 'close', 'cut']);
  });

  it('says when the timeout cut something', async () => {
    const { server, closing } = recordingServer();
    const source = new EventEmitter();
    const out = io();
    const serving = serveUntilStopped(server, { graceMs: 0, timeoutMs: 100 }, out.io, { source, platform: 'linux' });
    source.emit('SIGTERM', 'SIGTERM');
    await until(closing);
    server.cut(); // what the deadline does in the real server
    await serving;
    expect(out.stderr()).toContain('shutdown timeout: cut what was still open 100 ms after the signal\n');
  });

  it('ignores SIGHUP on Linux with a line on stderr, and goes on serving', async () => {
    const { server, events, finishClose, closing } = recordingServer();
    const source = new EventEmitter();
    const out = io();
    const serving = serveUntilStopped(server, { graceMs: 0, timeoutMs: 1000 }, out.io, { source, platform: 'linux' });
    source.emit('SIGHUP', 'SIGHUP');
    expect(out.stderr()).toBe('SIGHUP: ignored; serve has nothing to reload (SIGTERM or SIGINT stops it)\n');
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(events).toEqual([]);
    source.emit('SIGTERM', 'SIGTERM');
    await until(closing);
    finishClose();
    await serving;
  });

  it('runs the reload at SIGHUP on Linux, says whether it worked, and goes on serving either way', async () => {
    const { server, events, finishClose, closing } = recordingServer();
    const source = new EventEmitter();
    const out = io();
    let fail = false;
    let reloads = 0;
    const reload = {
      what: 'the TLS certificate',
      run: async () => {
        reloads += 1;
        if (fail) throw new Error('TLS: the private key does not match the certificate');
      },
    };
    const serving = serveUntilStopped(server, { graceMs: 0, timeoutMs: 1000 }, out.io, { source, platform: 'linux' }, reload);
    source.emit('SIGHUP', 'SIGHUP');
    await until(() => out.stderr().includes('\n'));
    expect(out.stderr()).toBe('SIGHUP: reloaded the TLS certificate; new connections use it, open ones keep theirs\n');
    fail = true;
    source.emit('SIGHUP', 'SIGHUP');
    await until(() => out.stderr().split('\n').length > 2);
    expect(out.stderr().split('\n')[1]).toBe('SIGHUP: the TLS certificate not reloaded, still serving the previous one: TLS: the private key does not match the certificate');
    expect(reloads).toBe(2);
    expect(events).toEqual([]);
    source.emit('SIGTERM', 'SIGTERM');
    await until(closing);
    finishClose();
    await serving;
    expect(source.listenerCount('SIGHUP')).toBe(0);
  });

  it('stops at SIGHUP on Windows (the console closing)', async () => {
    const { server, events, finishClose, closing } = recordingServer();
    const source = new EventEmitter();
    const out = io();
    const serving = serveUntilStopped(server, { graceMs: 0, timeoutMs: 1000 }, out.io, { source, platform: 'win32' });
    source.emit('SIGHUP', 'SIGHUP');
    expect(out.stderr()).toMatch(/^SIGHUP: stopping; /);
    await until(closing);
    finishClose();
    await serving;
    expect(events.map((event) => event.what)).toEqual(['drain', 'close']);
  });
});
