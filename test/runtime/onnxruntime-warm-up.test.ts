/**
 * The single executable's onnxruntime warm-up (runtime/onnxruntime-warm-up.ts): a throwaway worker thread that loads
 * onnxruntime and creates its process-wide environment while the main thread loads the program. Run here on
 * onnxruntime-node's own binding, as the executable runs it on the extracted one.
 */
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { warmUpOnnxruntimeFor } from '../../runtime/onnxruntime-warm-up.ts';
import { OnnxModel } from '../../src/encoder/onnx-model.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';

const require = createRequire(import.meta.url);
const binding = path.join(
  path.dirname(require.resolve('onnxruntime-node/package.json')),
  'bin',
  'napi-v6',
  process.platform,
  process.arch,
  'onnxruntime_binding.node',
);

describe('onnxruntime warm-up', () => {
  it('loads onnxruntime in a worker thread, creates a session and ends; a model loads after it in this thread', async () => {
    const thread = warmUpOnnxruntimeFor(['infer', 'some text'], binding);
    expect(thread).toBeDefined();
    const errors: Error[] = [];
    thread!.on('error', (error: Error) => errors.push(error));
    const [exitCode] = await once(thread!, 'exit');
    expect(errors).toEqual([]);
    expect(exitCode).toBe(0);
    // the environment it created is the one this thread's sessions use
    const model = await OnnxModel.load(readFileSync(path.join(await generateTinyModel(), 'model.onnx')), 'embedding');
    expect(model.signature.output.name).toBe('last_hidden_state');
    await model.close();
  });

  it('is started for infer and serve only, never for help, and not without a binding', () => {
    expect(warmUpOnnxruntimeFor(['inspect'], binding)).toBeUndefined();
    expect(warmUpOnnxruntimeFor(['build', '-f', 'x.yaml'], binding)).toBeUndefined();
    expect(warmUpOnnxruntimeFor(['infer', '--help'], binding)).toBeUndefined();
    expect(warmUpOnnxruntimeFor(['serve', '-h'], binding)).toBeUndefined();
    expect(warmUpOnnxruntimeFor([], binding)).toBeUndefined();
    // from source there is no extracted binding (nativeFiles() is null): nothing to warm up
    expect(warmUpOnnxruntimeFor(['infer', 'text'])).toBeUndefined();
  });

  it('fails quietly inside its thread when the binding cannot be loaded', async () => {
    const thread = warmUpOnnxruntimeFor(['infer', 'text'], path.join(path.dirname(binding), 'missing.node'));
    expect(thread).toBeDefined();
    // events.once would reject on the 'error' event; the warm-up's own listener swallows it and the thread ends
    const exitCode = await new Promise((resolve) => thread!.on('exit', resolve));
    expect(exitCode).toBe(1);
  });
});
