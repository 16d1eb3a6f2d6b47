"""farm_submit.py TOKEN OUT_DIR FIRST LAST PORT... : test_farm.sh's client.

Submits forge jobs FIRST..LAST, eight at a time, job n through the
instance n % len(PORTS) with Idempotency-Key farm-n and out OUT_DIR/jn; a
submission an instance cannot answer (it is down, or restarting) is retried
through the next one with the same key.  Every seventh job is submitted
again through another instance, and must answer the same job.  The ports
are read again from PORTS_FILE (when set) before each retry, so a restarted
instance is found on its new port.  Prints "job N ID" per job, then
"retries R" and "mismatches M".
"""
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

SOURCES = ["qwen35_hf", "glm45", "mimo", "qwen35_moe_hf_fused_linear"]
token, out_dir, first, last = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ports = sys.argv[5:]
ports_file = os.environ.get("PORTS_FILE")
lock = threading.Lock()
retries = 0
mismatches = 0


def current_ports():
    if ports_file and os.path.exists(ports_file):
        with open(ports_file) as f:
            got = [p.strip() for p in f.read().split() if p.strip()]
        if got:
            return got
    return ports


def post(port, n):
    body = json.dumps({"kind": "forge", "source": SOURCES[n % 4], "out": "%s/j%d" % (out_dir, n)}).encode()
    req = urllib.request.Request("http://127.0.0.1:%s/v1/jobs" % port, data=body, method="POST", headers={
        "Authorization": "Bearer " + token, "Content-Type": "application/json", "Idempotency-Key": "farm-%d" % n})
    with urllib.request.urlopen(req, timeout=30) as r:
        if r.status != 202:
            raise OSError("HTTP %d" % r.status)
        return json.loads(r.read())["id"]


def submit(n, start):
    global retries
    for attempt in range(60):
        p = current_ports()
        try:
            return post(p[(start + attempt) % len(p)], n)
        except (OSError, urllib.error.URLError, ValueError):
            with lock:
                retries += 1
            time.sleep(0.1)
    raise SystemExit("job %d: no instance answered" % n)


def one(n):
    global mismatches
    jid = submit(n, n)
    if n % 7 == 0 and submit(n, n + 1) != jid:
        with lock:
            mismatches += 1
    return n, jid


with ThreadPoolExecutor(8) as pool:
    for n, jid in pool.map(one, range(first, last + 1)):
        print("job %d %d" % (n, jid))
print("retries %d" % retries)
print("mismatches %d" % mismatches)
