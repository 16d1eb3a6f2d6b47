#!/usr/bin/python3
"""Does RUNTIME load the head of a forged artifact right?  An independent reading, with numpy.

usage: check_layout.py RUNTIME SOURCE_DIR ARTIFACT_DIR SOURCE_CONVENTION -> exit 0 or 1

Each runtime's loader is re-read here from its public source, not from
forged: which files it opens, which head keys it keeps, what +1 it adds to
which norms at load (or computes at run time), which expert layouts it
stacks.  The citation of each rule is beside it (repository, path, commit
and lines, as forge/model/runtimes_table.c cites them; index-only sources
name a symbol, MTPLX a function and a character offset).  The artifact is
read with this file's own safetensors reader.

The expectation comes from the source checkpoint alone: every zero-centred
head norm must reach the runtime as the gain 1 + offset (SOURCE_CONVENTION
delta: the source stores offsets, Hugging Face's layout) or as the source's
own gain (absolute: an MLX conversion); plain families' norms as stored.
Every other head tensor must carry the source's bytes (numbered experts
stacked into switch_mlp, or fused [E,2I,H] split, where the loader reads
them so).  The trunk's first q_norm must reach the runtime as a gain in
[1.25, 2.4] (docs/domain.md section 2).
"""
import glob
import json
import os
import struct
import sys

import numpy as np

ZERO_CENTRED = (".q_norm.weight", ".k_norm.weight", ".input_layernorm.weight",
                ".post_attention_layernorm.weight", ".pre_fc_norm_embedding.weight",
                ".pre_fc_norm_hidden.weight", "mtp.norm.weight")


class Fail(Exception):
    pass


def fail(msg):
    raise Fail(msg)


