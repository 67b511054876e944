import { InvariantError, TerminalError } from '../core/errors';
import type { ServiceRecord } from '../sync/ports';
import { decodeRecord, encodeRecord } from './record-codec';

/** A Service's record item, compressed record and copied-out attributes: DynamoDB items hold 400 KB, less `pk` and `ver`. */
export const maxRecordBytes = 380 * 1024;

/**
 * The record an item holds. `rec` is what release 0.1 wrote; our writes replace the item whole, so
 * an item with `rec` beside `recz` was written by 0.1 after us (a rollback) and `rec` is newer.
 * 0.1 removes `rec` and `uid` when it deletes a record but leaves `recz`, so `recz` counts only
 * with `uid` beside it.
 */
/**
 * A record's item attributes, or the TerminalError for a record DynamoDB would refuse on every
 * retry (the item over its size limit): the spec must shrink, so it is the user's to fix.
 */
export function storedRecordAttributes(record: ServiceRecord): Record<string, string | Uint8Array> {
  const attributes = {
    recz: encodeRecord(record),
    uid: record.uid,
    hostsHash: record.hostsHash ?? '',
    // Beside the hash, for node sync's scan to compare each Service with the hosts it selects.
    nodeSelector: record.nodeSelector ?? '',
  };
  const bytes = Object.entries(attributes).reduce(
    (n, [name, value]) =>
      n + name.length + (typeof value === 'string' ? Buffer.byteLength(value) : value.byteLength),
    0,
  );
  if (bytes > maxRecordBytes) {
    throw new TerminalError(
      `the Service's state record would be ${Math.ceil(bytes / 1024)} KiB compressed, over the ${maxRecordBytes / 1024} KiB a state item can hold: use fewer ports, source ranges or load balancer annotations`,
    );
  }
  return attributes;
}

export function parseRecord(item: Record<string, unknown> | undefined): ServiceRecord | undefined {
  if (typeof item?.rec === 'string') return JSON.parse(item.rec) as ServiceRecord;
  if (!(item?.recz instanceof Uint8Array) || typeof item.uid !== 'string') return undefined;
  try {
    return decodeRecord(item.recz);
  } catch (error) {
    // Written by a newer release (rolled back past a format change) or damaged: retrying cannot
    // help, and guessing could delete what the record names.
    throw new InvariantError(
      `state item ${String(item.pk)}: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}
