// fleet.js: the fleet page: what is broken, where, and why.
//
// Reads GET /v1/fleet/health?unhealthy_limit=500 (artifacts, unhealthy[] with
// hosts, warnings, verdict_matrix, probe_after_load, probe_qnorm; next_cursor
// when the server has more; the default page holds 50; since schema
// forged.fleet_health.v2 each family's band, hosts[] with what they observed
// and the runtime as they named it) and GET
// /v1/artifacts/{id} of the served unhealthy
// artifacts, for the runtime rows and verdict details that say why.

import { h, clear, table, tag, kindOf, num } from './dom.js';
import { get } from './api.js';
import { histogram } from './charts.js';

const DETAILS_MAX = 20; // served unhealthy artifacts whose documents are fetched for "why"

function arr(x) {
  return Array.isArray(x) ? x : [];
}

function obj(x) {
  return x && typeof x === 'object' && !Array.isArray(x) ? x : {};
}

function artifactLink(id, text) {
  return h('a', { href: `#/artifact/${encodeURIComponent(id)}` }, text);
}

// The filters of the page, from and to the location's query (#/fleet?family=...).
function readFilters(params) {
  return {
    family: params.get('family') || '',
    runtime: params.get('runtime') || '',
    verdict: params.get('verdict') || '',
    host: params.get('host') || '',
  };
}

function hostMatches(f, hst) {
  if (f.runtime && hst.runtime !== f.runtime) return false;
  if (f.host && !String(hst.host || '').toLowerCase().includes(f.host.toLowerCase())) return false;
  return true;
}

// The unhealthy artifacts passing the filters, each with only its matching hosts.
function filterUnhealthy(list, f) {
  const out = [];
  for (const u of list) {
    if (f.family && u.family !== f.family) continue;
    if (f.verdict && !arr(u.verdicts).includes(f.verdict)) continue;
    const hosts = arr(u.hosts).filter((x) => hostMatches(f, x));
    if ((f.runtime || f.host) && hosts.length === 0) continue;
    out.push({ ...u, hosts });
  }
  return out;
}

function select(id, label, value, options, onChange) {
  const sel = h('select', { id, name: id },
    h('option', { value: '' }, 'any'),
    options.map((o) => h('option', { value: o, selected: o === value }, o)));
  sel.addEventListener('change', () => onChange(sel.value));
  return h('div', { class: 'filter' }, h('label', { for: id }, label), sel);
}

function filterBar(health, f, setFilter) {
  const families = new Set(Object.keys(obj(obj(health.artifacts).by_family)));
  arr(health.verdict_matrix).forEach((r) => families.add(r.family));
  Object.keys(obj(obj(health.probe_after_load).by_family)).forEach((k) => families.add(k));
  const runtimes = new Set();
  arr(health.unhealthy).forEach((u) => arr(u.hosts).forEach((x) => runtimes.add(x.runtime)));
  arr(health.hosts).forEach((x) => runtimes.add(x.runtime));
  const verdicts = new Set(Object.keys(obj(obj(health.artifacts).by_verdict)));
  arr(health.unhealthy).forEach((u) => arr(u.verdicts).forEach((c) => verdicts.add(c)));
  const hostInput = h('input', { id: 'f-host', name: 'f-host', type: 'search', value: f.host, placeholder: 'part of a host name', autocomplete: 'off' });
  hostInput.addEventListener('change', () => setFilter('host', hostInput.value.trim()));
  const clearBtn = h('button', { type: 'button', id: 'f-clear' }, 'Clear filters');
  clearBtn.addEventListener('click', () => setFilter(null));
  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter the fleet' },
    select('f-family', 'Family', f.family, [...families].filter(Boolean).sort(), (v) => setFilter('family', v)),
    select('f-runtime', 'Runtime', f.runtime, [...runtimes].filter(Boolean).sort(), (v) => setFilter('runtime', v)),
    select('f-verdict', 'Verdict', f.verdict, [...verdicts].filter(Boolean).sort(), (v) => setFilter('verdict', v)),
    h('div', { class: 'filter' }, h('label', { for: 'f-host' }, 'Host'), hostInput),
    clearBtn);
  form.addEventListener('submit', (e) => { e.preventDefault(); setFilter('host', hostInput.value.trim()); });
  return form;
}

