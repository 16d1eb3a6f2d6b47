// charts.js: the two charts, as hand-written SVG (no library, nothing to
// bundle).  Colours come from classes in app.css; every mark carries a
// <title> and data-* attributes with its figures, and each chart is paired
// with a table of the same numbers by its caller.

import { s, num } from './dom.js';

const W = 560;
const H = 200;
const M = { l: 44, r: 44, t: 24, b: 34 };

function scale(d0, d1, r0, r1) {
  const k = d1 === d0 ? 0 : (r1 - r0) / (d1 - d0);
  return (v) => r0 + (v - d0) * k;
}

function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function axisX(x, y0, ticks, label) {
  const g = s('g', { class: 'axis' });
  g.appendChild(s('line', { x1: M.l, x2: W - M.r, y1: y0, y2: y0 }));
  for (const t of ticks) {
    g.appendChild(s('line', { x1: x(t.v), x2: x(t.v), y1: y0, y2: y0 + 4 }));
    g.appendChild(s('text', { x: x(t.v), y: y0 + 15, 'text-anchor': 'middle' }, t.label));
  }
  g.appendChild(s('text', { x: (M.l + W - M.r) / 2, y: H - 3, 'text-anchor': 'middle', class: 'axis-label' }, label));
  return g;
}

function axisY(y, x0, max, label, right) {
  const g = s('g', { class: 'axis' });
  g.appendChild(s('line', { x1: x0, x2: x0, y1: M.t, y2: H - M.b }));
  for (let i = 0; i <= 4; i++) {
    const v = (max * i) / 4;
    g.appendChild(s('text', { x: right ? x0 + 5 : x0 - 5, y: y(v) + 4, 'text-anchor': right ? 'start' : 'end' }, num(v, 2)));
  }
  g.appendChild(s('text', { x: right ? W - 4 : 4, y: M.t - 9, 'text-anchor': right ? 'end' : 'start', class: 'axis-label' }, label));
  return g;
}

// A histogram of q-norm values.  bars: [{lo, hi, count}] (hi null: up to xmax);
// band: [lo, hi] shaded as healthy; danger: values above it are the double-shift zone.
export function histogram({ title, bars, band, danger, xmax = 4, unit = 'host reports' }) {
  const x = scale(0, xmax, M.l, W - M.r);
  const top = niceMax(Math.max(1, ...bars.map((b) => b.count)));
  const y = scale(0, top, H - M.b, M.t);
  const id = `h${Math.random().toString(36).slice(2)}`;
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart histogram', role: 'img', 'aria-labelledby': `${id}-t` },
    s('title', { id: `${id}-t` }, title));
  if (danger !== undefined && danger !== null) {
    svg.appendChild(s('rect', { class: 'zone-danger', x: x(danger), y: M.t, width: x(xmax) - x(danger), height: H - M.b - M.t },
      s('title', {}, `double-shift zone: q-norm above ${danger}`)));
    svg.appendChild(s('text', { class: 'zone-label zone-label-danger', x: x(danger) + 4, y: M.t + 12 }, `double shift > ${danger}`));
  }
  if (band) {
    svg.appendChild(s('rect', { class: 'zone-band', x: x(band[0]), y: M.t, width: Math.max(2, x(band[1]) - x(band[0])), height: H - M.b - M.t },
      s('title', {}, `healthy band ${band[0]}–${band[1]}`)));
    svg.appendChild(s('text', { class: 'zone-label zone-label-band', x: x(band[0]) - 4, y: M.t + 12, 'text-anchor': 'end' }, `healthy ${band[0]}–${band[1]}`));
  }
  for (const b of bars) {
    if (!b.count) continue;
    const hi = b.hi === null || b.hi === undefined ? xmax : Math.min(b.hi, xmax);
    const lo = Math.max(0, Math.min(b.lo, xmax));
    const inDanger = danger !== undefined && danger !== null && lo >= danger - 1e-9;
    const inBand = band && lo >= band[0] - 0.05 && hi <= band[1] + 0.05 && !inDanger;
    const cls = inDanger ? 'bar bar-danger' : inBand ? 'bar bar-band' : 'bar';
    const range = b.hi === null || b.hi === undefined ? `${num(b.lo, 2)} and above` : `${num(b.lo, 2)}–${num(b.hi, 2)}`;
    svg.appendChild(s('rect', {
      class: cls, x: x(lo) + 0.5, y: y(b.count), width: Math.max(1.5, x(hi) - x(lo) - 1), height: y(0) - y(b.count),
      'data-lo': b.lo, 'data-hi': b.hi === null || b.hi === undefined ? '' : b.hi, 'data-count': b.count,
    }, s('title', {}, `q-norm ${range}: ${b.count} ${unit}${inDanger ? ' (double-shifted)' : ''}`)));
    svg.appendChild(s('text', { class: 'bar-count', x: (x(lo) + x(hi)) / 2, y: y(b.count) - 3, 'text-anchor': 'middle' }, String(b.count)));
  }
  const ticks = [];
  for (let v = 0; v <= xmax + 1e-9; v += 0.5) ticks.push({ v, label: num(v, 1) });
  svg.appendChild(axisX(x, H - M.b, ticks, 'trunk probe q-norm (layers.N.self_attn.q_norm mean)'));
  svg.appendChild(axisY(y, M.l, top, unit, false));
  return svg;
}

