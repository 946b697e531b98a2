import { randomBytes } from 'node:crypto';
import { open, readFile, realpath, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { type Command, Option } from 'commander';
import { ConfigError, InputError } from '../encoder/errors.ts';
import { isImageModelPackage, type ImageModelPackage } from '../encoder/image-model-package.ts';
import { ImagePipeline, type ImagePipelineOptions, type ImagePredictResponse } from '../encoder/image-pipeline.ts';
import { PredictPipeline } from '../encoder/predict-pipeline.ts';
import { stringifyJson } from '../shared/float32-json.ts';
import { traceStartup } from '../shared/startup-trace.ts';
import { parseFileName, parsePositiveInteger } from './arguments.ts';
import { addConfigOption, type ModelSource } from './model-source.ts';
import type { CliIo } from './program.ts';
import { addSessionOptions, sessionSettingsOf, type SessionCommandOptions } from './serve-session.ts';

export interface InferOptions extends SessionCommandOptions {
  config?: string;
  output?: string;
  /** Unset: an embedding model normalises, a sentence_embedding model follows its own setting. */
  normalize?: boolean;
  threads?: number;
}

export function registerInferCommand(program: Command, io: CliIo, source: ModelSource): void {
  const command = program
    .command('infer')
    .description('Run the model on one or more texts (or, for an image model, image files) and print the results as JSON (one result per input, in order)')
    .argument('<texts...>', 'texts to run, or the paths of images for an image model; `-` alone reads standard input: texts (a JSON array, else one per line), or one image');
  addConfigOption(command, source);
  command
    .option('-o, --output <file>', 'write the JSON results to this file instead of standard output', parseFileName)
    // encoderfile's flag; JSON is its only format too
    .addOption(new Option('-f, --format <format>', 'output format').choices(['json']).default('json'))
    .option('--normalize', 'embedding models: scale vectors to unit length (default: token vectors yes, sentence vectors as the model says)')
    .option('--no-normalize', 'embedding models: do not scale vectors to unit length')
    .option('--threads <n>', 'onnxruntime threads (default: all cores)', parsePositiveInteger);
  // onnxruntime's session options, as serve and as encoderfile's infer take them
  addSessionOptions(command)
    .action(async (texts: string[], options: InferOptions) => {
      sessionSettingsOf(options); // the flags checked before the model loads
      const pkg = await source.load(options);
      traceStartup('model package read');
      const session = sessionSettingsOf(options, pkg.session);
      if (isImageModelPackage(pkg)) {
        const images = imageArguments(texts, io);
        const normalize = pkg.modelType === 'image_embedding' ? options.normalize : undefined;
        const json = await inferImages(pkg, images, normalize, { threads: session.threads, sessionOptions: session.sessionOptions, codecFiles: source.imageCodecFiles });
        if (options.output !== undefined) await writeOutput(options.output, json);
        else io.stdout(json);
        return;
      }
      const pipeline = await PredictPipeline.load(pkg, { ...source.pipelineOptions, threads: session.threads, sessionOptions: session.sessionOptions });
      try {
        for (const note of pipeline.notes) io.stderr(`note: ${note}\n`);
        const inputs = texts.length === 1 && texts[0] === '-' ? inputsOfStdin((await readStdin(io, 'the texts')).toString('utf8')) : texts;
        const body: Record<string, unknown> = { inputs };
        if (pipeline.modelType === 'embedding') body.normalize = options.normalize ?? true;
        if (pipeline.modelType === 'sentence_embedding' && options.normalize !== undefined) body.normalize = options.normalize;
        const json = `${stringifyJson(await pipeline.predict(body))}\n`;
        traceStartup('first result');
        if (options.output !== undefined) await writeOutput(options.output, json);
        else io.stdout(json);
        traceStartup('output written');
      } finally {
        await pipeline.close();
      }
    });
}

/** An image given to `infer`: where it comes from (a path, or standard input), and how to read its bytes. */
interface ImageArgument {
  source: string;
  read: () => Promise<Uint8Array>;
}

/**
 * Images per request of `infer` (a few onnxruntime runs each): files are read a request at a time, so that a folder
 * of photos is never in memory at once, only its results.
 */
export const INFER_IMAGES_PER_REQUEST = 64;

/**
 * The images of `infer a.png b.jpg`, or of `infer -`: one image's bytes on standard input, whose format is read from
 * the bytes as for every image. A file that cannot be read is a ConfigError naming it, when its turn comes.
 */
function imageArguments(paths: string[], io: CliIo): ImageArgument[] {
  if (paths.length === 1 && paths[0] === '-') return [{ source: 'standard input', read: () => readStdin(io, 'the image') }];
  if (paths.includes('-')) throw new InputError('`-` reads one image from standard input and is then the only argument; give the others as files');
  return paths.map((file) => ({
    source: file,
    read: () =>
      readFile(file).catch((error: unknown) => {
        throw new ConfigError(`cannot read image ${file}: ${(error as Error).message}`, { cause: error });
      }),
  }));
}

/**
 * `infer` of an image model: the images classified (labels with scores, best first) or embedded, the results as
 * /predict answers them, in requests of INFER_IMAGES_PER_REQUEST images that run in pieces of the pipeline's default
 * batch (DEFAULT_MAX_BATCH_IMAGES images per onnxruntime run). `normalize` (image_embedding): unset, the model's
 * setting. An image that cannot be decoded is an InputError naming it by its position (`paths[i]`) and where it came
 * from.
 */
async function inferImages(
  pkg: ImageModelPackage,
  images: ImageArgument[],
  normalize: boolean | undefined,
  session: Pick<ImagePipelineOptions, 'threads' | 'sessionOptions' | 'codecFiles'>,
): Promise<string> {
  const pipeline = await ImagePipeline.load(pkg, session);
  try {
    let response: ImagePredictResponse | undefined;
    const results: ImagePredictResponse['results'][number][] = [];
    for (let from = 0; from < images.length; from += INFER_IMAGES_PER_REQUEST) {
      const given = images.slice(from, from + INFER_IMAGES_PER_REQUEST);
      const bytes = await Promise.all(given.map((image) => image.read()));
      response = await pipeline.predictImages({ images: bytes, ...(normalize !== undefined ? { normalize } : {}) }, 'paths').catch((error: unknown) => {
        // the position among all the paths says which input; the path says it to a person
        const at = error instanceof InputError ? /^paths\[(\d+)\]/.exec(error.reason) : null;
        if (!at) throw error;
        const index = from + Number(at[1]);
        throw new InputError(`paths[${index}]${(error as InputError).reason.slice(at[0].length)} (${images[index].source})`, { field: 'paths' });
      });
      results.push(...response.results);
    }
    return `${stringifyJson({ ...response, results })}\n`;
  } finally {
    await pipeline.close();
  }
}

async function readStdin(io: CliIo, what: string): Promise<Buffer> {
  if (!io.readStdin) throw new InputError(`\`-\` reads ${what} from standard input, which this command line does not have`);
  return io.readStdin();
}

/**
 * The texts of `infer -`: a JSON array (of texts, or of [text, text_pair] for a classifier) when standard input
 * starts with `[`, else one text per line (the last line's newline, and a CR before each newline, are not part of it).
 */
export function inputsOfStdin(text: string): unknown[] {
  if (text.trimStart().startsWith('[')) {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      throw new InputError(`standard input starts with "[" but is not JSON: ${(error as Error).message}`);
    }
    if (!Array.isArray(value)) throw new InputError('standard input is JSON but not an array of texts');
    return value;
  }
  const lines = text.replace(/\r?\n$/, '').split(/\r?\n/);
  if (lines.length === 1 && lines[0] === '') throw new InputError('standard input is empty: give one text per line, or a JSON array');
  return lines;
}

/**
 * Writes the results beside `file` and renames them over it once whole and synced: a full disk or a killed process
 * leaves the old file as it was (writing in place left it truncated). A symbolic link is followed (its target is
 * replaced, the link kept), the old file's mode is kept, and what is not a regular file (/dev/stdout, a pipe) is
 * written in place. A failure is a user-side error (the path, its permissions, its disk): exit status 2.
 */
async function writeOutput(file: string, json: string): Promise<void> {
  let temporary: string | null = null;
  try {
    const existing = await stat(file).catch(() => null);
    if (existing && !existing.isFile()) {
      await writeFile(file, json);
      return;
    }
    const target = existing ? await realpath(file) : file;
    temporary = path.join(path.dirname(target), `.${path.basename(target)}.${randomBytes(6).toString('hex')}.partial`);
    const handle = await open(temporary, 'wx', (existing?.mode ?? 0o644) & 0o777);
    try {
      await handle.writeFile(json);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temporary, target);
  } catch (error) {
    if (temporary !== null) await rm(temporary, { force: true });
    throw new ConfigError(`cannot write ${file}: ${(error as Error).message}`, { cause: error });
  }
}
