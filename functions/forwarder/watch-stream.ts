import type { IncomingMessage } from 'node:http';

/**
 * Reads a watch response line by line (one JSON event per line), calling `onEvent` for each.
 * Resolves when the server ends the stream; rejects on a broken connection or a bad line.
 */
export async function readWatchStream(
  response: IncomingMessage,
  onEvent: (type: string, object: unknown) => void,
): Promise<void> {
  response.setEncoding('utf8');
  let pending = '';
  const emit = (line: string) => {
    if (line.trim() === '') return;
    const event = JSON.parse(line) as { type?: unknown; object?: unknown };
    if (typeof event.type !== 'string') throw new Error(`watch event without a type: ${line}`);
    onEvent(event.type, event.object);
  };
  for await (const chunk of response) {
    pending += chunk as string;
    let newline = pending.indexOf('\n');
    while (newline >= 0) {
      emit(pending.slice(0, newline));
      pending = pending.slice(newline + 1);
      newline = pending.indexOf('\n');
    }
  }
  emit(pending);
}
