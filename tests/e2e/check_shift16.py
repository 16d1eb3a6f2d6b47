#!/usr/bin/python3
"""The bf16_shift_* verdicts of an inspect report against numpy (issue 12 item 8).

usage: check_shift16.py SOURCE_DIR REPORT.json EXPECT
         check_shift16.py to-f16 SOURCE_DIR OUT_DIR
  EXPECT: "SET=RUNTIME,RUNTIME;SET=..." the sets that must carry one verdict and the runtimes
  it names, every other delta set none ("" = no verdict at all).
  to-f16 copies a checkpoint with every 1-D BF16 tensor stored F16 (same bytes per value, so
  the offsets stay; the header is padded with spaces to its old length).

For every set named, numpy computes, over its zero-centred norms stored BF16 or F16 (Qwen3.5's
(1 + w) RMSNorms: input_layernorm, post_attention_layernorm, q_norm, k_norm, the final norms and
the head's pre_fc_norm_*; linear_attn.norm is a plain gated gain), the worst |round16(1 + w) -
(1 + w)| with the sum rounded once to the tensor's own dtype (ties to even), and checks the one
verdict: its count of norms, its worst error (the element it names and the two values it prints),
its severity (warning beyond half a BF16 step at 1.0, 2^-8; info within), and its runtimes.
Reads the shards directly; needs numpy (Debian's python3-numpy).
"""

import glob
import json
import os
import re
import struct
import sys

import numpy as np

HALF_STEP = 2.0 ** -8
ZERO_CENTRED = ("input_layernorm.weight", "post_attention_layernorm.weight", "q_norm.weight", "k_norm.weight",
                "pre_fc_norm_embedding.weight", "pre_fc_norm_hidden.weight")


def fail(msg):
    print(f"FAIL shift16: {msg}")
    sys.exit(1)


def tensors(src):
    out = {}
    for path in sorted(glob.glob(os.path.join(src, "*.safetensors"))):
        raw = open(path, "rb").read()
        n = struct.unpack("<Q", raw[:8])[0]
        for name, h in json.loads(raw[8:8 + n]).items():
            if name == "__metadata__" or h["dtype"] not in ("BF16", "F16") or len(h["shape"]) != 1:
                continue
            b, e = h["data_offsets"]
            out[name] = (h["dtype"], raw[8 + n + b:8 + n + e])
    return out


def as_f64(dtype, data):
    if dtype == "F16":
        return np.frombuffer(data, "<f2").astype(np.float64)
    return (np.frombuffer(data, "<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def round16(dtype, x):
    """x (float64) rounded to BF16 or F16, ties to even, back in float64."""
    if dtype == "F16":
        return x.astype(np.float16).astype(np.float64)
    m, e = np.frexp(x)  # x = m * 2^e, 0.5 <= |m| < 1: BF16 keeps 8 significant bits
    return np.ldexp(np.rint(m * 256.0) / 256.0, e)


def zero_centred(name):
    """The (1 + w) gains; a final norm is "<container>.norm.weight" outside the attention blocks."""
    if name.endswith(ZERO_CENTRED):
        return True
    return name.endswith(".norm.weight") and not re.search(r"\.(self_attn|linear_attn|mlp)\.", name)


def set_of(name):
    return "mtp" if name.startswith("mtp.") else "trunk"


def to_f16(src, out):
    os.makedirs(out, exist_ok=True)
    for f in sorted(os.listdir(src)):
        raw = open(os.path.join(src, f), "rb").read()
        if f.endswith(".safetensors"):
            n = struct.unpack("<Q", raw[:8])[0]
            head, body = json.loads(raw[8:8 + n]), bytearray(raw[8 + n:])
            for name, h in head.items():
                if name == "__metadata__" or h["dtype"] != "BF16" or len(h["shape"]) != 1:
                    continue
                b, e = h["data_offsets"]
                body[b:e] = as_f64("BF16", bytes(body[b:e])).astype("<f2").tobytes()
                h["dtype"] = "F16"
            text = json.dumps(head, separators=(",", ":")).encode()
            if len(text) > n:
                fail(f"{f}: the F16 header grew")
            raw = raw[:8] + text + b" " * (n - len(text)) + bytes(body)
        open(os.path.join(out, f), "wb").write(raw)


def main():
    if sys.argv[1] == "to-f16":
        to_f16(sys.argv[2], sys.argv[3])
        return
    src, report, expect = sys.argv[1:4]
    want = {}
    for part in filter(None, expect.split(";")):
        s, _, rts = part.partition("=")
        want[s] = sorted(filter(None, rts.split(",")))
    got = json.load(open(report))
    verdicts = [v for v in got["verdicts"] if v["code"].startswith("bf16_shift_")]
    by_set = {}
    for v in verdicts:
        if v["set"] in by_set:
            fail(f"set {v['set']}: more than one bf16_shift verdict")
        by_set[v["set"]] = v
    if sorted(by_set) != sorted(want):
        fail(f"verdicts for sets {sorted(by_set)}, expected {sorted(want)}")
    ts = tensors(src)
    for s, runtimes in want.items():
        v = by_set[s]
        norms = {n: t for n, t in ts.items() if set_of(n) == s and zero_centred(n)}
        worst, where = -1.0, None
        for n, (dt, data) in norms.items():
            w = as_f64(dt, data)
            err = np.abs(round16(dt, 1.0 + w) - (1.0 + w))
            if err.max() > worst:
                worst, where = float(err.max()), n
        if sorted(v["runtimes"]) != runtimes:
            fail(f"set {s}: runtimes {v['runtimes']}, expected {runtimes}")
        code = "bf16_shift_precision_loss" if worst > HALF_STEP else "bf16_shift_rounding"
        sev = "warning" if worst > HALF_STEP else "info"
        if v["code"] != code or v["severity"] != sev:
            fail(f"set {s}: {v['code']} ({v['severity']}), numpy's worst error {worst} gives {code} ({sev})")
        m = re.match(r"(\d+) delta norm\(s\) .* off by ([0-9.e+-]+) \((\S+)\[(\d+)\]: 1 \+ ([0-9.e+-]+) stored as "
                     r"([0-9.e+-]+);", v["detail"])
        if not m:
            fail(f"set {s}: detail not understood: {v['detail']}")
        if int(m.group(1)) != len(norms):
            fail(f"set {s}: {m.group(1)} norms counted, numpy finds {len(norms)} ({sorted(norms)})")
        if abs(float(m.group(2)) - worst) > 1e-3 * worst:
            fail(f"set {s}: worst error {m.group(2)}, numpy {worst} (in {where})")
        name = v["tensors"][0]
        if name not in norms:
            fail(f"set {s}: the verdict names {name}, not one of the set's 16-bit zero-centred norms")
        dt, data = norms[name]
        w = as_f64(dt, data)[int(m.group(4))]
        stored = float(round16(dt, np.array([1.0 + w]))[0])
        if abs(stored - (1.0 + w)) != worst or abs(float(m.group(6)) - stored) > 1e-6 or \
                abs(float(m.group(5)) - w) > 1e-6:
            fail(f"set {s}: {name}[{m.group(4)}] = {w} sums to {stored}, the verdict says "
                 f"{m.group(5)} -> {m.group(6)} (numpy's worst {worst})")
    print("ok shift16: " + (", ".join(f"{s} {by_set[s]['code']}" for s in sorted(want)) or "no verdict"))


if __name__ == "__main__":
    main()
