import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

export const VIRTUAL_KEY_PREFIX = 'gw-';

/** A new master key: 32 random bytes from the system's secure generator, base64url (43 characters). */
export function generateMasterKey(): string {
  return randomBytes(32).toString('base64url');
}

/** A new virtual key secret: `gw-` and 32 random bytes, base64url. */
export function generateVirtualKey(): string {
  return VIRTUAL_KEY_PREFIX + randomBytes(32).toString('base64url');
}

/** What is stored instead of a secret: its SHA-256 (hex). 256 bits of randomness need no salt or slow hash. */
export function hashSecret(secret: string): string {
  return secretDigest(secret).toString('hex');
}

/** The part of a secret shown in listings so that people can tell keys apart: `gw-` and 4 characters. */
export function displayPrefix(secret: string): string {
  return secret.slice(0, VIRTUAL_KEY_PREFIX.length + 4);
}

/** Compares a presented token's digest with the master key's in constant time (digests have equal lengths). */
export function sameDigest(tokenDigest: Buffer, secretDigest: Buffer): boolean {
  return timingSafeEqual(tokenDigest, secretDigest);
}

export function secretDigest(secret: string): Buffer {
  return hash('sha256', secret, 'buffer'); // one-shot: no Hash object per authentication
}
