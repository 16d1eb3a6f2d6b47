#!/usr/bin/env python3
"""fake_server.py SCENARIO.json LOG PORTFILE: a stand-in for `forged serve`.

Answers each "METHOD PATH" with the next response of its list in the
scenario (the last one repeats): {"status": N, "headers": {...}, "body": ...}
(a body that is not a string is sent as JSON).  Every request is appended to
LOG as one JSON line: time, method, path, the Idempotency-Key and
Authorization headers, and the body.  Listens on 127.0.0.1, an ephemeral
port written to PORTFILE.  Used by test_client.sh to check the client's
retries and that one invocation reuses one Idempotency-Key.
"""
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

scenario = json.load(open(sys.argv[1]))
log_path = sys.argv[2]
lock = threading.Lock()
served = {}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode() if n else ""
        key = f"{self.command} {self.path}"
        with lock:
            with open(log_path, "a") as f:
                f.write(json.dumps({"t": time.monotonic(), "method": self.command, "path": self.path,
                                    "idempotency_key": self.headers.get("Idempotency-Key"),
                                    "authorization": self.headers.get("Authorization"),
                                    "body": body}) + "\n")
            responses = scenario.get(key) or [{"status": 404, "body": {"type": "urn:forged:problem:no-such-route",
                                                                      "title": "No such route", "status": 404}}]
            i = served.get(key, 0)
            served[key] = i + 1
            r = responses[min(i, len(responses) - 1)]
        data = r.get("body", "")
        data = (data if isinstance(data, str) else json.dumps(data)).encode()
        self.send_response(r["status"])
        for k, v in r.get("headers", {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json" if r["status"] < 400 else "application/problem+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = answer


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(sys.argv[3] + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(sys.argv[3] + ".tmp", sys.argv[3])
# Stop by itself after a while, whatever the test does.
threading.Timer(120, server.shutdown).start()
server.serve_forever()
