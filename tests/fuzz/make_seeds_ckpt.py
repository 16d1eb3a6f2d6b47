#!/usr/bin/python3
"""Write the seed corpora of tests/fuzz/ (run once; the outputs are committed).

  make_seeds_ckpt.py     writes tests/fuzz/seeds/jsonlex_diff/* and tests/fuzz/seeds/ckpt_open/*

seeds/jsonlex_diff: index-shaped JSON texts that exercise the cJSON dialect (escapes,
surrogates, a byte-order mark, odd numbers, duplicate keys), and whole safetensors files
whose entries take the reader's fast paths and their edges (no white space as the
safetensors crate writes, white space everywhere, 15 and 16 digits, a reordered entry,
an escaped key, offsets out of order).  seeds/ckpt_open:
small checkpoint folders in fuzz_ckpt_open.c's input format (config, index,
shards cut at "\\n--\\n"; a shard part is a 2-byte data length + its header).
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def header(tensors, compact=False):
    """tensors: [(name, dtype, shape)] -> (header text, data length); compact: no white space."""
    size = {"F32": 4, "BF16": 2, "F16": 2, "U8": 1}
    hdr, off = {"__metadata__": {"format": "mlx"}}, 0
    for name, dt, shape in tensors:
        n = size[dt]
        for d in shape:
            n *= d
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    return json.dumps(hdr, separators=(",", ":") if compact else None).encode(), off


def st_file(text, data_len):
    """A whole safetensors file: the length, the header text, data_len zero bytes."""
    return struct.pack("<Q", len(text)) + text + bytes(data_len)


def fast_path_files():
    """safetensors files for fg_st_parse's fast paths, spelled as writers spell them and just past them."""
    t = [("model.layers.0.mlp.experts.3.down_proj.weight", "BF16", [4, 2]), ("model.norm.weight", "F32", [2]),
         ("model.layers.0.self_attn.q_norm.weight", "F32", [2])]
    files = {}
    text, n = header(t, compact=True)
    files["compact.safetensors"] = st_file(text, n)
    text, n = header(t)
    files["spaced.safetensors"] = st_file(text, n)
    files["wide_spaces.safetensors"] = st_file(text.replace(b", ", b" ,\n\t").replace(b": ", b" :  "), n)
    # The last tensor first: offsets out of the header's order (the table is sorted by offset).
    text, n = header(t[::-1], compact=True)
    files["reversed.safetensors"] = st_file(text, n)
    big = b'{"a":{"dtype":"U8","shape":[100000000000000],"data_offsets":[0,100000000000000]}}'
    files["digits15.safetensors"] = st_file(big, 0)  # 15 digits: exact (tiling fails: no data)
    files["digits16.safetensors"] = st_file(big.replace(b"100000000000000", b"1000000000000000"), 0)
    files["reordered.safetensors"] = st_file(b'{"a":{"shape":[2],"dtype":"U8","data_offsets":[0,2]}}', 2)
    files["escaped_key.safetensors"] = st_file(b'{"a\\u002eb":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}', 2)
    files["exponent.safetensors"] = st_file(b'{"a":{"dtype":"U8","shape":[2e0],"data_offsets":[0,02]}}', 2)
    files["rank7.safetensors"] = st_file(b'{"a":{"dtype":"U8","shape":[1,1,1,1,1,1,2],"data_offsets":[0,2]}}', 2)
    return files


def shard_part(tensors):
    text, dlen = header(tensors)
    return struct.pack("<H", dlen) + text


def qwen(layers=2, H=8, sidecar=True, experts=0):
    cfg = {"model_type": "qwen3_5", "text_config": {"model_type": "qwen3_5_text", "hidden_size": H,
           "num_hidden_layers": layers, "mtp_num_hidden_layers": 1, "moe_intermediate_size": 4,
           "num_experts": experts or None}}
    trunk = [("model.embed_tokens.weight", "BF16", [4, H])]
    for i in range(layers):
        p = f"model.layers.{i}."
        trunk += [(p + "input_layernorm.weight", "F32", [H]), (p + "self_attn.q_norm.weight", "F32", [H]),
                  (p + "self_attn.k_norm.weight", "F32", [H]), (p + "post_attention_layernorm.weight", "F32", [H]),
                  (p + "mlp.down_proj.weight", "BF16", [H, 4])]
    trunk.append(("model.norm.weight", "F32", [H]))
    head = [("mtp.fc.weight", "BF16", [H, 2 * H]), ("mtp.pre_fc_norm_embedding.weight", "F32", [H]),
            ("mtp.pre_fc_norm_hidden.weight", "F32", [H]), ("mtp.norm.weight", "F32", [H]),
            ("mtp.layers.0.self_attn.q_norm.weight", "F32", [H])]
    for e in range(experts):
        head += [(f"mtp.layers.0.mlp.experts.{e}.{w}_proj.weight", "BF16", [4, H]) for w in ("gate", "up")]
        head.append((f"mtp.layers.0.mlp.experts.{e}.down_proj.weight", "BF16", [H, 4]))
    half = len(trunk) // 2
    shards = [trunk[:half], trunk[half:]]
    wm = {}
    for i, s in enumerate(shards, 1):
        for t in s:
            wm[t[0]] = f"model-{i:05d}-of-00004.safetensors"
    if sidecar:
        cfg["mlx_lm_extra_tensors"] = {"mtp_file": "mtp.safetensors"}
    else:
        shards[1] = shards[1] + head
        for t in head:
            wm[t[0]] = "model-00002-of-00004.safetensors"
    parts = [json.dumps(cfg).encode(), json.dumps({"metadata": {"total_size": 1}, "weight_map": wm}).encode()]
    parts += [shard_part(s) for s in shards]
    if sidecar:
        text, dlen = header(head)
        parts.append(struct.pack("<H", dlen) + b"S" + text)  # 'S' marks the sidecar; the header follows it
    return b"\n--\n".join(parts)


def main():
    js = os.path.join(HERE, "seeds", "jsonlex_diff")
    ck = os.path.join(HERE, "seeds", "ckpt_open")
    os.makedirs(js, exist_ok=True)
    os.makedirs(ck, exist_ok=True)
    texts = {
        "index.json": b'{"metadata": {"total_size": 12}, "weight_map": {"a.weight": "model-00001.safetensors", "b": "m.safetensors"}}\n',
        "escapes.json": b'{"weight_map": {"a\\u00e9\\ud83d\\ude00\\n\\"": "x\\/y.safetensors", "b\\u0000c": "z"}}',
        "bom.json": b'\xef\xbb\xbf {"weight_map": {}} \t\r\n',
        "numbers.json": b'{"weight_map": {"a": 1}, "n": [-0, 1e5, 1.5e-3, -.5, 01, 1.e2, 1e400]}',
        "dup.json": b'{"weight_map": 3, "weight_map": {"a": "b"}, "metadata": {"x": [true, false, null]}}',
        "deep.json": b"[" * 40 + b"]" * 40,
    }
    texts.update(fast_path_files())
    for name, data in texts.items():
        with open(os.path.join(js, name), "wb") as f:
            f.write(data)
    seeds = {"sidecar": qwen(), "embedded": qwen(sidecar=False), "moe_numbered": qwen(experts=2),
             "no_index": b"\n--\n".join(qwen().split(b"\n--\n")[:1] + [b""] + qwen().split(b"\n--\n")[2:])}
    for name, data in seeds.items():
        with open(os.path.join(ck, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
