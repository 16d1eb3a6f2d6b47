#!/usr/bin/python3
"""Independent checks of a forged artifact, with numpy (Debian's python3-numpy).

Reads the source checkpoint and the artifact with its own safetensors reader
and computes what the sidecar must hold: norms shifted in float32 (1 + offset)
or untouched, every other tensor byte-identical or dequantized/restacked the
way docs/domain.md describes.  Never uses forged's writer or reader.

usage: check_forge.py MODE SOURCE_DIR ARTIFACT_DIR [HEAD_FILE]   (modes below) -> exit 0 or 1

HEAD_FILE is where the artifact's layout puts the head (default
mtp.safetensors, which config.json must point at); a model*.safetensors
name means a shard of the index (no pointer, every head tensor indexed
there).
"""
import glob
import json
import os
import re
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


def shards(d, skip=None):
    out = {}
    for f in sorted(glob.glob(os.path.join(d, "model*.safetensors"))):
        if os.path.basename(f) != skip:
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


HEAD = "mtp.safetensors"


def check_common(art):
    """Index matches shard headers; config points at the sidecar (or the index lists the head's shard); hashes."""
    prov = json.load(open(os.path.join(art, "forged.json")))
    import hashlib
    for name, want in prov["files"].items():
        got = hashlib.sha256(open(os.path.join(art, name), "rb").read()).hexdigest()
        if got != want:
            fail(f"{name}: sha256 {got} != forged.json {want}")
    if HEAD == "mtp.safetensors":
        h = hashlib.sha256()
        for name in ("config.json", HEAD):
            h.update(open(os.path.join(art, name), "rb").read())
        if h.hexdigest() != prov["fingerprint"]:
            fail(f"fingerprint is not sha256(config.json + {HEAD})")
    elif prov["fingerprint"]:
        fail(f"a legacy fingerprint ({prov['fingerprint']}) without an mtp.safetensors")
    # MTPLX's framing (forge.py _verification_artifact_fingerprint) over a sidecar the config points at:
    # "config.json" NUL cfg NUL "mtp" NUL head NUL; none for a head in a shard of its own (layout.h).
    layout = prov.get("layout") or {}
    if layout.get("place", "sidecar") != "embedded":
        cfg = open(os.path.join(art, "config.json"), "rb").read()
        head = open(os.path.join(art, HEAD), "rb").read()
        framed = "sha256:" + hashlib.sha256(b"config.json\0" + cfg + b"\0mtp\0" + head + b"\0").hexdigest()
        if prov.get("head_fingerprint") != framed:
            fail(f"head_fingerprint {prov.get('head_fingerprint')} is not MTPLX's framing {framed}")
    # The artifact digest: name NUL sha256 LF for every listed file, in byte order of the names.
    d = hashlib.sha256(b"".join(n.encode() + b"\0" + v.encode() + b"\n" for n, v in sorted(prov["files"].items())))
    if prov.get("digest") != "sha256:" + d.hexdigest():
        fail("digest is not the SHA-256 over the files' names and SHA-256s")
    if HEAD not in prov["files"]:
        fail(f"forged.json lists no {HEAD}")
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
    side, meta = read(os.path.join(art, HEAD))
    embedded = HEAD.startswith("model") and "/" not in HEAD
    if embedded:
        if "mlx_lm_extra_tensors" in cfg:
            fail("config.json points at a sidecar, the head is in the shards")
        wm = json.load(open(idx_path))["weight_map"]
        if any(wm.get(k) != HEAD for k in side):
            fail(f"the index does not place every head tensor in {HEAD}")
    else:
        if cfg.get("mlx_lm_extra_tensors", {}).get("mtp_file") != HEAD:
            fail(f"config.json does not point at {HEAD}")
        if meta.get("format") != "mlx":
            fail("sidecar metadata lacks format mlx")
    for f in glob.glob(os.path.join(art, "model*.safetensors")):
        if os.path.basename(f) == HEAD:
            continue
        for k in read(f)[0]:
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
        if ".switch_mlp." in module + ".weight":
            # stacked experts: the numbered sources, one after another, rows of the last axis
            head, proj = (module + ".weight").split(".switch_mlp.")
            parts, raws, e = [], [], 0
            while True:
                key = next((k for k in s if strip(k) == strip(f"{head}.experts.{e}.{proj}")), None)
                if key is None:
                    break
                sdt, shape, raw = s[key]
                parts.append(values(sdt, raw).reshape(shape))
                raws.append(raw)
                e += 1
            w = np.concatenate(parts).reshape(-1, parts[0].shape[-1])
            raw = b"".join(raws)
        else:
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
        got_w = np.frombuffer(side[module + ".weight"][2], "<u4").reshape(packed.shape)  # stacks: rows flattened
        if not np.array_equal(got_w, packed):
            fail(f"{module}.weight: packed words differ from numpy's")
        n += 1
    if not n:
        fail("no quantized module")
    print(f"ok quant: {n} modules equal numpy's quantization bit for bit")