def read(path):
    """name -> (dtype, shape, raw bytes), metadata."""
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
        return np.frombuffer(raw, "<f4").astype(np.float64)
    if dtype == "BF16":
        return (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if dtype == "F16":
        return np.frombuffer(raw, "<f2").astype(np.float64)
    raise ValueError(dtype)


def strip(name):
    while True:
        if name.startswith("model."):
            name = name[6:]
        elif name.startswith("language_model."):
            name = name[15:]
        else:
            return name


def is_norm(name, shape):
    return len(shape) == 1 and name.endswith("norm.weight")


def zero_centred(name):
    return name.endswith(ZERO_CENTRED) and ".linear_attn." not in name


# ---- the artifact's files ----

def index_map(d):
    p = os.path.join(d, "model.safetensors.index.json")
    return json.load(open(p))["weight_map"] if os.path.exists(p) else None


def root_files(d, pattern):
    return sorted(os.path.basename(f) for f in glob.glob(os.path.join(d, pattern)))


def load_files(d, names, only=None):
    """The tensors of the files, name -> (dtype, shape, raw, file); a name twice is refused."""
    out = {}
    for n in names:
        for k, v in read(os.path.join(d, n))[0].items():
            if only is not None and only.get(k) != n:
                continue
            if k in out:
                fail(f"{k} is in both {out[k][3]} and {n}")
            out[k] = v + (n,)
    return out


# ---- the expectation, from the source ----

def source_head(src, conv, family_plain):
    """Stripped name -> (dtype, shape, raw, expected gain or None): the source's head, wherever it was."""
    cfg = json.load(open(os.path.join(src, "config.json")))
    files = root_files(src, "model*.safetensors")
    t = {}
    for f in files:
        t.update(read(os.path.join(src, f))[0])
    for extra in ("mtp.safetensors", "mtp/weights.safetensors", "model-mtp.safetensors"):
        p = os.path.join(src, extra)
        if os.path.exists(p) and extra not in files:
            t.update(read(p)[0])
    n_layers = cfg.get("num_hidden_layers", cfg.get("text_config", {}).get("num_hidden_layers"))
    head = {}
    for k, (dt, shape, raw) in t.items():
        s = strip(k)
        if s.startswith("mtp."):
            pass
        elif family_plain and s.startswith("layers.") and int(s.split(".")[1]) >= n_layers:
            pass
        else:
            continue
        gain = None
        if is_norm(s, shape) and dt in ("F32", "BF16", "F16"):
            v = values(dt, raw)
            gain = v + 1.0 if (conv == "delta" and zero_centred(s)) else v
        head[k if family_plain else s] = (dt, shape, raw, gain)
    if not head:
        fail("the source has no head")
    return head


def expected_expert(src_head, name):
    """The bytes a restacked switch_mlp or a kept fused expert tensor must hold, from the source's experts."""
    if ".switch_mlp." in name:
        block, proj = name.split(".switch_mlp.")
        proj = proj[:-len(".weight")]
        parts, e = [], 0
        while f"{block}.experts.{e}.{proj}.weight" in src_head:
            dt, shape, raw, _ = src_head[f"{block}.experts.{e}.{proj}.weight"]
            parts.append(np.frombuffer(raw, np.uint8).reshape(shape[0], -1))
            e += 1
        if parts:
            return np.stack(parts).tobytes()
        fused = src_head.get(f"{block}.experts.gate_up_proj") or src_head.get(f"{block}.experts.gate_up_proj.weight")
        down = src_head.get(f"{block}.experts.down_proj") or src_head.get(f"{block}.experts.down_proj.weight")
        if proj == "down_proj" and down:
            return down[2]
        if fused:
            dt, shape, raw, _ = fused
            a = np.frombuffer(raw, np.uint8).reshape(shape[0], shape[1], -1)
            half = shape[1] // 2
            return np.ascontiguousarray(a[:, :half] if proj == "gate_proj" else a[:, half:]).tobytes()
    return None


# ---- a loaded head against the expectation ----

def compare_head(loaded, src_head, added, experts_ok, what):
    """loaded: stripped (or kept) name -> (dtype, shape, raw); added(name) -> what the loader adds."""
    seen_norms = 0
    for name, (dt, shape, raw, gain) in src_head.items():
        if gain is None:
            continue
        if name not in loaded:
            fail(f"{what}: norm {name} is not loaded")
        ldt, lshape, lraw = loaded[name][:3]
        got = values(ldt, lraw) + added(name)
        if not np.allclose(got, gain, rtol=0, atol=1e-6):
            fail(f"{what}: {name} reaches the runtime as mean {got.mean():.4f}, the source's gain is {gain.mean():.4f}")
        seen_norms += 1
    for name, (ldt, lshape, lraw) in ((k, v[:3]) for k, v in loaded.items()):
        if is_norm(name, lshape):
            continue
        if ".switch_mlp." in name or ".experts." in name:
            layout = "switch_mlp" if ".switch_mlp." in name else \
                     "fused" if name.split(".experts.")[1].startswith(("gate_up_proj", "down_proj")) else "numbered"
            if layout not in experts_ok:
                fail(f"{what}: {name} is {layout}; the loader stacks {', '.join(experts_ok)}")
            want = src_head[name][2] if name in src_head else expected_expert(src_head, name)
        else:
            want = src_head[name][2] if name in src_head else None
        if want is None:
            fail(f"{what}: {name} has no source tensor")
        if want != lraw and not (name in src_head and src_head[name][0] != ldt):
            fail(f"{what}: {name} differs from the source's bytes")
    if not seen_norms:
        fail(f"{what}: no head norm compared")
    # Every source head tensor is loaded: as itself, or (experts) inside a switch_mlp stack.
    stacks = {k.split(".switch_mlp.")[0] for k in loaded if ".switch_mlp." in k}
    for name in src_head:
        if name in loaded or name.endswith("_scale_inv"):
            continue
        if ".experts." in name and name.split(".experts.")[0] in stacks:
            continue
        fail(f"{what}: {name} is not loaded")


# ---- the trunk ----

def trunk_probe(tensors, added):
    """The first trunk q_norm as the runtime uses it (stored + what it adds)."""
    qs = sorted((k for k in tensors if k.endswith("self_attn.q_norm.weight") and "mtp." not in k),
                key=lambda k: int(strip(k).split(".")[1]))
    if not qs:
        fail("no trunk q_norm")
    dt, shape, raw = tensors[qs[0]][:3]
    m = float(values(dt, raw).mean()) + added
    if not 1.25 <= m <= 2.4:
        fail(f"trunk probe {qs[0]} reaches the runtime as {m:.4f}, outside [1.25, 2.4]")
    return m


def raw_conv1d(tensors, rank3_only=False):
    """mlx-lm's test: a conv1d.weight whose last dimension is not 1, at any rank
    (mlx-lm mlx_lm/models/qwen3_5.py@d78bf58e217c:L348-370); ollama --experimental's: 3-D only
    (ollama x/models/qwen3_5/qwen3_5.go@fb3076099687:L831-838)."""
    return any(k.endswith("conv1d.weight") and v[1][-1] != 1 and (len(v[1]) == 3 or not rank3_only)
               for k, v in tensors.items())


# ---- the runtimes ----

MTPLX_DELTA_WORDS = ("delta", "delta_plus_one", "mlx_delta")


def mtplx(art, src_head, _plain):
    """MTPLX 2.11 / 2.12.0, the generic injector (qwen3_5, qwen3_5_moe)."""
    cfg = json.load(open(os.path.join(art, "config.json")))
    # Trunk: mlx_lm.utils.load, pinned mlx-lm>=0.31,<0.32 (jvmenen/MTPLX pyproject@0d56bc6d):
    # glob model*.safetensors (mlx-lm mlx_lm/utils.py@ed1fca4cef15:L316); +1 on the trunk when any
    # key contains "mtp." or a conv1d is raw (mlx_lm/models/qwen3_5.py@ed1fca4cef15:L307-331).
    trunk = load_files(art, root_files(art, "model*.safetensors"))
    shift = any("mtp." in k for k in trunk) or raw_conv1d(trunk)
    trunk_probe(trunk, 1.0 if shift else 0.0)
    # The head file: the config pointer, no existence check, else the first existing of three
    # names (youssofal/MTPLX mtplx/artifacts.py@6d0a869a expected_mtp_file); else the index's
    # mtp keys only (mtplx/mtp_patch.py@0943c6cb _embedded_mtp_weight_map, inject_mtp_support
    # ~c31000-33000).  Keys: mtp. and language_model.mtp. only (artifacts.py is_mtp_key).
    ptr = (cfg.get("mlx_lm_extra_tensors") or {}).get("mtp_file")
    cands = [ptr] if ptr else [c for c in ("mtp.safetensors", "mtp/weights.safetensors", "model-mtp.safetensors")
                               if os.path.exists(os.path.join(art, c))]
    if cands:
        t = read(os.path.join(art, cands[0]))[0]
    else:
        wm = index_map(art) or {}
        t = {}
        for f in sorted(set(v for k, v in wm.items() if k.startswith(("mtp.", "language_model.mtp.")))):
            t.update({k: v for k, v in read(os.path.join(art, f))[0].items() if wm.get(k) == f})
    head = {("mtp." + k[len("language_model.mtp."):] if k.startswith("language_model.mtp.") else k): v
            for k, v in t.items() if k.startswith(("mtp.", "language_model.mtp."))}
    if not head:
        fail("MTPLX loads no head key")
    # Heal: a declared delta encoding adds +1 to every 1-D *norm.weight (mtp_patch.py@0943c6cb
    # _restore_delta_encoded_mtp_norms ~c18500); otherwise the set detector: q/k means all below
    # 1.25 and a low-set mean below 0.5, q/k norms required (mtp_patch.py _heal_raw_delta_mtp_norms,
    # the detector as fourthDimensional/MTPLX-Optimized compressed_tensors.py@7e9dfaa8 reads it).
    declared = any(str(cfg.get(k, "")).strip().lower() in MTPLX_DELTA_WORDS
                   for k in ("mtplx_mtp_norm_encoding", "mtp_norm_encoding"))
    qk = [values(head[k][0], head[k][2]).mean() for k in head if k.endswith(("q_norm.weight", "k_norm.weight"))]
    low = [values(head[k][0], head[k][2]).mean() for k in head
           if k.endswith(("input_layernorm.weight", "post_attention_layernorm.weight",
                          "pre_fc_norm_hidden.weight", "pre_fc_norm_embedding.weight"))]
    detected = bool(qk) and bool(low) and max(qk) < 1.25 and min(low) < 0.5
    add = (lambda n: 1.0) if declared or detected else (lambda n: 0.0)
    # Experts: numbered stacked, switch_mlp kept, fused dropped under strict=False (#574)
    # (mtp_patch.py@0943c6cb _stack_mtp_moe_experts).
    compare_head(head, src_head, add, ("switch_mlp", "numbered"), "MTPLX")


def vllm_mlx(art, src_head, _plain):
    """waybarrios/vllm-mlx, the Qwen3.5 patch."""
    # Trunk through mlx-lm (pyproject.toml@4b654c09e610:L42-45 pins >=0.31.3; main's sanitize, +1
    # only for a raw conv1d: mlx_lm/models/qwen3_5.py@d78bf58e217c:L348-370).
    trunk = load_files(art, root_files(art, "model*.safetensors"))
    trunk_probe(trunk, 1.0 if raw_conv1d(trunk) else 0.0)
    # Only mtp/weights.safetensors, then model-mtp.safetensors
    # (vllm_mlx/patches/qwen3_5_mtp.py@4b654c09e610:L290-298).
    f = next((c for c in ("mtp/weights.safetensors", "model-mtp.safetensors") if os.path.exists(os.path.join(art, c))), None)
    if not f:
        fail("vllm-mlx finds neither mtp/weights.safetensors nor model-mtp.safetensors")
    t = read(os.path.join(art, f))[0]
    # Keys mtp. and language_model.mtp., stripped (L29-37, L363-368).
    head = {("mtp." + k.split("mtp.", 1)[1]): v for k, v in t.items() if k.startswith(("mtp.", "language_model.mtp."))}
    # manifest.json beside the weights: schema 1 and mlx_gamma skip the heal (L94-112, L436-442);
    # else +1 on each 1-D *norm.weight whose mean is below 0.5 (L40-48, L74-91, L443-448).
    mp = os.path.join(art, os.path.dirname(f), "manifest.json")
    m = json.load(open(mp)) if os.path.exists(mp) else {}
    gamma = m.get("artifact_schema_version") == 1 and m.get("rmsnorm_weight_format") == "mlx_gamma"
    add = (lambda n: 0.0) if gamma else \
        (lambda n: 1.0 if is_norm(n, head[n][1]) and values(head[n][0], head[n][2]).mean() < 0.5 else 0.0)
    # Experts: fused [E,2I,H] split, or switch_mlp (L122-186, L406-434).
    compare_head(head, src_head, add, ("switch_mlp", "fused"), "vllm-mlx")


def hf_files(art, fallback):
    """The index's files (vllm weight_utils.py@0a1ee72ed53f filter_duplicate_safetensors_files), else fallback."""
    wm = index_map(art)
    return sorted(set(wm.values())) if wm else fallback


def vllm(art, src_head, plain):
    """vLLM: GemmaRMSNorm computes x * (1 + w) (vllm-project/vllm layers/layernorm.py@00cba797bda4
    GemmaRMSNorm.forward_static), trunk and head; the mtp drafter reads the target's own files."""
    tensors = load_files(art, hf_files(art, root_files(art, "*.safetensors")))
    if not plain:  # a plain family's norms are gains as stored: no probe to move
        trunk_probe({k: v for k, v in tensors.items() if not k.startswith("mtp.")}, 1.0)
    if plain:
        # DeepSeek / GLM drafters: model.layers.{L+i}.* (deepseek_mtp.py@03356f8cb59b,
        # glm4_moe_mtp.py@6e052ba8f4d9 _rewrite_spec_layer_name); plain norms, no shift.
        head = {k: v for k, v in tensors.items() if k in src_head}
        compare_head(head, src_head, lambda n: 0.0, ("numbered", "fused", "switch_mlp"), "vllm")
        return
    # Qwen: names starting exactly "mtp." (vllm qwen3_5_mtp.py@01d99805d1ef Qwen3_5MTP.load_weights
    # remap_weight_names); experts per expert or fused gate_up_proj chunked on dim -2
    # (Qwen3_5MultiTokenPredictor.load_weights).
    head = {k: v for k, v in tensors.items() if k.startswith("mtp.")}
    compare_head(head, src_head, lambda n: 1.0, ("numbered", "fused"), "vllm")


def sglang(art, src_head, _plain):
    """SGLang: the drafter keeps names holding "mtp", renames mtp.* (sgl-project/sglang
    python/sglang/srt/models/qwen3_5_mtp.py@008b79d2358b Qwen3_5ForCausalLMMTP.load_weights);
    GemmaRMSNorm x * (1 + w); the index's files (weight_utils.py@00b08c497f07)."""
    tensors = load_files(art, hf_files(art, root_files(art, "*.safetensors")))
    trunk_probe({k: v for k, v in tensors.items() if "mtp" not in k}, 1.0)
    head = {k: v for k, v in tensors.items() if k.startswith("mtp.")}
    compare_head(head, src_head, lambda n: 1.0, ("numbered", "fused"), "sglang")


def transformers(art, src_head, _plain):
    """transformers: ^mtp.* ignored on load, no head (huggingface/transformers
    models/qwen3_next/modeling_qwen3_next.py@7515843b6175 _keys_to_ignore_on_load_unexpected);
    Qwen3NextRMSNorm x * (1 + w)."""
    tensors = load_files(art, hf_files(art, ["model.safetensors"]))
    trunk_probe({k: v for k, v in tensors.items() if not k.startswith("mtp.")}, 1.0)
    stray = [k for k in tensors if "mtp" in k and not k.startswith("mtp.")]
    if stray:
        fail(f"transformers would warn about head keys it does not ignore: {stray[:3]}")


def ollama(art, src_head, _plain):
    """ollama create, the default GGUF import."""
    # The client uploads the first pattern's files, model*.safetensors first
    # (ollama/ollama parser/parser.go@fb3076099687:L300-401); no index (convert/reader.go L78-101);
    # a name in two files is "duplicate tensor name" (convert/convert.go L427-460).
    tensors = load_files(art, root_files(art, "model*.safetensors"))
    # +1 on every *_norm.weight but ssm_norm, unconditionally (convert/convert_qwen3next.go
    # L1008-1010, L1541-1561), head norms too; mtp.* (that prefix) to nextn blocks (L937, L963-968).
    trunk_probe({k: v for k, v in tensors.items() if not k.startswith("mtp.")}, 1.0)
    head = {k: v for k, v in tensors.items() if k.startswith("mtp.")}
    compare_head(head, src_head, lambda n: 1.0, ("numbered", "fused"), "ollama")


def ollama_mlx(art, src_head, _plain):
    """ollama create --experimental (the MLX runner)."""
    # With an index, its files and only its tensors (ollama x/create/inventory.go@fb3076099687:L58-131).
    wm = index_map(art)
    if not wm:
        fail("ollama --experimental: no index (it would read root model*.safetensors, L132-155)")
    tensors = load_files(art, sorted(set(wm.values())), only=wm)
    # One flag for the whole model: any name holding "mtp." or a raw 3-D conv1d
    # (x/models/qwen3_5/qwen3_5.go@fb3076099687:L831-838), then +1 on trunk and head norms (L846,
    # L901-902, L965-966, L1026-1034); the head needs mtp.fc (L884-891).
    flag = any("mtp." in k for k in tensors) or raw_conv1d(tensors, rank3_only=True)
    trunk_probe({k: v for k, v in tensors.items() if not k.startswith("mtp.")}, 1.0 if flag else 0.0)
    head = {k: v for k, v in tensors.items() if k.startswith("mtp.")}
    if "mtp.fc.weight" not in head:
        fail("ollama --experimental: no mtp.fc.weight, no head")
    compare_head(head, src_head, lambda n: 1.0 if flag else 0.0, ("numbered", "fused", "switch_mlp"), "ollama-mlx")


def llamacpp(art, src_head, _plain):
    """llama.cpp convert_hf_to_gguf (ggml-org/llama.cpp conversion/base.py@00bd27a621f9
    ModelBase.index_tensors: the index's files, and its names must equal the files')."""
    wm = index_map(art)
    files = sorted(set(wm.values())) if wm else root_files(art, "model*.safetensors")
    tensors = load_files(art, files)
    if wm is not None and set(wm) != set(tensors):
        fail("llama.cpp: the index and the parts disagree")
    # +1 on names ending norm.weight but linear_attn.norm.weight (conversion/qwen.py@03173d5e78f8
    # Qwen3NextModel.modify_tensors); mtp.* and model.mtp.* to nextn layers (_Qwen35MtpMixin.filter_tensors).
    trunk_probe({k: v for k, v in tensors.items() if "mtp." not in k}, 1.0)
    head = {strip(k) if strip(k).startswith("mtp.") else k: v for k, v in tensors.items() if strip(k).startswith("mtp.")}
    compare_head(head, src_head, lambda n: 1.0, ("numbered", "fused"), "llamacpp")


def mlxlm(presence):
    """mlx-lm: glob model*.safetensors (mlx_lm/utils.py@ed1fca4cef15:L316); qwen3_5 adds +1 when a
    conv1d is raw, and before PR 1623 also when any key holds "mtp." (qwen3_5.py@ed1fca4cef15:L307-331;
    @d78bf58e217c:L348-370; LM Studio's pin 2c008fd0252b:L348-372); mtp.* dropped first; no head."""
    def run(art, src_head, _plain):
        trunk = load_files(art, root_files(art, "model*.safetensors"))
        shift = raw_conv1d(trunk) or (presence and any("mtp." in k for k in trunk))
        trunk_probe(trunk, 1.0 if shift else 0.0)
    return run


def mlx_vlm(art, src_head, _plain):
    """mlx-vlm 0.6.15: the index's files (sorted) else *.safetensors minus consolidated
    (Blaizzy/mlx-vlm mlx_vlm/utils.py@9b13f522a7f1:L761-805); mtp.* dropped first, +1 for a raw
    conv1d or a norm key not starting language_model. (models/qwen3_5/qwen3_5.py@9b13f522a7f1:L16-47,
    L145-170)."""
    files = hf_files(art, [f for f in root_files(art, "*.safetensors") if f != "consolidated.safetensors"])
    trunk = {k: v for k, v in load_files(art, files).items() if "mtp." not in k}
    qs = [k for k in trunk if k.endswith("self_attn.q_norm.weight")]
    shift = raw_conv1d(trunk) or any(not k.startswith("language_model.") for k in qs)
    trunk_probe(trunk, 1.0 if shift else 0.0)


def mlxlm_pr(all_groups, experts):
    """The open mlx-lm PR heads: mtp.* kept in the globbed shards, +1 with the trunk's shift (a raw
    conv1d) on the trunk suffixes, which match the head layer's norms, and (990, 1740, 1724) on
    pre_fc_norm_* and mtp.norm too (qwen3_5.py@e8ceeccf118d:L504-537, @bc1d11414c12:L533-548,
    @a9e671b33ce8:L712-727); 1469 only the trunk suffixes (qwen3_5.py@51b980d8a507:L490-503)."""
    def run(art, src_head, _plain):
        tensors = load_files(art, root_files(art, "model*.safetensors"))
        shift = raw_conv1d(tensors)
        trunk_probe({k: v for k, v in tensors.items() if "mtp." not in k}, 1.0 if shift else 0.0)
        head = {strip(k): v for k, v in tensors.items() if "mtp." in k}
        layer = (".input_layernorm.weight", ".post_attention_layernorm.weight", ".q_norm.weight", ".k_norm.weight")
        add = lambda n: 1.0 if shift and (all_groups or n.endswith(layer)) else 0.0
        compare_head(head, src_head, add, experts, "mlx-lm PR")
    return run


RUNTIMES = {
    "mtplx-2.11": mtplx, "mtplx-2.12": mtplx, "vllm-mlx": vllm_mlx, "vllm": vllm, "sglang": sglang,
    "transformers": transformers, "ollama": ollama, "ollama-mlx": ollama_mlx, "llamacpp": llamacpp,
    "mlx-lm-0.31": mlxlm(True), "lmstudio-mlx": mlxlm(True), "mlx-lm-0.32": mlxlm(False), "mlx-vlm": mlx_vlm,
    # Head experts: PR 990 unfuses fused and stacks numbered, a switch_mlp head is a KeyError
    # (qwen3_5_moe.py@e8ceeccf118d:L50-80); 1740 passes switch_mlp too (@bc1d11414c12:L64-80);
    # 1724 takes exactly one of the three (@a9e671b33ce8:L23-114); 1469 converts nothing.
    "mlx-lm-pr990": mlxlm_pr(True, ("fused", "numbered")),
    "mlx-lm-pr1740": mlxlm_pr(True, ("fused", "numbered", "switch_mlp")),
    "mlx-lm-pr1724": mlxlm_pr(True, ("fused", "numbered", "switch_mlp")),
    "mlx-lm-pr1469": mlxlm_pr(False, ("switch_mlp",)),
}

if __name__ == "__main__":
    runtime, src, art, conv = sys.argv[1:5]
    try:
        RUNTIMES[runtime](art, source_head(src, conv, conv == "plain"), conv == "plain")
    except Fail as e:
        print(f"FAIL {runtime}: {e}")
        sys.exit(1)
    print(f"ok {runtime}")