// The verification chart: tok/s against depth (left axis) with the AR
// baseline (the depth-0 row), and acceptance per position as bars (right
// axis, 0 to 1) at each depth.
export function verificationChart({ title, rows, verdict }) {
  const sorted = [...rows].filter((r) => typeof r.depth === 'number').sort((a, b) => a.depth - b.depth);
  const maxDepth = Math.max(1, ...sorted.map((r) => r.depth));
  const x = scale(-0.5, maxDepth + 0.5, M.l, W - M.r);
  const topTok = niceMax(Math.max(1, ...sorted.map((r) => (typeof r.tok_s === 'number' ? r.tok_s : 0))) * 1.1);
  const y = scale(0, topTok, H - M.b, M.t);
  const ya = scale(0, 1, H - M.b, M.t);
  const id = `v${Math.random().toString(36).slice(2)}`;
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart verification', role: 'img', 'aria-labelledby': `${id}-t` },
    s('title', { id: `${id}-t` }, title));
  // acceptance bars first, under the line; one slot per position, the same width at every depth
  const positions = Math.max(1, ...sorted.map((r) => (Array.isArray(r.acceptance) ? r.acceptance.length : 0)));
  const slot = 0.6 / positions;
  for (const r of sorted) {
    const acc = Array.isArray(r.acceptance) ? r.acceptance : [];
    acc.forEach((a, p) => {
      if (typeof a !== 'number') return;
      const x0 = x(r.depth - 0.3 + p * slot);
      const x1 = x(r.depth - 0.3 + (p + 1) * slot);
      svg.appendChild(s('rect', {
        class: `acc acc-${Math.min(p, 3)}`, x: x0 + 0.5, y: ya(a), width: Math.max(1, x1 - x0 - 1), height: Math.max(0.5, ya(0) - ya(a)),
        'data-depth': r.depth, 'data-pos': p + 1, 'data-value': a,
      }, s('title', {}, `depth ${r.depth}, position ${p + 1}: acceptance ${num(a, 3)}`)));
    });
  }
  const ar = sorted.find((r) => r.depth === 0 && typeof r.tok_s === 'number');
  if (ar) {
    svg.appendChild(s('line', { class: 'ar-line', x1: M.l, x2: W - M.r, y1: y(ar.tok_s), y2: y(ar.tok_s), 'data-tok-s': ar.tok_s },
      s('title', {}, `AR baseline ${num(ar.tok_s, 2)} tok/s`)));
    svg.appendChild(s('text', { class: 'ar-label', x: W - M.r - 4, y: y(ar.tok_s) - 4, 'text-anchor': 'end' }, `AR ${num(ar.tok_s, 2)} tok/s`));
  }
  const pts = sorted.filter((r) => typeof r.tok_s === 'number');
  if (pts.length > 1) {
    svg.appendChild(s('polyline', { class: 'tok-line', points: pts.map((r) => `${x(r.depth)},${y(r.tok_s)}`).join(' ') }));
  }
  for (const r of pts) {
    svg.appendChild(s('circle', { class: 'tok-pt', cx: x(r.depth), cy: y(r.tok_s), r: 3.5, 'data-depth': r.depth, 'data-tok-s': r.tok_s },
      s('title', {}, `depth ${r.depth}: ${num(r.tok_s, 2)} tok/s`)));
    svg.appendChild(s('text', { class: 'tok-label', x: x(r.depth) + 5, y: y(r.tok_s) - 6 }, num(r.tok_s, 2)));
  }
  const ticks = [];
  for (let d = 0; d <= maxDepth; d++) ticks.push({ v: d, label: d === 0 ? '0 (AR)' : String(d) });
  svg.appendChild(axisX(x, H - M.b, ticks, 'MTP depth'));
  svg.appendChild(axisY(y, M.l, topTok, 'tok/s', false));
  svg.appendChild(axisY(ya, W - M.r, 1, 'acceptance', true));
  if (verdict) {
    svg.appendChild(s('text', { class: `chart-verdict chart-verdict-${verdict.kind}`, x: M.l + 6, y: M.t + 12 }, `verdict: ${verdict.code}`));
  }
  return svg;
}
