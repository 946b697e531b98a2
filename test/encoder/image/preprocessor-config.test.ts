/**
 * preprocessor_config.json as HuggingFace reads it: each processor class's defaults for missing fields, the older
 * size forms, and a ConfigError naming the field for a value the processors would not accept. Plus the geometry
 * helpers' edge cases (HF's rounding of shortest-edge sizes, Python's floor division in the center crop) and a
 * request's images to one tensor.
 */
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { ConfigError, InputError } from '../../../src/encoder/errors.ts';
import { preprocessImages } from '../../../src/encoder/image/index.ts';
import { installedWasmCodecs } from '../../../src/encoder/image/installed-codecs.ts';
import { parseImageProcessorConfig } from '../../../src/encoder/image/preprocessor-config.ts';
import { centerCrop, pixelValues, resizeOutputSize } from '../../../src/encoder/image/preprocess.ts';

describe('parseImageProcessorConfig', () => {
  it("gives ViTImageProcessor's defaults to a file that names the class only", () => {
    expect(parseImageProcessorConfig({ image_processor_type: 'ViTImageProcessor' })).toEqual({
      processorType: 'ViTImageProcessor',
      resize: { target: { height: 224, width: 224 }, resample: 2 },
      centerCrop: null,
      rescaleFactor: 1 / 255,
      normalize: { mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5] },
      convertRgb: true,
    });
  });

  it("gives CLIPImageProcessor's defaults, also when named by the older feature_extractor_type", () => {
    const config = parseImageProcessorConfig({ feature_extractor_type: 'CLIPFeatureExtractor' });
    expect(config.resize).toEqual({ target: { shortestEdge: 224 }, resample: 3 });
    expect(config.centerCrop).toEqual({ height: 224, width: 224 });
    expect(config.normalize?.mean).toEqual([0.48145466, 0.4578275, 0.40821073]);
  });

  it('reads a bare number size as a square for ViT and as a shortest edge for CLIP, and a bare crop size as a square', () => {
    expect(parseImageProcessorConfig({ size: 384 }).resize?.target).toEqual({ height: 384, width: 384 });
    expect(parseImageProcessorConfig({ image_processor_type: 'CLIPImageProcessor', size: 336, crop_size: 336 })).toMatchObject({
      resize: { target: { shortestEdge: 336 } },
      centerCrop: { height: 336, width: 336 },
    });
  });

  it('turns steps off, and takes a single number for mean and std', () => {
    const config = parseImageProcessorConfig({ do_resize: false, do_rescale: false, do_normalize: true, image_mean: 0.5, image_std: 0.25 });
    expect(config).toMatchObject({ resize: null, rescaleFactor: null, normalize: { mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25] } });
    expect(parseImageProcessorConfig({ do_normalize: false, do_convert_rgb: false })).toMatchObject({ normalize: null, convertRgb: false });
  });

  it('refuses values the processors would not accept, naming the field', () => {
    const cases: [unknown, RegExp][] = [
      [[], /must hold a JSON object/],
      [{ size: { longest_edge: 224 } }, /size must be/],
      [{ size: { shortest_edge: 224, longest_edge: 400 } }, /size must be/],
      [{ size: { height: 0, width: 224 } }, /size must be a positive integer/],
      [{ size: { height: 22.5, width: 224 } }, /size must be a positive integer/],
      [{ resample: 7 }, /resample must be a PIL filter id/],
      [{ resample: 'bilinear' }, /resample must be a PIL filter id/],
      [{ do_center_crop: true, crop_size: { height: 10 } }, /crop_size must be/],
      [{ rescale_factor: '1/255' }, /rescale_factor must be a number/],
      [{ image_mean: [0.5, 0.5] }, /image_mean must be a number or a list of 3 numbers/],
      [{ image_std: [0.5, 0, 0.5] }, /image_std must be non-zero/],
      [{ do_resize: 'yes' }, /do_resize must be true or false/],
    ];
    for (const [json, message] of cases) {
      expect(() => parseImageProcessorConfig(json)).toThrow(ConfigError);
      expect(() => parseImageProcessorConfig(json)).toThrow(message);
    }
  });
});

