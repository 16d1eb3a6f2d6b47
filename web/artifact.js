// artifact.js: one artifact: identity, convention decisions, the runtime
// matrix, verdicts with their tensors, the verification history as charts,
// and the fleet hosts serving it.
//
// Reads GET /v1/artifacts/{id} (id, source, path, family, fingerprint, ok,
// created_at, report, provenance, verdicts, verifications with rows,
// fingerprints; digest, head_fingerprint, mtplx_runtime and fleet[] since
// issue 13) and GET /v1/fleet/health for the hosts of an older server
// (unhealthy[].hosts; hosts[] when the server lists every host).

import { h, clear, table, tag, kindOf, num } from './dom.js';
import { get } from './api.js';
import { verificationChart } from './charts.js';

function arr(x) {
  return Array.isArray(x) ? x : [];
}

function obj(x) {
  return x && typeof x === 'object' && !Array.isArray(x) ? x : {};
}

function text(v) {
  if (v === null || v === undefined || v === '') return '–';
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

function dl(pairs) {
  return h('dl', { class: 'facts' }, pairs.filter(Boolean).map(([k, v]) => [h('dt', {}, k), h('dd', {}, v instanceof Node ? v : text(v))]));
}

function yesNo(b) {
  return b === true ? 'yes' : b === false ? 'no' : '–';
}

function identity(a) {
  const p = obj(a.provenance);
  const src = obj(p.source);
  const prints = Object.entries(obj(a.fingerprints));
  const sec = h('section', { id: 'identity' }, h('h2', {}, 'Identity'),
    dl([
      ['artifact', String(a.id)],
      ['source', h('span', { class: 'mono source' }, text(a.source))],
      ['path', h('span', { class: 'mono' }, text(a.path))],
      ['family', text(a.family)],
      ['status', a.ok ? tag('ok: inspects clean', 'ok') : tag('not ok: do not ship', 'bad')],
      a.digest !== undefined ? ['digest (every file)', h('span', { class: 'mono digest' }, text(a.digest))] : null,
      a.head_fingerprint !== undefined ? ['head fingerprint (MTPLX framing)', h('span', { class: 'mono head-fingerprint' }, text(a.head_fingerprint))] : null,
      ['fingerprint (legacy framing)', h('span', { class: 'mono' }, text(a.fingerprint))],
      ['stored', text(a.created_at)],
    ]));
  if (a.provenance) {
    const dec = obj(p.decisions);
    sec.appendChild(h('h3', {}, 'Provenance'));
    sec.appendChild(dl([
      ['schema', text(p.schema)],
      ['forged version', text(p.forged_version)],
      ['forged at', text(p.created_at)],
      ['source', h('span', { class: 'mono' }, text(src.path ?? p.source))],
      ['backbone', h('span', { class: 'mono' }, text(p.backbone))],
      ['target', text(p.target)],
      ['policy', text(p.policy)],
      ['conventions', `${text(dec.source_convention)} → ${text(dec.target_convention)}`],
      ['shifted tensors', arr(dec.shifted_tensors).length ? h('span', { class: 'mono' }, arr(dec.shifted_tensors).join(', ')) : '–'],
      ['removed from backbone', `${arr(p.removed_from_backbone).length} tensor(s)`],
      ['fingerprint', h('span', { class: 'mono' }, text(p.fingerprint))],
    ]));
  } else {
    sec.appendChild(h('p', { class: 'note' }, 'No provenance: an inspected checkpoint, not a forged artifact.'));
  }
  if (prints.length) {
    sec.appendChild(table('File fingerprints (SHA-256)', ['file', 'sha256'],
      prints.map(([f, sha]) => [h('th', { scope: 'row', class: 'mono' }, f), h('td', { class: 'mono' }, text(sha))])));
  }
  return sec;
}

// MTPLX's runtime contract: what forged wrote (restamped by verifications) or read from an MTPLX pack.
function mtplxRuntime(a) {
  const rt = a.mtplx_runtime;
  if (!rt || typeof rt !== 'object') return null;
  const ev = obj(rt.speed_evidence);
  const on = obj(rt.verified_on);
  const unverified = ev.status === 'unverified' || on.status === 'unverified';
  return h('section', { id: 'mtplx-runtime' }, h('h2', {}, 'MTPLX runtime contract (mtplx_runtime.json)'),
    dl([
      ['state', unverified ? tag('unverified: MTPLX runs it as architecture-compatible-but-unverified', 'warn')
        : ev.verdict === 'mtp_depth_wins' ? tag('verified: mtp_depth_wins', 'ok') : tag(`speed verdict ${text(ev.verdict)}`, 'bad')],
      ['mtplx version', text(rt.mtplx_version)],
      ['arch id', text(rt.arch_id)],
      ['mtp depth max', text(rt.mtp_depth_max)],
      ['recommended profile', text(rt.recommended_profile)],
      ['verified on', on.timestamp ? `${text(on.timestamp)}${on.hardware ? `, ${on.hardware}` : ''}` : '–'],
      ['artifact fingerprint', h('span', { class: 'mono' }, text(ev.artifact_fingerprint))],
    ]));
}

function decisions(report) {
  const sets = arr(report.sets);
  return h('section', { id: 'decisions' }, h('h2', {}, 'Convention decisions'),
    sets.length ? table('The convention decided for each tensor set, with its figures', ['set', 'file', 'tensors', 'norms', 'convention', 'qk_max', 'low_min', 'probe tensor', 'probe mean', 'quantized'],
      sets.map((st) => h('tr', { 'data-set': st.name },
        h('th', { scope: 'row' }, text(st.name)),
        h('td', { class: 'mono' }, text(st.file)),
        h('td', { class: 'n' }, text(st.tensors)),
        h('td', { class: 'n' }, text(st.norm_tensors)),
        h('td', {}, tag(text(st.convention), kindOf(st.convention))),
        h('td', { class: 'n' }, num(st.qk_max, 4)),
        h('td', { class: 'n' }, num(st.low_min, 4)),
        h('td', { class: 'mono' }, text(obj(st.probe).tensor)),
        h('td', { class: 'n' }, num(obj(st.probe).mean, 4)),
        h('td', { class: 'n' }, text(st.quantized_tensors)))), { class: 'sets' })
      : h('p', {}, 'The report has no tensor sets.'));
}

function runtimeMatrix(report) {
  const rts = arr(report.runtimes);
  return h('section', { id: 'runtimes' }, h('h2', {}, 'Runtime matrix'),
    rts.length ? table('What each runtime loads: files read, the trunk shift and its reason, trunk and head outcome', ['runtime', 'targeted', 'files read', 'trunk shift (reason)', 'probe after load', 'head shift', 'head keys dropped', 'trunk', 'head', 'outcome'],
      rts.map((r) => h('tr', { 'data-runtime': r.runtime, class: `outcome-${kindOf(r.outcome)}` },
        h('th', { scope: 'row' }, text(r.runtime)),
        h('td', {}, yesNo(r.targeted)),
        h('td', {}, h('details', {}, h('summary', {}, `${arr(r.files).length} file(s)`), h('ul', { class: 'mono' }, arr(r.files).map((f) => h('li', {}, String(f)))))),
        h('td', {}, r.trunk_shift ? tag(`+1 (${text(r.shift_reason)})`, 'warn') : 'none'),
        h('td', { class: 'n' }, num(r.trunk_probe_after, 4)),
        h('td', {}, yesNo(r.head_shift)),
        h('td', { class: 'n' }, text(r.head_keys_dropped)),
        h('td', { class: 'trunk' }, tag(text(r.trunk), kindOf(r.trunk))),
        h('td', { class: 'head' }, tag(text(r.head), kindOf(r.head))),
        h('td', { class: 'outcome' }, tag(text(r.outcome), kindOf(r.outcome))))), { class: 'matrix runtimes' })
      : h('p', {}, 'The report simulates no runtime.'));
}

function verdicts(a) {
  const rv = arr(obj(a.report).verdicts);
  const stored = arr(a.verdicts).filter((v) => v.origin && v.origin !== 'static');
  return h('section', { id: 'verdicts' }, h('h2', {}, 'Verdicts'),
    rv.length ? table('Verdicts of the inspection, with the tensors they name', ['code', 'severity', 'set', 'runtimes', 'tensors', 'detail'],
      rv.map((v) => h('tr', { 'data-code': v.code },
        h('th', { scope: 'row' }, tag(text(v.code), kindOf(v.severity))),
        h('td', {}, text(v.severity)),
        h('td', {}, text(v.set)),
        h('td', {}, arr(v.runtimes).join(', ') || '–'),
        h('td', { class: 'tensors' }, arr(v.tensors).length
          ? [h('ul', { class: 'mono' }, arr(v.tensors).map((t) => h('li', { class: 'tensor' }, String(t)))),
            typeof v.tensor_count === 'number' && v.tensor_count > arr(v.tensors).length ? `… ${v.tensor_count} in all` : '']
          : '–'),
        h('td', {}, text(v.detail)))))
      : h('p', {}, tag('no verdicts', 'ok'), ' The inspection raised nothing.'),
    stored.length ? table('Verdicts from verification', ['code', 'severity', 'origin'],
      stored.map((v) => [h('th', { scope: 'row' }, tag(text(v.code), kindOf(v.severity))), h('td', {}, text(v.severity)), h('td', {}, text(v.origin))])) : null);
}

function verificationBlock(v, i) {
  const res = obj(v.result);
  const rows = arr(v.rows);
  const sev = res.severity || (v.verdict === 'mtp_acceptance_collapsed' ? 'error' : 'info');
  const fig = h('figure', { class: 'verification-fig', 'data-verification': v.id ?? i },
    h('figcaption', {}, h('strong', {}, `Verification ${v.id ?? i + 1}`), ` (${text(v.created_at)}): `,
      tag(text(v.verdict), kindOf(sev)), res.runtime ? ` on ${res.runtime}` : '', res.hardware ? `, ${res.hardware}` : '',
      res.best_depth !== undefined && res.best_depth !== null ? `, best depth ${res.best_depth}` : ''));
  if (!rows.length) {
    fig.appendChild(h('p', { class: 'note' }, 'The rows of this verification are not in the document (an older server): only its verdict is known.'));
    return fig;
  }
  fig.appendChild(verificationChart({ title: `verification ${v.id ?? i + 1}: tok/s and acceptance by depth`, rows, verdict: { code: v.verdict, kind: kindOf(sev) } }));
  const ar = rows.find((r) => r.depth === 0);
  const maxPos = Math.max(0, ...rows.map((r) => arr(r.acceptance).length));
  const heads = ['depth', 'tok/s', 'vs AR'];
  for (let p = 1; p <= maxPos; p++) heads.push(`acceptance ${p}`);
  fig.appendChild(table(`Rows of verification ${v.id ?? i + 1}`, heads,
    [...rows].sort((x, y) => x.depth - y.depth).map((r) => {
      const cells = [h('th', { scope: 'row' }, r.depth === 0 ? '0 (AR)' : text(r.depth)), h('td', { class: 'n' }, num(r.tok_s, 2)),
        h('td', { class: 'n' }, ar && typeof r.tok_s === 'number' && ar.tok_s ? `${num(r.tok_s / ar.tok_s, 3)}×` : '–')];
      for (let p = 0; p < maxPos; p++) cells.push(h('td', { class: 'n' }, num(arr(r.acceptance)[p], 3)));
      return h('tr', { 'data-depth': r.depth }, cells);
    }), { class: 'rows' }));
  return fig;
}

function verificationSection(a) {
  const vs = arr(a.verifications);
  return h('section', { id: 'verifications' }, h('h2', {}, 'Verification history'),
    vs.length ? [...vs].reverse().map((v, i) => verificationBlock(v, vs.length - 1 - i)) : h('p', {}, 'No verification rows were posted for this artifact.'));
}

function observedText(o) {
  const e = Object.entries(obj(o));
  return e.length ? e.map(([k, v]) => `${k} ${typeof v === 'object' ? JSON.stringify(v) : v}`).join(', ') : '–';
}

function hostsSection(a, health) {
  const id = a.id;
  let hosts = null;
  // Since issue 13 the artifact lists its own reports (with what each host observed).
  if (Array.isArray(a.fleet)) hosts = a.fleet;
  else if (health && Array.isArray(health.hosts)) hosts = health.hosts.filter((x) => x.artifact_id === id);
  else if (health) {
    const u = arr(health.unhealthy).find((x) => x.artifact_id === id);
    hosts = u ? arr(u.hosts) : null;
  }
  const sec = h('section', { id: 'fleet-hosts' }, h('h2', {}, 'Fleet hosts serving it'));
  if (hosts && hosts.length) {
    sec.appendChild(table(`Hosts serving artifact ${id}`, ['host', 'runtime', 'loads', 'observed', 'reported'],
      hosts.map((x) => {
        const r = arr(obj(a.report).runtimes).find((y) => y.runtime === x.runtime);
        const named = x.runtime_reported && x.runtime_reported !== x.runtime ? ` (reported as ${x.runtime_reported})` : '';
        return h('tr', { 'data-host': x.host },
          h('th', { scope: 'row', class: 'host' }, String(x.host)),
          h('td', {}, String(x.runtime) + named),
          h('td', {}, r ? [tag(`trunk ${r.trunk}`, kindOf(r.trunk)), ' ', tag(`outcome ${r.outcome}`, kindOf(r.outcome)),
            typeof r.trunk_probe_after === 'number' ? ` probe ${num(r.trunk_probe_after, 4)}` : ''] : 'not inspected for this runtime'),
          h('td', {}, observedText(x.observed)),
          h('td', {}, text(x.reported_at)));
      }), { class: 'hosts' }));
  } else if (hosts) {
    sec.appendChild(h('p', {}, 'No host reports serving this artifact.'));
  } else {
    sec.appendChild(h('p', { class: 'note' }, 'Not known: this server lists hosts for unhealthy artifacts only, and this one is healthy.'));
  }
  return sec;
}

export function mount(root, ctx) {
  const id = ctx.id;
  let art = null;
  let health = null;

  function render() {
    clear(root);
    if (!art) return;
    const report = obj(art.report);
    root.appendChild(h('p', { class: 'crumbs' }, h('a', { href: '#/fleet' }, 'Fleet'), ' › artifact ', String(art.id)));
    root.appendChild(h('h1', {}, 'Artifact ', String(art.id), ': ', h('span', { class: 'source' }, text(art.source))));
    root.appendChild(identity(art));
    const mrt = mtplxRuntime(art);
    if (mrt) root.appendChild(mrt);
    root.appendChild(decisions(report));
    root.appendChild(runtimeMatrix(report));
    root.appendChild(verdicts(art));
    root.appendChild(verificationSection(art));
    root.appendChild(hostsSection(art, health));
  }

  async function refresh() {
    const [a, f] = await Promise.allSettled([get(`/v1/artifacts/${encodeURIComponent(id)}`), get('/v1/fleet/health?unhealthy_limit=500')]);
    if (a.status === 'rejected') throw a.reason;
    let changed = a.value.changed || !art;
    art = a.value.data;
    if (f.status === 'fulfilled') {
      changed = changed || f.value.changed;
      health = f.value.data;
    }
    if (changed) render();
    return changed;
  }

  return { refresh, render };
}
