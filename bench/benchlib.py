#!/usr/bin/python3
"""benchlib.py: what every benchmark shares: interleaved runs, CPU beside wall,
best and median of N, and one JSON result per benchmark (a "fragment") that
bench/run_all.sh collects into build/bench/results.json.

  benchlib.py init FRAG BENCH [KEY=VALUE ...]       start FRAG (params, interpreter)
  benchlib.py abrun FRAG [options] -- NAME ARGV... [::: NAME ARGV...]...
  benchlib.py samples FRAG < LINES                  cases from measured samples
  benchlib.py set FRAG DOTTED.PATH [KEY=VALUE ...]  add fields (VALUE parsed as JSON if it can be)
  benchlib.py collect OUT FRAG...                   merge fragments into OUT, print the ratios
  benchlib.py interpreter [PATH]                    print "PATH (Python X.Y.Z, numpy N)"

abrun runs the named commands in rounds, A B A B ..., so that a change of load
on a shared machine hits every command alike, and measures each run with
bench/measure.py (wall time around spawn + wait4; CPU time = user + sys from
wait4's rusage of that child).  Options:
  --reps N              timed rounds (default 5)
  --first               one extra round first, reported apart as "first" (a cold
                        or first-use figure, and a warm-up for the timed rounds)
  --stdout NAME=FILE    stdout of NAME's first run goes to FILE (then /dev/null)
  --pre NAME=SHELL      run SHELL (sh -c, untimed) before each run of NAME
  --scale NAME=F        multiply NAME's wall and CPU by F (an extrapolation,
                        e.g. one shard's download -> the full download)
  --case CASE=A/B[:UNIT]  a case comparing command A (forged) with B (reference)
  --label NAME=TEXT     what NAME is, for the report
  --raw FILE            every run's full measure.py figures, as JSON
A non-zero exit of any run stops abrun with exit 1.

samples reads lines produced by the in-process benchmarks (bench_quant.c,
bench_dtype.c, bench_store.c, the numpy reference, bench/api/run.sh):
  sample CASE ROLE METRIC VALUE     ROLE forged or reference; METRIC wall, cpu
                                    or any other figure (each gets stats)
  unit CASE TEXT                    unit of wall and cpu (default ms)
  name CASE ROLE TEXT               what ROLE is in CASE
  extra CASE KEY VALUE              a figure reported as is
Other lines are ignored.

A case in a fragment:
  {"unit": "ms",
   "forged":    {"name": ..., "wall": STATS, "cpu": STATS, ...},
   "reference": {"name": ..., "wall": STATS, "cpu": STATS, ...} or null,
   "ratios":    {"wall_best", "wall_median", "cpu_best", "cpu_median"},
   "extra":     {...}}
STATS is {"best", "median", "min", "max", "n"}; every wall/cpu figure is a
time (lower is better: best is the minimum), and every ratio is forged over
reference, so below 1 means forged is faster (or spends less CPU).
"""

import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure  # noqa: E402


def stats(values):
    vals = sorted(float(v) for v in values)
    if not vals:
        return None
    r = lambda x: round(x, 4)  # noqa: E731
    return {"best": r(vals[0]), "median": r(statistics.median(vals)), "min": r(vals[0]),
            "max": r(vals[-1]), "n": len(vals)}


def ratios(forged, ref):
    out = {}
    for metric in ("wall", "cpu"):
        f, b = (forged or {}).get(metric), (ref or {}).get(metric)
        for k in ("best", "median"):
            if f and b and b[k] > 0:
                out[f"{metric}_{k}"] = round(f[k] / b[k], 4)
            else:
                out[f"{metric}_{k}"] = None
    return out


def interpreter(path=None):
    path = path or os.environ.get("BENCH_PYTHON") or "/usr/bin/python3"
    code = ("import sys, platform\ntry:\n import numpy; n = numpy.__version__\n"
            "except Exception:\n n = None\nprint(platform.python_version()); print(n)")
    try:
        out = subprocess.run([path, "-c", code], capture_output=True, text=True, timeout=60).stdout.split("\n")
        return {"path": path, "version": out[0], "numpy": None if out[1] == "None" else out[1]}
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return {"path": path, "version": None, "numpy": None}


def load(frag):
    with open(frag) as f:
        return json.load(f)


def save(frag, doc):
    tmp = frag + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, frag)


def value(text):
    try:
        return json.loads(text)
    except ValueError:
        return text


