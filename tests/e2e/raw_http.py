#!/usr/bin/env python3
"""raw_http.py: hostile HTTP clients for the e2e tests, on raw sockets.

  raw_http.py trickle HOST PORT SECONDS
      one connection sending its request line and headers one byte a second;
      prints how many seconds passed until the server closed it ("open" when
      it was still open after SECONDS)
  raw_http.py flood HOST PORT N SOURCE SECONDS
      N connections from the address SOURCE (e.g. 127.0.0.2), each trickling
      a header byte every second for SECONDS; prints "accepted A refused R":
      refused are those the server closed within the first second
  raw_http.py first-line HOST PORT METHOD PATH HEADER...
      sends the request line and headers (no body, whatever Content-Length
      says) and prints the first line the server answers within 5 s, or
      "timeout"
"""
import socket
import sys
import time


def trickle(host, port, seconds):
    s = socket.create_connection((host, int(port)), timeout=5)
    s.setblocking(False)
    req = b"GET /livez HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 4096
    t0 = time.monotonic()
    i = 0
    while time.monotonic() - t0 < float(seconds):
        try:
            s.send(req[i:i + 1])
            i = (i + 1) % len(req)
            if s.recv(1) == b"":
                print("%.1f" % (time.monotonic() - t0))
                return
        except BlockingIOError:
            pass
        except (BrokenPipeError, ConnectionResetError):
            print("%.1f" % (time.monotonic() - t0))
            return
        time.sleep(1)
    print("open")


def flood(host, port, n, source, seconds):
    socks = []
    for _ in range(int(n)):
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((source, 0))
            s.settimeout(2)
            s.connect((host, int(port)))
            s.setblocking(False)
            s.send(b"GET /livez HTTP/1.1\r\nHost: x\r\n")
            socks.append(s)
        except OSError:
            pass
    time.sleep(1)
    alive = []
    refused = int(n) - len(socks)
    for s in socks:
        try:
            if s.recv(1) == b"":
                refused += 1
                continue
        except BlockingIOError:
            pass
        except OSError:
            refused += 1
            continue
        alive.append(s)
    print("accepted %d refused %d" % (len(alive), refused), flush=True)
    t0 = time.monotonic()
    while time.monotonic() - t0 < float(seconds):
        for s in alive:
            try:
                s.send(b"a")
            except OSError:
                pass
        time.sleep(1)


def first_line(host, port, method, path, headers):
    s = socket.create_connection((host, int(port)), timeout=5)
    head = "%s %s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (method, path, "".join(h + "\r\n" for h in headers))
    s.sendall(head.encode())
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        print("timeout")
        return
    print(data.split(b"\r\n")[0].decode(errors="replace") if data else "closed")


cmd = sys.argv[1]
if cmd == "trickle":
    trickle(*sys.argv[2:5])
elif cmd == "flood":
    flood(*sys.argv[2:7])
elif cmd == "first-line":
    first_line(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:])
else:
    sys.exit("unknown command " + cmd)
