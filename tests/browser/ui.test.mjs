// ui.test.mjs: the dashboard in a real browser.
//
// Starts a real `forged serve` (FORGED) on an ephemeral port with a tokens
// file, seeds it through the public API with the generated fixtures
// (FIXTURES): the MTPLX issue-306 layout served by two hosts under
// mlx-lm-0.31 with the 306 verification figures, a delta head on a third
// host (the mixed-conventions warning), a hostile host name, artifact
// source and tensor name, a refused forge job, and two forge jobs reading a
// remote copy of a fixture from a slow loopback server (slow_server.mjs), so
// their progress (bytes fetched of the total) really moves.  Then drives
// Debian's Chromium headless (playwright-core, no browser download) through
// the fleet, artifact and jobs pages with a read token and a write token,
// and saves a screenshot of each page in SHOTS.
//
// Prints one line per failed check and ends with "test_browser: N passed, N failed".

import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { startSlowServer } from './slow_server.mjs';

const FORGED = process.env.FORGED;
const FIXTURES = path.resolve(process.env.FIXTURES || 'build/fixtures');
const SHOTS = path.resolve(process.env.SHOTS || 'build/ui-shots');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const RATE = Number(process.env.UI_TEST_RATE || 20000); // bytes per second of the slow server
const HOSTILE = '<img src=x onerror="window.__pwned=1">';
const HOSTILE_TENSOR = 'mtp.<img src=x onerror="window.__pwned=2">.weight';
const RTOK = 'ui-read-token-5a1e';
const WTOK = 'ui-write-token-9c3b';

let passed = 0;
let failed = 0;
function check(desc, cond, detail) {
  if (cond) passed++;
  else {
    failed++;
    console.log(`FAIL: ${desc}${detail !== undefined ? `: ${typeof detail === 'string' ? detail : JSON.stringify(detail)}` : ''}`);
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'forged-ui-'));
let server = null;
let slow = null;
let browser = null;

async function cleanup() {
  if (browser) await browser.close().catch(() => {});
  if (server && server.exitCode === null) {
    server.kill('SIGTERM');
    await Promise.race([new Promise((r) => server.once('exit', r)), sleep(10000)]);
    if (server.exitCode === null) server.kill('SIGKILL');
  }
  if (slow) await slow.close().catch(() => {});
  fs.rmSync(tmp, { recursive: true, force: true });
}

const deadline = setTimeout(async () => {
  console.log('FAIL: the browser tests ran past their time limit');
  failed++;
  await cleanup();
  console.log(`test_browser: ${passed} passed, ${failed} failed`);
  process.exit(1);
}, Number(process.env.UI_TEST_TIMEOUT_MS || 170000));

// ---- the server ----

function sha(s) {
  return crypto.createHash('sha256').update(s).digest('hex');
}

async function startForged(extra) {
  const log = path.join(tmp, 'serve.log');
  const out = fs.openSync(log, 'w');
  server = spawn(FORGED, ['serve', '--listen', '127.0.0.1:0', '--state-dir', path.join(tmp, 'state'),
    '--allow-roots', FIXTURES, '--allow-roots', tmp, '--tokens-file', path.join(tmp, 'tokens'), '--workers', '1', ...extra],
  { stdio: ['ignore', out, out] });
  for (let i = 0; i < 300; i++) {
    const m = /listening on \S+ port (\d+),/.exec(fs.readFileSync(log, 'utf8'));
    if (m) return `http://127.0.0.1:${m[1]}`;
    if (server.exitCode !== null) break;
    await sleep(50);
  }
  throw new Error(`forged serve did not start: ${fs.readFileSync(log, 'utf8').slice(-400)}`);
}

