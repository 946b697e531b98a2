/**
 * Pictures for the image benchmarks, made here: photo-like (smooth gradients, hard edges and seeded noise, so that the
 * codecs work as on photos), encoded with sharp; and a timer of several steps in turns on one input.
 */
import sharp from 'sharp';
import { median } from './measure.ts';

export type ImageFormat = 'png' | 'jpeg' | 'webp';

/** A photo-like RGB picture: two gradients, a few hard edges and seeded noise. */
export function picture(width: number, height: number): Buffer {
  const pixels = Buffer.alloc(width * height * 3);
  let state = 12345;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      state = (state * 1103515245 + 12345) >>> 0;
      const noise = (state >>> 24) % 24;
      const edge = (Math.floor(x / (width / 7)) + Math.floor(y / (height / 5))) % 2 ? 40 : 0;
      const i = (y * width + x) * 3;
      pixels[i] = Math.min(255, Math.round((255 * x) / width) + noise);
      pixels[i + 1] = Math.min(255, Math.round((255 * y) / height) + edge);
      pixels[i + 2] = Math.min(255, 128 + edge + noise);
    }
  }
  return pixels;
}

/** picture(width, height) as a PNG, or a JPEG or WebP of quality 90. */
export async function encodedPicture(format: ImageFormat, width: number, height: number): Promise<Buffer> {
  const image = sharp(picture(width, height), { raw: { width, height, channels: 3 } });
  if (format === 'png') return image.png().toBuffer();
  if (format === 'jpeg') return image.jpeg({ quality: 90 }).toBuffer();
  return image.webp({ quality: 90 }).toBuffer();
}

/**
 * Median wall and CPU ms (the process's user + system time, other threads of the process included) of each step on
 * `input`, the steps taking turns round by round (after two rounds not counted) so that changes of the machine's load
 * hit all alike. On a loaded machine the CPU time is the steadier measure.
 */
export async function interleaved<T>(steps: readonly ((input: T) => unknown)[], input: T, rounds: number): Promise<{ wall: number; cpu: number }[]> {
  const samples = steps.map(() => ({ wall: [] as number[], cpu: [] as number[] }));
  for (let round = -2; round < rounds; round++) {
    for (const [i, step] of steps.entries()) {
      const cpu = process.cpuUsage();
      const start = performance.now();
      await step(input);
      const wall = performance.now() - start;
      const used = process.cpuUsage(cpu);
      if (round >= 0) {
        samples[i].wall.push(wall);
        samples[i].cpu.push((used.user + used.system) / 1000);
      }
    }
  }
  return samples.map(({ wall, cpu }) => ({ wall: median(wall), cpu: median(cpu) }));
}
