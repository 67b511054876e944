import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { sha256 } from '../../../functions/aws/model/sha256';

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');
const reference = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

describe('sha256 (the pure one names are derived from)', () => {
  it('matches the FIPS 180-4 example "abc"', () => {
    expect(hex(sha256('abc'))).toBe(
      'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
    );
  });

  // Lengths around the 55/56/64-byte padding boundaries, multi-block input and non-ASCII text.
  it.each([0, 1, 54, 55, 56, 57, 63, 64, 65, 119, 120, 200, 1000])(
    'matches node:crypto for %i characters',
    (length) => {
      const text = Array.from({ length }, (_, i) => String.fromCharCode(97 + ((i * 7) % 26))).join(
        '',
      );
      expect(hex(sha256(text))).toBe(reference(text));
    },
  );

  it('hashes the UTF-8 bytes of non-ASCII text', () => {
    for (const text of ['wéb', '名前空間/サービス', '🙂'.repeat(20)]) {
      expect(hex(sha256(text))).toBe(reference(text));
    }
  });
});
