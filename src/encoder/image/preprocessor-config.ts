/**
 * preprocessor_config.json → the steps of HuggingFace's ViTImageProcessor or CLIPImageProcessor, with each class's
 * defaults for the fields a file leaves out (`image_processor_type`, or the older `feature_extractor_type`, says
 * which; CLIP-like ones are CLIP's, all others ViT's).
 */
import { ConfigError } from '../errors.ts';
import { PIL_RESAMPLE, type PilResample } from './pil-resample.ts';

/** A resize either to a fixed size or so that the shorter edge has a length (the longer one keeps the aspect). */
export type ResizeTarget = { height: number; width: number } | { shortestEdge: number };

export interface ImageProcessorConfig {
  /** The class named by the file, for messages. */
  processorType: string;
  resize: { target: ResizeTarget; resample: PilResample } | null;
  centerCrop: { height: number; width: number } | null;
  rescaleFactor: number | null;
  normalize: { mean: [number, number, number]; std: [number, number, number] } | null;
  convertRgb: boolean;
}

const IMAGENET_STANDARD = { mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5] };
const OPENAI_CLIP = { mean: [0.48145466, 0.4578275, 0.40821073], std: [0.26862954, 0.26130258, 0.27577711] };

const DEFAULTS = {
  vit: { size: { height: 224, width: 224 }, resample: PIL_RESAMPLE.bilinear, do_center_crop: false, crop_size: null, ...IMAGENET_STANDARD, do_convert_rgb: true },
  clip: { size: { shortest_edge: 224 }, resample: PIL_RESAMPLE.bicubic, do_center_crop: true, crop_size: { height: 224, width: 224 }, ...OPENAI_CLIP, do_convert_rgb: true },
};

export function parseImageProcessorConfig(json: unknown, file = 'preprocessor_config.json'): ImageProcessorConfig {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new ConfigError(`${file} must hold a JSON object`);
  const config = json as Record<string, unknown>;
  const fail = (field: string, expected: string) => new ConfigError(`${file}: ${field} must be ${expected}, got ${JSON.stringify(config[field])}`);
  const processorType = String(config.image_processor_type ?? config.feature_extractor_type ?? 'ViTImageProcessor');
  const kind = /clip/i.test(processorType) ? 'clip' : 'vit';
  const defaults = DEFAULTS[kind];
  const field = <T>(name: string, fallback: T): unknown => (config[name] === undefined || config[name] === null ? fallback : config[name]);
  const flag = (name: string, fallback: boolean): boolean => {
    const value = field(name, fallback);
    if (typeof value !== 'boolean') throw fail(name, 'true or false');
    return value;
  };
  const positive = (name: string, value: unknown): number => {
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) throw fail(name, 'a positive integer or an object of positive integers');
    return value;
  };
  const triple = (name: string, fallback: number[]): [number, number, number] => {
    const value = field(name, fallback);
    const list = typeof value === 'number' ? [value, value, value] : value;
    if (!Array.isArray(list) || list.length !== 3 || !list.every((v) => typeof v === 'number' && Number.isFinite(v))) throw fail(name, 'a number or a list of 3 numbers');
    if (name === 'image_std' && list.includes(0)) throw fail(name, 'non-zero');
    return list as [number, number, number];
  };

  let resize: ImageProcessorConfig['resize'] = null;
  if (flag('do_resize', true)) {
    const size = field('size', defaults.size);
    let target: ResizeTarget;
    // a bare number: ViT makes it a square, CLIP a shortest edge (get_size_dict's default_to_square)
    if (typeof size === 'number') target = kind === 'clip' ? { shortestEdge: positive('size', size) } : { height: positive('size', size), width: positive('size', size) };
    else if (isObject(size) && 'shortest_edge' in size && !('longest_edge' in size)) target = { shortestEdge: positive('size', size.shortest_edge) };
    else if (isObject(size) && 'height' in size && 'width' in size) target = { height: positive('size', size.height), width: positive('size', size.width) };
    else throw fail('size', '{"height": h, "width": w}, {"shortest_edge": n} or a number');
    const resample = field('resample', defaults.resample);
    if (typeof resample !== 'number' || !(Object.values(PIL_RESAMPLE) as number[]).includes(resample)) throw fail('resample', "a PIL filter id (0 nearest, 1 lanczos, 2 bilinear, 3 bicubic, 4 box, 5 hamming)");
    resize = { target, resample: resample as PilResample };
  }

  let centerCrop: ImageProcessorConfig['centerCrop'] = null;
  if (flag('do_center_crop', defaults.do_center_crop)) {
    const crop = field('crop_size', defaults.crop_size ?? { height: 224, width: 224 });
    if (typeof crop === 'number') centerCrop = { height: positive('crop_size', crop), width: positive('crop_size', crop) };
    else if (isObject(crop) && 'height' in crop && 'width' in crop) centerCrop = { height: positive('crop_size', crop.height), width: positive('crop_size', crop.width) };
    else throw fail('crop_size', '{"height": h, "width": w} or a number');
  }

  let rescaleFactor: number | null = null;
  if (flag('do_rescale', true)) {
    const factor = field('rescale_factor', 1 / 255);
    if (typeof factor !== 'number' || !Number.isFinite(factor)) throw fail('rescale_factor', 'a number');
    rescaleFactor = factor;
  }

  const normalize = flag('do_normalize', true) ? { mean: triple('image_mean', defaults.mean), std: triple('image_std', defaults.std) } : null;
  return { processorType, resize, centerCrop, rescaleFactor, normalize, convertRgb: flag('do_convert_rgb', defaults.do_convert_rgb) };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
