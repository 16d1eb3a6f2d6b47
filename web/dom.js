// dom.js: building the page without HTML strings.
//
// Every value the API returns (artifact sources, host names, tensor names)
// is user-controlled, so nothing here parses markup: elements are made with
// createElement, text goes in as text nodes, attributes through
// setAttribute, and event handlers and inline styles cannot be set at all
// (the Content-Security-Policy would refuse an inline style anyway).

const SVG_NS = 'http://www.w3.org/2000/svg';

function build(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (/^on/i.test(k) || k === 'style' || k === 'srcdoc' || k === 'innerHTML') {
      throw new Error(`dom: refusing attribute ${k}`);
    }
    el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

// append(el, children): strings and numbers become text nodes; arrays are flattened; null is skipped.
export function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
  return el;
}

// h('td', {class: 'x'}, 'text', child...): an HTML element.
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

// s('rect', {x: 1}, child...): an SVG element.
export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

// A number with at most `digits` decimals, or a dash.
export function num(x, digits = 3) {
  if (typeof x !== 'number' || !Number.isFinite(x)) return '–';
  return String(Number(x.toFixed(digits)));
}

export function bytes(n) {
  if (typeof n !== 'number' || !Number.isFinite(n)) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

export function seconds(t) {
  if (typeof t !== 'number' || !Number.isFinite(t) || t < 0) return '–';
  if (t < 90) return `${Math.round(t)} s`;
  if (t < 5400) return `${Math.round(t / 60)} min`;
  return `${(t / 3600).toFixed(1)} h`;
}

// A table with a caption, one header row (th scope=col) and rows of cells;
// a cell is a node, a string, or {th: true, ...} for a row header.
export function table(caption, headers, rows, attrs = {}) {
  const head = h('tr', {}, headers.map((x) => h('th', { scope: 'col' }, x)));
  const body = rows.map((r) => (r instanceof Node ? r : h('tr', {}, r)));
  return h('table', attrs, h('caption', {}, caption), h('thead', {}, head), h('tbody', {}, body));
}

// A status word with its colour class: the word is always written.
export function tag(text, kind) {
  return h('span', { class: `tag tag-${kind}` }, text);
}

// The colour class of an outcome word of the runtime matrix or a severity.
export function kindOf(word) {
  switch (word) {
    case 'ok': case 'info': case 'healthy': case 'succeeded': case 'absolute': case 'delta':
      return 'ok';
    case 'dropped': case 'absent': case 'warning': case 'queued': case 'running': case 'cancelled':
    case 'healed': case 'raw': case 'degraded':
      return 'warn';
    case 'double_shifted': case 'broken': case 'refused': case 'error': case 'failed': case 'inverted':
    case 'mixed': case 'unhealthy': case 'missing_shift':
      return 'bad';
    default:
      return 'plain';
  }
}