def cmd_init(argv):
    frag, bench = argv[0], argv[1]
    params = dict(kv.split("=", 1) for kv in argv[2:])
    doc = {"bench": bench, "ok": False, "quick": os.environ.get("BENCH_QUICK", "0") not in ("", "0"),
           "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "interpreter": interpreter(), "params": {k: value(v) for k, v in params.items()}, "cases": {}}
    os.makedirs(os.path.dirname(os.path.abspath(frag)), exist_ok=True)
    save(frag, doc)
    return 0


def cmd_set(argv):
    frag, path = argv[0], argv[1]
    doc = load(frag)
    node = doc
    for key in [k for k in path.split(".") if k]:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    for kv in argv[2:]:
        k, _, v = kv.partition("=")
        node[k] = value(v)
    save(frag, doc)
    return 0


def add_cases(frag, cases):
    doc = load(frag) if os.path.exists(frag) else {"cases": {}}
    doc.setdefault("cases", {}).update(cases)
    save(frag, doc)


def fmt(s):
    if not s:
        return "-"
    return f"{s['best']:.4g} / {s['median']:.4g} ({s['min']:.4g}-{s['max']:.4g}, n={s['n']})"


def print_case(name, c, out=sys.stderr):
    f, b, r = c["forged"], c["reference"], c["ratios"]
    out.write(f"  {name} [{c['unit']}; best / median (range, n)]\n")
    for role, x in (("forged", f), ("reference", b)):
        if x:
            out.write(f"    {role:<9} {x.get('name', '')}\n      wall {fmt(x.get('wall'))}   cpu {fmt(x.get('cpu'))}\n")
    if b:
        g = lambda k: "-" if r.get(k) is None else f"{r[k]:.3f}"  # noqa: E731
        out.write(f"    ratio forged/reference: wall best {g('wall_best')} median {g('wall_median')}, "
                  f"cpu best {g('cpu_best')} median {g('cpu_median')}\n")


def cmd_abrun(argv):
    frag = argv[0]
    args = argv[1:]
    reps, first, raw = 5, False, None
    stdout, pre, scale, cases, labels = {}, {}, {}, [], {}
    while args and args[0] != "--":
        opt = args.pop(0)
        if opt == "--first":
            first = True
            continue
        val = args.pop(0)
        if opt == "--reps":
            reps = int(val)
        elif opt == "--raw":
            raw = val
        elif opt in ("--stdout", "--pre", "--scale", "--label"):
            k, _, v = val.partition("=")
            {"--stdout": stdout, "--pre": pre, "--scale": scale, "--label": labels}[opt][k] = v
        elif opt == "--case":
            name, _, rest = val.partition("=")
            pair, _, unit = rest.partition(":")
            a, _, b = pair.partition("/")
            cases.append((name, a, b or None, unit or "ms"))
        else:
            sys.exit(f"abrun: unknown option {opt}")
    args = args[1:]
    cmds, cur = {}, None
    for a in args:
        if a == ":::":
            cur = None
        elif cur is None:
            cur = a
            cmds[cur] = []
        else:
            cmds[cur].append(a)
    order = list(cmds)
    if not order:
        sys.exit("abrun: no commands")
    runs = {n: {"argv": cmds[n], "label": labels.get(n, " ".join(cmds[n])), "scale": float(scale.get(n, 1)),
                "first": None, "runs": []} for n in order}

    def one(name, is_first):
        if name in pre:
            subprocess.run(["sh", "-c", pre[name]], check=True)
        out = stdout.get(name, "/dev/null") if is_first or not first and not runs[name]["runs"] else "/dev/null"
        m = measure.run(cmds[name], out)
        if m["rc"] != 0:
            sys.stderr.write(f"abrun: {name} exited {m['rc']}: {' '.join(cmds[name])}\n")
            sys.exit(1)
        return m

    rounds = ([True] if first else []) + [False] * reps
    sys.stderr.write(f"  {len(rounds)} rounds{' (the first reported apart)' if first else ''} of: {' '.join(order)}\n")
    for is_first in rounds:
        for name in order:  # A B A B ...: every round runs each command once, in the same order
            m = one(name, is_first)
            if is_first:
                runs[name]["first"] = m
            else:
                runs[name]["runs"].append(m)
    if raw:
        with open(raw, "w") as f:
            json.dump({"order": order, "reps": reps, "interleaved": True, "commands": runs}, f, indent=1)

    def role(name):
        r = runs[name]
        k = r["scale"]
        out = {"name": r["label"],
               "wall": stats(m["wall_ms"] * k for m in r["runs"]),
               "cpu": stats(m["cpu_ms"] * k for m in r["runs"]),
               "user": stats(m["user_ms"] * k for m in r["runs"]),
               "sys": stats(m["sys_ms"] * k for m in r["runs"]),
               "maxrss_kib": max(m["maxrss_kib"] for m in r["runs"]),
               "rss_floor_kib": r["runs"][0]["rss_floor_kib"],
               "read_bytes": stats(m["read_bytes"] for m in r["runs"])}
        if k != 1:
            out["scaled_by"] = k
        if r["first"]:
            out["first"] = {"wall": round(r["first"]["wall_ms"] * k, 3), "cpu": round(r["first"]["cpu_ms"] * k, 3),
                            "read_bytes": r["first"]["read_bytes"]}
        return out

    built = {}
    for name, a, b, unit in cases:
        fa = role(a)
        fb = role(b) if b else None
        built[name] = {"unit": unit, "forged": fa, "reference": fb, "ratios": ratios(fa, fb) if fb else {},
                       "extra": {"order": "interleaved " + " ".join(order)}}
        print_case(name, built[name])
    add_cases(frag, built)
    return 0


def cmd_samples(argv):
    frag = argv[0]
    acc, units, names, extra = {}, {}, {}, {}
    for line in sys.stdin:
        w = line.split()
        if len(w) >= 5 and w[0] == "sample":
            acc.setdefault(w[1], {}).setdefault(w[2], {}).setdefault(w[3], []).append(float(w[4]))
        elif len(w) >= 3 and w[0] == "unit":
            units[w[1]] = " ".join(w[2:])
        elif len(w) >= 4 and w[0] == "name":
            names[(w[1], w[2])] = " ".join(w[3:])
        elif len(w) >= 4 and w[0] == "extra":
            extra.setdefault(w[1], {})[w[2]] = value(" ".join(w[3:]))
    built = {}
    for case, roles in acc.items():
        obj = {}
        for r in ("forged", "reference"):
            if r in roles:
                obj[r] = {"name": names.get((case, r), r)}
                obj[r].update({m: stats(v) for m, v in roles[r].items()})
            else:
                obj[r] = None
        built[case] = {"unit": units.get(case, "ms"), "forged": obj["forged"], "reference": obj["reference"],
                       "ratios": ratios(obj["forged"], obj["reference"]) if obj["reference"] else {},
                       "extra": extra.get(case, {})}
        print_case(case, built[case])
    add_cases(frag, built)
    return 0


def cmd_collect(argv):
    out, frags = argv[0], argv[1:]
    doc = {"schema": "forged.bench.v1", "quick": os.environ.get("BENCH_QUICK", "0") not in ("", "0"),
           "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "interpreter": interpreter(),
           "host": {"nproc": os.cpu_count(), "kernel": os.uname().release,
                    "loadavg": open("/proc/loadavg").read().split()[:3]},
           "conventions": "wall and cpu in each case's unit; best = minimum; ratios = forged / reference "
                          "(below 1: forged faster or cheaper); runs interleaved A B A B",
           "benches": {}}
    for fr in frags:
        try:
            d = load(fr)
        except (OSError, ValueError) as e:
            d = {"bench": os.path.basename(fr).rsplit(".", 1)[0], "ok": False, "error": str(e), "cases": {}}
        doc["benches"][d.get("bench", fr)] = d
    save(out, doc)
    w = sys.stdout.write
    w(f"{'bench / case':<44} {'wall best':>10} {'wall med':>9} {'cpu best':>9} {'cpu med':>8}  (forged/reference)\n")
    for b, d in doc["benches"].items():
        w(f"{b}{'' if d.get('ok') else '  [FAILED: ' + str(d.get('error', 'see its log')) + ']'}\n")
        for c, x in d.get("cases", {}).items():
            r = x.get("ratios") or {}
            g = lambda k: "-" if r.get(k) is None else f"{r[k]:.3f}"  # noqa: E731
            w(f"  {c:<42} {g('wall_best'):>10} {g('wall_median'):>9} {g('cpu_best'):>9} {g('cpu_median'):>8}\n")
    w(f"results: {out}\n")
    return 0


def main(argv):
    if not argv:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "interpreter":
        i = interpreter(rest[0] if rest else None)
        print(f"{i['path']} (Python {i['version']}, numpy {i['numpy'] or 'missing'})")
        return 0
    return {"init": cmd_init, "set": cmd_set, "abrun": cmd_abrun, "samples": cmd_samples,
            "collect": cmd_collect}[cmd](rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
