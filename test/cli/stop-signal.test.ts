import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { ignoreSighup, onStopSignals, reloadsOnSighup, stopSignals, waitForStopSignal } from '../../src/cli/stop-signal.ts';

describe('stop signals', () => {
  it('are SIGTERM and SIGINT on Linux and macOS, where SIGHUP reloads', () => {
    for (const platform of ['linux', 'darwin'] as const) {
      expect(stopSignals(platform)).toEqual(['SIGTERM', 'SIGINT']);
      expect(reloadsOnSighup(platform)).toBe(true);
    }
  });

  it('add Ctrl+Break and the console closing on Windows, where SIGHUP never reloads', () => {
    expect(stopSignals('win32')).toEqual(['SIGTERM', 'SIGINT', 'SIGBREAK', 'SIGHUP']);
    expect(reloadsOnSighup('win32')).toBe(false);
  });

  it('resolve with the first signal and leave no handler behind', async () => {
    const source = new EventEmitter();
    const waiting = waitForStopSignal(source, 'win32');
    expect(source.listenerCount('SIGBREAK')).toBe(1);
    source.emit('SIGBREAK', 'SIGBREAK');
    await expect(waiting).resolves.toBe('SIGBREAK');
    for (const signal of stopSignals('win32')) expect(source.listenerCount(signal)).toBe(0);
  });

  it('ignore SIGHUP on Linux (it reloads there)', async () => {
    const source = new EventEmitter();
    const waiting = waitForStopSignal(source, 'linux');
    expect(source.listenerCount('SIGHUP')).toBe(0);
    source.emit('SIGINT', 'SIGINT');
    await expect(waiting).resolves.toBe('SIGINT');
  });

  it('reach a handler every time until it is removed (a second Ctrl+C is not the default kill)', () => {
    const source = new EventEmitter();
    const seen: string[] = [];
    const remove = onStopSignals((signal) => seen.push(signal), source, 'linux');
    source.emit('SIGTERM', 'SIGTERM');
    source.emit('SIGINT', 'SIGINT');
    expect(seen).toEqual(['SIGTERM', 'SIGINT']);
    remove();
    for (const signal of stopSignals('linux')) expect(source.listenerCount(signal)).toBe(0);
  });
});

describe('SIGHUP', () => {
  it('is ignored on Linux and macOS with a call to say so, until the handler is removed', () => {
    for (const platform of ['linux', 'darwin'] as const) {
      const source = new EventEmitter();
      let calls = 0;
      const remove = ignoreSighup(() => (calls += 1), source, platform);
      // with a listener, Node no longer applies the default action (ending the process with status 129)
      expect(source.listenerCount('SIGHUP')).toBe(1);
      source.emit('SIGHUP', 'SIGHUP');
      source.emit('SIGHUP', 'SIGHUP');
      expect(calls).toBe(2);
      remove();
      expect(source.listenerCount('SIGHUP')).toBe(0);
    }
  });

  it('is left alone on Windows, where it is a stop signal', () => {
    const source = new EventEmitter();
    const remove = ignoreSighup(() => expect.fail('not on Windows'), source, 'win32');
    expect(source.listenerCount('SIGHUP')).toBe(0);
    remove();
  });
});