let BASE = '';
async function api(method, p, body, tok = WTOK) {
  const res = await fetch(BASE + p, {
    method,
    headers: { Authorization: `Bearer ${tok}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch (e) { /* not JSON */ }
  return { status: res.status, json, text };
}

// A copy of the issue-306 layout whose first head tensor has a hostile name (the header rewritten, offsets kept).
function hostileTensorCheckpoint() {
  const dst = path.join(tmp, 'hostile_tensor');
  fs.cpSync(path.join(FIXTURES, 'qwen35_mlx_embedded'), dst, { recursive: true });
  for (const f of fs.readdirSync(dst).filter((x) => x.endsWith('.safetensors'))) {
    const file = path.join(dst, f);
    const b = fs.readFileSync(file);
    const n = Number(b.readBigUInt64LE(0));
    const header = JSON.parse(b.subarray(8, 8 + n).toString('utf8'));
    if (!('mtp.fc.weight' in header)) continue;
    const renamed = {};
    for (const [k, v] of Object.entries(header)) renamed[k === 'mtp.fc.weight' ? HOSTILE_TENSOR : k] = v;
    let text = Buffer.from(JSON.stringify(renamed), 'utf8');
    if (text.length % 8) text = Buffer.concat([text, Buffer.alloc(8 - (text.length % 8), 0x20)]);
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(text.length));
    fs.writeFileSync(file, Buffer.concat([len, text, b.subarray(8 + n)]));
  }
  const ix = path.join(dst, 'model.safetensors.index.json');
  const index = JSON.parse(fs.readFileSync(ix, 'utf8'));
  index.weight_map[HOSTILE_TENSOR] = index.weight_map['mtp.fc.weight'];
  delete index.weight_map['mtp.fc.weight'];
  fs.writeFileSync(ix, JSON.stringify(index));
  return dst;
}

const V306 = {
  schema: 'forged.verification.v1', hardware: 'M4 Max', runtime: 'mtplx-2.12',
  rows: [{ depth: 0, tok_s: 15.04 },
    { depth: 1, tok_s: 13.46, acceptance: [0.067], quality_passed: true },
    { depth: 2, tok_s: 11.48, acceptance: [0.067, 0.004] },
    { depth: 3, tok_s: 11.18, acceptance: [0.067, 0.004, 0.0] }],
};

async function seed() {
  const ids = {};
  const inspect = async (key, source) => {
    const r = await api('POST', '/v1/inspections', { source });
    check(`inspect ${key}: 201`, r.status === 201, r.text.slice(0, 300));
    ids[key] = r.json && r.json.artifact_id;
  };
  await inspect('pack306', 'qwen35_mlx_embedded');
  await inspect('delta', 'qwen35_hf');
  await inspect('healthy', 'qwen35_mlx_sidecar');
  // A source whose name is markup: a symlink (inside an allowed root) to a refused fixture.
  fs.symlinkSync(path.join(FIXTURES, 'qwen35_mlx_head_shifted'), path.join(tmp, HOSTILE));
  await inspect('hostileSource', path.join(tmp, HOSTILE));
  await inspect('hostileTensor', hostileTensorCheckpoint());
  const report = async (host, artifact, runtime, observed) => {
    const r = await api('POST', '/v1/fleet/reports', { host, artifact, runtime, observed });
    check(`report ${host}: 201`, r.status === 201, r.text.slice(0, 300));
  };
  await report('gpu-a.example', ids.pack306, 'mlx-lm-0.31', { tok_s: 12.1 });
  await report('gpu-b.example', ids.pack306, 'mlx-lm-0.31', { tok_s: 11.9 });
  await report('gpu-c.example', ids.delta, 'hf');
  await report('gpu-d.example', ids.healthy, 'mlx-lm-0.32');
  await report(HOSTILE, ids.hostileSource, 'ollama', { note: HOSTILE });
  // Issue 13: a runtime named by its version string (mapped to mlx-lm-0.32), with what the host measured.
  await report('gpu-f.example', ids.healthy, 'mlx_lm==0.33.1', { tok_s: 40.5 });
  const v = await api('POST', `/v1/artifacts/${ids.pack306}/verifications`, V306);
  check('306 verification: 201 mtp_acceptance_collapsed', v.status === 201 && v.json.result.verdict === 'mtp_acceptance_collapsed', v.text.slice(0, 300));
  return ids;
}

// ---- the browser ----

async function newPage(token) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/the server responded with a status of (401|404)/.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  page.on('dialog', (d) => { problems.push(`dialog: ${d.message()}`); d.dismiss(); });
  await page.goto(`${BASE}/`);
  if (token) {
    await page.waitForSelector('#token-input', { state: 'visible', timeout: 10000 });
    await page.fill('#token-input', token);
    await page.press('#token-input', 'Enter');
  }
  return { context, page, problems };
}

async function pwned(page) {
  return page.evaluate(() => window.__pwned === undefined && document.querySelectorAll('#page img').length === 0);
}

async function fleetChecks(ids) {
  const { context, page, problems } = await newPage(RTOK);
  const statuses = [];
  page.on('response', (r) => { if (new URL(r.url()).pathname === '/v1/fleet/health') statuses.push(r.status()); });
  check('/ redirects to /ui/', page.url().startsWith(`${BASE}/ui/`), page.url());
  await page.waitForSelector(`#served article[data-artifact="${ids.pack306}"]`, { timeout: 15000 });
  const card = page.locator(`#served article[data-artifact="${ids.pack306}"]`);
  const cardText = await card.innerText();
  check('fleet: the 306 pack is listed as served and unhealthy', /qwen35_mlx_embedded/.test(cardText) && /served by 2 hosts/.test(cardText), cardText.slice(0, 300));
  const hosts = await card.locator('th.host').allInnerTexts();
  check('fleet: the 306 pack names its two hosts', hosts.sort().join(',') === 'gpu-a.example,gpu-b.example', hosts);
  check('fleet: why: mlx-lm-0.31 double-shifts the trunk', /trunk double_shifted/.test(cardText) && /mlx-lm-0\.31/.test(cardText), cardText.slice(0, 400));
  check('fleet: why: the verdict detail', /embedded_mtp_shift_hazard/.test(cardText) && /becomes 2\.7913/.test(cardText), cardText.slice(0, 400));
  check('fleet: the served section is an alert', (await page.getAttribute('#served', 'class')) === 'alert');
  // the histogram of the 306 pack's family
  const bars = await page.$$eval('figure.histogram-fig[data-family="qwen3_5"] rect.bar', (rs) => rs.map((r) => ({
    lo: Number(r.getAttribute('data-lo')), count: Number(r.getAttribute('data-count')), cls: r.getAttribute('class') })));
  const zone = bars.filter((b) => b.lo >= 2.4);
  check('histogram: bars in the double-shift zone for qwen3_5', zone.length > 0 && zone.every((b) => /bar-danger/.test(b.cls)), bars);
  check('histogram: the two 306 hosts at q-norm 2.75-2.80', zone.some((b) => Math.abs(b.lo - 2.75) < 1e-6 && b.count >= 2), zone);
  check('histogram: the healthy band is shaded and the zone marked',
    (await page.locator('figure.histogram-fig[data-family="qwen3_5"] rect.zone-band').count()) === 1 &&
    (await page.locator('figure.histogram-fig[data-family="qwen3_5"] rect.zone-danger').count()) === 1);
  check('histogram: the zone is labelled in text', /double shift > 2\.4/.test(await page.locator('figure.histogram-fig[data-family="qwen3_5"]').innerText()));
  // verdict counts and the warning
  const matrix = await page.locator('#verdict-counts tr[data-family="qwen3_5"] td[data-severity="error"]').innerText();
  check('verdict counts: qwen3_5 errors written with their codes', /error/.test(matrix) && /embedded_mtp_shift_hazard/.test(matrix), matrix);
  check('verdict counts: a real table (caption, th scope)', (await page.locator('#verdict-counts table caption').count()) === 1 &&
    (await page.locator('#verdict-counts thead th[scope="col"]').count()) === 4);
  // Issue 13: the hosts list shows the runtime as reported and each host's after-load probe bucket.
  const hostRows = await page.locator('#hosts tbody tr').allInnerTexts();
  const fRow = hostRows.find((t) => t.includes('gpu-f.example')) || '';
  check('hosts: a version string and the row it maps to', /mlx-lm-0\.32 \(reported as mlx_lm==0\.33\.1\)/.test(fRow) && /tok_s 40\.5/.test(fRow), fRow);
  const cRow = hostRows.find((t) => t.includes('gpu-c.example')) || '';
  check('hosts: the raw Hugging Face artifact served on hf loads healthy (1.7908)', /1\.7908/.test(cRow) && /healthy/.test(cRow), cRow);
  const hres = await api('GET', '/v1/fleet/health?full=1');
  const outside = await page.locator('#probe-outside').innerText();
  check('probe summary: the served artifacts outside the band, as the API counts them',
    hres.json && hres.json.probe_qnorm.basis === 'after_load' && new RegExp(`^${hres.json.probe_qnorm.outside_band} served`).test(outside), outside);
  const warn = await page.locator('#warnings li[data-code="mixed_head_conventions_in_fleet"]').count();
  check('fleet: the mixed-head-conventions warning', warn === 1);
  // the hostile host name is text
  const hostile = await page.$$eval('th.host, div.host', (els, want) => els.filter((e) => e.textContent.includes(want)).length, HOSTILE);
  check('hostile host name rendered as text', hostile >= 1, hostile);
  check('hostile host name: no script ran, no element made', await pwned(page));
  // filters: by runtime, by host, keyboard-reachable with labels
  check('filters have labels', (await page.locator('label[for="f-family"], label[for="f-runtime"], label[for="f-verdict"], label[for="f-host"]').count()) === 4);
  await page.focus('#f-runtime');
  await page.selectOption('#f-runtime', 'ollama');
  await page.waitForFunction((id) => !document.querySelector(`#served article[data-artifact="${id}"]`), ids.pack306, { timeout: 5000 }).catch(() => {});
  check('filter runtime=ollama hides the mlx-lm-0.31 pack', (await page.locator(`#served article[data-artifact="${ids.pack306}"]`).count()) === 0);
  check('filter runtime=ollama keeps the hostile host', (await page.locator(`#served article[data-artifact="${ids.hostileSource}"]`).count()) === 1);
  check('filter state in the URL', /runtime=ollama/.test(page.url()), page.url());
  await page.click('#f-clear');
  await page.fill('#f-host', 'gpu-a');
  await page.press('#f-host', 'Enter');
  await page.waitForTimeout(200);
  const filteredHosts = await page.locator(`#served article[data-artifact="${ids.pack306}"] th.host`).allInnerTexts();
  check('filter host=gpu-a shows only gpu-a', filteredHosts.join(',') === 'gpu-a.example', filteredHosts);
  await page.click('#f-clear');
  await page.waitForSelector(`#served article[data-artifact="${ids.pack306}"]`);
  // Tab reaches the controls
  await page.focus('#nav-fleet');
  const reached = new Set();
  for (let i = 0; i < 12; i++) {
    await page.keyboard.press('Tab');
    reached.add(await page.evaluate(() => document.activeElement && document.activeElement.id));
  }
  check('Tab reaches the filters', reached.has('f-family') && reached.has('f-host'), [...reached]);
  // auto-refresh revalidates: a 304 within two refresh periods while nothing changes
  for (let i = 0; i < 120 && !statuses.includes(304); i++) await sleep(100);
  check('auto-refresh: fleet health revalidated with 304', statuses.includes(304), statuses);
  await page.screenshot({ path: path.join(SHOTS, 'fleet.png'), fullPage: true });
  // ... and a change shows up by itself: a host starts serving the hostile-tensor copy
  const r = await api('POST', '/v1/fleet/reports', { host: 'gpu-e.example', artifact: ids.hostileTensor, runtime: 'mlx-lm-0.31' });
  check('report gpu-e: 201', r.status === 201, r.text.slice(0, 200));
  const appeared = await page.waitForSelector(`#served article[data-artifact="${ids.hostileTensor}"]`, { timeout: 12000 }).then(() => true, () => false);
  check('auto-refresh: a newly served unhealthy artifact appears', appeared && statuses.slice(-3).includes(200), statuses);
  check('the hostile tensor name on the fleet page: no script ran', await pwned(page));
  check('no page errors on the fleet page', problems.length === 0, problems);
  await context.close();
}

async function artifactChecks(ids) {
  const { context, page, problems } = await newPage(RTOK);
  await page.waitForSelector(`#served article[data-artifact="${ids.pack306}"] h3 a`, { timeout: 15000 });
  // open the artifact by keyboard
  await page.focus(`#served article[data-artifact="${ids.pack306}"] h3 a`);
  await page.keyboard.press('Enter');
  await page.waitForSelector('#runtimes tr[data-runtime="mlx-lm-0.31"]', { timeout: 10000 });
  check('artifact page by its link', page.url().endsWith(`#/artifact/${ids.pack306}`), page.url());
  const row = page.locator('#runtimes tr[data-runtime="mlx-lm-0.31"]');
  const trunk = row.locator('td.trunk .tag');
  check('runtime matrix: mlx-lm-0.31 trunk written double_shifted', (await trunk.innerText()) === 'double_shifted');
  check('runtime matrix: and coloured bad', /tag-bad/.test(await trunk.getAttribute('class')));
  check('runtime matrix: outcome broken, shift reason mtp_keys', (await row.locator('td.outcome').innerText()) === 'broken' && /mtp_keys/.test(await row.innerText()));
  check('runtime matrix: every runtime row', (await page.locator('#runtimes tbody tr').count()) === 17);
  check('runtime matrix: mlx-lm-0.32 ok', (await page.locator('#runtimes tr[data-runtime="mlx-lm-0.32"] td.trunk').innerText()) === 'ok');
  const trunkSet = await page.locator('#decisions tr[data-set="trunk"]').innerText();
  check('decisions: trunk absolute with qk_max and probe 1.7913', /absolute/.test(trunkSet) && /1\.7913/.test(trunkSet) && /0\.9669/.test(trunkSet), trunkSet);
  const verdictRow = await page.locator('#verdicts tr[data-code="embedded_mtp_shift_hazard"]').innerText();
  check('verdicts: the tensors are named', /mtp\.pre_fc_norm_embedding\.weight/.test(verdictRow), verdictRow.slice(0, 300));
  // the verification chart
  const pts = await page.$$eval('svg.verification circle.tok-pt', (cs) => cs.map((c) => [Number(c.getAttribute('data-depth')), Number(c.getAttribute('data-tok-s'))]));
  check('chart: tok/s per depth 15.04 13.46 11.48 11.18', JSON.stringify(pts) === JSON.stringify([[0, 15.04], [1, 13.46], [2, 11.48], [3, 11.18]]), pts);
  const ar = await page.getAttribute('svg.verification line.ar-line', 'data-tok-s');
  check('chart: the AR baseline at 15.04', ar === '15.04', ar);
  const acc = await page.$$eval('svg.verification rect.acc', (rs) => rs.map((r) => [Number(r.getAttribute('data-depth')), Number(r.getAttribute('data-pos')), Number(r.getAttribute('data-value'))]));
  check('chart: acceptance per position', JSON.stringify(acc) === JSON.stringify([[1, 1, 0.067], [2, 1, 0.067], [2, 2, 0.004], [3, 1, 0.067], [3, 2, 0.004], [3, 3, 0]]), acc);
  const figText = await page.locator('figure.verification-fig').innerText();
  check('chart: the verdict shown', /mtp_acceptance_collapsed/.test(figText) && /AR 15\.04 tok\/s/.test(await page.locator('svg.verification').textContent()), figText.slice(0, 200));
  check('chart: the rows table says 0.895x at depth 1', /0\.895×/.test(figText), figText.slice(0, 400));
  const hostsHere = await page.locator('#fleet-hosts th.host').allInnerTexts();
  check('artifact: the fleet hosts serving it', hostsHere.sort().join(',') === 'gpu-a.example,gpu-b.example', hostsHere);
  check('artifact: identity and provenance section', /qwen35_mlx_embedded/.test(await page.locator('#identity').innerText()));
  check('artifact: its digest shown', /^sha256:[0-9a-f]{64}$/.test(await page.locator('#identity .digest').innerText()));
  const obsHere = await page.locator('#fleet-hosts tbody').innerText();
  check('artifact: what its hosts observed', /tok_s 12\.1/.test(obsHere) && /tok_s 11\.9/.test(obsHere), obsHere);
  await page.screenshot({ path: path.join(SHOTS, 'artifact.png'), fullPage: true });
  // hostile source and tensor names
  await page.goto(`${BASE}/ui/#/artifact/${ids.hostileSource}`);
  await page.waitForSelector('#identity .source');
  check('hostile source rendered as text', (await page.locator('h1 .source').textContent()) === path.join(tmp, HOSTILE));
  check('hostile source: no script ran', await pwned(page));
  await page.goto(`${BASE}/ui/#/artifact/${ids.hostileTensor}`);
  await page.waitForSelector('#verdicts li.tensor');
  const tensors = await page.locator('#verdicts li.tensor').allTextContents();
  check('hostile tensor name rendered as text', tensors.includes(HOSTILE_TENSOR), tensors.slice(0, 3));
  check('hostile tensor name: no script ran', await pwned(page));
  await page.screenshot({ path: path.join(SHOTS, 'artifact-hostile.png'), fullPage: true });
  check('no page errors on the artifact pages', problems.length === 0, problems);
  await context.close();
}

async function waitJob(id, states, ms) {
  let j = null;
  for (let i = 0; i < ms / 100; i++) {
    j = (await api('GET', `/v1/jobs/${id}`, null, RTOK)).json;
    if (j && states.includes(j.state)) return j;
    await sleep(100);
  }
  return j;
}

async function jobsChecks() {
  const remote = `http://127.0.0.1:${slow.port}/qwen35_hf/`;
  const refused = await api('POST', '/v1/jobs', { kind: 'forge', source: 'qwen35_mlx_head_shifted' });
  check('refused job: 202', refused.status === 202, refused.text.slice(0, 200));
  const failedJob = await waitJob(refused.json.id, ['failed'], 20000);
  check('refused job failed', failedJob && failedJob.state === 'failed', failedJob);
  const slow1 = await api('POST', '/v1/jobs', { kind: 'forge', source: remote, backbone: 'qwen35_hf', out: path.join(tmp, 'out1') });
  const slow2 = await api('POST', '/v1/jobs', { kind: 'forge', source: remote, backbone: 'qwen35_hf', out: path.join(tmp, 'out2') });
  check('slow jobs: 202', slow1.status === 202 && slow2.status === 202, slow1.text.slice(0, 200));
  const running = await waitJob(slow1.json.id, ['running'], 10000);
  check('slow job 1 runs', running && running.state === 'running', running);

  // read token: progress moves, no cancel
  const { context, page, problems } = await newPage(RTOK);
  await page.goto(`${BASE}/ui/#/jobs`);
  const bar = `tr[data-job="${slow1.json.id}"] progress.bytes-progress`;
  await page.waitForSelector(bar, { timeout: 20000 });
  const first = Number(await page.getAttribute(bar, 'value'));
  const total = Number(await page.getAttribute(bar, 'max'));
  let later = first;
  for (let i = 0; i < 60 && later <= first; i++) {
    await sleep(250);
    const v = await page.getAttribute(bar, 'value').catch(() => null);
    if (v !== null) later = Number(v);
  }
  check(`progress bar advances (${first} -> ${later} of ${total} bytes)`, later > first && total > 0, { first, later, total });
  const line = await page.locator(`tr[data-job="${slow1.json.id}"] .progress-cell`).innerText();
  check('progress: bytes, rate and ETA written', /of/.test(line) && /\/s/.test(line) && /ETA/.test(line), line);
  check('queued job listed', (await page.locator(`#queued tr[data-job="${slow2.json.id}"]`).count()) === 1);
  check('read token: no cancel offered', (await page.locator('button.cancel').count()) === 0 && /cancel needs a write token/.test(await page.locator('#running').innerText()));
  const failedRow = await page.locator(`#failed tr[data-job="${refused.json.id}"]`).innerText();
  check('recent failures with the refusal code', /head_double_shifted/.test(failedRow), failedRow);
  await page.screenshot({ path: path.join(SHOTS, 'jobs.png'), fullPage: true });
  check('no page errors on the jobs page (read)', problems.length === 0, problems);
  await context.close();

  // write token: cancel the queued job, then the running one
  const w = await newPage(WTOK);
  await w.page.goto(`${BASE}/ui/#/jobs`);
  await w.page.waitForSelector(`#cancel-${slow2.json.id}`, { timeout: 10000 });
  let offered = 0;
  for (let i = 0; i < 40 && offered < 2; i++) { // the page refreshes each second: wait for both rows
    offered = await w.page.locator('button.cancel').count();
    if (offered < 2) await sleep(250);
  }
  check('write token: cancel offered', offered >= 2, { offered });
  await w.page.focus(`#cancel-${slow2.json.id}`);
  await w.page.keyboard.press('Enter');
  const c2 = await waitJob(slow2.json.id, ['cancelled'], 5000);
  check('cancel of the queued job: cancelled', c2 && c2.state === 'cancelled', c2);
  await w.page.waitForSelector(`#cancel-${slow1.json.id}`, { timeout: 5000 }).catch(() => {});
  await w.page.click(`#cancel-${slow1.json.id}`).catch(() => {});
  const c1 = await waitJob(slow1.json.id, ['cancelled', 'succeeded'], 15000);
  check('cancel of the running job: cancelled', c1 && c1.state === 'cancelled', c1);
  check('the cancel is reported on the page', /Job \d+: /.test(await w.page.locator('#jobs-message').innerText()));
  check('no page errors on the jobs page (write)', w.problems.length === 0, w.problems);
  await w.context.close();
}

async function main() {
  fs.mkdirSync(SHOTS, { recursive: true });
  fs.writeFileSync(path.join(tmp, 'tokens'), `read ui-reader ${sha(RTOK)}\nwrite ui-writer ${sha(WTOK)}\n`);
  slow = await startSlowServer(FIXTURES, RATE);
  BASE = await startForged(['--allow-hosts', `127.0.0.1:${slow.port}`]);
  const ids = await seed();
  // playwright gives every launch a fresh temporary profile (--user-data-dir is its own).
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  await fleetChecks(ids);
  await artifactChecks(ids);
  await jobsChecks();
}

try {
  await main();
} catch (e) {
  failed++;
  console.log(`FAIL: ${e.stack || e}`);
}
clearTimeout(deadline);
await cleanup();
console.log(`screenshots: ${SHOTS}`);
console.log(`test_browser: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
