// The memory curves of a soak run as one SVG picture: heap after GC and RSS over time, one line per
// process (the product's; the harness dashed, for comparison). A few lines of SVG, no dependency.

export interface Curve {
  name: string;
  /** Minutes since the start, value in MB. */
  points: ReadonlyArray<{ t: number; v: number }>;
  dashed?: boolean;
}

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#7f7f7f', '#ff7f0e'];
const W = 900;
const PANEL_H = 260;
const LEFT = 60;
const RIGHT = 170;
const TOP = 40;
const GAP = 60;

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** A round step for about five ticks over `span`. */
function step(span: number): number {
  const raw = span / 5;
  const p = 10 ** Math.floor(Math.log10(raw || 1));
  return [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw) ?? p * 10;
}

function panel(title: string, curves: readonly Curve[], y0: number, tMax: number): string {
  const values = curves.flatMap((c) => c.points.map((p) => p.v));
  const vMax = Math.max(1, ...values) * 1.05;
  const plotW = W - LEFT - RIGHT;
  const x = (t: number): number => LEFT + (t / (tMax || 1)) * plotW;
  const y = (v: number): number => y0 + PANEL_H - (v / vMax) * PANEL_H;
  const out: string[] = [
    `<text x="${LEFT}" y="${y0 - 10}" font-size="14" font-weight="bold">${esc(title)}</text>`,
    `<rect x="${LEFT}" y="${y0}" width="${plotW}" height="${PANEL_H}" fill="none" stroke="#999"/>`,
  ];
  const vs = step(vMax);
  for (let v = 0; v <= vMax; v += vs)
    out.push(
      `<line x1="${LEFT}" x2="${LEFT + plotW}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#eee"/>`,
      `<text x="${LEFT - 6}" y="${(y(v) + 4).toFixed(1)}" font-size="11" text-anchor="end">${v}</text>`,
    );
  const ts = step(tMax);
  for (let t = 0; t <= tMax; t += ts)
    out.push(
      `<text x="${x(t).toFixed(1)}" y="${y0 + PANEL_H + 15}" font-size="11" text-anchor="middle">${t}</text>`,
    );
  out.push(
    `<text x="${LEFT + plotW / 2}" y="${y0 + PANEL_H + 32}" font-size="11" text-anchor="middle">minutes</text>`,
    `<text x="14" y="${y0 + PANEL_H / 2}" font-size="11" transform="rotate(-90 14 ${y0 + PANEL_H / 2})" text-anchor="middle">MB</text>`,
  );
  curves.forEach((c, i) => {
    const color = COLORS[i % COLORS.length];
    const d = c.points.map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(' ');
    out.push(
      `<polyline fill="none" stroke="${color}" stroke-width="1.5"${c.dashed ? ' stroke-dasharray="5,3"' : ''} points="${d}"/>`,
      `<line x1="${W - RIGHT + 12}" x2="${W - RIGHT + 32}" y1="${y0 + 12 + i * 18}" y2="${y0 + 12 + i * 18}" stroke="${color}" stroke-width="2"${c.dashed ? ' stroke-dasharray="5,3"' : ''}/>`,
      `<text x="${W - RIGHT + 38}" y="${y0 + 16 + i * 18}" font-size="12">${esc(c.name)}</text>`,
    );
  });
  return out.join('\n');
}

/** The picture: a title line, then one panel per entry of `panels`. */
export function memorySvg(
  title: string,
  panels: ReadonlyArray<{ title: string; curves: readonly Curve[] }>,
): string {
  const tMax = Math.max(0, ...panels.flatMap((p) => p.curves.flatMap((c) => c.points.map((q) => q.t))));
  const h = TOP + panels.length * (PANEL_H + GAP + 20);
  const body = panels.map((p, i) => panel(p.title, p.curves, TOP + 30 + i * (PANEL_H + GAP + 20), tMax));
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${h}" viewBox="0 0 ${W} ${h}" font-family="sans-serif">`,
    `<title>${esc(title)}</title>`,
    `<rect width="${W}" height="${h}" fill="white"/>`,
    `<text x="${LEFT}" y="24" font-size="15">${esc(title)}</text>`,
    ...body,
    '</svg>',
    '',
  ].join('\n');
}
