#!/usr/bin/env python3
"""Compares `forged inspect --json` reports with the fixture manifest.

The manifest is written by tests/fixtures/gen_fixtures.py from the values it
generated (its own Python arithmetic, not forged's), so this is an independent
check of family, layout, head location, per-set conventions and figures, the
probe, and that every verdict a fixture is built to provoke is raised.

usage: check_inspect.py MANIFEST NAME REPORT.json  -> exit 0, or 1 naming the mismatch
"""
import json
import re
import sys


def fail(name, what, got, want):
    print(f"{name}: {what}: forged says {got!r}, manifest {want!r}")
    sys.exit(1)


def close(a, b, tol=1e-3):
    return a is not None and b is not None and abs(a - b) <= tol


def main():
    manifest_path, name, report_path = sys.argv[1:4]
    want = json.load(open(manifest_path))["fixtures"][name]
    got = json.load(open(report_path))

    if got.get("schema") != "forged.inspect.v1":
        fail(name, "schema", got.get("schema"), "forged.inspect.v1")
    for key in ("family", "norm_style", "layout"):
        if want.get(key) is not None and got[key] != want[key]:
            fail(name, key, got[key], want[key])
    if want.get("model_type") and got["model_type"] != want["model_type"]:
        fail(name, "model_type", got["model_type"], want["model_type"])

    wm, gm = want.get("mtp") or {}, got["mtp"]
    for key in ("location", "scheme", "sidecar", "declared_layers", "tensors", "quantized"):
        if key in wm and wm[key] is not None and gm.get(key) != wm[key]:
            fail(name, "mtp." + key, gm.get(key), wm[key])

    sets = {s["name"]: s for s in got["sets"]}
    for set_name, conv in (want.get("conventions") or {}).items():
        if conv is None:
            continue
        if set_name not in sets:
            fail(name, f"set {set_name}", None, conv)
        if sets[set_name]["convention"] != conv:
            fail(name, f"set {set_name} convention", sets[set_name]["convention"], conv)
    for set_name, fig in (want.get("sets") or {}).items():
        if set_name not in sets:
            continue
        s = sets[set_name]
        for key in ("tensors", "norm_tensors"):
            if key in fig and s[key] != fig[key]:
                fail(name, f"set {set_name} {key}", s[key], fig[key])
        for key in ("qk_max", "low_min"):
            if fig.get(key) is not None and not close(s[key], fig[key]):
                fail(name, f"set {set_name} {key}", s[key], fig[key])
        probe = fig.get("probe")
        if probe:
            gp = s.get("probe") or {}
            if gp.get("tensor") != probe["tensor"] or not close(gp.get("mean"), probe["mean"]):
                fail(name, f"set {set_name} probe", gp, probe)

    codes = {v["code"] for v in got["verdicts"]}
    for code in want.get("exercises") or []:
        if re.fullmatch(r"[a-z0-9_]+", code) and code not in codes:
            fail(name, "verdict " + code, sorted(codes), code)
    errors = [v["code"] for v in got["verdicts"] if v["severity"] == "error"]
    if got["ok"] != (not errors):
        fail(name, "ok", got["ok"], not errors)
    print(f"ok {name}")


if __name__ == "__main__":
    main()
