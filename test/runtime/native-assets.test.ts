/**
 * Where the single executable extracts its native files when the cache directory is not writable. Containers often
 * run as a user id without an /etc/passwd entry (docker --user 1234, Kubernetes runAsUser, OpenShift), where
 * os.userInfo() throws: the fallback folder must not depend on it.
 */
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { fallbackCacheRoot } from '../../src/encoder/cache/cache-dir.ts';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('fallbackCacheRoot', () => {
  it('is a per-user folder in the temporary directory, also for a user id without a passwd entry', () => {
    vi.spyOn(os, 'userInfo').mockImplementation(() => {
      throw new Error('uv_os_get_passwd returned ENOENT (no such file or directory)');
    });
    const expected = process.getuid ? `encoder-${process.getuid()}` : 'encoder';
    expect(fallbackCacheRoot()).toBe(path.join(os.tmpdir(), expected));
  });
});
