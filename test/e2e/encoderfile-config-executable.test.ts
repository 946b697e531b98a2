/**
 * An encoderfile user's workflow on the built runtime, no flags: `encoder build -f encoderfile.yml` in the folder of an
 * unchanged mozilla-ai/encoderfile configuration (its target and base_binary_path, its tokenizer block, its Matryoshka
 * transform) writes `./<name>.encoderfile`, which then answers `infer` with the configured truncation side.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hostTarget } from '../../src/builder/targets.ts';
import { baseRuntimePath, hasBaseRuntime, runExecutable, warnIfNoBaseRuntime } from '../helpers/executables.ts';
import { hasShared, sharedModel } from '../helpers/shared-fixtures.ts';

let work: string;
let cacheDir: string;

warnIfNoBaseRuntime('encoderfile configurations on the built runtime');
describe.skipIf(!hasBaseRuntime() || !hasShared)('encoderfile configurations on the built runtime', () => {
  beforeAll(() => {
    work = mkdtempSync(path.join(os.tmpdir(), 'e2e-encoderfile-'));
    cacheDir = path.join(work, 'cache');
  });
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('builds ./<name>.encoderfile from the configuration alone and serves it as configured', () => {
    const project = path.join(work, 'project');
    mkdirSync(path.join(project, 'transforms'), { recursive: true });
    writeFileSync(path.join(project, 'transforms', 'clamp.lua'), 'function Postprocess(logits)\n  return logits:clamp(-100, 100)\nend\n');
    writeFileSync(
      path.join(project, 'encoderfile.yml'),
      `encoderfile:
  name: ner
  path: ${sharedModel('tiny-bert-token-classification')}
  model_type: token_classification
  base_binary_path: ${baseRuntimePath()}
  target: ${hostTarget()}
  transform:
    path: ./transforms/clamp.lua
  tokenizer:
    truncation_side: left
    max_length: 12
    stride: 2
  validate_transform: true
`,
    );
    const built = runExecutable(baseRuntimePath(), ['build', '-f', 'encoderfile.yml'], { cacheDir, cwd: project });
    expect(built.stderr).toContain('[2/6] load and validate the configuration: ner 0.2.0 (token_classification), a mozilla-ai/encoderfile configuration\n');
    expect(built.stderr).toContain('max length: 12 tokens (tokenizer.max_length of the configuration');
    expect(built.status).toBe(0);
    const executable = path.join(project, 'ner.encoderfile');
    expect(existsSync(executable)).toBe(true);

    const text = Array.from({ length: 40 }, (_, i) => `w${i}`).join(' ');
    const inferred = runExecutable(executable, ['infer', text], { cacheDir });
    expect(inferred.status, inferred.stderr).toBe(0);
    const tokens = (JSON.parse(inferred.stdout) as { results: { tokens: { token_info: { end: number } }[] }[] }).results[0].tokens;
    // 12 less [CLS] and [SEP], the last ones of the text
    expect(tokens).toHaveLength(10);
    expect(tokens.at(-1)!.token_info.end).toBe(text.length);
  });
});
