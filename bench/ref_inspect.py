#!/usr/bin/python3
"""Python reference for bench_inspect.sh: the minimal work of a convention check.

  ref_inspect.py CHECKPOINT_DIR      prints one JSON object

For every `*.safetensors` file of the folder (the shards, and the MTP sidecar
named by config.json's `mlx_lm_extra_tensors.mtp_file`, if any): read the 8-byte
header length and the JSON header with the json module; for every tensor whose
name ends with "norm.weight" (or with `pre_fc_norm_{embedding,hidden}.weight`,
the head's low-set norms, which the suffix misses), seek to its bytes, read
them and compute the mean of its BF16 or F32 values (array module).  Then
apply the two-signal rule of docs/domain.md section 2 per tensor set (trunk = the
shards, mtp = the sidecar):
absolute when qk_max >= 1.25 or low_min >= 0.5, delta otherwise, no_evidence
without q/k or low-set norms.

It does far less than `forged inspect` (no index cross-check, no family
table, no MTP scheme search, no runtime simulation, no validation of offsets
or shapes): it is the floor a scripted check would cost.  It also reports the
bytes it read and how many distinct 4 KiB pages the norm tensors span (the
least a reader that faults norm bytes in through mmap must touch).
"""

import json
import os
import struct
import sys
from array import array

PAGE = 4096
QK = ("self_attn.q_norm.weight", "self_attn.k_norm.weight")
LOW = ("input_layernorm.weight", "post_attention_layernorm.weight",
       "pre_fc_norm_embedding.weight", "pre_fc_norm_hidden.weight")


def mean_of(dtype: str, raw: bytes) -> float:
    if dtype == "BF16":
        h = array("H")
        h.frombytes(raw)
        if sys.byteorder != "little":
            h.byteswap()
        vals = array("f")
        vals.frombytes(array("I", [x << 16 for x in h]).tobytes())
    elif dtype == "F32":
        vals = array("f")
        vals.frombytes(raw)
        if sys.byteorder != "little":
            vals.byteswap()
    else:
        raise ValueError(f"unsupported norm dtype {dtype}")
    return sum(vals) / len(vals) if len(vals) else float("nan")


def decide(qk, low) -> str:
    if not qk and not low:
        return "no_evidence"
    if (qk and max(qk) >= 1.25) or (low and min(low) >= 0.5):
        return "absolute"
    return "delta"


def main(argv) -> int:
    if len(argv) != 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    folder = argv[0]
    with open(os.path.join(folder, "config.json"), "rb") as f:
        cfg = json.load(f)
    sidecar = (cfg.get("mlx_lm_extra_tensors") or {}).get("mtp_file")
    files = sorted(n for n in os.listdir(folder) if n.endswith(".safetensors"))
    sets = {"trunk": {"qk": [], "low": [], "tensors": 0, "norms": 0},
            "mtp": {"qk": [], "low": [], "tensors": 0, "norms": 0}}
    read = pages = 0
    for name in files:
        s = sets["mtp" if name == sidecar else "trunk"]
        with open(os.path.join(folder, name), "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
            read += 8 + n
            start = 8 + n
            for key, t in header.items():
                if key == "__metadata__":
                    continue
                s["tensors"] += 1
                if not key.endswith(("norm.weight",) + LOW[2:]):
                    continue
                b, e = t["data_offsets"]
                f.seek(start + b)
                raw = f.read(e - b)
                read += len(raw)
                pages += (start + e - 1) // PAGE - (start + b) // PAGE + 1 if e > b else 0
                m = mean_of(t["dtype"], raw)
                s["norms"] += 1
                if key.endswith(QK):
                    s["qk"].append(m)
                elif key.endswith(LOW):
                    s["low"].append(m)
    out = {"files": len(files), "tensors": sum(s["tensors"] for s in sets.values()),
           "bytes_read": read, "norm_pages": pages, "sets": {}}
    for k, s in sets.items():
        if s["tensors"]:
            out["sets"][k] = {"tensors": s["tensors"], "norm_tensors": s["norms"],
                              "convention": decide(s["qk"], s["low"]),
                              "qk_max": round(max(s["qk"]), 4) if s["qk"] else None,
                              "low_min": round(min(s["low"]), 4) if s["low"] else None}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
