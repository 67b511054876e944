import { describe, expect, it } from 'vitest';
import { humanDuration, requestedTableVersion } from '../../../functions/local/fake-kube/tables';

describe('the AGE column', () => {
  it.each([
    [-5, '<invalid>'],
    [-1, '0s'],
    [0, '0s'],
    [119, '119s'],
    [120, '2m'],
    [192, '3m12s'],
    [599, '9m59s'],
    [600, '10m'],
    [3 * 3600 - 1, '179m'],
    [3 * 3600, '3h'],
    [3 * 3600 + 30 * 60, '3h30m'],
    [8 * 3600, '8h'],
    [47 * 3600, '47h'],
    [48 * 3600, '2d'],
    [50 * 3600, '2d2h'],
    [8 * 86400, '8d'],
    [729 * 86400, '729d'],
    [730 * 86400, '2y'],
    [731 * 86400, '2y1d'],
    [9 * 365 * 86400, '9y'],
  ])('%i s reads %s', (seconds, printed) => {
    expect(humanDuration(seconds)).toBe(printed);
  });
});

describe('the Table a client asks for', () => {
  it('is read from the Accept header kubectl sends, v1 first', () => {
    expect(
      requestedTableVersion(
        'application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json',
      ),
    ).toBe('v1');
    expect(requestedTableVersion('application/json;as=Table;v=v1beta1;g=meta.k8s.io')).toBe(
      'v1beta1',
    );
    expect(requestedTableVersion('application/json')).toBeUndefined();
    expect(requestedTableVersion(undefined)).toBeUndefined();
  });
});
