import type { IncomingMessage } from 'node:http';
import type { KubeApiClient } from './kube-api-client';

/** What a list page says besides its items. */
export interface ListPageMetadata {
  readonly resourceVersion?: string | undefined;
  readonly _continue?: string | undefined;
}

const quote = 0x22;
const backslash = 0x5c;
const openBrace = 0x7b;
const closeBrace = 0x7d;
const openBracket = 0x5b;
const closeBracket = 0x5d;
const colon = 0x3a;
const comma = 0x2c;

/** What ends or escapes within a JSON string. */
const stringSpecial = /["\\]/g;

function isSpace(code: number): boolean {
  return code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09;
}

/**
 * Splits a Kubernetes list document (`{"metadata": …, "items": [ … ]}`), fed in chunks, into the
 * text of each item as soon as it is complete, and the rest of the document. A page is as large
 * as its objects: 100 Services filled to Kubernetes' object limit are 150 MB of JSON, which read
 * whole and parsed at once would take the forwarder past its memory limit; this holds one item's
 * text at a time. It tracks only strings and nesting: `JSON.parse` still checks every item and the
 * rest.
 */
export class ListScanner {
  private depth = 0;
  private inString = false;
  private escaped = false;
  /** The last string closed at the top level (a key, once a colon follows), as JSON text. */
  private lastTopString = '';
  /** Where a top-level string began in the current chunk, and its text from earlier chunks. */
  private stringStart = -1;
  private pendingString = '';
  /** A top-level key and its colon have been read: the next value is that key's. */
  private keyReady = false;
  private inItems = false;
  private itemParts: string[] = [];
  private outsideParts: string[] = [];

  /** Feeds the next chunk; returns the items it completed, as JSON text, in order. */
  push(chunk: string): string[] {
    const items: string[] = [];
    // Where the current run of text (item or outside) began within this chunk.
    let runStart = 0;
    for (let i = 0; i < chunk.length; i++) {
      if (this.inString) {
        if (this.escaped) {
          this.escaped = false;
          continue;
        }
        // Strings are most of a large object (annotations, ranges): jump to the next quote or
        // backslash natively instead of looking at every character.
        stringSpecial.lastIndex = i;
        const found = stringSpecial.exec(chunk);
        if (found === null) {
          i = chunk.length;
          continue;
        }
        i = found.index;
        if (chunk.charCodeAt(i) === backslash) this.escaped = true;
        else {
          this.inString = false;
          if (this.depth === 1 && !this.inItems) {
            this.lastTopString = this.pendingString + chunk.slice(this.stringStart, i + 1);
            this.pendingString = '';
            this.keyReady = false;
          }
        }
        continue;
      }
      const code = chunk.charCodeAt(i);
      if (code === quote) {
        if (this.inItems && this.depth === 2) throw new Error('list items must be objects');
        this.inString = true;
        if (this.depth === 1 && !this.inItems) {
          this.stringStart = i;
          this.pendingString = '';
        }
      } else if (code === colon && this.depth === 1 && !this.inItems) {
        this.keyReady = true;
      } else if (code === openBrace || code === openBracket) {
        if (this.inItems && this.depth === 2) {
          if (code !== openBrace) throw new Error('list items must be objects');
          // An item begins: what came before it (the array's commas) is dropped.
          runStart = i;
        }
        this.depth++;
        if (
          this.depth === 2 &&
          code === openBracket &&
          this.keyReady &&
          this.lastTopString === '"items"'
        ) {
          // The items array: the rest of the document keeps an empty one in its place.
          this.outsideParts.push(chunk.slice(runStart, i + 1));
          this.inItems = true;
          runStart = i + 1;
        }
        this.keyReady = false;
      } else if (code === closeBrace || code === closeBracket) {
        this.depth--;
        if (this.depth < 0) throw new Error('list response is not JSON: unbalanced brackets');
        if (this.inItems && this.depth === 2 && code === closeBrace) {
          this.itemParts.push(chunk.slice(runStart, i + 1));
          items.push(this.itemParts.join(''));
          this.itemParts = [];
          runStart = i + 1;
        } else if (this.inItems && this.depth === 1) {
          // The items array ends: its bracket belongs to the rest of the document again.
          this.inItems = false;
          runStart = i;
        }
      } else if (this.inItems && this.depth === 2 && code !== comma && !isSpace(code)) {
        throw new Error('list items must be objects');
      }
    }
    if (this.inString && this.depth === 1 && !this.inItems) {
      this.pendingString += chunk.slice(Math.max(this.stringStart, 0));
      this.stringStart = 0;
    }
    const rest = chunk.slice(runStart);
    if (this.inItems && this.depth > 2) this.itemParts.push(rest);
    else if (!this.inItems) this.outsideParts.push(rest);
    return items;
  }

  /** The document without its items, parsed, once the whole response has been fed. */
  finish(): unknown {
    if (this.depth !== 0 || this.inString) throw new Error('list response ended early');
    return JSON.parse(this.outsideParts.join(''));
  }
}

/**
 * Reads one page of a list, handing each item to `onItem` as soon as it has arrived (and waiting
 * for it, so a slow consumer slows the read rather than buffering the page). Returns the page's
 * resourceVersion and continue token.
 */
export async function streamListPage<T>(
  http: KubeApiClient,
  path: string,
  limit: number,
  continueToken: string | undefined,
  onItem: (item: T) => Promise<void> | void,
  /** Give up when the API server sends nothing for this long (the functions); none by default. */
  idleTimeoutMs?: number,
): Promise<ListPageMetadata> {
  const response: IncomingMessage = await http.stream(
    path,
    { limit: String(limit), continue: continueToken },
    undefined,
    idleTimeoutMs,
  );
  response.setEncoding('utf8');
  const scanner = new ListScanner();
  for await (const chunk of response) {
    for (const text of scanner.push(chunk as string)) await onItem(JSON.parse(text) as T);
  }
  const rest = scanner.finish() as { metadata?: { resourceVersion?: string; continue?: string } };
  return { resourceVersion: rest.metadata?.resourceVersion, _continue: rest.metadata?.continue };
}
