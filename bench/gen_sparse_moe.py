#!/usr/bin/python3
"""Write a SPARSE checkpoint folder shaped like a very large Qwen3.5-MoE MLX model.

The folder has what `forged inspect` meets on a real >1 TB MLX conversion:

  config.json                     model_type qwen3_5_moe, text_config qwen3_5_moe_text,
                                  layer_types 3 x linear_attention + 1 x full_attention
                                  repeating, mtp_num_hidden_layers 1, and
                                  mlx_lm_extra_tensors {"mtp_file": "mtp.safetensors"}
  model-XXXXX-of-NNNNN.safetensors  dozens of shards, tens of GB logical each,
                                  `__metadata__: {"format": "mlx"}`
  model.safetensors.index.json    weight_map of every shard tensor
  mtp.safetensors                 the sidecar MTP head (top-level `mtp.*`, F32 norms)

Routed experts are numbered (`...mlp.experts.{e}.{gate,up,down}_proj.weight`, BF16,
[I, H] / [I, H] / [H, I]), so the default size (64 layers x 512 experts) gives
over 100,000 tensors (100,836) and 1.28 TB (1.2 TiB) of logical data.

Only the bytes a convention check reads are written: every 1-D `*norm.weight`
tensor (absolute-convention gains: q/k norms near 1.78, input/post-attention
layernorms 0.97-1.3, `linear_attn.norm` near 1.0, final norm near 3.5, MTP
norms in their own bands) and every `linear_attn.conv1d.weight` (MLX layout
[C, K, 1]).  Everything else is a hole: the data section is laid out in per-layer
order (so each norm sits between multi-GB expert blocks), the few real tensors
are written with seek + write, and the file is extended with truncate().  Disk
use stays in the tens of MB; compare `du -sh` with `du -sh --apparent-size`.

Header keys are written in name order while the data follows layer order, as
several writers do, so a reader must sort by offset rather than trust the order.

Values are seeded, so runs are byte-identical.  Python 3.9+, standard library only.

Usage:
  gen_sparse_moe.py OUT_DIR [--layers 64] [--experts 512] [--hidden 4096]
                    [--moe-intermediate 1536] [--shard-gb 25] [--force]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import struct
import sys
import time
from array import array

ITEM = {"BF16": 2, "F32": 4}


def bf16_bytes(values) -> bytes:
    """Round-to-nearest-even float32 -> BF16, little-endian."""
    n = len(values)
    words = struct.unpack(f"<{n}I", struct.pack(f"<{n}f", *values))
    out = array("H", [((w + 0x7FFF + ((w >> 16) & 1)) >> 16) & 0xFFFF for w in words])
    if sys.byteorder != "little":
        out.byteswap()
    return out.tobytes()


def f32_bytes(values) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def encode(dtype: str, values) -> bytes:
    return bf16_bytes(values) if dtype == "BF16" else f32_bytes(values)


def norm_values(name: str, n: int, mean: float, sigma: float = 0.02):
    r = random.Random(name)
    return [mean + r.gauss(0.0, sigma) for _ in range(n)]


def conv1d_bytes(name: str, n: int) -> bytes:
    """Small random BF16 values (|x| in [2^-4, 2^-1)) built from seeded bits, fast."""
    r = random.Random(name)
    raw = array("H")
    raw.frombytes(r.randbytes(2 * n) if hasattr(r, "randbytes")
                  else bytes(r.getrandbits(8) for _ in range(2 * n)))
    # keep sign + 7 mantissa bits + 2 exponent bits; exponent 0x7B..0x7E (2^-4..2^-1)
    out = array("H", [(w & 0x817F) | ((0x7B + ((w >> 7) & 3)) << 7) for w in raw])
    if sys.byteorder != "little":
        out.byteswap()
    return out.tobytes()


class Tensor:
    __slots__ = ("name", "dtype", "shape", "nbytes", "data")

    def __init__(self, name, dtype, shape, data=None):
        self.name = name
        self.dtype = dtype
        self.shape = list(shape)
        self.nbytes = math.prod(self.shape) * ITEM[dtype]
        self.data = data  # bytes to write, or None for a hole
        if data is not None and len(data) != self.nbytes:
            raise ValueError(f"{name}: {len(data)} bytes for {dtype}{self.shape}")


class Dims:
    def __init__(self, a):
        self.L = a.layers
        self.E = a.experts
        self.H = a.hidden
        self.I = a.moe_intermediate
        self.SI = a.moe_intermediate  # shared_expert_intermediate_size
        self.heads, self.kv_heads, self.head_dim = 32, 2, 256
        self.lk_heads, self.lv_heads, self.lk_dim, self.lv_dim = 16, 64, 128, 128
        self.conv_k = 4
        self.vocab = 248320
        self.key_dim = self.lk_heads * self.lk_dim
        self.value_dim = self.lv_heads * self.lv_dim
        self.conv_c = 2 * self.key_dim + self.value_dim


def layer_type(i: int) -> str:
    return "full_attention" if i % 4 == 3 else "linear_attention"


def moe_block(prefix: str, d: Dims, out: list) -> None:
    out.append(Tensor(f"{prefix}mlp.gate.weight", "BF16", [d.E, d.H]))
    for e in range(d.E):
        p = f"{prefix}mlp.experts.{e}."
        out.append(Tensor(p + "gate_proj.weight", "BF16", [d.I, d.H]))
        out.append(Tensor(p + "up_proj.weight", "BF16", [d.I, d.H]))
        out.append(Tensor(p + "down_proj.weight", "BF16", [d.H, d.I]))
    out.append(Tensor(f"{prefix}mlp.shared_expert.gate_proj.weight", "BF16", [d.SI, d.H]))
    out.append(Tensor(f"{prefix}mlp.shared_expert.up_proj.weight", "BF16", [d.SI, d.H]))
    out.append(Tensor(f"{prefix}mlp.shared_expert.down_proj.weight", "BF16", [d.H, d.SI]))
    out.append(Tensor(f"{prefix}mlp.shared_expert_gate.weight", "BF16", [1, d.H]))


def norm(name: str, dtype: str, n: int, mean: float, sigma: float = 0.02) -> Tensor:
    return Tensor(name, dtype, [n], encode(dtype, norm_values(name, n, mean, sigma)))


def full_attn(prefix: str, d: Dims, dtype: str, qk_mean: float, out: list) -> None:
    a = prefix + "self_attn."
    out.append(Tensor(a + "q_proj.weight", "BF16", [2 * d.heads * d.head_dim, d.H]))  # + output gate
    out.append(Tensor(a + "k_proj.weight", "BF16", [d.kv_heads * d.head_dim, d.H]))
    out.append(Tensor(a + "v_proj.weight", "BF16", [d.kv_heads * d.head_dim, d.H]))
    out.append(norm(a + "q_norm.weight", dtype, d.head_dim, qk_mean))
    out.append(norm(a + "k_norm.weight", dtype, d.head_dim, qk_mean - 0.01))
    out.append(Tensor(a + "o_proj.weight", "BF16", [d.H, d.heads * d.head_dim]))


def trunk_tensors(d: Dims) -> list:
    """Every trunk tensor, in the data order of the shards (per layer)."""
    pre = "language_model.model."
    out = [Tensor(pre + "embed_tokens.weight", "BF16", [d.vocab, d.H])]
    for i in range(d.L):
        p = f"{pre}layers.{i}."
        frac = i / max(1, d.L - 1)
        out.append(norm(p + "input_layernorm.weight", "BF16", d.H, 0.97 + 0.33 * frac))
        if layer_type(i) == "full_attention":
            full_attn(p, d, "BF16", 1.78 + 0.03 * math.sin(i), out)
        else:
            a = p + "linear_attn."
            out.append(Tensor(a + "in_proj_qkv.weight", "BF16", [d.conv_c, d.H]))
            out.append(Tensor(a + "in_proj_z.weight", "BF16", [d.value_dim, d.H]))
            out.append(Tensor(a + "in_proj_b.weight", "BF16", [d.lv_heads, d.H]))
            out.append(Tensor(a + "in_proj_a.weight", "BF16", [d.lv_heads, d.H]))
            n = d.conv_c * d.conv_k
            out.append(Tensor(a + "conv1d.weight", "BF16", [d.conv_c, d.conv_k, 1],
                              conv1d_bytes(a + "conv1d.weight", n)))
            out.append(Tensor(a + "dt_bias", "BF16", [d.lv_heads]))
            out.append(Tensor(a + "A_log", "F32", [d.lv_heads]))
            out.append(norm(a + "norm.weight", "BF16", d.lv_dim, 1.0, 0.01))
            out.append(Tensor(a + "out_proj.weight", "BF16", [d.H, d.value_dim]))
        out.append(norm(p + "post_attention_layernorm.weight", "BF16", d.H, 1.0 + 0.3 * frac))
        moe_block(p, d, out)
    out.append(norm(pre + "norm.weight", "BF16", d.H, 3.5, 0.1))
    out.append(Tensor("language_model.lm_head.weight", "BF16", [d.vocab, d.H]))
    return out


def mtp_tensors(d: Dims) -> list:
    """The sidecar head, top-level mtp.* names, F32 norms as MTPLX writes them."""
    out = [Tensor("mtp.fc.weight", "BF16", [d.H, 2 * d.H]),
           norm("mtp.pre_fc_norm_embedding.weight", "F32", d.H, 0.93),
           norm("mtp.pre_fc_norm_hidden.weight", "F32", d.H, 1.12)]
    p = "mtp.layers.0."
    out.append(norm(p + "input_layernorm.weight", "F32", d.H, 1.02))
    full_attn(p, d, "F32", 1.79, out)
    out.append(norm(p + "post_attention_layernorm.weight", "F32", d.H, 1.05))
    moe_block(p, d, out)
    out.append(norm("mtp.norm.weight", "F32", d.H, 2.25, 0.05))
    return out


def split_shards(tensors: list, shard_bytes: int) -> list:
    shards, cur, size = [], [], 0
    for t in tensors:
        if cur and size + t.nbytes > shard_bytes:
            shards.append(cur)
            cur, size = [], 0
        cur.append(t)
        size += t.nbytes
    if cur:
        shards.append(cur)
    return shards


def write_sparse(path: str, tensors: list, metadata: dict) -> int:
    """Header (keys in name order) + only the tensors that carry data; the rest are holes."""
    entries, off = {}, 0
    for t in tensors:
        entries[t.name] = {"dtype": t.dtype, "shape": t.shape, "data_offsets": [off, off + t.nbytes]}
        off += t.nbytes
    header = {"__metadata__": metadata}
    for name in sorted(entries):
        header[name] = entries[name]
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(8 + len(text)) % 8)
    data_start = 8 + len(text)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for t in tensors:
            if t.data is not None:
                f.seek(data_start + entries[t.name]["data_offsets"][0])
                f.write(t.data)
        f.truncate(data_start + off)
    return data_start + off


def config(d: Dims) -> dict:
    return {
        "architectures": ["Qwen3_5MoeForConditionalGeneration"],
        "model_type": "qwen3_5_moe",
        "text_config": {
            "model_type": "qwen3_5_moe_text",
            "hidden_size": d.H,
            "num_hidden_layers": d.L,
            "num_attention_heads": d.heads,
            "num_key_value_heads": d.kv_heads,
            "head_dim": d.head_dim,
            "vocab_size": d.vocab,
            "hidden_act": "silu",
            "max_position_embeddings": 262144,
            "rms_norm_eps": 1e-06,
            "rope_theta": 10000000,
            "partial_rotary_factor": 0.25,
            "attn_output_gate": True,
            "full_attention_interval": 4,
            "layer_types": [layer_type(i) for i in range(d.L)],
            "linear_conv_kernel_dim": d.conv_k,
            "linear_key_head_dim": d.lk_dim,
            "linear_value_head_dim": d.lv_dim,
            "linear_num_key_heads": d.lk_heads,
            "linear_num_value_heads": d.lv_heads,
            "tie_word_embeddings": False,
            "num_experts": d.E,
            "num_experts_per_tok": 10,
            "decoder_sparse_step": 1,
            "mlp_only_layers": [],
            "moe_intermediate_size": d.I,
            "shared_expert_intermediate_size": d.SI,
            "norm_topk_prob": True,
            "mtp_num_hidden_layers": 1,
            "dtype": "bfloat16",
        },
        "tie_word_embeddings": False,
        "mlx_lm_extra_tensors": {"mtp_file": "mtp.safetensors"},
        "mtp_norm_encoding": "absolute",
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--layers", type=int, default=64,
                    help="num_hidden_layers (default 64: with 512 experts, >100,000 tensors)")
    ap.add_argument("--experts", type=int, default=512)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--moe-intermediate", type=int, default=1536)
    ap.add_argument("--shard-gb", type=float, default=25.0, help="logical GB per shard")
    ap.add_argument("--force", action="store_true", help="replace OUT_DIR if it exists")
    a = ap.parse_args(argv)
    if a.layers < 1 or a.experts < 1 or a.hidden < 1 or a.moe_intermediate < 1 or a.shard_gb <= 0:
        ap.error("sizes must be positive")
    if os.path.exists(a.out_dir):
        if not a.force:
            ap.error(f"{a.out_dir} exists (use --force to replace it)")
        shutil.rmtree(a.out_dir)
    t0 = time.monotonic()
    d = Dims(a)
    tmp = a.out_dir.rstrip("/") + ".tmp"
    if os.path.exists(tmp):
        shutil.rmtree(tmp)
    os.makedirs(tmp)

    shards = split_shards(trunk_tensors(d), int(a.shard_gb * 1e9))
    n = len(shards)
    weight_map, total, count = {}, 0, 0
    for i, group in enumerate(shards, 1):
        fname = f"model-{i:05d}-of-{n:05d}.safetensors"
        write_sparse(os.path.join(tmp, fname), group, {"format": "mlx"})
        for t in group:
            weight_map[t.name] = fname
            total += t.nbytes
        count += len(group)
    with open(os.path.join(tmp, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total},
                   "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
        f.write("\n")
    head = mtp_tensors(d)
    side = write_sparse(os.path.join(tmp, "mtp.safetensors"), head, {"format": "mlx"})
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(config(d), f, indent=2)
        f.write("\n")
    os.rename(tmp, a.out_dir)

    files = sorted(os.listdir(a.out_dir))
    apparent = sum(os.stat(os.path.join(a.out_dir, x)).st_size for x in files)
    on_disk = sum(os.stat(os.path.join(a.out_dir, x)).st_blocks * 512 for x in files)
    print(f"{a.out_dir}: {n} shards + mtp.safetensors, {count + len(head)} tensors "
          f"({count} trunk, {len(head)} head), logical {apparent / 1e9:.1f} GB, "
          f"on disk {on_disk / 2**20:.1f} MiB, {time.monotonic() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