// Severity of each verdict code, from what the documents say.
function severities(health, details) {
  const sev = new Map();
  arr(health.verdict_matrix).forEach((r) => sev.set(r.code, r.severity));
  for (const d of details.values()) {
    arr(d.verdicts).forEach((v) => v.code && v.severity && sev.set(v.code, v.severity));
  }
  return sev;
}

function verdictTags(codes, sev) {
  return arr(codes).map((c) => {
    const s = sev.get(c);
    return [tag(s ? `${c} (${s})` : c, kindOf(s || 'plain')), ' '];
  });
}

// What a host's runtime loads, from the artifact's inspect report.
function runtimeRow(detail, runtime) {
  return arr(obj(obj(detail).report).runtimes).find((r) => r.runtime === runtime) || null;
}

function loadCell(detail, runtime) {
  if (!detail) return h('td', {}, 'unknown: the artifact document could not be read');
  const r = runtimeRow(detail, runtime);
  if (!r) return h('td', {}, 'not inspected for this runtime');
  return h('td', { class: 'load' },
    'trunk ', tag(String(r.trunk), kindOf(r.trunk)), ', head ', tag(String(r.head), kindOf(r.head)),
    ', outcome ', tag(String(r.outcome), kindOf(r.outcome)),
    typeof r.trunk_probe_after === 'number' ? ` (probe after load ${num(r.trunk_probe_after, 4)})` : '');
}

function observedText(o) {
  const e = Object.entries(obj(o));
  return e.length ? e.map(([k, v]) => `${k} ${typeof v === 'object' ? JSON.stringify(v) : v}`).join(', ') : '';
}

// The runtime row, and the version string the host named it by when that differs.
function runtimeText(x) {
  return x.runtime_reported && x.runtime_reported !== x.runtime ? `${x.runtime} (reported as ${x.runtime_reported})` : String(x.runtime ?? '');
}

function servedCard(u, detail, sev) {
  const why = arr(obj(obj(detail).report).verdicts).filter((v) => v.severity === 'error' || v.severity === 'warning');
  const verif = arr(obj(detail).verifications);
  const last = verif.length ? verif[verif.length - 1] : null;
  const rows = u.hosts.map((x) => h('tr', { 'data-host': x.host },
    h('th', { scope: 'row', class: 'host' }, String(x.host)),
    h('td', {}, runtimeText(x)),
    loadCell(detail, x.runtime),
    h('td', {}, observedText(x.observed)),
    h('td', {}, String(x.reported_at || ''))));
  return h('article', { class: 'served-unhealthy', 'data-artifact': u.artifact_id },
    h('h3', {}, tag('unhealthy', 'bad'), ' ', artifactLink(u.artifact_id, String(u.source)),
      ` (artifact ${u.artifact_id}, ${u.family}) served by ${u.hosts.length} host${u.hosts.length === 1 ? '' : 's'}`),
    h('p', {}, 'Verdicts: ', verdictTags(u.verdicts, sev)),
    table(`Hosts serving artifact ${u.artifact_id}`, ['host', 'runtime', 'what the runtime loads', 'observed', 'reported'], rows,
      { class: 'hosts' }),
    why.length ? h('ul', { class: 'why' }, why.map((v) => h('li', {}, tag(String(v.code), kindOf(v.severity)), ' ', String(v.detail || '')))) : null,
    last && last.verdict === 'mtp_acceptance_collapsed'
      ? h('p', { class: 'why' }, tag('mtp_acceptance_collapsed', 'bad'), ` latest verification (${last.created_at || ''})`) : null);
}

