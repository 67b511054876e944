import { describe, expect, it } from 'vitest';
import { startMotoServer } from '../../functions/local/moto-server';

describe('moto server lifecycle', () => {
  it('starts on a free loopback port, answers, and is gone after stop', async () => {
    const moto = await startMotoServer();
    expect(moto.endpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const answer = await fetch(`${moto.endpoint}/moto-api/data.json`);
    expect(answer.ok).toBe(true);

    await moto.stop();
    await expect(fetch(`${moto.endpoint}/moto-api/data.json`)).rejects.toThrow();
  });
});
