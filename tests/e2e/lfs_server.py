#!/usr/bin/env python3
"""lfs_server.py ROOT PORTFILE LOG: a hub's resolve endpoint in miniature.

GET /ORG/NAME/resolve/REV/FILE answers 302 to /cdn/ORG/NAME/FILE with the
file's SHA-256 in X-Linked-Etag (quoted, as the Hugging Face hub names an LFS
file's oid) for .safetensors files, and serves other files directly; /cdn/
serves the bytes of ROOT/ORG/NAME/FILE with an ETag and byte ranges
("bytes=A-B", one range), 206 with Content-Range.  Every request is one line
of LOG.  Listens on 127.0.0.1, an ephemeral port written to PORTFILE; stops
by itself after five minutes.
"""
import hashlib
import os
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

root, portfile, log = sys.argv[1], sys.argv[2], sys.argv[3]
lock = threading.Lock()


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_file(self, path):
        size = os.path.getsize(path)
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range") or "")
        a, b = (int(m.group(1)), int(m.group(2) or size - 1)) if m else (0, size - 1)
        b = min(b, size - 1)
        with open(path, "rb") as f:
            f.seek(a)
            data = f.read(b - a + 1)
        self.send_response(206 if m else 200)
        self.send_header("ETag", '"cdn-%d-%d"' % (size, int(os.path.getmtime(path))))
        if m:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (a, b, size))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        with lock:
            with open(log, "a") as f:
                f.write("%s %s\n" % (self.path, self.headers.get("Range")))
        hub = re.fullmatch(r"/([^/]+)/([^/]+)/resolve/[^/]+/(.+)", self.path)
        cdn = re.fullmatch(r"/cdn/([^/]+)/([^/]+)/(.+)", self.path)
        m = hub or cdn
        path = os.path.join(root, m.group(1), m.group(2), m.group(3)) if m else ""
        if not m or ".." in self.path or not os.path.isfile(path):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif hub and path.endswith(".safetensors"):
            self.send_response(302)
            self.send_header("Location", "/cdn/%s/%s/%s" % m.groups())
            self.send_header("X-Linked-Etag", '"%s"' % sha256(path))
            self.send_header("ETag", '"git-%s"' % sha256(path)[:40])
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self.send_file(path)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(portfile + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(portfile + ".tmp", portfile)
threading.Timer(300, server.shutdown).start()
server.serve_forever()
