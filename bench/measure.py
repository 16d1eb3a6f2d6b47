#!/usr/bin/python3
"""Run one command and report its wall time, rusage and I/O counters (Linux).

  measure.py [--stdout FILE] -- CMD [ARG...]   prints one line of key=value pairs
  measure.py --selftest                        checks the I/O accounting method

Output keys: rc, wall_ms, cpu_ms, user_ms, sys_ms, maxrss_kib, rss_floor_kib,
minflt, majflt, rchar, wchar, syscr, read_bytes (the last four are the
child's /proc I/O counters).

Method.  The child's stdout goes to /dev/null (or FILE).  Wall time is taken
around spawn + wait; CPU time (user + sys, and each apart), maxrss and the
fault counts come from os.wait4()'s rusage of that child alone (its threads
and the children it reaped included).  One caveat: Linux keeps in ru_maxrss the peak of
the memory image the child had before exec, which is this wrapper's (Python's)
own, so a child whose peak is below rss_floor_kib (our VmHWM at spawn) reports
about the floor instead of its own peak; a figure clearly above the floor is
the child's own peak.

The I/O counters use a Linux property: when a process reaps a child, the
kernel adds the child's (and its threads') task I/O accounting into the
parent's signal struct (kernel/exit.c, wait_task_zombie:
task_io_accounting_add(&psig->ioac, ...)), and /proc/PID/io of the parent
reports those totals.  So /proc/self/io read before the spawn and after wait4
differs by exactly the child's rchar/syscr/read_bytes, plus the bytes of our
own first read of /proc/self/io, which a back-to-back calibration read
measures and we subtract.  --selftest verifies this on the running kernel by
running `cat` on a 3 MiB file and checking that rchar grows by 3 MiB.

What the counters see.  rchar counts bytes returned by read()/pread() and
friends (forged's header preads, config and index reads); it does NOT count
pages faulted in through mmap.  Faults are counted in minflt/majflt, but those
also include faults on anonymous memory (heap, stacks) and on the binary and
libraries, so `rchar + (minflt + majflt) * 4096` is an upper bound of the bytes
the process touched, not a measure of file pages alone.  read_bytes counts
bytes the block layer fetched from storage for this process (0 when served
from the page cache; holes of sparse files are never read from storage).
"""

import os
import subprocess
import sys
import tempfile
import time

KEYS = ("rchar", "wchar", "syscr", "read_bytes")


def read_io() -> dict:
    with open("/proc/self/io") as f:
        text = f.read()
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        out[k.strip()] = int(v)
    return out


def vm_hwm_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def run(cmd, stdout_path="/dev/null") -> dict:
    floor = vm_hwm_kib()
    a = read_io()
    b = read_io()  # calibration: what one read of /proc/self/io costs
    cal = {k: b[k] - a[k] for k in KEYS}
    with open(stdout_path, "wb") as out:
        t0 = time.perf_counter_ns()
        p = subprocess.Popen(cmd, stdout=out)
        _, status, ru = os.wait4(p.pid, 0)
        t1 = time.perf_counter_ns()
    p.returncode = os.waitstatus_to_exitcode(status)  # already reaped; keep Popen quiet
    c = read_io()
    res = {"rc": p.returncode, "wall_ms": round((t1 - t0) / 1e6, 3),
           "cpu_ms": round((ru.ru_utime + ru.ru_stime) * 1e3, 3),
           "user_ms": round(ru.ru_utime * 1e3, 3), "sys_ms": round(ru.ru_stime * 1e3, 3),
           "maxrss_kib": ru.ru_maxrss, "rss_floor_kib": floor, "minflt": ru.ru_minflt, "majflt": ru.ru_majflt}
    for k in KEYS:
        res[k] = c[k] - b[k] - cal[k]
    return res


def selftest() -> int:
    size = 3 << 20
    with tempfile.NamedTemporaryFile() as f:
        f.write(os.urandom(size))
        f.flush()
        r = run(["cat", f.name])
    ok = r["rc"] == 0 and size <= r["rchar"] < size + (256 << 10)
    print(f"selftest: cat of {size} bytes -> child rchar {r['rchar']}: "
          f"{'ok, reaped children are accounted to the parent' if ok else 'FAILED'}")
    return 0 if ok else 1


def main(argv) -> int:
    if argv[:1] == ["--selftest"]:
        return selftest()
    stdout_path = "/dev/null"
    if argv[:1] == ["--stdout"] and len(argv) >= 2:
        stdout_path, argv = argv[1], argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    r = run(argv, stdout_path)
    print(" ".join(f"{k}={v}" for k, v in r.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
