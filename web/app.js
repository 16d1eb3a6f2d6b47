// app.js: the dashboard's shell: the token, the pages (#/fleet,
// #/artifact/ID, #/jobs) and auto-refresh.
//
// The token is asked for once and kept in sessionStorage for this tab; a
// server without a tokens file needs none (GET /v1/whoami says so).  Pages
// refresh on a timer while the tab is visible; their GETs revalidate by
// ETag, so an unchanged fleet costs a 304 and no re-render.

import { h, clear } from './dom.js';
import * as api from './api.js';
import * as fleet from './fleet.js';
import * as artifact from './artifact.js';
import * as jobs from './jobs.js';

const page = document.getElementById('page');
const form = document.getElementById('token-form');
const input = document.getElementById('token-input');
const tokenError = document.getElementById('token-error');
const who = document.getElementById('who');
const status = document.getElementById('refresh-status');
const auto = document.getElementById('auto-refresh');
const change = document.getElementById('token-change');

let me = { auth: true, role: null, token: null };
let current = null;
let timer = null;
let generation = 0; // bumped per navigation, so a stale refresh does not reschedule

function canWrite() {
  return me.role === 'write';
}

function showWho() {
  clear(who);
  if (!me.auth) who.appendChild(document.createTextNode('open server (no tokens file): read and write'));
  else if (me.role) who.appendChild(document.createTextNode(`token ${me.token || ''} (${me.role})`));
  else who.appendChild(document.createTextNode('no token'));
  change.hidden = !me.auth;
}

function askToken(why) {
  clearTimeout(timer);
  form.hidden = false;
  page.hidden = true;
  tokenError.textContent = why || '';
  input.value = '';
  input.focus();
}

form.addEventListener('submit', async (e) => {
  e.preventDefault();
  api.setToken(input.value.trim());
  me = await api.whoami();
  showWho();
  if (me.auth && !me.role) {
    askToken('That token is not valid here.');
    return;
  }
  form.hidden = true;
  page.hidden = false;
  route();
});

change.addEventListener('click', () => {
  api.setToken('');
  me = { auth: me.auth, role: null, token: null };
  showWho();
  askToken('');
});

function setParams(p) {
  const [path] = location.hash.slice(2).split('?');
  const q = p.toString();
  history.replaceState(null, '', `#/${path}${q ? `?${q}` : ''}`);
  current.ctx.params = p;
}

function stamp() {
  return new Date().toLocaleTimeString([], { hour12: false });
}

async function run(gen) {
  clearTimeout(timer);
  if (!current || gen !== generation) return;
  try {
    const changed = await current.view.refresh();
    if (gen !== generation) return;
    status.textContent = changed ? `updated ${stamp()}` : `checked ${stamp()}: unchanged`;
  } catch (e) {
    if (gen !== generation) return;
    if (e instanceof api.AuthError) {
      askToken('The server needs a token to show this.');
      return;
    }
    status.textContent = `error ${stamp()}: ${e.message}`;
    if (!page.firstChild || e.status === 404) {
      clear(page).appendChild(h('div', { class: 'error-box', role: 'alert' }, `Cannot show this page: ${e.message}`));
    }
  }
  if (auto.checked && !document.hidden && gen === generation) {
    const ms = current.view.interval ? current.view.interval() : 5000;
    timer = setTimeout(() => run(gen), ms);
  }
}

function route() {
  const hash = location.hash && location.hash.startsWith('#/') ? location.hash : '#/fleet';
  const [path, query] = hash.slice(2).split('?');
  const parts = path.split('/');
  const ctx = { params: new URLSearchParams(query || ''), setParams, canWrite };
  let name = 'fleet';
  clear(page);
  if (parts[0] === 'artifact' && /^[1-9][0-9]{0,17}$/.test(parts[1] || '')) {
    name = 'artifact';
    ctx.id = parts[1];
    current = { ctx, view: artifact.mount(page, ctx) };
    document.title = `forged: artifact ${parts[1]}`;
  } else if (parts[0] === 'jobs') {
    name = 'jobs';
    current = { ctx, view: jobs.mount(page, ctx) };
    document.title = 'forged: jobs';
  } else {
    current = { ctx, view: fleet.mount(page, ctx) };
    document.title = 'forged: fleet';
  }
  for (const a of document.querySelectorAll('nav a')) {
    if (a.id === `nav-${name}`) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  generation++;
  status.textContent = 'loading…';
  run(generation);
}

window.addEventListener('hashchange', route);
auto.addEventListener('change', () => run(generation));
document.addEventListener('visibilitychange', () => {
  if (!document.hidden) run(generation);
});

(async function start() {
  me = await api.whoami();
  showWho();
  if (me.auth && !me.role) {
    askToken(api.token() ? 'The stored token is not valid here.' : '');
    return;
  }
  route();
})();
