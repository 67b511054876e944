/** Small hand-written SVG charts (grouped bars and lines), with no dependency. */

const palette = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#7f7f7f'];
const font = 'font-family="Helvetica, Arial, sans-serif"';

function escape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function niceMax(value: number): number {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}

function label(value: number): string {
  if (value === 0) return '0';
  if (Math.abs(value) >= 1000) return value.toLocaleString('en-US', { maximumFractionDigits: 0 });
  if (Math.abs(value) >= 10) return value.toFixed(0);
  if (Math.abs(value) >= 1) return value.toFixed(1).replace(/\.0$/, '');
  return value.toPrecision(2);
}

/** Splits a label into lines of at most `width` characters, at spaces. */
function wrapped(text: string, width: number): string[] {
  const lines: string[] = [];
  let current = '';
  for (const word of text.split(' ')) {
    if (current !== '' && current.length + 1 + word.length > width) {
      lines.push(current);
      current = word;
    } else current = current === '' ? word : `${current} ${word}`;
  }
  if (current !== '') lines.push(current);
  return lines;
}

export interface BarSeries {
  readonly name: string;
  readonly values: readonly number[];
}

export interface BarChart {
  readonly title: string;
  readonly categories: readonly string[];
  readonly series: readonly BarSeries[];
  readonly yLabel: string;
  /** Logarithmic y axis (values ≤ 0 are drawn at the bottom). */
  readonly log?: boolean;
  /** A horizontal reference line, e.g. a budget. */
  readonly reference?: { readonly value: number; readonly label: string };
  /** Stack the series instead of grouping them. */
  readonly stacked?: boolean;
}

export function barChart(chart: BarChart): string {
  const width = 760;
  const height = 400;
  const margin = { top: 48, right: 20, bottom: 88, left: 78 };
  const plotW = width - margin.left - margin.right;
  const plotH = height - margin.top - margin.bottom;
  const totals = chart.categories.map((_, c) =>
    chart.stacked
      ? chart.series.reduce((n, s) => n + Math.max(0, s.values[c] ?? 0), 0)
      : Math.max(...chart.series.map((s) => s.values[c] ?? 0)),
  );
  const dataMax = Math.max(...totals, chart.reference?.value ?? 0);
  const positive = chart.series.flatMap((s) => s.values).filter((v) => v > 0);
  const logMin = chart.log ? 10 ** Math.floor(Math.log10(Math.min(...positive, dataMax))) : 0;
  const logMax = chart.log ? 10 ** Math.ceil(Math.log10(Math.max(dataMax, logMin * 10))) : 0;
  const yMax = chart.log ? logMax : niceMax(dataMax);
  const y = (v: number) => {
    if (chart.log) {
      if (v <= logMin) return plotH;
      return plotH - (Math.log10(v / logMin) / Math.log10(logMax / logMin)) * plotH;
    }
    return plotH - (v / yMax) * plotH;
  };
  const parts: string[] = [];
  const ticks: number[] = [];
  if (chart.log) for (let t = logMin; t <= logMax * 1.0001; t *= 10) ticks.push(t);
  else for (let i = 0; i <= 5; i++) ticks.push((yMax / 5) * i);
  for (const t of ticks) {
    const ty = margin.top + y(t);
    parts.push(
      `<line x1="${margin.left}" x2="${margin.left + plotW}" y1="${ty}" y2="${ty}" stroke="#e0e0e0"/>`,
      `<text x="${margin.left - 6}" y="${ty + 4}" text-anchor="end" font-size="11" ${font}>${label(t)}</text>`,
    );
  }
  const groupW = plotW / Math.max(1, chart.categories.length);
  const barW = chart.stacked ? groupW * 0.5 : (groupW * 0.8) / Math.max(1, chart.series.length);
  chart.categories.forEach((category, c) => {
    const gx = margin.left + c * groupW;
    let stackBase = 0;
    chart.series.forEach((series, s) => {
      const value = series.values[c] ?? 0;
      const color = palette[s % palette.length] ?? '#333';
      if (chart.stacked) {
        const top = margin.top + y(stackBase + Math.max(0, value));
        const bottom = margin.top + y(stackBase);
        const x = gx + (groupW - barW) / 2;
        parts.push(
          `<rect x="${x}" y="${top}" width="${barW}" height="${Math.max(0, bottom - top)}" fill="${color}"><title>${escape(series.name)}: ${label(value)}</title></rect>`,
        );
        stackBase += Math.max(0, value);
      } else {
        const x = gx + groupW * 0.1 + s * barW;
        const top = margin.top + y(value);
        parts.push(
          `<rect x="${x}" y="${top}" width="${barW - 2}" height="${Math.max(0, margin.top + plotH - top)}" fill="${color}"><title>${escape(series.name)}: ${label(value)}</title></rect>`,
          `<text x="${x + (barW - 2) / 2}" y="${top - 3}" text-anchor="middle" font-size="10" ${font}>${label(value)}</text>`,
        );
      }
    });
    if (chart.stacked) {
      parts.push(
        `<text x="${gx + groupW / 2}" y="${margin.top + y(stackBase) - 4}" text-anchor="middle" font-size="10" ${font}>${label(stackBase)}</text>`,
      );
    }
    parts.push(
      wrapped(category, Math.max(8, Math.floor(groupW / 6.5)))
        .map(
          (line, i) =>
            `<text x="${gx + groupW / 2}" y="${margin.top + plotH + 16 + i * 13}" text-anchor="middle" font-size="11" ${font}>${escape(line)}</text>`,
        )
        .join(''),
    );
  });
  if (chart.reference !== undefined) {
    const ry = margin.top + y(chart.reference.value);
    parts.push(
      `<line x1="${margin.left}" x2="${margin.left + plotW}" y1="${ry}" y2="${ry}" stroke="#d62728" stroke-dasharray="6 4"/>`,
      `<text x="${margin.left + plotW - 4}" y="${ry - 4}" text-anchor="end" font-size="11" fill="#d62728" ${font}>${escape(chart.reference.label)}</text>`,
    );
  }
  return frame(
    chart.title,
    chart.yLabel,
    width,
    height,
    margin,
    plotH,
    parts,
    legend(
      chart.series.map((s) => s.name),
      width,
      height,
    ),
  );
}

