// slow_server.mjs: a checkpoint host on loopback that sends bytes slowly.
//
// Serves DIR/NAME/FILE at /NAME/FILE with HEAD, single Range requests and an
// ETag, and paces every body through one shared budget of `rate` bytes per
// second, so a forge job reading a remote source really takes seconds and
// its progress (bytes fetched of the total) can be watched moving.

import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';

export function startSlowServer(dir, rate) {
  let nextFree = Date.now();
  let sent = 0;
  const CHUNK = 512;

  function pace(res, buf) {
    let off = 0;
    const step = () => {
      if (res.destroyed) return;
      if (off >= buf.length) { res.end(); return; }
      const part = buf.subarray(off, off + CHUNK);
      off += part.length;
      sent += part.length;
      const now = Date.now();
      nextFree = Math.max(nextFree, now) + (part.length * 1000) / rate;
      res.write(part);
      setTimeout(step, Math.max(0, nextFree - now));
    };
    step();
  }

  const server = http.createServer((req, res) => {
    const url = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    const rel = path.normalize(url).replace(/^\/+/, '');
    const file = path.join(dir, rel);
    if (rel.startsWith('..') || !file.startsWith(dir + path.sep)) { res.writeHead(403); res.end(); return; }
    let st;
    try { st = fs.statSync(file); } catch (e) { st = null; }
    if (!st || !st.isFile()) { res.writeHead(404, { 'Content-Type': 'text/plain' }); res.end('not found\n'); return; }
    const etag = `"${st.size.toString(16)}-${Math.floor(st.mtimeMs).toString(16)}"`;
    const head = { 'Accept-Ranges': 'bytes', ETag: etag, 'Last-Modified': st.mtime.toUTCString(), 'Content-Type': 'application/octet-stream' };
    let start = 0;
    let end = st.size - 1;
    let status = 200;
    const m = /^bytes=(\d*)-(\d*)$/.exec(req.headers.range || '');
    if (m && (m[1] || m[2])) {
      if (m[1]) { start = Number(m[1]); if (m[2]) end = Math.min(Number(m[2]), st.size - 1); }
      else { start = Math.max(0, st.size - Number(m[2])); }
      if (start > end || start >= st.size) {
        res.writeHead(416, { 'Content-Range': `bytes */${st.size}` });
        res.end();
        return;
      }
      status = 206;
      head['Content-Range'] = `bytes ${start}-${end}/${st.size}`;
    }
    head['Content-Length'] = String(end - start + 1);
    res.writeHead(status, head);
    if (req.method === 'HEAD') { res.end(); return; }
    const fd = fs.openSync(file, 'r');
    const buf = Buffer.alloc(end - start + 1);
    fs.readSync(fd, buf, 0, buf.length, start);
    fs.closeSync(fd);
    pace(res, buf);
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => resolve({
      port: server.address().port,
      sent: () => sent,
      close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()); }),
    }));
  });
}