# ---------------------------------------------------------------------------
# dequant: quantized source heads (issue 12), decoded here from the formats' public rules
# (/work/notes/quant-formats.md), word shifts rather than dequant_golden.py's bit planes

QROLES = ("qweight", "qzeros", "scales", "g_idx", "biases", "weight_packed", "weight_scale", "weight_zero_point",
          "weight_shape", "weight_g_idx", "weight_global_scale", "weight_scale_2", "weight_scale_inv", "input_scale",
          "input_global_scale", "pre_quant_scale")
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])
AWQ_REV = [0, 4, 1, 5, 2, 6, 3, 7]


def arr(t, dt=None):
    dtype, shape, raw = t
    np_dt = {"I32": "<u4", "U32": "<u4", "I64": "<i8", "U8": "u1", "F8_E4M3": "u1", "F16": "<f2"}.get(dtype)
    if dt:
        np_dt = dt
    if np_dt is None:
        return values(dtype, raw).reshape(shape).astype(np.float64)
    return np.frombuffer(raw, np_dt).reshape(shape)


def fvals(t):
    """Float tensor values in float64 (exact)."""
    dtype = t[0]
    if dtype == "F16":
        return np.frombuffer(t[2], "<f2").astype(np.float64).reshape(t[1])
    if dtype == "F8_E4M3":
        return e4m3(t[2]).astype(np.float64).reshape(t[1])
    return values(dtype, t[2]).astype(np.float64).reshape(t[1])


