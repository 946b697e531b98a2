import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, closeSync, lstatSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { SequenceClassificationResponse } from '../../src/encoder/schemas.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { runCliCaptured } from '../helpers/run-cli.ts';
import { repoRoot } from '../helpers/shared-fixtures.ts';
import type { JsonOf } from '../../src/shared/float32-json.ts';

let work: string;
let modelDir: string;

function config(name: string, extra = '', modelType = 'sequence_classification'): string {
  const file = path.join(work, `${name}.yaml`);
  writeFileSync(file, `encoder:\n  name: ${name}\n  path: ${modelDir}\n  model_type: ${modelType}\n${extra}`);
  return file;
}

beforeAll(async () => {
  work = mkdtempSync(path.join(os.tmpdir(), 'cli-infer-'));
  modelDir = await generateTinyModel({ modelType: 'sequence_classification', labels: ['neg', 'pos'] });
});

describe('encoder infer', () => {
  it('prints one result per text, in order, as JSON', async () => {
    const { code, stdout, stderr } = await runCliCaptured(['infer', '--config', config('ok'), 'first text', 'second', 'third one here']);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const response = JSON.parse(stdout) as JsonOf<SequenceClassificationResponse>;
    expect(response.model_id).toBe('ok');
    expect(response.results).toHaveLength(3);
    const alone = JSON.parse((await runCliCaptured(['infer', '--config', config('ok'), 'second'])).stdout) as JsonOf<SequenceClassificationResponse>;
    expect(alone.results[0].logits[0]).toBeCloseTo(response.results[1].logits[0], 5);
  });

  it("takes onnxruntime's session options, as serve and encoderfile's infer do; ones that cannot apply exit 2", async () => {
    const plain = JSON.parse((await runCliCaptured(['infer', '--config', config('session'), 'first text', 'second'])).stdout) as JsonOf<SequenceClassificationResponse>;
    const tuned = await runCliCaptured([
      'infer', '--config', config('session'), 'first text', 'second',
      '--graph-optimization-level', 'disable', '--execution-provider', 'cpu', '--inter-op-threads', '2', '--intra-op-threads', '1', '--disable-cpu-fallback', '--with-arena-allocator',
    ]);
    expect(tuned.stderr).toBe('');
    expect(tuned.code).toBe(0);
    const results = (JSON.parse(tuned.stdout) as JsonOf<SequenceClassificationResponse>).results;
    results.forEach((result, i) => result.logits.forEach((logit, j) => expect(logit).toBeCloseTo(plain.results[i].logits[j], 4)));
    for (const [args, reason] of [
      [['--execution-provider', 'cuda'], 'carries onnxruntime\'s CPU execution provider only'],
      [['--device-id', '0'], '--device-id tunes the cuda and tensorrt execution providers'],
      [['--graph-optimization-level', '4'], 'is not a graph optimization level'],
      [['--threads', '2', '--intra-op-threads', '3'], '--threads 2 and --intra-op-threads 3 disagree'],
    ] as const) {
      const refused = await runCliCaptured(['infer', '--config', config('session'), 'x', ...args]);
      expect(refused.code, args.join(' ')).toBe(2);
      expect(refused.stderr).toContain(reason);
    }
  });

  it('writes the results to the -o file', async () => {
    const out = path.join(work, 'out.json');
    const { code, stdout } = await runCliCaptured(['infer', '-c', config('file'), 'text', '-o', out]);
    expect(code).toBe(0);
    expect(stdout).toBe('');
    expect((JSON.parse(readFileSync(out, 'utf8')) as JsonOf<SequenceClassificationResponse>).results).toHaveLength(1);
  });

  it('exits 2 for configuration errors, naming the problem', async () => {
    const missing = await runCliCaptured(['infer', '--config', path.join(work, 'nope.yaml'), 'x']);
    expect(missing).toMatchObject({ code: 2, stderr: `error: configuration file not found: ${path.join(work, 'nope.yaml')}\n` });

    const badType = await runCliCaptured(['infer', '--config', config('bad', '', 'classification'), 'x']);
    expect(badType.code).toBe(2);
    expect(badType.stderr).toContain('invalid value "classification" for "encoder.model_type"; allowed values: embedding, sentence_embedding, sequence_classification, token_classification');

    const noModel = path.join(work, 'nomodel.yaml');
    writeFileSync(noModel, `encoder:\n  name: x\n  path: ${work}\n  model_type: embedding\n`);
    const noWeights = await runCliCaptured(['infer', '--config', noModel, 'x']);
    expect(noWeights).toMatchObject({ code: 2, stderr: `error: model weights not found: ${path.join(work, 'model.onnx')}\n` });

    const syntax = await runCliCaptured(['infer', '--config', config('syntax', '  transform: "function Postprocess(arr) return arr"\n'), 'x']);
    expect(syntax.code).toBe(2);
    expect(syntax.stderr).toMatch(/^error: transform line 1: /);
  });

  it('exits 2 for input errors and bad arguments', async () => {
    const empty = await runCliCaptured(['infer', '--config', config('empty'), '']);
    expect(empty).toMatchObject({ code: 2, stderr: 'error: Invalid input: inputs[0] is an empty string\n' });
    const noTexts = await runCliCaptured(['infer', '--config', config('none')]);
    expect(noTexts.code).toBe(2);
    expect(noTexts.stderr).toContain("missing required argument 'texts'");
    const noConfig = await runCliCaptured(['infer', 'text']);
    expect(noConfig.code).toBe(2);
    expect(noConfig.stderr).toContain("required option '-c, --config <file>' not specified");
    const badThreads = await runCliCaptured(['infer', '--config', config('threads'), '--threads', 'many', 'x']);
    expect(badThreads.code).toBe(2);
    expect(badThreads.stderr).toContain('"many" is not a positive integer');
  });

  it('exits 1 for internal errors (a transform failing at run time), 2 for an output it cannot write', async () => {
    const failing = await runCliCaptured(['infer', '--config', config('fail', '  transform: |\n    function Postprocess(arr)\n      if arr:shape()[1] == 1 then error("exploded") end\n      return arr\n    end\n'), 'x']);
    expect(failing.code).toBe(1);
    expect(failing.stderr).toMatch(/^error: transform line 2: .*exploded/);
    const unwritable = await runCliCaptured(['infer', '--config', config('unwritable'), 'x', '-o', path.join(work, 'no-such-dir', 'out.json')]);
    expect(unwritable.code).toBe(2);
    expect(unwritable.stderr).toMatch(/^error: cannot write .*no-such-dir\/out\.json: ENOENT/);
  });

  it('-o onto a full file system keeps the old file and leaves no partial one', async (context) => {
    const mount = mkdtempSync(path.join(os.tmpdir(), 'full-fs-'));
    if (spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', mount]).status !== 0) {
      rmSync(mount, { recursive: true });
      context.skip('needs root to mount a small tmpfs');
    }
    try {
      const out = path.join(mount, 'results.json');
      writeFileSync(out, '{"old": true}\n');
      // fill what is left, so that not even a small result fits
      const fd = openSync(path.join(mount, 'filler'), 'w');
      try {
        for (;;) writeSync(fd, Buffer.alloc(4096));
      } catch (error) {
        expect((error as NodeJS.ErrnoException).code).toBe('ENOSPC');
      } finally {
        closeSync(fd);
      }
      const full = await runCliCaptured(['infer', '--config', config('full'), 'some text', '-o', out]);
      expect(full.code).toBe(2);
      expect(full.stderr).toMatch(/^error: cannot write .*results\.json: ENOSPC/);
      expect(readFileSync(out, 'utf8')).toBe('{"old": true}\n');
      expect(readdirSync(mount).sort()).toEqual(['filler', 'results.json']);

      rmSync(path.join(mount, 'filler'));
      chmodSync(out, 0o600);
      const replaced = await runCliCaptured(['infer', '--config', config('full'), 'some text', '-o', out]);
      expect(replaced.code).toBe(0);
      expect((JSON.parse(readFileSync(out, 'utf8')) as JsonOf<SequenceClassificationResponse>).results).toHaveLength(1);
      expect(statSync(out).mode & 0o777).toBe(0o600);
    } finally {
      spawnSync('umount', [mount]);
      rmSync(mount, { recursive: true, force: true });
    }
  });

  it('-o follows a symbolic link (the link stays) and writes a device in place', async () => {
    const target = path.join(work, 'linked-target.json');
    writeFileSync(target, 'old');
    const link = path.join(work, 'link.json');
    symlinkSync(target, link);
    const viaLink = await runCliCaptured(['infer', '-c', config('linked'), 'text', '-o', link]);
    expect(viaLink.code).toBe(0);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect((JSON.parse(readFileSync(target, 'utf8')) as JsonOf<SequenceClassificationResponse>).results).toHaveLength(1);
    const device = await runCliCaptured(['infer', '-c', config('device'), 'text', '-o', '/dev/null']);
    expect(device.code).toBe(0);
    expect(statSync('/dev/null').isCharacterDevice()).toBe(true);
  });

  it('`-` reads the texts from standard input: one per line, or a JSON array', async () => {
    const direct = JSON.parse((await runCliCaptured(['infer', '-c', config('stdin'), 'first line', 'second line'])).stdout) as JsonOf<SequenceClassificationResponse>;
    for (const stdin of ['first line\nsecond line\n', 'first line\r\nsecond line', '["first line", "second line"]']) {
      const piped = await runCliCaptured(['infer', '-c', config('stdin'), '-'], { stdin });
      expect(piped.stderr, JSON.stringify(stdin)).toBe('');
      expect(JSON.parse(piped.stdout), JSON.stringify(stdin)).toEqual(direct);
    }
    const pairs = await runCliCaptured(['infer', '-c', config('stdin'), '-'], { stdin: '[["a question", "an answer"]]' });
    expect((JSON.parse(pairs.stdout) as JsonOf<SequenceClassificationResponse>).results).toHaveLength(1);
    expect(await runCliCaptured(['infer', '-c', config('stdin'), '-'], { stdin: '' })).toMatchObject({ code: 2, stderr: 'error: Invalid input: standard input is empty: give one text per line, or a JSON array\n' });
    const broken = await runCliCaptured(['infer', '-c', config('stdin'), '-'], { stdin: '[1, 2' });
    expect(broken.code).toBe(2);
    expect(broken.stderr).toMatch(/^error: Invalid input: standard input starts with "\[" but is not JSON/);
    const blank = await runCliCaptured(['infer', '-c', config('stdin'), '-'], { stdin: 'one\n\nthree\n' });
    expect(blank).toMatchObject({ code: 2, stderr: 'error: Invalid input: inputs[1] is an empty string\n' });
  });

  it('refuses an empty -o of infer and build (e.g. an unset variable in -o "$OUT") instead of ignoring it', async () => {
    const empty = await runCliCaptured(['infer', '--config', config('empty-output'), 'x', '-o', '']);
    expect(empty.code).toBe(2);
    expect(empty.stdout).toBe('');
    expect(empty.stderr).toContain(`error: option '-o, --output <file>' argument '' is invalid. the output file name is empty`);
    const build = await runCliCaptured(['build', '-f', config('empty-build-output'), '-o', '']);
    expect(build.code).toBe(2);
    expect(build.stderr).toContain(`error: option '-o, --output <path>' argument '' is invalid. the output file name is empty`);
  });

  it('runs from source through the package bin (bin/encoder.js) with the pinned Node', () => {
    const env = { ...process.env, PATH: `${path.join(repoRoot, 'node_modules', '.bin')}${path.delimiter}${process.env.PATH}` };
    const bin = path.join(repoRoot, 'bin', 'encoder.js');
    const result = spawnSync(bin, ['infer', '--config', config('bin'), 'hello there'], { encoding: 'utf8', env });
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect((JSON.parse(result.stdout) as JsonOf<SequenceClassificationResponse>).results[0].predicted_label).toMatch(/^(neg|pos)$/);
    const usage = spawnSync(bin, ['infer', '--config', 'x.yaml', '--bogus', 'text'], { encoding: 'utf8', env });
    expect(usage.status).toBe(2);
    expect(usage.stderr).toContain("unknown option '--bogus'");
  });

  it('ends quietly when the reader of its output goes away (infer … | head)', async () => {
    const main = path.join(repoRoot, 'src', 'cli', 'main.ts');
    const texts = Array.from({ length: 1000 }, (_, i) => `t${i}`); // far more output than a pipe buffer
    const child = spawn(process.execPath, [main, 'infer', '--config', config('closed-pipe'), ...texts], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.destroy(); // like `| head -c 0`: the reading end is closed before anything is written
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const status = await new Promise<number | string | null>((resolve) => child.on('close', (code, signal) => resolve(code ?? signal)));
    expect({ status, stderr }).toEqual({ status: 0, stderr: '' });
  });
});
