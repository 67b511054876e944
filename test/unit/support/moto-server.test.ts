import { describe, expect, it } from 'vitest';
import { MotoMissingError, startMotoServer } from '../../../functions/local/moto-server';

describe('moto server fixture when moto is missing', () => {
  it('fails with one clear message naming the install command when python3 cannot import moto', async () => {
    // -S leaves site-packages off the path, so this interpreter has no moto.
    const failure = startMotoServer(['python3', '-S']);
    await expect(failure).rejects.toBeInstanceOf(MotoMissingError);
    await expect(failure).rejects.toThrow(/python3 -m pip install 'moto\[server\]==5\.2\.1'/);
  });

  it('fails the same way when there is no Python interpreter at all', async () => {
    await expect(startMotoServer(['no-such-python-interpreter'])).rejects.toThrow(
      /moto's server is required.*pip install/s,
    );
  });
});
