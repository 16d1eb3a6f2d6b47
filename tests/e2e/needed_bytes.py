#!/usr/bin/env python3
"""needed_bytes.py DIR: the bytes an inspection of checkpoint DIR must read,
counted independently of forged: config.json, the index (when present), and
for every shard and sidecar its 8-byte length, its JSON header and the bytes
of its 1-D norm tensors (names ending in norm.weight / layernorm.weight)."""
import glob
import json
import os
import struct
import sys

d = sys.argv[1]
total = os.path.getsize(os.path.join(d, "config.json"))
idx = os.path.join(d, "model.safetensors.index.json")
files = set()
if os.path.exists(idx):
    total += os.path.getsize(idx)
    files |= set(json.load(open(idx))["weight_map"].values())
else:
    files.add("model.safetensors")
for side in ("mtp.safetensors", "mtp/weights.safetensors", "model-mtp.safetensors"):
    if os.path.exists(os.path.join(d, side)):
        files.add(side)
for name in files:
    with open(os.path.join(d, name), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    total += 8 + n
    for k, v in header.items():
        if k != "__metadata__" and len(v["shape"]) == 1 and "norm" in k.rsplit(".", 2)[-2]:
            total += v["data_offsets"][1] - v["data_offsets"][0]
print(total)
