/**
 * Seeded pseudo-random numbers: xoshiro128** seeded through splitmix32. Math.random cannot be
 * seeded, and the generated models must be byte-identical for the same seed on every machine.
 */

function splitmix32(state: number): [next: number, output: number] {
  const next = (state + 0x9e3779b9) | 0;
  let z = next;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return [next, (z ^ (z >>> 16)) >>> 0];
}

/** FNV-1a hash of a string, used to give every weight tensor its own stream. */
function hashString(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193);
  }
  return hash >>> 0;
}

export class SeededRandom {
  #s0: number;
  #s1: number;
  #s2: number;
  #s3: number;
  #spareNormal: number | undefined;

  /**
   * @param seed a non-negative safe integer
   * @param stream a name that selects an independent sequence for the same seed
   */
  constructor(seed: number, stream = '') {
    // Both 32-bit halves of the seed and the stream name feed the state, so seeds above 2^32
    // and different streams do not collide.
    let state = (seed >>> 0) ^ hashString(stream);
    const high = Math.floor(seed / 2 ** 32) >>> 0;
    let out: number;
    [state, out] = splitmix32(state ^ Math.imul(high, 0x27d4eb2d));
    this.#s0 = out;
    [state, out] = splitmix32(state);
    this.#s1 = out;
    [state, out] = splitmix32(state);
    this.#s2 = out;
    [, out] = splitmix32(state);
    this.#s3 = out;
    if ((this.#s0 | this.#s1 | this.#s2 | this.#s3) === 0) this.#s0 = 1; // all-zero state is a fixed point
  }

  /** Next uniformly distributed unsigned 32-bit integer. */
  nextUint32(): number {
    const result = Math.imul(rotl(Math.imul(this.#s1, 5), 7), 9) >>> 0;
    const t = this.#s1 << 9;
    this.#s2 ^= this.#s0;
    this.#s3 ^= this.#s1;
    this.#s1 ^= this.#s2;
    this.#s0 ^= this.#s3;
    this.#s2 ^= t;
    this.#s3 = rotl(this.#s3, 11);
    return result;
  }

  /** Uniform in (0, 1): never 0, so it is safe under Math.log. */
  nextUniform(): number {
    return (this.nextUint32() + 0.5) / 2 ** 32;
  }

  /** Standard normal sample (Box-Muller; the second value of each pair is kept for the next call). */
  nextNormal(): number {
    if (this.#spareNormal !== undefined) {
      const spare = this.#spareNormal;
      this.#spareNormal = undefined;
      return spare;
    }
    const radius = Math.sqrt(-2 * Math.log(this.nextUniform()));
    const angle = 2 * Math.PI * this.nextUniform();
    this.#spareNormal = radius * Math.sin(angle);
    return radius * Math.cos(angle);
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}
