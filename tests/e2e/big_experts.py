#!/usr/bin/env python3
"""big_experts.py SRC OUT INTER: the fused-linear MoE fixture SRC with a head
whose experts are large, for the originals writer (test_big_original.sh).

OUT is SRC with moe_intermediate_size = INTER and the head's fused experts
replaced: gate_up_proj [E, 2*INTER, H] BF16 of finite values with random
mantissas and signs (zstd cannot shrink them, so the compressed original is
as large as the tensor) and down_proj [E, H, INTER] of zeros, left as a hole
at the end of the shard so it costs no disk.  Every other tensor, the trunk
shard and the index keep their bytes (the index's total_size follows).
Written in chunks: memory stays at a few tens of MB.  Prints the gate_up
tensor's byte count and SHA-256.
"""
import hashlib
import json
import os
import shutil
import struct
import sys

import numpy as np

HEAD = "mtp.layers.0.mlp.experts."
CHUNK = 16 << 20  # elements per generated chunk


def read_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n)), 8 + n


def random_finite_bf16(rng, n):
    """n BF16 bit patterns: random sign and mantissa, exponent in [64, 191]."""
    r = rng.integers(0, 1 << 16, size=n, dtype=np.uint16)
    return (r & 0x80FF) | ((((r >> 8) & 0x3F) + 0x20) << 8)


def main():
    src, out, inter = sys.argv[1], sys.argv[2], int(sys.argv[3])
    os.makedirs(out)
    cfg = json.load(open(os.path.join(src, "config.json")))
    text = cfg.get("text_config", cfg)
    text["moe_intermediate_size"] = inter
    experts, hidden = text["num_experts"], text["hidden_size"]
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)

    index = json.load(open(os.path.join(src, "model.safetensors.index.json")))
    shard = index["weight_map"][HEAD + "gate_up_proj"]
    big = {
        HEAD + "gate_up_proj": [experts, 2 * inter, hidden],
        HEAD + "down_proj": [experts, hidden, inter],
    }
    for name in os.listdir(src):
        if name not in (shard, "config.json", "model.safetensors.index.json"):
            shutil.copyfile(os.path.join(src, name), os.path.join(out, name))

    header, data_start = read_header(os.path.join(src, shard))
    meta = header.pop("__metadata__", None)
    kept = sorted((k for k in header if k not in big), key=lambda k: header[k]["data_offsets"][0])
    new, off = {}, 0
    for k in kept:
        a, b = header[k]["data_offsets"]
        new[k] = dict(header[k], data_offsets=[off, off + b - a])
        off += b - a
    for k, shape in big.items():
        n = 2 * int(np.prod(shape, dtype=np.int64))
        new[k] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + n]}
        off += n
    if meta is not None:
        new["__metadata__"] = meta
    text_h = json.dumps(new, separators=(",", ":")).encode()
    text_h += b" " * (-len(text_h) % 8)

    rng = np.random.default_rng(20261201)
    digest = hashlib.sha256()
    with open(os.path.join(src, shard), "rb") as fin, open(os.path.join(out, shard), "wb") as fo:
        fo.write(struct.pack("<Q", len(text_h)) + text_h)
        for k in kept:
            a, b = header[k]["data_offsets"]
            fin.seek(data_start + a)
            fo.write(fin.read(b - a))
        left = int(np.prod(big[HEAD + "gate_up_proj"], dtype=np.int64))
        while left:
            n = min(left, CHUNK)
            chunk = random_finite_bf16(rng, n).astype("<u2").tobytes()
            digest.update(chunk)
            fo.write(chunk)
            left -= n
        fo.truncate(8 + len(text_h) + off)  # down_proj: zeros, as a hole

    total = 0
    for name in set(index["weight_map"].values()):
        h, _ = read_header(os.path.join(out, name))
        h.pop("__metadata__", None)
        total += sum(v["data_offsets"][1] - v["data_offsets"][0] for v in h.values())
    index.setdefault("metadata", {})["total_size"] = total
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
    a, b = new[HEAD + "gate_up_proj"]["data_offsets"]
    print(b - a, digest.hexdigest())


if __name__ == "__main__":
    main()
