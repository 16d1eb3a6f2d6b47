#!/usr/bin/python3
"""Writes a raw Hugging Face Qwen3.5-MoE checkpoint whose MTP head is realistic
in size (a 35B-A3B-shaped head: 256 numbered experts of 3 x [512, 2048] BF16,
about 1.6 GB), with a small trunk, for bench/forge/run.sh.

usage: /usr/bin/python3 bench/forge/gen_big_head.py OUT_DIR [--experts 256]
           [--small] [--fp8] [--trunk-layers L --trunk-experts N] [--one-shard]
Values are normal(0, 0.02) in BF16, so quantization sees realistic ranges.
For bench/forge/scale.sh (how forge's time grows with the number of tensors):
  --small          tiny dimensions (hidden 64, experts [32, 64]): many tensors, few bytes
  --fp8            the head's experts in F8_E4M3 with their weight_scale_inv block scales
  --trunk-layers L, --trunk-experts N: L trunk layers of N numbered experts each
  --one-shard      trunk and head in one shard (so a forge rewrites it, not links it)
Needs numpy (Debian's python3-numpy).
"""
import argparse
import json
import os
import struct

import numpy as np

H, I, HEADS, HEAD_DIM = 2048, 512, 16, 128
SMALL = (64, 32, 2, 32)


def bf16(rng, shape, scale=0.02, base=0.0):
    x = (rng.standard_normal(shape, dtype=np.float32) * np.float32(scale) + np.float32(base))
    u = x.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def write_shard(path, tensors):
    """tensors: list of (name, array, dtype string); written in order, data streamed."""
    header, off = {}, 0
    for name, arr, dt in tensors:
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + arr.nbytes]}
        off += arr.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - (len(text) % 8)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, arr, _ in tensors:
            f.write(arr.tobytes())


def main():
    global H, I, HEADS, HEAD_DIM
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--experts", type=int, default=256)
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--fp8", action="store_true")
    ap.add_argument("--trunk-layers", type=int, default=4)
    ap.add_argument("--trunk-experts", type=int, default=0)
    ap.add_argument("--one-shard", action="store_true")
    a = ap.parse_args()
    if a.small:
        H, I, HEADS, HEAD_DIM = SMALL
    rng = np.random.default_rng(7)
    os.makedirs(a.out, exist_ok=True)
    layers = a.trunk_layers
    cfg = {"model_type": "qwen3_5_moe", "architectures": ["Qwen3_5MoeForConditionalGeneration"],
           "text_config": {"model_type": "qwen3_5_moe_text", "hidden_size": H, "num_hidden_layers": layers,
                           "num_attention_heads": HEADS, "num_key_value_heads": 2, "head_dim": HEAD_DIM,
                           "moe_intermediate_size": I, "num_experts": a.experts, "num_experts_per_tok": 8,
                           "shared_expert_intermediate_size": I, "vocab_size": 1024,
                           "layer_types": ["full_attention"] * layers, "mtp_num_hidden_layers": 1}}
    json.dump(cfg, open(os.path.join(a.out, "config.json"), "w"), indent=1)
    trunk = [("model.language_model.embed_tokens.weight", bf16(rng, (1024, H)), "BF16")]
    for l in range(layers):
        p = f"model.language_model.layers.{l}."
        trunk += [(p + "input_layernorm.weight", bf16(rng, (H,), 0.01, 0.3), "BF16"),
                  (p + "post_attention_layernorm.weight", bf16(rng, (H,), 0.01, 0.3), "BF16"),
                  (p + "self_attn.q_norm.weight", bf16(rng, (HEAD_DIM,), 0.01, 0.78), "BF16"),
                  (p + "self_attn.k_norm.weight", bf16(rng, (HEAD_DIM,), 0.01, 0.78), "BF16")]
        for e in range(a.trunk_experts):
            trunk += [(p + f"mlp.experts.{e}.{w}_proj.weight", bf16(rng, (I, H) if w != "down" else (H, I)), "BF16")
                      for w in ("gate", "up", "down")]
    trunk.append(("model.language_model.norm.weight", bf16(rng, (H,), 0.01, 2.5), "BF16"))
    # A raw [C, 1, K] conv1d, as Qwen3.5's linear-attention layers store it: mlx-lm
    # shifts such a trunk at load, so the artifact is servable by MLX runtimes.
    trunk.append(("model.language_model.layers.0.linear_attn.conv1d.weight", bf16(rng, (256, 1, 4)), "BF16"))
    head = [("mtp.fc.weight", bf16(rng, (H, 2 * H)), "BF16"),
            ("mtp.pre_fc_norm_embedding.weight", bf16(rng, (H,), 0.01, -0.4), "BF16"),
            ("mtp.pre_fc_norm_hidden.weight", bf16(rng, (H,), 0.01, 0.3), "BF16"),
            ("mtp.norm.weight", bf16(rng, (H,), 0.01, 1.25), "BF16")]
    p = "mtp.layers.0."
    head += [(p + "input_layernorm.weight", bf16(rng, (H,), 0.01, 0.3), "BF16"),
             (p + "post_attention_layernorm.weight", bf16(rng, (H,), 0.01, 0.3), "BF16"),
             (p + "self_attn.q_proj.weight", bf16(rng, (2 * HEADS * HEAD_DIM, H)), "BF16"),
             (p + "self_attn.k_proj.weight", bf16(rng, (2 * HEAD_DIM, H)), "BF16"),
             (p + "self_attn.v_proj.weight", bf16(rng, (2 * HEAD_DIM, H)), "BF16"),
             (p + "self_attn.o_proj.weight", bf16(rng, (H, HEADS * HEAD_DIM)), "BF16"),
             (p + "self_attn.q_norm.weight", bf16(rng, (HEAD_DIM,), 0.01, 0.78), "BF16"),
             (p + "self_attn.k_norm.weight", bf16(rng, (HEAD_DIM,), 0.01, 0.78), "BF16"),
             (p + "mlp.gate.weight", bf16(rng, (a.experts, H)), "BF16")]
    for e in range(a.experts):
        q = f"{p}mlp.experts.{e}."
        for w, shape in (("gate_proj", (I, H)), ("up_proj", (I, H)), ("down_proj", (H, I))):
            if a.fp8:
                # E4M3 bytes below 0x70: finite, non-negative values up to 120; one scale per 128 x 128 block.
                blocks = tuple((d + 127) // 128 for d in shape)
                head += [(q + w + ".weight", rng.integers(0, 0x70, size=shape, dtype=np.uint8), "F8_E4M3"),
                         (q + w + ".weight_scale_inv", np.full(blocks, 0.01, dtype=np.float32), "F32")]
            else:
                head.append((q + w + ".weight", bf16(rng, shape), "BF16"))
    shards = [(trunk + head, "model-00001-of-00001.safetensors")] if a.one_shard else \
        [(trunk, "model-00001-of-00002.safetensors"), (head, "model-00002-of-00002.safetensors")]
    wm = {}
    for tensors, fname in shards:
        write_shard(os.path.join(a.out, fname), tensors)
        for name, _, _ in tensors:
            wm[name] = fname
    json.dump({"metadata": {}, "weight_map": wm}, open(os.path.join(a.out, "model.safetensors.index.json"), "w"))
    print(f"head: {sum(x.nbytes for _, x, _ in head) / 1e9:.2f} GB in {len(head)} tensors")


if __name__ == "__main__":
    main()