def unpack(words, bits, n):
    """[rows, words] LSB-first codes of 2/4/8 bits: code k of a row is (word[k / pf] >> bits * (k % pf)) & mask."""
    pf, mask = 32 // bits, (1 << bits) - 1
    k = np.arange(n)
    return ((words[:, k // pf].astype(np.uint64) >> (bits * (k % pf)).astype(np.uint64)) & mask).astype(np.int64)


def modules_of(src):
    """module prefix -> {role: tensor} for every quantized module of a tensor dict."""
    mods = {}
    for name, t in src.items():
        prefix, _, role = name.rpartition(".")
        if role in QROLES or (role == "weight" and t[0] in ("U32", "U8", "F8_E4M3")):
            mods.setdefault(prefix, {})
    for name, t in src.items():
        prefix, _, role = name.rpartition(".")
        if prefix in mods:
            mods[prefix][role] = t
    return mods


def decode(m, qc, module):
    """The float64 W [out, in] of one quantized module, by its tensor family."""
    method = (qc or {}).get("quant_method")
    if "qweight" in m and ("g_idx" in m or method == "gptq"):  # GPTQ (notes 2): packed along in; zeros along out
        sc = fvals(m["scales"])
        if "g_idx" in m:
            g_idx = arr(m["g_idx"], "<i4").astype(np.int64)
            inn, out = len(g_idx), sc.shape[1]
            bits = m["qweight"][1][0] * 32 // inn
        else:  # no g_idx: column c is in group c // group_size
            bits, out = qc["bits"], sc.shape[1]
            inn = m["qweight"][1][0] * 32 // bits
            g_idx = np.arange(inn) // (qc["group_size"] if qc["group_size"] > 0 else inn)
        q = unpack(arr(m["qweight"]).T, bits, inn).T          # [in, out]
        z = unpack(arr(m["qzeros"]), bits, out)               # [G, out]
        if (qc.get("checkpoint_format") or qc.get("format") or "gptq").lower() == "gptq":
            z = (z + 1) & ((1 << bits) - 1)                    # v1 stores zero - 1
        return (sc[g_idx, :] * (q - z[g_idx, :])).T
    if "qweight" in m:  # AutoAWQ GEMM (notes 3)
        qw, sc = arr(m["qweight"]), fvals(m["scales"])
        inn, out = qw.shape[0], sc.shape[1]
        group = inn // sc.shape[0]
        o = np.arange(out)
        shifts = np.array([4 * AWQ_REV[x % 8] for x in o], dtype=np.uint64)
        q = ((qw[:, o // 8].astype(np.uint64) >> shifts) & 15).astype(np.int64)
        z = ((arr(m["qzeros"])[:, o // 8].astype(np.uint64) >> shifts) & 15).astype(np.int64)
        gi = np.arange(inn) // group
        return (sc[gi, :] * (q - z[gi, :])).T
    if "weight_packed" in m:  # compressed-tensors pack-quantized (notes 4): signed, offset 2^(b-1)
        out, inn = (int(x) for x in arr(m["weight_shape"]))
        wp = arr(m["weight_packed"])
        bits = wp.shape[1] * 32 // inn
        off = 1 << (bits - 1)
        q = unpack(wp, bits, inn) - off
        sc = fvals(m["weight_scale"]).reshape(out, -1)
        gi = np.arange(inn) * sc.shape[1] // inn
        zp = np.zeros((out, sc.shape[1]))
        if "weight_zero_point" in m:
            zp = unpack(arr(m["weight_zero_point"]).T, bits, out).T - off
        return (q - zp[:, gi]) * sc[:, gi]
    w = m["weight"]
    if w[0] == "F8_E4M3":  # float-quantized FP8 (notes 5) or DeepSeek's block scales (notes 8)
        codes = fvals(w)
        sc = fvals(m["weight_scale"] if "weight_scale" in m else m["weight_scale_inv"])
        if sc.size == 1:
            return codes * sc.reshape(-1)[0]
        if sc.shape == (codes.shape[0], 1):
            return codes * sc
        b0, b1 = -(-codes.shape[0] // sc.shape[0]), -(-codes.shape[1] // sc.shape[1])
        return codes * np.repeat(np.repeat(sc, b0, 0), b1, 1)[:codes.shape[0], :codes.shape[1]]
    if w[0] == "U8":  # ModelOpt NVFP4 (notes 6): low nibble = even column; se = e4m3 * weight_scale_2 in F32
        b = arr(w)
        codes = np.empty((b.shape[0], b.shape[1] * 2), dtype=np.int64)
        codes[:, 0::2], codes[:, 1::2] = b & 15, b >> 4
        s2 = np.float32(fvals(m["weight_scale_2"]).reshape(-1)[0])
        se = (fvals(m["weight_scale"]).astype(np.float32) * s2).astype(np.float32)
        return (E2M1[codes].astype(np.float32) * np.repeat(se, 16, axis=1)).astype(np.float32).astype(np.float64)
    # MLX (notes 7): the mode and group from the config's quantization, per module
    q = (qc or {}).get(module) if isinstance((qc or {}).get(module), dict) else {}
    mode = q.get("mode", qc.get("mode", "affine"))
    group = q.get("group_size", qc.get("group_size", 64))
    bits = q.get("bits", qc.get("bits", 4))
    words = arr(w)
    out = words.shape[0]
    if mode == "affine":
        inn = words.shape[1] * 32 // bits
        codes = unpack(words, bits, inn).astype(np.float32)
        s = np.repeat(fvals(m["scales"]), group, axis=1).astype(np.float32)
        b = np.repeat(fvals(m["biases"]), group, axis=1).astype(np.float32)
        return ((s * codes).astype(np.float32) + b).astype(np.float32).astype(np.float64)
    sc = arr(m["scales"]).astype(np.int64)
    if mode == "mxfp8":
        codes = words.astype("<u4").view(np.uint8).reshape(out, -1)
        return qg.e4m3_table()[codes].astype(np.float64) * np.repeat(np.ldexp(1.0, sc - 127), 32, axis=1)
    codes = unpack(words, 4, words.shape[1] * 8)
    if mode == "nvfp4":
        return E2M1[codes] * np.repeat(qg.e4m3_table()[sc].astype(np.float64), 16, axis=1)
    return E2M1[codes] * np.repeat(np.ldexp(1.0, sc - 127), 32, axis=1)  # mxfp4


def bf16_of(w64):
    return to_bf16(np.asarray(w64, dtype=np.float64).astype(np.float32))


def mode_dequant(src, art):
    """Quantized source head modules: dequantized ones equal numpy's decode rounded to BF16 (stacked experts
    too), kept ones are byte-identical, re-quantized ones equal numpy's MLX affine of that BF16; no
    quantization companion tensor reaches the sidecar."""
    s = shards(src)
    scfg = json.load(open(os.path.join(src, "config.json")))
    qc = scfg.get("quantization") or scfg.get("quantization_config") or {}
    # A source forged wrote: each head module it stored quantized has its MLX {bits, group_size,
    # mode} in forged's record (over a float trunk the config has no block; over a Hugging Face
    # format the trunk's config does not describe them); its head file is where its layout says.
    own = {k: v for k, v in scfg.get("mtp_quantization", {}).get("modules", {}).items()
           if isinstance(v, dict) and isinstance(v.get("bits"), int)}
    if own:
        s.update(read(os.path.join(src, json.load(open(os.path.join(src, "forged.json")))["layout"]["file"]))[0])
    side, _ = check_common(art)
    cfg = json.load(open(os.path.join(art, "config.json")))
    records = cfg["mtp_quantization"]["modules"]
    mods = modules_of(s)
    by_strip = {strip(p): p for p in mods}
    counts = {"dequantized": 0, "kept": 0, "requantized": 0, "stacked": 0}
    for name in side:
        if name.rpartition(".")[2] in QROLES and name.rpartition(".")[2] not in ("scales", "biases"):
            fail(f"{name}: a quantization companion tensor reached the sidecar")
    for out, rec in records.items():
        if not isinstance(rec, dict):
            continue
        if ".switch_mlp." in out:
            head, proj = out.split(".switch_mlp.")
            srcs, e = [], 0
            while strip(f"{head}.experts.{e}.{proj}") in by_strip:
                srcs.append(by_strip[strip(f"{head}.experts.{e}.{proj}")])
                e += 1
            if not srcs:
                fail(f"{out}: no numbered source experts")
            want = np.stack([bf16_of(decode(mods[p], own if p in own else qc, p)) for p in srcs])
            counts["stacked"] += 1
        else:
            if strip(out) not in by_strip:
                fail(f"{out}: recorded {rec} but no quantized source module")
            p = by_strip[strip(out)]
            want = bf16_of(decode(mods[p], own if p in own else qc, p))
        if rec.get("dequantized_from"):
            dt, shape, raw = side[out + ".weight"]
            got = np.frombuffer(raw, "<u2").reshape(shape)
            if dt != "BF16" or got.shape != want.shape or not np.array_equal(got, want):
                bad = np.argwhere(got != want)[:1].tolist() if got.shape == want.shape else "shape"
                fail(f"{out}: not numpy's dequantization rounded to BF16 (first difference {bad})")
            counts["dequantized"] += 1
        elif rec.get("requantized"):
            w = (want.astype(np.uint32) << 16).view(np.float32).reshape(want.shape[0], -1)
            if rec.get("mode") == "mxfp4":
                packed, e8, _ = qg.mxfp4_quant(w)
                if side[out + ".scales"][2] != e8.astype(np.uint8).tobytes():
                    fail(f"{out}.scales: re-quantized mxfp4 scales differ from numpy's")
            else:
                packed, scale, bias = qg.affine_quant(w, rec["bits"], rec["group_size"])
                for part, x in (("scales", scale), ("biases", bias)):
                    if side[out + "." + part][2] != qg.store_bytes(x, "BF16"):
                        fail(f"{out}.{part}: re-quantized {part} differ from numpy's")
            if not np.array_equal(np.frombuffer(side[out + ".weight"][2], "<u4").reshape(packed.shape), packed):
                fail(f"{out}: re-quantized words differ from numpy's {rec.get('mode')} of the BF16 dequantization")
            counts["requantized"] += 1
        else:
            p = by_strip[strip(out)]
            for role, t in mods[p].items():
                if side.get(out + "." + role, (None, None, None))[2] != t[2]:
                    fail(f"{out}.{role}: kept module not byte-identical to the source")
            counts["kept"] += 1
    text = scfg.get("text_config", scfg)
    layers = text.get("num_hidden_layers", scfg.get("num_hidden_layers"))
    covered = {strip(o) for o in records}
    covered |= {strip(o.split(".switch_mlp.")[0]) + ".experts." + o.split(".switch_mlp.")[1]
                for o in records if ".switch_mlp." in o}
    for p in mods:
        sp = strip(p)
        if not (sp.startswith("mtp.") or sp.startswith(f"layers.{layers}.")):
            continue
        expert = re.sub(r"\.experts\.\d+\.", ".experts.", sp)
        if sp not in covered and expert not in covered:
            fail(f"{p}: a quantized head module without a record in mtp_quantization.modules")
    if not any(counts.values()):
        fail("no quantized module checked")
    print("ok dequant: " + ", ".join(f"{v} {k}" for k, v in counts.items()))


if __name__ == "__main__":
    if len(sys.argv) > 4:
        HEAD = sys.argv[4]
    {"shift": mode_shift, "same": mode_same, "fp8": mode_fp8, "experts": mode_experts,
     "quant": mode_quant, "dequant": mode_dequant}[sys.argv[1]](sys.argv[2], sys.argv[3])