function matrixSection(health, f) {
  const m = arr(health.verdict_matrix);
  if (!health.verdict_matrix) {
    // An older server: counts by verdict and by family only.
    const byV = Object.entries(obj(obj(health.artifacts).by_verdict)).filter(([c]) => !f.verdict || c === f.verdict);
    const byF = Object.entries(obj(obj(health.artifacts).by_family)).filter(([c]) => !f.family || c === f.family);
    return h('section', { id: 'verdict-counts' }, h('h2', {}, 'Verdict counts'),
      table('Artifacts by verdict', ['verdict', 'artifacts'], byV.map(([c, n]) => [h('th', { scope: 'row' }, c), h('td', { class: 'n' }, String(n))])),
      table('Artifacts by family', ['family', 'artifacts'], byF.map(([c, n]) => [h('th', { scope: 'row' }, c), h('td', { class: 'n' }, String(n))])));
  }
  const fams = new Map();
  for (const r of m) {
    if (f.family && r.family !== f.family) continue;
    if (f.verdict && r.code !== f.verdict) continue;
    if (!fams.has(r.family)) fams.set(r.family, { error: [], warning: [], info: [] });
    const cell = fams.get(r.family)[r.severity] || (fams.get(r.family)[r.severity] = []);
    cell.push(r);
  }
  const sevs = ['error', 'warning', 'info'];
  const rows = [...fams.entries()].sort().map(([fam, c]) => h('tr', { 'data-family': fam },
    h('th', { scope: 'row' }, fam),
    sevs.map((sv) => {
      const list = c[sv] || [];
      const n = list.reduce((a, r) => a + r.count, 0);
      return h('td', { class: n ? `sev sev-${sv}` : 'sev', 'data-severity': sv, 'data-count': n },
        n ? [h('strong', {}, `${n} ${sv}`), h('br'), list.map((r) => [h('span', { class: 'code' }, `${r.code} ${r.count}`), ' '])] : '0');
    })));
  return h('section', { id: 'verdict-counts' }, h('h2', {}, 'Verdict counts by family and severity'),
    rows.length ? table('Verdict rows by family (rows) and severity (columns), with their codes', ['family', 'error', 'warning', 'info'], rows, { class: 'matrix' })
      : h('p', {}, 'No verdicts match.'));
}

