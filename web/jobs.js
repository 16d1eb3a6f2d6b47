// jobs.js: the job queue: running and queued jobs with live progress
// (bytes, rate, ETA), recent failures with their refusal codes, and cancel
// for write tokens.
//
// Reads GET /v1/jobs?state=running|queued|failed (id, kind, state, stage,
// progress, error, artifact_id, created_at, updated_at; bytes_done,
// bytes_total, eta_s, source and code when the server has them).  Without
// bytes_done/bytes_total the bytes come from a "fetch DONE/TOTAL" stage;
// without eta_s the rate and ETA are measured here between polls.

import { h, clear, table, tag, kindOf, num, bytes, seconds } from './dom.js';
import { get, del } from './api.js';

const FAILED_PAGES_MAX = 10; // pages of 500 read to find the newest failures
const FAILED_SHOWN = 20;
const CODE_RE = /\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b/g;

function arr(x) {
  return Array.isArray(x) ? x : [];
}

// Bytes done and total of a job, from its fields or its stage; null when unknown.
export function jobBytes(job) {
  if (typeof job.bytes_done === 'number' && typeof job.bytes_total === 'number') {
    return { done: job.bytes_done, total: job.bytes_total };
  }
  const m = /^fetch (\d+)\/(\d+)$/.exec(job.stage || '');
  return m ? { done: Number(m[1]), total: Number(m[2]) } : null;
}

function stageName(job) {
  if (typeof job.stage !== 'string' || !job.stage) return job.state === 'queued' ? 'waiting for a worker' : '–';
  return job.stage.startsWith('fetch ') ? 'fetch' : job.stage;
}

// The refusal codes of a failed job: its code field, else the verdict-like words of its error.
function refusalCodes(job) {
  const out = new Set();
  for (const k of ['code', 'refusal', 'error_code']) if (typeof job[k] === 'string' && job[k]) out.add(job[k]);
  for (const k of ['codes', 'refusals']) arr(job[k]).forEach((c) => typeof c === 'string' && out.add(c));
  if (!out.size && typeof job.error === 'string') (job.error.match(CODE_RE) || []).forEach((c) => out.add(c));
  return [...out];
}

async function listAll(path, pages) {
  const items = [];
  let cursor = null;
  for (let i = 0; i < pages; i++) {
    const r = await get(cursor ? `${path}&cursor=${encodeURIComponent(cursor)}` : path);
    items.push(...arr(r.data.items));
    cursor = r.data.next_cursor;
    if (cursor === null || cursor === undefined) return { items, more: false };
  }
  return { items, more: true };
}