export interface LineSeries {
  readonly name: string;
  readonly points: readonly (readonly [number, number])[];
}

export interface LineChart {
  readonly title: string;
  readonly series: readonly LineSeries[];
  readonly xLabel: string;
  readonly yLabel: string;
}

export function lineChart(chart: LineChart): string {
  const width = 760;
  const height = 400;
  const margin = { top: 48, right: 20, bottom: 88, left: 78 };
  const plotW = width - margin.left - margin.right;
  const plotH = height - margin.top - margin.bottom;
  const all = chart.series.flatMap((s) => s.points);
  const xMax = niceMax(Math.max(...all.map((p) => p[0])));
  const yMax = niceMax(Math.max(...all.map((p) => p[1])));
  const x = (v: number) => margin.left + (v / xMax) * plotW;
  const y = (v: number) => margin.top + plotH - (v / yMax) * plotH;
  const parts: string[] = [];
  for (let i = 0; i <= 5; i++) {
    const ty = y((yMax / 5) * i);
    const tx = x((xMax / 5) * i);
    parts.push(
      `<line x1="${margin.left}" x2="${margin.left + plotW}" y1="${ty}" y2="${ty}" stroke="#e0e0e0"/>`,
      `<text x="${margin.left - 6}" y="${ty + 4}" text-anchor="end" font-size="11" ${font}>${label((yMax / 5) * i)}</text>`,
      `<text x="${tx}" y="${margin.top + plotH + 16}" text-anchor="middle" font-size="11" ${font}>${label((xMax / 5) * i)}</text>`,
    );
  }
  chart.series.forEach((series, s) => {
    const color = palette[s % palette.length] ?? '#333';
    const path = series.points
      .map(([px, py], i) => `${i === 0 ? 'M' : 'L'}${x(px).toFixed(1)},${y(py).toFixed(1)}`)
      .join(' ');
    parts.push(`<path d="${path}" fill="none" stroke="${color}" stroke-width="2"/>`);
  });
  parts.push(
    `<text x="${margin.left + plotW / 2}" y="${margin.top + plotH + 36}" text-anchor="middle" font-size="12" ${font}>${escape(chart.xLabel)}</text>`,
  );
  return frame(
    chart.title,
    chart.yLabel,
    width,
    height,
    margin,
    plotH,
    parts,
    legend(
      chart.series.map((s) => s.name),
      width,
      height,
    ),
  );
}

function legend(names: readonly string[], width: number, height: number): string {
  const itemW = Math.min(240, (width - 40) / Math.max(1, names.length));
  return names
    .map((name, i) => {
      const lx = 20 + i * itemW;
      const ly = height - 18;
      return `<rect x="${lx}" y="${ly - 10}" width="12" height="12" fill="${palette[i % palette.length] ?? '#333'}"/><text x="${lx + 16}" y="${ly}" font-size="11" ${font}>${escape(name)}</text>`;
    })
    .join('');
}

function frame(
  title: string,
  yLabel: string,
  width: number,
  height: number,
  margin: { top: number; left: number },
  plotH: number,
  parts: readonly string[],
  legendSvg: string,
): string {
  const midY = margin.top + plotH / 2;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${width / 2}" y="24" text-anchor="middle" font-size="15" font-weight="bold" ${font}>${escape(title)}</text>`,
    `<text x="18" y="${midY}" text-anchor="middle" font-size="12" transform="rotate(-90 18 ${midY})" ${font}>${escape(yLabel)}</text>`,
    ...parts,
    legendSvg,
    `</svg>`,
    '',
  ].join('\n');
}