function histogramSection(health, f) {
  const d = obj(health.probe_after_load);
  const sec = h('section', { id: 'probe-histograms' }, h('h2', {}, 'Trunk probe q-norm after load, per family'));
  if (health.probe_after_load && typeof d.bin_width === 'number') {
    const lo = typeof d.lo === 'number' ? d.lo : 0;
    const band = Array.isArray(d.healthy_band) ? d.healthy_band : null;
    const danger = typeof d.double_shift_above === 'number' ? d.double_shift_above : 2.4;
    const xmax = lo + d.bin_width * (typeof d.bins === 'number' ? d.bins : 0);
    sec.appendChild(h('p', { class: 'note' },
      `What each serving host loads: its runtime's trunk probe after load, ${d.reports ?? 0} host report(s) counted`,
      d.not_counted ? `, ${d.not_counted} without a probe for their runtime` : '', '. Shaded: the healthy band; red: the double-shift zone.'));
    const fams = Object.entries(obj(d.by_family)).filter(([fam]) => !f.family || fam === f.family).sort();
    const pq = obj(health.probe_qnorm);
    if (pq.basis === 'after_load') {
      sec.appendChild(h('p', { class: 'summary', id: 'probe-outside' },
        pq.outside_band ? tag(`${pq.outside_band} served artifact(s) outside their family's healthy band`, 'warn') : tag('every served artifact of a banded family is in its healthy band', 'ok'),
        pq.outside_plausible ? [' ', tag(`${pq.outside_plausible} outside the plausible band`, 'bad')] : ''));
    }
    if (!fams.length) sec.appendChild(h('p', {}, 'No host reports with a probe yet.'));
    for (const [fam, counts] of fams) {
      const bars = arr(counts).map((c, i) => ({ lo: lo + i * d.bin_width, hi: i === arr(counts).length - 1 ? null : lo + (i + 1) * d.bin_width, count: c }));
      const total = bars.reduce((a, b) => a + (b.count || 0), 0);
      const shifted = bars.filter((b) => b.lo >= danger - 1e-9).reduce((a, b) => a + (b.count || 0), 0);
      // Each family's own band (null: none published, so no alarm); an older server has one band for all.
      const bands = d.bands && typeof d.bands === 'object' ? d.bands : null;
      const own = bands ? bands[fam] : undefined;
      const famBand = bands ? (own && Array.isArray(own.healthy) ? own.healthy : null) : band;
      const famDanger = bands ? (own && Array.isArray(own.plausible) ? own.plausible[1] : null) : danger;
      sec.appendChild(h('figure', { class: 'histogram-fig', 'data-family': fam },
        histogram({ title: `${fam}: trunk probe q-norm after load`, bars, band: famBand, danger: famDanger ?? undefined, xmax }),
        h('figcaption', {}, h('strong', {}, fam), `: ${total} host report(s)`,
          bands && own === null ? ', no published band for this family: shown without an alarm'
            : shifted ? [', ', tag(`${shifted} double_shifted`, 'bad'), ` (q-norm > ${danger})`] : ', none double-shifted')));
    }
    return sec;
  }
  // An older server: the stored (before load) probe of every artifact, all families together.
  const q = obj(health.probe_qnorm);
  const bars = arr(q.buckets).map((b) => ({ lo: arr(b.range)[0] ?? 0, hi: arr(b.range)[1] ?? null, count: b.count || 0 }));
  sec.appendChild(h('p', { class: 'note' }, 'This server does not report after-load probes per family; shown: the stored trunk probe of every artifact (before load), all families.'));
  sec.appendChild(h('figure', { class: 'histogram-fig', 'data-family': '' },
    histogram({ title: 'stored trunk probe q-norm, all artifacts', bars, band: Array.isArray(q.healthy_band) ? q.healthy_band : null, danger: 2.4, unit: 'artifacts' }),
    h('figcaption', {}, `${q.outside_band ?? 0} artifact(s) outside the healthy band`)));
  return sec;
}

function unhealthyTable(list, total, sev) {
  const rows = list.map((u) => h('tr', { 'data-artifact': u.artifact_id },
    h('th', { scope: 'row' }, artifactLink(u.artifact_id, String(u.source))),
    h('td', {}, String(u.family)),
    h('td', {}, verdictTags(u.verdicts, sev)),
    h('td', {}, u.hosts.length ? u.hosts.map((x) => h('div', { class: 'host' }, `${x.host} (${x.runtime})`)) : 'not served'),
    h('td', { class: 'mono' }, u.digest ? String(u.digest).slice(0, 23) : u.fingerprint ? String(u.fingerprint).slice(0, 16) : '–')));
  return h('section', { id: 'unhealthy' }, h('h2', {}, 'Unhealthy artifacts'),
    h('p', {}, `${list.length} shown`, typeof total === 'number' ? ` of ${total} unhealthy` : ''),
    table('Artifacts with an error verdict or a collapsed verification', ['artifact', 'family', 'verdicts', 'hosts (runtime)', 'digest'], rows));
}

function hostsSection(health, f) {
  if (!Array.isArray(health.hosts)) return null;
  const rows = health.hosts.filter((x) => hostMatches(f, x)).map((x) => h('tr', {},
    h('th', { scope: 'row', class: 'host' }, String(x.host)),
    h('td', {}, runtimeText(x)),
    h('td', {}, x.artifact_id ? artifactLink(x.artifact_id, String(x.artifact_id)) : '–'),
    h('td', {}, typeof x.probe_after === 'number'
      ? [num(x.probe_after, 4), x.probe_bucket ? [' ', tag(String(x.probe_bucket), x.probe_bucket === 'healthy' ? 'ok' : (x.probe_bucket === 'below' || x.probe_bucket === 'above') ? 'bad' : 'warn')] : '']
      : '–'),
    h('td', {}, observedText(x.observed)),
    h('td', {}, String(x.reported_at ?? ''))));
  return h('section', { id: 'hosts' }, h('h2', {}, 'Hosts'),
    table('Every host report', ['host', 'runtime', 'artifact', 'probe after load', 'observed', 'reported'], rows));
}

