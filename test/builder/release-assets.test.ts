import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import packageJson from '../../package.json' with { type: 'json' };
import { main, runtimeBinaryPath, writeReleaseAssets } from '../../scripts/release-assets.ts';
import {
  CHECKSUMS_FILE,
  DEFAULT_RELEASE_URL,
  githubReleaseUrl,
  PROGRAM_VERSION,
  RELEASE_URL_ENV,
  checkVersion,
  formatChecksums,
  parseChecksums,
  releaseAssetName,
  releaseFileUrl,
  resolveReleaseLocation,
} from '../../src/builder/release.ts';
import { ConfigError } from '../../src/encoder/errors.ts';

const SCRIPT = fileURLToPath(new URL('../../scripts/release-assets.ts', import.meta.url));
const sha256 = (data: Uint8Array): string => createHash('sha256').update(data).digest('hex');
const HEX_A = 'a'.repeat(64);
const HEX_B = 'b'.repeat(64);

function expectConfigError(run: () => unknown, pattern: RegExp): void {
  let caught: unknown;
  try {
    run();
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(ConfigError);
  expect((caught as Error).message).toMatch(pattern);
}

describe('release address', () => {
  it("defaults to the GitHub releases of package.json's repository, with the version substituted", () => {
    const template = 'https://github.com/acme/encoder/releases/download/v{version}';
    expect(resolveReleaseLocation({ version: '1.2.3', env: {}, defaultUrl: template })).toEqual({
      baseUrl: 'https://github.com/acme/encoder/releases/download/v1.2.3',
      template,
      origin: 'default',
    });
    // package.json's own `repository` decides the default; this repository names none, so there is no default
    const repository = (packageJson as { repository?: unknown }).repository;
    expect(DEFAULT_RELEASE_URL).toBe(githubReleaseUrl(repository));
    if (repository === undefined) expect(resolveReleaseLocation({ version: '1.2.3', env: {} })).toBeNull();
  });

  it('reads the repository forms npm accepts', () => {
    const expected = 'https://github.com/acme/encoder/releases/download/v{version}';
    for (const repository of ['github:acme/encoder', 'acme/encoder', { type: 'git', url: 'git+https://github.com/acme/encoder.git' }, 'https://github.com/acme/encoder', 'git@github.com:acme/encoder.git']) {
      expect(githubReleaseUrl(repository), JSON.stringify(repository)).toBe(expected);
    }
    for (const repository of [undefined, '', 'https://gitlab.com/acme/encoder', { type: 'git' }, 42]) {
      expect(githubReleaseUrl(repository), JSON.stringify(repository)).toBeNull();
    }
  });

  it('takes ENCODER_RELEASE_URL from the environment, replacing every {version} and dropping trailing slashes', () => {
    const location = resolveReleaseLocation({
      version: '2.0.0-rc.1',
      env: { [RELEASE_URL_ENV]: ' http://mirror.local/encoder/{version}/files-{version}/ ' },
    });
    expect(location?.baseUrl).toBe('http://mirror.local/encoder/2.0.0-rc.1/files-2.0.0-rc.1');
    expect(location?.origin).toBe('env');
  });

  it('uses an address without {version} as it is, and ignores an empty variable', () => {
    expect(resolveReleaseLocation({ version: '1.0.0', env: { [RELEASE_URL_ENV]: 'https://x.test/fixed' } })?.baseUrl).toBe(
      'https://x.test/fixed',
    );
    expect(resolveReleaseLocation({ version: '1.0.0', env: { [RELEASE_URL_ENV]: '  ' }, defaultUrl: 'https://d.test/v{version}' })?.origin).toBe('default');
  });

  it('prefers the explicit option over the environment', () => {
    const location = resolveReleaseLocation({
      version: '1.0.0',
      releaseUrl: 'http://127.0.0.1:1/v{version}',
      env: { [RELEASE_URL_ENV]: 'http://ignored.test' },
    });
    expect(location).toMatchObject({ baseUrl: 'http://127.0.0.1:1/v1.0.0', origin: 'option' });
  });

  it('rejects addresses that are not http(s) URLs, naming the variable', () => {
    expectConfigError(
      () => resolveReleaseLocation({ version: '1.0.0', env: { [RELEASE_URL_ENV]: 'file:///srv/release/v{version}' } }),
      /invalid release address "file:\/\/\/srv\/release\/v\{version\}" \(from ENCODER_RELEASE_URL\): only http:\/\/ and https:\/\//,
    );
    expectConfigError(
      () => resolveReleaseLocation({ version: '1.0.0', env: { [RELEASE_URL_ENV]: 'mirror/v{version}' } }),
      /invalid release address "mirror\/v\{version\}" \(from ENCODER_RELEASE_URL\): not a URL/,
    );
  });

  it('builds file names and URLs', () => {
    expect(releaseAssetName('1.2.3', 'aarch64-apple-darwin')).toBe('encoder-1.2.3-aarch64-apple-darwin.gz');
    expect(releaseFileUrl('http://h/v1/', CHECKSUMS_FILE)).toBe('http://h/v1/SHA256SUMS');
    expect(releaseFileUrl('http://h/v1', 'encoder-1+b.gz')).toBe('http://h/v1/encoder-1%2Bb.gz');
  });

  it('rejects versions that could escape a file name or folder', () => {
    for (const bad of ['', '../1.0.0', '1.0/0', '.hidden', '1 0']) {
      expectConfigError(() => checkVersion(bad), /invalid version/);
    }
    expect(checkVersion('0.1.0+build.5')).toBe('0.1.0+build.5');
    expect(PROGRAM_VERSION).toBe(packageJson.version);
  });
});

describe('checksum list', () => {
  it('formats like sha256sum, sorted by file name, and parses back', () => {
    const text = formatChecksums([
      { fileName: 'encoder-1-b.gz', sha256: HEX_B },
      { fileName: 'encoder-1-a.gz', sha256: HEX_A },
    ]);
    expect(text).toBe(`${HEX_A}  encoder-1-a.gz\n${HEX_B}  encoder-1-b.gz\n`);
    expect([...parseChecksums(text)]).toEqual([
      ['encoder-1-a.gz', HEX_A],
      ['encoder-1-b.gz', HEX_B],
    ]);
  });

  it('accepts binary markers, upper-case hex, CRLF and blank lines', () => {
    const parsed = parseChecksums(`\r\n${HEX_A.toUpperCase()} *one.gz\r\n\r\n${HEX_B}  two words.gz\r\n`);
    expect(parsed.get('one.gz')).toBe(HEX_A);
    expect(parsed.get('two words.gz')).toBe(HEX_B);
    expect(parsed.size).toBe(2);
  });

  it('names the source and line of a malformed entry', () => {
    expectConfigError(
      () => parseChecksums(`${HEX_A}  ok.gz\nnot a checksum line\n`, 'http://h/SHA256SUMS'),
      /malformed checksum list http:\/\/h\/SHA256SUMS, line 2: expected "<64 hex digits> {2}<file name>", got "not a checksum line"/,
    );
    expectConfigError(() => parseChecksums(`${'a'.repeat(63)}  short.gz\n`), /line 1/);
    expectConfigError(() => parseChecksums(`${HEX_A}\tx.gz\n`), /line 1/);
    expectConfigError(() => parseChecksums('<html>404</html>'), /line 1: expected/);
  });

  it('rejects an empty list and conflicting duplicates', () => {
    expectConfigError(() => parseChecksums('\n\n'), /lists no files/);
    expectConfigError(() => parseChecksums(`${HEX_A}  x.gz\n${HEX_B}  x.gz\n`), /line 2: x\.gz is listed twice with different digests/);
    expect(parseChecksums(`${HEX_A}  x.gz\n${HEX_A}  x.gz\n`).size).toBe(1);
  });

  it('refuses to format entries that would not parse back', () => {
    expectConfigError(() => formatChecksums([{ fileName: 'x.gz', sha256: 'abc' }]), /invalid SHA-256 for x\.gz/);
    expectConfigError(() => formatChecksums([{ fileName: 'a/b.gz', sha256: HEX_A }]), /invalid file name/);
    expectConfigError(
      () =>
        formatChecksums([
          { fileName: 'x.gz', sha256: HEX_A },
          { fileName: 'x.gz', sha256: HEX_A },
        ]),
      /listed twice/,
    );
  });
});

describe('writeReleaseAssets', () => {
  let work: string;
  let runtimeDir: string;
  let outDir: string;

  beforeEach(async () => {
    work = await mkdtemp(path.join(tmpdir(), 'encoder-release-assets-'));
    runtimeDir = path.join(work, 'runtime');
    outDir = path.join(work, 'release');
  });
  afterEach(async () => {
    await rm(work, { recursive: true, force: true });
  });

  async function fakeRuntime(target: Parameters<typeof runtimeBinaryPath>[1], bytes: Uint8Array): Promise<void> {
    const file = runtimeBinaryPath(runtimeDir, target);
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, bytes, { mode: 0o755 });
  }

  it('writes one .gz per built runtime and a SHA256SUMS that lists exactly them', async () => {
    const linux = Buffer.from('#!fake linux runtime\n'.repeat(200));
    const darwin = Buffer.from([0xcf, 0xfa, 0xed, 0xfe, 0, 1, 2, 3, 255]);
    const windows = Buffer.from('MZ fake windows runtime');
    await fakeRuntime('x86_64-unknown-linux-gnu', linux);
    await fakeRuntime('aarch64-apple-darwin', darwin);
    await fakeRuntime('x86_64-pc-windows-msvc', windows);
    expect(runtimeBinaryPath(runtimeDir, 'x86_64-pc-windows-msvc')).toBe(path.join(runtimeDir, 'x86_64-pc-windows-msvc', 'encoder.exe'));
    await mkdir(path.join(runtimeDir, 'not-a-target'), { recursive: true });

    const result = await writeReleaseAssets({ runtimeDir, outDir, version: '1.2.3' });

    const releaseDir = path.join(outDir, 'v1.2.3');
    expect(result.releaseDir).toBe(releaseDir);
    expect(result.version).toBe('1.2.3');
    expect((await readdir(releaseDir)).sort()).toEqual([
      'SHA256SUMS',
      'encoder-1.2.3-aarch64-apple-darwin.gz',
      'encoder-1.2.3-x86_64-pc-windows-msvc.gz',
      'encoder-1.2.3-x86_64-unknown-linux-gnu.gz',
    ]);
    const linuxGz = await readFile(path.join(releaseDir, 'encoder-1.2.3-x86_64-unknown-linux-gnu.gz'));
    const darwinGz = await readFile(path.join(releaseDir, 'encoder-1.2.3-aarch64-apple-darwin.gz'));
    expect(gunzipSync(linuxGz).equals(linux)).toBe(true);
    expect(gunzipSync(darwinGz).equals(darwin)).toBe(true);
    const windowsGz = await readFile(path.join(releaseDir, 'encoder-1.2.3-x86_64-pc-windows-msvc.gz'));
    expect(gunzipSync(windowsGz).equals(windows)).toBe(true);
    expect(linuxGz.length).toBeLessThan(linux.length); // really compressed

    const sums = await readFile(path.join(releaseDir, 'SHA256SUMS'), 'utf8');
    expect(sums).toBe(
      `${sha256(darwinGz)}  encoder-1.2.3-aarch64-apple-darwin.gz\n` +
        `${sha256(windowsGz)}  encoder-1.2.3-x86_64-pc-windows-msvc.gz\n` +
        `${sha256(linuxGz)}  encoder-1.2.3-x86_64-unknown-linux-gnu.gz\n`,
    );
    expect(result.checksumsPath).toBe(path.join(releaseDir, 'SHA256SUMS'));
    expect(result.assets.map((asset) => [asset.target, asset.sha256, asset.size])).toEqual([
      ['x86_64-unknown-linux-gnu', sha256(linuxGz), linuxGz.length],
      ['aarch64-apple-darwin', sha256(darwinGz), darwinGz.length],
      ['x86_64-pc-windows-msvc', sha256(windowsGz), windowsGz.length],
    ]);
    expect(result.stale).toEqual([]);
  });

  it("uses package.json's version by default", async () => {
    await fakeRuntime('aarch64-unknown-linux-gnu', Buffer.from('arm'));
    const result = await writeReleaseAssets({ runtimeDir, outDir });
    expect(result.version).toBe(packageJson.version);
    expect(await readdir(path.join(outDir, `v${packageJson.version}`))).toContain(
      `encoder-${packageJson.version}-aarch64-unknown-linux-gnu.gz`,
    );
  });

  it('rewrites a release in place and reports archives it did not write', async () => {
    await fakeRuntime('x86_64-unknown-linux-gnu', Buffer.from('old'));
    await fakeRuntime('x86_64-apple-darwin', Buffer.from('mac'));
    await writeReleaseAssets({ runtimeDir, outDir, version: '1.0.0' });
    await rm(path.join(runtimeDir, 'x86_64-apple-darwin'), { recursive: true });
    await fakeRuntime('x86_64-unknown-linux-gnu', Buffer.from('new'));

    const result = await writeReleaseAssets({ runtimeDir, outDir, version: '1.0.0' });

    expect(result.stale).toEqual(['encoder-1.0.0-x86_64-apple-darwin.gz']);
    const sums = parseChecksums(await readFile(result.checksumsPath, 'utf8'));
    expect([...sums.keys()]).toEqual(['encoder-1.0.0-x86_64-unknown-linux-gnu.gz']);
    expect(gunzipSync(await readFile(result.assets[0].path)).toString()).toBe('new');
    expect((await readdir(result.releaseDir)).filter((name) => name.endsWith('.part'))).toEqual([]);
  });

  it('fails clearly when the runtime folder does not exist', async () => {
    await expect(writeReleaseAssets({ runtimeDir, outDir, version: '1.0.0' })).rejects.toThrow(ConfigError);
    await expect(writeReleaseAssets({ runtimeDir, outDir, version: '1.0.0' })).rejects.toThrow(
      `no base runtime was built: ${runtimeDir} does not exist. Run \`npm run build:runtime\` first.`,
    );
    await expect(readdir(outDir)).rejects.toThrow(/ENOENT/);
  });

  it('fails clearly when no runtime was built, listing where it looked', async () => {
    await mkdir(path.join(runtimeDir, 'x86_64-unknown-linux-gnu', 'encoder'), { recursive: true }); // a folder, not a file
    const error = await writeReleaseAssets({ runtimeDir, outDir, version: '1.0.0' }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    expect(message).toMatch(/^no base runtime was built; none of these files exists:/);
    expect(message).toContain(path.join(runtimeDir, 'aarch64-apple-darwin', 'encoder'));
    expect(message).toContain('npm run build:runtime');
  });

  it('rejects a version that is not usable in file names', async () => {
    await fakeRuntime('x86_64-unknown-linux-gnu', Buffer.from('x'));
    await expect(writeReleaseAssets({ runtimeDir, outDir, version: '../evil' })).rejects.toThrow(/invalid version "\.\.\/evil"/);
  });

  it('main() parses the options and prints what it wrote', async () => {
    await fakeRuntime('x86_64-unknown-linux-gnu', Buffer.from('bin'));
    const lines: string[] = [];
    const code = await main(
      ['node', SCRIPT, '--runtime-dir', runtimeDir, '--out', outDir, '--version', '3.1.4'],
      (line) => lines.push(line),
    );
    expect(code).toBe(0);
    expect(lines[0]).toBe(`Wrote release 3.1.4 to ${path.join(outDir, 'v3.1.4')}:`);
    expect(lines.join('\n')).toContain('encoder-3.1.4-x86_64-unknown-linux-gnu.gz');
    expect(lines.at(-1)).toBe('  SHA256SUMS');
  });

  it('runs as a script: writes the release, and exits 1 with a one-line error when nothing was built', async () => {
    await fakeRuntime('aarch64-apple-darwin', Buffer.from('bin'));
    const ok = await runScript(['--runtime-dir', runtimeDir, '--out', outDir, '--version', '0.0.1']);
    expect(ok).toMatchObject({ code: 0, stderr: '' });
    expect(ok.stdout).toContain('encoder-0.0.1-aarch64-apple-darwin.gz');
    expect((await readdir(path.join(outDir, 'v0.0.1'))).sort()).toEqual(['SHA256SUMS', 'encoder-0.0.1-aarch64-apple-darwin.gz']);

    const failed = await runScript(['--runtime-dir', path.join(work, 'missing'), '--out', outDir]);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toBe(
      `error: no base runtime was built: ${path.join(work, 'missing')} does not exist. Run \`npm run build:runtime\` first.\n`,
    );
  });
});

function runScript(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [SCRIPT, ...args], { timeout: 30_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}