describe('resizeOutputSize', () => {
  it('makes the shorter edge the target and truncates the longer one as int(size * long / short)', () => {
    expect(resizeOutputSize({ width: 37, height: 91 }, { shortestEdge: 224 })).toEqual({ width: 224, height: 550 }); // 550.9…
    expect(resizeOutputSize({ width: 300, height: 17 }, { shortestEdge: 224 })).toEqual({ width: 3952, height: 224 }); // 3952.94…
    expect(resizeOutputSize({ width: 50, height: 50 }, { shortestEdge: 7 })).toEqual({ width: 7, height: 7 });
    expect(resizeOutputSize({ width: 640, height: 480 }, { height: 10, width: 20 })).toEqual({ height: 10, width: 20 });
  });
});

describe('centerCrop', () => {
  const image = (width: number, height: number) => ({ width, height, pixels: Uint8Array.from({ length: width * height * 3 }, (_, i) => Math.floor(i / 3) + 1) });
  const firstChannel = (crop: { pixels: Uint8Array }) => [...crop.pixels].filter((_, i) => i % 3 === 0);

  it('takes the middle, the extra odd pixel going to the bottom and right as Python floor division puts it', () => {
    // 5×4 image numbered 1..20, crop 2×2: top = (4-2)//2 = 1, left = (5-2)//2 = 1
    expect(firstChannel(centerCrop(image(5, 4), { width: 2, height: 2 }))).toEqual([7, 8, 12, 13]);
  });

  it('pads with zeros around an image smaller than the crop, the odd pixel of padding on the top and left (ceil)', () => {
    // 1×1 image into 4×3: left pad ceil(3/2) = 2, top pad ceil(2/2) = 1
    expect(firstChannel(centerCrop(image(1, 1), { width: 4, height: 3 }))).toEqual([0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0]);
    // cropped in width, padded in height: top pad ceil(1/2) = 1
    expect(firstChannel(centerCrop(image(4, 1), { width: 2, height: 2 }))).toEqual([0, 0, 2, 3]);
  });
});

describe('preprocessImages', () => {
  it('decodes a request\'s images in order into one tensor, and names the input that fails', async () => {
    const png = (shade: number) => sharp({ create: { width: 9, height: 7, channels: 3, background: { r: shade, g: 0, b: 255 - shade } } }).png().toBuffer();
    const config = parseImageProcessorConfig({ size: { height: 4, width: 4 }, do_normalize: false });
    const tensor = await preprocessImages([await png(0), await png(255)], config, { wasm: installedWasmCodecs, field: 'input' });
    expect(tensor.dims).toEqual([2, 3, 4, 4]);
    expect([tensor.data[0], tensor.data[2 * 16], tensor.data[48], tensor.data[48 + 2 * 16]]).toEqual([0, 1, 1, 0]);
    await expect(preprocessImages([await png(0), new Uint8Array([1, 2, 3])], config, { wasm: installedWasmCodecs, field: 'input' })).rejects.toThrow(
      'Invalid input: input[1]: not a PNG, JPEG, WebP or GIF image',
    );
  });
});

describe('pixelValues', () => {
  it('refuses a batch whose images come out at different sizes, naming the first that differs', () => {
    const config = parseImageProcessorConfig({ image_processor_type: 'CLIPImageProcessor', do_center_crop: false, size: { shortest_edge: 4 } });
    const image = (width: number, height: number) => ({ width, height, pixels: new Uint8Array(width * height * 3) });
    expect(() => pixelValues([image(8, 8), image(8, 8), image(8, 16)], config)).toThrow(InputError);
    expect(() => pixelValues([image(8, 8), image(8, 8), image(8, 16)], config)).toThrow(/^Invalid input: inputs\[2\]: the image comes out of preprocessing at 4×8, the batch's first at 4×4/);
  });
});
