import { describe, expect, it } from 'vitest';
import { DEFAULT_RELEASE_URL } from '../../src/builder/release.ts';
import { runCliCaptured } from '../helpers/run-cli.ts';

describe('encoder build --help', () => {
  it('names the environment variables the build reads and their defaults', async () => {
    const { code, stdout } = await runCliCaptured(['build', '--help']);
    expect(code).toBe(0);
    const environment = stdout.slice(stdout.indexOf('Environment:'));
    expect(environment).toMatch(/^Environment:\n {2}ENCODER_RELEASE_URL {2}where base runtimes of other targets are downloaded from/);
    expect(environment).toContain(`default: ${DEFAULT_RELEASE_URL ?? 'none: this build of encoder names no repository'}`);
    expect(environment).toMatch(/\n {2}ENCODER_CACHE_DIR {4}cache of downloaded base runtimes/);
    expect(environment).toContain('%LOCALAPPDATA%\\encoder (Windows)');
    expect(environment).toContain('it is its own base runtime: no cache, no download, no flag');
  });
});
