/**
 * User values in messages. An error message becomes a Warning event, log lines and a lifecycle
 * event, so a value is never echoed whole: a 200 KB annotation would be copied into each of them
 * on every pass (issue 19). Enough is shown to recognise the value, with its real length.
 */

/** How many characters of one user value a message shows. */
export const echoLimit = 100;

/** How many problems one message names; the rest are counted. */
export const problemLimit = 10;

/** The first `limit` characters, never ending in half a surrogate pair. */
function head(text: string, limit: number): string {
  const cut = text.slice(0, limit);
  const last = cut.charCodeAt(cut.length - 1);
  return last >= 0xd800 && last <= 0xdbff ? cut.slice(0, -1) : cut;
}

/**
 * A user value, quoted and escaped (a line break cannot start a forged log line), cut to
 * `echoLimit` characters with an ellipsis and the full length when longer.
 */
export function quoted(value: string, limit = echoLimit): string {
  if (value.length <= limit) return JSON.stringify(value);
  return `${JSON.stringify(`${head(value, limit)}…`)} (${value.length} characters)`;
}

/** A user-given name shown as it is when short (annotation names, keys), else cut like `quoted`. */
export function clipped(value: string, limit = echoLimit): string {
  if (value.length <= limit) return value;
  return `${head(value, limit)}… (${value.length} characters)`;
}

/** One message for many problems: the first `problemLimit`, then how many more there are. */
export function joinProblems(problems: readonly string[]): string {
  if (problems.length <= problemLimit) return problems.join('; ');
  const rest = problems.length - problemLimit;
  return `${problems.slice(0, problemLimit).join('; ')}; and ${rest} more problem${rest === 1 ? '' : 's'}`;
}
