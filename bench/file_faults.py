#!/usr/bin/python3
"""Count the page faults a command takes on mmap()ed files whose name ends with SUFFIX.

  file_faults.py [--suffix .safetensors] -- CMD [ARG...]   prints one line of key=value pairs

Output keys: faults (all page faults), file_faults (faults whose address lies
in a mapping of a *SUFFIX file), file_pages (distinct 4 KiB pages among them),
file_bytes (file_pages * 4096), maps (mappings of *SUFFIX files).

Why.  rchar (see measure.py) does not see bytes a process reads through a
file mapping, and rusage fault counts mix those with heap faults.  This
records every page-fault software event with its data address
(`perf record -e page-faults -c 1 -d`, no root needed at
perf_event_paranoid <= 2) together with the mmap events perf logs, replays
them in order (a later mapping replaces an earlier one over the same range,
as after munmap + mmap), and attributes each fault to the mapping holding its
address.  Faults taken in the kernel on the process's behalf (e.g. copying
to user buffers) are included; pages the kernel reads ahead without a fault
are not, which is the point of forged's MADV_RANDOM.  Needs `perf`; the
command's stdout goes to /dev/null.  Exit 3 if perf cannot record.
"""

import bisect
import os
import re
import subprocess
import sys
import tempfile

MMAP = re.compile(r"PERF_RECORD_MMAP2? \d+/\d+: \[(0x[0-9a-f]+)\((0x[0-9a-f]+)\) @ \S+(?: [^\]]*)?\]: \S+ (.*)$")
PAGE = 4096


class Maps:
    """Non-overlapping [start, end) -> name intervals; a new map replaces what it covers."""

    def __init__(self):
        self.starts, self.ends, self.names = [], [], []

    def add(self, start, end, name):
        s, e, n = self.starts, self.ends, self.names
        i = bisect.bisect_right(s, start) - 1
        if i >= 0 and e[i] > start:  # split the interval containing start
            if e[i] > end:
                s.insert(i + 1, end)
                e.insert(i + 1, e[i])
                n.insert(i + 1, n[i])
            e[i] = start
            i += 1
        else:
            i += 1
        j = i
        while j < len(s) and s[j] < end:  # drop or trim what the new map covers
            if e[j] > end:
                s[j] = end
                break
            j += 1
        del s[i:j], e[i:j], n[i:j]
        s.insert(i, start)
        e.insert(i, end)
        n.insert(i, name)

    def find(self, addr):
        i = bisect.bisect_right(self.starts, addr) - 1
        if i >= 0 and addr < self.ends[i]:
            return self.names[i]
        return None


def main(argv) -> int:
    suffix = ".safetensors"
    if argv[:1] == ["--suffix"] and len(argv) >= 2:
        suffix, argv = argv[1], argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "pf.data")
        with open(os.devnull, "wb") as null:
            rec = subprocess.run(["perf", "record", "-q", "-e", "page-faults", "-c", "1", "-d",
                                  "-o", data, "--"] + argv, stdout=null, stderr=subprocess.PIPE)
        if rec.returncode != 0 or not os.path.exists(data):
            sys.stderr.write(rec.stderr.decode(errors="replace"))
            return 3
        script = subprocess.run(["perf", "script", "-i", data, "--show-mmap-events", "-F", "addr"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True)
    maps = Maps()
    faults = file_faults = n_maps = 0
    pages = set()
    for line in script.stdout.decode(errors="replace").splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith("PERF_RECORD_MMAP"):
            m = MMAP.search(line)
            if m:
                start, length, name = int(m.group(1), 16), int(m.group(2), 16), m.group(3).strip()
                maps.add(start, start + length, name)
                n_maps += name.endswith(suffix)
            continue
        try:
            addr = int(line, 16)
        except ValueError:
            continue
        faults += 1
        name = maps.find(addr)
        if name and name.endswith(suffix):
            file_faults += 1
            pages.add((name, addr // PAGE))
    print(f"faults={faults} file_faults={file_faults} file_pages={len(pages)} "
          f"file_bytes={len(pages) * PAGE} maps={n_maps}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
