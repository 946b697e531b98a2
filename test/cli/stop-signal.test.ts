import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { reloadsOnSighup, stopSignals, waitForStopSignal } from '../../src/cli/stop-signal.ts';

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
});
