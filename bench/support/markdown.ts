/** Markdown tables and the number formats of the benchmark report (bench/report.ts). */
import { round } from './stats';

export type Cell = string | number;

export function table(headers: readonly string[], rows: readonly (readonly Cell[])[]): string {
  const line = (cells: readonly Cell[]) =>
    `| ${cells.map((c) => String(c).replace(/\|/g, '\\|')).join(' | ')} |`;
  return [line(headers), line(headers.map(() => '---')), ...rows.map(line)].join('\n');
}

/** Milliseconds as seconds: two decimals under 10 s, one above. */
export const s = (ms: number) => `${round(ms / 1000, ms < 10_000 ? 2 : 1)} s`;
export const ratio = (ours: number, theirs: number) =>
  theirs === 0 ? 'n/a' : `${round(ours / theirs, 2)}×`;
export const money = (v: number) => (v < 0.01 ? `$${v.toFixed(4)}` : `$${v.toFixed(2)}`);
export const kb = (bytes: number) => `${round(bytes / 1024, 1)} KB`;
