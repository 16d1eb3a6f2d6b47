// api.js: the public JSON API, with the bearer token kept for this tab
// (sessionStorage) and ETag revalidation: a GET sends the ETag of the last
// answer for the same path and a 304 returns that answer again, marked
// unchanged, so polling costs the server no body.

const TOKEN_KEY = 'forged.token';

export class AuthError extends Error {}

export class ApiError extends Error {
  constructor(status, problem) {
    super(problem && problem.detail ? problem.detail : `HTTP ${status}`);
    this.status = status;
    this.problem = problem || null;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(t) {
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
  cache.clear();
}

const cache = new Map(); // path -> {etag, data}

function headers(extra) {
  const hd = { Accept: 'application/json', ...extra };
  const t = token();
  if (t) hd.Authorization = `Bearer ${t}`;
  return hd;
}

async function problemOf(res) {
  try {
    return await res.json();
  } catch (e) {
    return null;
  }
}

// GET path: {data, changed}; throws AuthError on 401, ApiError otherwise.
export async function get(path) {
  const seen = cache.get(path);
  const res = await fetch(path, {
    headers: headers(seen ? { 'If-None-Match': seen.etag } : {}),
    cache: 'no-store',
    credentials: 'omit',
  });
  if (res.status === 304 && seen) return { data: seen.data, changed: false };
  if (res.status === 401) throw new AuthError('a token is needed');
  if (!res.ok) throw new ApiError(res.status, await problemOf(res));
  const data = await res.json();
  const etag = res.headers.get('ETag');
  if (etag) cache.set(path, { etag, data });
  return { data, changed: true };
}

// DELETE path: the JSON answer; throws like get.
export async function del(path) {
  const res = await fetch(path, { method: 'DELETE', headers: headers({}), cache: 'no-store', credentials: 'omit' });
  if (res.status === 401) throw new AuthError('a token is needed');
  if (!res.ok) throw new ApiError(res.status, await problemOf(res));
  return res.json();
}

// What the token may do: {auth, role, token}; role null when the token is not valid.
export async function whoami() {
  const res = await fetch('/v1/whoami', { headers: headers({}), cache: 'no-store', credentials: 'omit' });
  if (!res.ok) return { auth: true, role: null, token: null };
  return res.json();
}
