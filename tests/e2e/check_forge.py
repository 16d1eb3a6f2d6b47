#!/usr/bin/python3
"""Independent checks of a forged artifact, with numpy (Debian's python3-numpy).

Reads the source checkpoint and the artifact with its own safetensors reader
and computes what the sidecar must hold: norms shifted in float32 (1 + offset)
or untouched, every other tensor byte-identical or dequantized/restacked the
way docs/domain.md describes.  Never uses forged's writer or reader.

usage: check_forge.py MODE SOURCE_DIR ARTIFACT_DIR   (modes below) -> exit 0 or 1
"""
import glob
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import quant_golden as qg  # the numpy reference of MLX quantization and FP8 (independent of forged)

ZERO_CENTRED = (".q_norm.weight", ".k_norm.weight", ".input_layernorm.weight",
                ".post_attention_layernorm.weight", ".pre_fc_norm_embedding.weight",
                ".pre_fc_norm_hidden.weight", "mtp.norm.weight")


def read(path):
    """name -> (dtype, shape, raw bytes), and the metadata."""
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__", {})
    base = 8 + n
    return {k: (v["dtype"], v["shape"], b[base + v["data_offsets"][0]:base + v["data_offsets"][1]])
            for k, v in h.items()}, meta


def values(dtype, raw):
    if dtype == "F32":
        return np.frombuffer(raw, "<f4")
    if dtype == "BF16":
        return (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
    if dtype == "F16":
        return np.frombuffer(raw, "<f2").astype(np.float32)
    raise ValueError(dtype)


def e4m3(raw):
    return qg.e4m3_table()[np.frombuffer(raw, np.uint8)].astype(np.float32)


def to_bf16(x):
    return qg.bf16_bits(np.ascontiguousarray(x, dtype=np.float32)).astype(np.uint16)


def shards(d):
    out = {}
    for f in sorted(glob.glob(os.path.join(d, "model*.safetensors"))):
        out.update(read(f)[0])
    return out


def strip(name):
    while True:
        if name.startswith("model."):
            name = name[6:]
        elif name.startswith("language_model."):
            name = name[15:]
        else:
            return name


def stacked(src, name):
    """np.stack of the numbered experts a switch_mlp tensor is made from (any name prefix)."""
    head, proj = name.split(".switch_mlp.")
    parts = []
    e = 0
    while True:
        key = next((k for k in src if k == f"{head}.experts.{e}.{proj}" or
                    strip(k) == strip(f"{head}.experts.{e}.{proj}")), None)
        if key is None:
            break
        dt, shape, raw = src[key]
        parts.append(np.frombuffer(raw, np.uint8).reshape(shape[0], -1))
        e += 1
    return np.stack(parts) if parts else None


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check_common(art):
    """Index matches shard headers; config points at the sidecar; files hash as recorded."""
    prov = json.load(open(os.path.join(art, "forged.json")))
    import hashlib
    for name, want in prov["files"].items():
        got = hashlib.sha256(open(os.path.join(art, name), "rb").read()).hexdigest()
        if got != want:
            fail(f"{name}: sha256 {got} != forged.json {want}")
    h = hashlib.sha256()
    for name in ("config.json", "mtp.safetensors"):
        h.update(open(os.path.join(art, name), "rb").read())
    if h.hexdigest() != prov["fingerprint"]:
        fail("fingerprint is not sha256(config.json + mtp.safetensors)")
    idx_path = os.path.join(art, "model.safetensors.index.json")
    if os.path.exists(idx_path):
        wm = json.load(open(idx_path))["weight_map"]
        seen = {}
        for f in glob.glob(os.path.join(art, "model*.safetensors")):
            for k in read(f)[0]:
                seen[k] = os.path.basename(f)
        if wm != seen:
            fail("index weight_map differs from the shard headers")
        if list(wm) != sorted(wm):
            fail("weight_map not sorted")
    cfg = json.load(open(os.path.join(art, "config.json")))
    if cfg.get("mlx_lm_extra_tensors", {}).get("mtp_file") != "mtp.safetensors":
        fail("config.json does not point at mtp.safetensors")
    side, meta = read(os.path.join(art, "mtp.safetensors"))
    if meta.get("format") != "mlx":
        fail("sidecar metadata lacks format mlx")
    for k in shards(art):
        if strip(k).startswith("mtp.") or "mtp." in k:
            fail(f"head key {k} left in the backbone shards")
    return side, prov


def mode_shift(src, art):
    """Zero-centred norms become float32(1 + source) exactly; all else byte-identical."""
    s = shards(src)
    side, _ = check_common(art)
    shifted = 0
    for name, (dt, shape, raw) in side.items():
        srcname = next((k for k in s if strip(k) == name), None)
        if srcname is None:
            fail(f"{name}: no source tensor")
        sdt, sshape, sraw = s[srcname]
        if name.endswith(ZERO_CENTRED):
            want = (values(sdt, sraw) + np.float32(1.0)).astype(np.float32)
            if dt != "F32" or not np.array_equal(np.frombuffer(raw, "<u4"), want.view(np.uint32)):
                fail(f"{name}: not float32(1 + source)")
            shifted += 1
        elif raw != sraw or dt != sdt or shape != sshape:
            fail(f"{name}: not byte-identical to the source")
    tiny = [k for k, (dt, _, raw) in side.items()
            if dt == "F32" and np.any(np.isclose(values(dt, raw), 1.0011367798, rtol=0, atol=1e-7))]
    if not tiny:
        fail("the 0.0011367798 offset did not survive as 1.0011368 in F32")
    print(f"ok shift: {shifted} norms = float32(1 + offset), {len(side) - shifted} tensors byte-identical")


def mode_same(src, art):
    """Nothing shifted: every head tensor byte-identical to the source head (shards or sidecar)."""
    s = shards(src)
    for extra in ("mtp.safetensors",):
        p = os.path.join(src, extra)
        if os.path.exists(p):
            s = {k: v for k, v in s.items()}
            s.update(read(p)[0])
    side, prov = check_common(art)
    if prov["decisions"]["shifted_tensors"]:
        fail("shifted tensors recorded for a source that needs none")
    for name, (dt, shape, raw) in side.items():
        if ".switch_mlp." in name:
            want = stacked(s, name)
            if want is None or want.shape[0] != shape[0] or want.tobytes() != raw:
                fail(f"{name}: not the stack of the numbered source experts")
            continue
        cands = [k for k in s if k == name or strip(k) == name]
        if not cands or all(s[c][2] != raw for c in cands):
            fail(f"{name}: differs from the source")
    print(f"ok same: {len(side)} tensors byte-identical")


def mode_fp8(src, art):
    """FP8 weights become BF16(e4m3 * scale_inv block) with round-to-nearest-even."""
    s = shards(src)
    side, _ = check_common(art)
    n = 0
    for name, (dt, shape, raw) in side.items():
        sdt, sshape, sraw = s[name]
        if sdt == "F8_E4M3":
            w = e4m3(sraw).reshape(sshape)
            sc = values("F32", s[name + "_scale_inv"][2]).reshape(s[name + "_scale_inv"][1])
            full = np.repeat(np.repeat(sc, 128, 0), 128, 1)[:sshape[0], :sshape[1]]
            want = to_bf16(w * full)
            if dt != "BF16" or not np.array_equal(np.frombuffer(raw, "<u2").reshape(sshape), want):
                fail(f"{name}: not BF16(e4m3 * scale_inv)")
            n += 1
        elif raw != sraw:
            fail(f"{name}: changed")
        if name.endswith("_scale_inv"):
            fail(f"{name}: scales left in the sidecar")
    if not n:
        fail("no FP8 tensor checked")
    print(f"ok fp8: {n} weights dequantized")


def mode_experts(src, art):
    """switch_mlp stacks equal numpy's stacking of the numbered source experts."""
    s = shards(src)
    side, _ = check_common(art)
    for proj in ("gate_proj", "up_proj", "down_proj"):
        name = f"mtp.layers.0.mlp.switch_mlp.{proj}.weight"
        if name not in side:
            fail(f"{name} missing")
        e = 0
        parts = []
        while f"mtp.layers.0.mlp.experts.{e}.{proj}.weight" in s:
            dt, shape, raw = s[f"mtp.layers.0.mlp.experts.{e}.{proj}.weight"]
            parts.append(np.frombuffer(raw, "<u2").reshape(shape))
            e += 1
        want = np.stack(parts)
        dt, shape, raw = side[name]
        if list(want.shape) != shape or not np.array_equal(np.frombuffer(raw, "<u2").reshape(shape), want):
            fail(f"{name}: differs from the stacked numbered experts")
    if any(".experts." in k for k in side):
        fail("unstacked expert tensors left in the sidecar")
    print("ok experts: switch_mlp equals np.stack of the numbered experts")


def mode_quant(src, art):
    """Every quantized module equals numpy's MLX affine/mxfp4 of the source weight, bit for bit."""
    s = shards(src)
    side, _ = check_common(art)
    cfg = json.load(open(os.path.join(art, "config.json")))
    modules = cfg["mtp_quantization"]["modules"]
    n = 0
    for module, spec in modules.items():
        srcname = next(k for k in s if strip(k) == module + ".weight")
        sdt, shape, raw = s[srcname]
        w = values(sdt, raw).reshape(shape[0], -1)
        if spec is None:
            if side[module + ".weight"][2] != raw:
                fail(f"{module}: recorded unquantized but changed")
            continue
        if spec["mode"] == "mxfp4":
            packed, e, _ = qg.mxfp4_quant(w)
            got_scales = np.frombuffer(side[module + ".scales"][2], np.uint8).reshape(e.shape)
            if not np.array_equal(got_scales, e):
                fail(f"{module}: mxfp4 scales differ from numpy")
        else:
            packed, scale, bias = qg.affine_quant(w, spec["bits"], spec["group_size"])
            for part, want in (("scales", scale), ("biases", bias)):
                got = side[module + "." + part][2]
                if got != qg.store_bytes(want, sdt):
                    fail(f"{module}.{part}: differs from numpy's MLX affine")
        got_w = np.frombuffer(side[module + ".weight"][2], "<u4").reshape(packed.shape)
        if not np.array_equal(got_w, packed):
            fail(f"{module}.weight: packed words differ from numpy's")
        n += 1
    if not n:
        fail("no quantized module")
    print(f"ok quant: {n} modules equal numpy's quantization bit for bit")


if __name__ == "__main__":
    {"shift": mode_shift, "same": mode_same, "fp8": mode_fp8, "experts": mode_experts,
     "quant": mode_quant}[sys.argv[1]](sys.argv[2], sys.argv[3])