export function mount(root, ctx) {
  let health = null;
  const details = new Map();

  function setFilter(key, value) {
    const p = new URLSearchParams(ctx.params);
    if (key === null) ['family', 'runtime', 'verdict', 'host'].forEach((k) => p.delete(k));
    else if (value) p.set(key, value);
    else p.delete(key);
    ctx.setParams(p);
    render();
  }

  function render() {
    if (!health) return;
    const f = readFilters(ctx.params);
    const sev = severities(health, details);
    const all = filterUnhealthy(arr(health.unhealthy), f);
    // The most widely served first: those break the most answers.
    const served = all.filter((u) => u.hosts.length > 0).sort((x, y) => y.hosts.length - x.hosts.length);
    const hostsServing = new Set(served.flatMap((u) => u.hosts.map((x) => x.host)));
    const a = obj(health.artifacts);
    const focus = document.activeElement && document.activeElement.id;
    clear(root);
    root.appendChild(h('h1', {}, 'Fleet'));
    root.appendChild(h('p', { class: 'summary' },
      `${a.total ?? '?'} artifact(s); ${health.unhealthy_total ?? arr(health.unhealthy).length} unhealthy; `,
      served.length ? tag(`${served.length} unhealthy artifact(s) served by ${hostsServing.size} host(s)`, 'bad') : tag('no unhealthy artifact is served', 'ok')));
    root.appendChild(filterBar(health, f, setFilter));
    const warn = arr(health.warnings);
    if (warn.length) {
      root.appendChild(h('section', { id: 'warnings', class: 'warnings', role: 'alert' }, h('h2', {}, 'Warnings'),
        h('ul', {}, warn.map((w) => h('li', { 'data-code': w.code }, tag(String(w.code), 'warn'), ' ', String(w.detail || ''))))));
    }
    root.appendChild(h('section', { id: 'served', class: served.length ? 'alert' : '' },
      h('h2', {}, 'Broken artifacts being served now'),
      served.length ? served.map((u) => servedCard(u, details.get(u.artifact_id), sev))
        : h('p', {}, 'None: no host reports an unhealthy artifact', f.family || f.runtime || f.verdict || f.host ? ' (with these filters)' : '', '.')));
    root.appendChild(matrixSection(health, f));
    root.appendChild(histogramSection(health, f));
    root.appendChild(unhealthyTable(all, health.unhealthy_total, sev));
    const hs = hostsSection(health, f);
    if (hs) root.appendChild(hs);
    if (health.next_cursor !== undefined && health.next_cursor !== null) {
      root.appendChild(h('p', { class: 'note' }, 'The server has more unhealthy artifacts than it listed here.'));
    }
    if (focus) {
      const el = document.getElementById(focus);
      if (el) el.focus();
    }
  }

  async function refresh() {
    const r = await get('/v1/fleet/health?unhealthy_limit=500');
    let changed = r.changed;
    health = r.data;
    const served = arr(health.unhealthy).filter((u) => arr(u.hosts).length > 0).slice(0, DETAILS_MAX);
    const got = await Promise.allSettled(served.map((u) => get(`/v1/artifacts/${encodeURIComponent(u.artifact_id)}`)));
    got.forEach((g, i) => {
      if (g.status === 'fulfilled') {
        if (g.value.changed || !details.has(served[i].artifact_id)) changed = true;
        details.set(served[i].artifact_id, g.value.data);
      }
    });
    if (changed || !root.firstChild) render();
    return changed;
  }

  return { refresh, render };
}
