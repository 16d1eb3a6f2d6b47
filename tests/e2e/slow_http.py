#!/usr/bin/env python3
"""slow_http.py DIR RATE PORTFILE: a checkpoint host on 127.0.0.1 that sends slowly.

Serves DIR/NAME/FILE at /NAME/FILE (GET and HEAD, one Range per request, an
ETag) and paces every response body through one shared budget of RATE bytes
per second, so a forge job reading a remote source is still running seconds
later (the e2e tests stop the server in the middle of such a job).  Writes
the bound port to PORTFILE once listening; runs until killed.
"""
import http.server
import os
import re
import sys
import threading
import time

root = sys.argv[1]
rate = float(sys.argv[2])
lock = threading.Lock()
next_free = [time.monotonic()]
CHUNK = 256


def pace(n):
    """Wait until n more bytes fit in the shared budget."""
    with lock:
        now = time.monotonic()
        start = max(next_free[0], now)
        next_free[0] = start + n / rate
    delay = start - time.monotonic()
    if delay > 0:
        time.sleep(delay)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def answer(self, body):
        rel = os.path.normpath(self.path.split("?")[0].lstrip("/"))
        path = os.path.join(root, rel)
        if rel.startswith("..") or os.path.isabs(rel) or not os.path.isfile(path):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        st = os.stat(path)
        size = st.st_size
        start, end, status = 0, size - 1, 200
        m = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", ""))
        if m and (m.group(1) or m.group(2)):
            if m.group(1):
                start = int(m.group(1))
                if m.group(2):
                    end = min(int(m.group(2)), size - 1)
            else:
                start = max(0, size - int(m.group(2)))
            if start > end or start >= size:
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % size)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        self.send_response(status)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", '"%x-%x"' % (size, int(st.st_mtime)))
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(end - start + 1))
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
        self.end_headers()
        if not body:
            return
        with open(path, "rb") as f:
            f.seek(start)
            left = end - start + 1
            while left > 0:
                part = f.read(min(CHUNK, left))
                if not part:
                    break
                pace(len(part))
                try:
                    self.wfile.write(part)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    return
                left -= len(part)

    def do_GET(self):
        self.answer(True)

    def do_HEAD(self):
        self.answer(False)


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
with open(sys.argv[3] + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(sys.argv[3] + ".tmp", sys.argv[3])
server.serve_forever()