export function mount(root, ctx) {
  let running = [];
  let queued = [];
  let failed = [];
  let moreQueued = false;
  const samples = new Map(); // job id -> [{t, done, progress}]
  let message = '';

  function sample(job) {
    const b = jobBytes(job);
    const list = samples.get(job.id) || [];
    const now = Date.now();
    const last = list[list.length - 1];
    const done = b ? b.done : null;
    if (!last || last.done !== done || last.progress !== job.progress) list.push({ t: now, done, progress: job.progress, stage: stageName(job) });
    while (list.length > 20 || (list.length > 2 && now - list[0].t > 30000)) list.shift();
    samples.set(job.id, list);
  }

  // Bytes per second over the samples of the same stage, or null.
  function rate(job) {
    const list = (samples.get(job.id) || []).filter((x) => x.done !== null && x.stage === stageName(job));
    if (list.length < 2) return null;
    const a = list[0];
    const b = list[list.length - 1];
    const dt = (b.t - a.t) / 1000;
    return dt > 0 && b.done >= a.done ? (b.done - a.done) / dt : null;
  }

  function progressCell(job) {
    const b = jobBytes(job);
    const p = typeof job.progress === 'number' ? Math.max(0, Math.min(1, job.progress)) : 0;
    const r = rate(job);
    let eta = typeof job.eta_s === 'number' ? job.eta_s : null;
    if (eta === null && b && r) eta = (b.total - b.done) / r;
    const parts = [h('div', { class: 'bar-line' },
      h('label', { for: `job-${job.id}-all` }, 'job'),
      h('progress', { id: `job-${job.id}-all`, class: 'job-progress', max: '1', value: String(p) }, `${Math.round(p * 100)}%`),
      h('span', { class: 'pct' }, `${Math.round(p * 100)}% (${stageName(job)})`))];
    if (b) {
      parts.push(h('div', { class: 'bar-line' },
        h('label', { for: `job-${job.id}-bytes` }, 'bytes'),
        h('progress', { id: `job-${job.id}-bytes`, class: 'bytes-progress', max: String(Math.max(1, b.total)), value: String(b.done), 'data-done': b.done, 'data-total': b.total },
          `${bytes(b.done)} of ${bytes(b.total)}`),
        h('span', { class: 'pct' }, `${bytes(b.done)} of ${bytes(b.total)}`, r ? ` · ${bytes(r)}/s` : '', eta !== null ? ` · ETA ${seconds(eta)}` : '')));
    }
    return h('td', { class: 'progress-cell' }, parts);
  }

  function cancelCell(job) {
    if (!ctx.canWrite()) return h('td', { class: 'note' }, 'cancel needs a write token');
    if (job.cancel_requested) return h('td', {}, 'cancel requested');
    const btn = h('button', { type: 'button', id: `cancel-${job.id}`, class: 'cancel', 'aria-label': `Cancel job ${job.id}` }, 'Cancel');
    btn.addEventListener('click', async () => {
      btn.disabled = true;
      try {
        const j = await del(`/v1/jobs/${encodeURIComponent(job.id)}`);
        message = `Job ${job.id}: ${j.state === 'running' ? 'cancel requested; the worker stops at its next progress report' : j.state}.`;
      } catch (e) {
        message = `Job ${job.id}: cancel failed: ${e.message}`;
      }
      await refresh().catch(() => {});
      render();
    });
    return h('td', {}, btn);
  }

  function activeTable(caption, jobs) {
    // The source column only when the server names the job's source.
    const src = jobs.some((j) => typeof j.source === 'string');
    return table(caption, ['job', src ? 'source' : null, 'state', 'progress', 'updated', 'cancel'].filter(Boolean),
      jobs.map((j) => h('tr', { 'data-job': j.id },
        h('th', { scope: 'row' }, `${j.id} (${j.kind})`),
        src ? h('td', { class: 'mono' }, typeof j.source === 'string' ? j.source : '–') : null,
        h('td', {}, tag(String(j.state), kindOf(j.state))),
        progressCell(j),
        h('td', {}, String(j.updated_at || '')),
        cancelCell(j))), { class: 'jobs' });
  }

  function render() {
    const focus = document.activeElement && document.activeElement.id;
    clear(root);
    root.appendChild(h('h1', {}, 'Jobs'));
    root.appendChild(h('p', { class: 'status-line', role: 'status', 'aria-live': 'polite', id: 'jobs-message' }, message));
    root.appendChild(h('section', { id: 'running' }, h('h2', {}, `Running (${running.length})`),
      running.length ? activeTable('Running jobs with their progress', running) : h('p', {}, 'No job is running.')));
    root.appendChild(h('section', { id: 'queued' }, h('h2', {}, `Queued (${queued.length}${moreQueued ? '+' : ''})`),
      queued.length ? activeTable('Queued jobs, oldest first', queued) : h('p', {}, 'The queue is empty.')));
    root.appendChild(h('section', { id: 'failed' }, h('h2', {}, 'Recent failures'),
      failed.length ? table('The newest failed jobs, with their refusal codes', ['job', 'refusal codes', 'error', 'failed at'],
        failed.map((j) => h('tr', { 'data-job': j.id },
          h('th', { scope: 'row' }, String(j.id)),
          h('td', {}, refusalCodes(j).map((c) => [tag(c, 'bad'), ' '])),
          h('td', { class: 'error-text' }, String(j.error || '')),
          h('td', {}, String(j.updated_at || ''))))) : h('p', {}, 'No failed jobs.')));
    if (focus) {
      const el = document.getElementById(focus);
      if (el) el.focus();
    }
  }

  async function refresh() {
    const [r, q, f] = await Promise.all([
      listAll('/v1/jobs?state=running&limit=500', 2),
      listAll('/v1/jobs?state=queued&limit=500', 1),
      listAll('/v1/jobs?state=failed&limit=500', FAILED_PAGES_MAX),
    ]);
    running = r.items;
    queued = q.items;
    moreQueued = q.more;
    failed = f.items.slice(-FAILED_SHOWN).reverse();
    running.forEach(sample);
    render();
    return true;
  }

  // Poll fast while something runs, so the bars move.
  return { refresh, render, interval: () => (running.length || queued.length ? 1000 : 5000) };
}
