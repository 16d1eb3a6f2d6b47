/*
 * runtimes.h: the loader contracts of docs/domain.md section 4 as a table of
 * data, and a simulation that reads the table generically.
 *
 * Each row transcribes one loader as its source reads (docs/runtimes.md
 * lists every row with its sources and the facts that are unconfirmed):
 * which files it reads and what it does with duplicate names, whether its
 * load is strict, when it adds +1 to zero-centred norms (per family), which
 * head keys its sanitize drops, which expert layouts it stacks, where it
 * looks for an MTP head, which key spellings it keeps, how it heals a delta
 * head, what it refuses, and what stage and order it feeds the head.  It
 * also carries, as data only, the weight formats the loader reads and what
 * a forge writing for it must produce (phase 2 of issue 10).
 *
 * fg_runtime_simulate() applies a row to the checkpoint as inspect saw it
 * (files, per-file facts, tensor-set decisions) and says what loads: the
 * trunk and head states of the inspect report (their vocabularies are a
 * contract: docs/openapi.json), the outcome, and since issue 10 the
 * breakage, the load error the runtime would print, and whether it decodes
 * with MTP or falls back to plain decoding.  No code tests a row's id.
 */
#ifndef FG_RUNTIMES_H
#define FG_RUNTIMES_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "forge/source/checkpoint.h"
#include "forge/format/quant/dequant.h"
#include "forge/model/convention.h"
#include "forge/model/family.h"
#include "forge/model/qmods.h"
#include "forge/model/tset.h"

/* ---- the table ---- */

/* Which files a loader reads. */
enum fg_rt_files {
	FG_FILES_GLOB,             /* every model*.safetensors of the folder, index ignored (mlx-lm) */
	FG_FILES_FIRST_PATTERN,    /* the files of the first of .patterns that matches (Ollama's import) */
	FG_FILES_INDEX_ELSE_GLOB,  /* the index's files; without an index every model*.safetensors (llama.cpp) */
	FG_FILES_INDEX_ELSE_ALL,   /* the index's files; without one every *.safetensors of the folder
				    * but .exclude (vLLM; mlx-vlm) */
	FG_FILES_INDEX_TENSORS,    /* the index's files and only the tensors it lists; without one the
				    * root model*.safetensors (Ollama --experimental) */
	FG_FILES_INDEX_ELSE_SINGLE, /* the index's files, else model.safetensors (transformers) */
};

/* What a loader does with one tensor name held by two files it reads. */
enum fg_rt_dups {
	FG_DUPS_ORDER,             /* the later file wins, in folder listing order: depends on order */
	FG_DUPS_INDEX_SORTED,      /* with an index the later of its sorted files wins; without: ORDER */
	FG_DUPS_REFUSE,            /* a load error */
};

/* What a loader does with the index against the headers. */
enum fg_rt_index_check {
	FG_INDEX_IGNORED,          /* never compared */
	FG_INDEX_REFUSE_MISSING,   /* an indexed tensor missing or in another file is a load error */
	FG_INDEX_REFUSE_ANY,       /* any difference is a load error (llama.cpp) */
};

/* What a load does with keys that match no parameter and parameters no key fills. */
enum fg_rt_strict {
	FG_LOAD_STRICT,            /* both are a load error (MLX load_weights(strict=True)) */
	FG_LOAD_LENIENT,           /* unmatched keys are skipped; parameters keep their initial values */
	FG_LOAD_RETRY_LENIENT,     /* strict, retried lenient when the error is extra keys (vllm-mlx) */
	FG_LOAD_EXTRA_OK,          /* extra keys are skipped; a parameter no key fills is an error (vLLM) */
	FG_LOAD_UNSTATED,          /* the source does not say: results that depend on it are not modelled */
};

/* Trunk shift triggers (bits of fg_rt_family.shift). */
enum {
	FG_SHIFT_ON_MTP_KEY = 1 << 0,     /* any loaded key contains "mtp." */
	FG_SHIFT_ON_CONV1D = 1 << 1,      /* a conv1d.weight whose last dimension is not 1, at any rank */
	FG_SHIFT_ON_CONV1D_3D = 1 << 2,   /* a 3-D conv1d.weight whose third dimension is not 1 */
	FG_SHIFT_ALWAYS = 1 << 3,         /* +1 unconditionally (GGUF converters; qwen3_next past its gate) */
	FG_SHIFT_ON_BARE_KEY = 1 << 4,    /* a norm whose original key does not start "language_model." */
	FG_SHIFT_RUN_TIME = 1 << 5,       /* no stored shift: the runtime computes x * (1 + w) */
};

/* Expert layouts (bits): the trunk's and the head's, and what loaders stack. */
enum {
	FG_XL_NUMBERED = 1 << 0,     /* experts.{e}.{gate,up,down}_proj.weight */
	FG_XL_FUSED_LINEAR = 1 << 1, /* experts.gate_up_proj [E,2I,H] + down_proj [E,H,I] */
	FG_XL_FUSED_BMM = 1 << 2,    /* the same transposed: [E,H,2I] + [E,I,H] */
	FG_XL_SWITCH_MLP = 1 << 3,   /* MLX-stacked switch_mlp.{gate,up,down}_proj.weight */
	FG_XL_ALL = 0xf,
};

/* Head key spellings (bits), classified on the name as stored. */
enum {
	FG_KEY_MTP = 1 << 0,           /* mtp.* */
	FG_KEY_LM_MTP = 1 << 1,        /* language_model.mtp.* */
	FG_KEY_MODEL_MTP = 1 << 2,     /* model.mtp.* */
	FG_KEY_MODEL_LM_MTP = 1 << 3,  /* model.language_model.mtp.* */
	FG_KEY_LM_MODEL_MTP = 1 << 4,  /* language_model.model.mtp.* (and deeper container prefixes) */
	FG_KEY_APPENDED = 1 << 5,      /* model.layers.{L+i}.* */
	FG_KEY_MTP_LAYERS = 1 << 6,    /* model.mtp_layers.{i}.* */
	FG_KEY_OTHER = 1 << 7,         /* anything else (bare "layers.0...", "fc.weight") */
};

/* Norm groups of a head (bits): which norms a shift or a heal touches. */
enum {
	FG_NG_QK = 1 << 0,       /* the head layer's self_attn.q_norm / k_norm */
	FG_NG_LAYER = 1 << 1,    /* the head layer's input / post-attention layernorms */
	FG_NG_PRE_FC = 1 << 2,   /* pre_fc_norm_embedding / pre_fc_norm_hidden (enorm / hnorm) */
	FG_NG_FINAL = 1 << 3,    /* mtp.norm (shared_head.norm) */
	FG_NG_ALL = 0xf,
};

/* What a sanitize drops of the head's keys before the trunk loads. */
enum fg_rt_drop_kind {
	FG_DROP_NONE,
	FG_DROP_SUBSTRING,       /* keys containing .text ("mtp.") */
	FG_DROP_PREFIX,          /* keys starting .text ("model.mtp_layers.") */
	FG_DROP_LAYER_L,         /* keys starting "model.layers.{L}" (L = num_hidden_layers): layer L only */
	FG_DROP_LAYERS_FROM_L,   /* layers numbered L and above */
	FG_DROP_LAYER_FIXED,     /* keys starting "model.layers.{.layer}", whatever L is */
};

struct fg_rt_drop {
	enum fg_rt_drop_kind kind;
	const char *text;
	long layer;
};

/* A gate before the sanitize runs at all (qwen3_next). */
enum fg_rt_gate {
	FG_GATE_NONE,
	FG_GATE_TENSOR,          /* without the tensor .gate_tensor the weights pass unchanged:
				  * no drop, no shift, no expert stacking */
};

/*
 * How a loader treats one family.  A row lists the families its source
 * covers; a family the row does not list is simulated by the row's "*"
 * entry, if any, and the result says `modelled: false`.
 */
struct fg_rt_family {
	const char *family;            /* a family id of family.h, or "*" */
	unsigned shift;                /* FG_SHIFT_* triggers of the trunk +1 (zero-centred families) */
	int conv1d_transpose;          /* the sanitize moves axis 2 of a conv1d.weight whose last
					* dimension is not 1: a 2-D one makes the load fail */
	enum fg_rt_gate gate;
	const char *gate_tensor;
	struct fg_rt_drop drop;        /* head keys the sanitize drops (when no head is built) */
	unsigned experts;              /* FG_XL_* trunk layouts it accepts */
	unsigned experts_known;        /* layouts whose handling the source states (others: not modelled) */
	const char *bmm_error;         /* a fused split by name whatever its orientation: what a fused bmm
					* tensor makes the strict load print (NULL: the row's strict_error) */
	const char *source;            /* repository path@commit:lines */
};

/* Where a head loader looks, in order. */
enum fg_rt_head_src_kind {
	FG_HSRC_END,               /* ends a source list */
	FG_HSRC_POINTER,           /* config mlx_lm_extra_tensors.mtp_file */
	FG_HSRC_FILE,              /* the file called .file, when it exists */
	FG_HSRC_EMBEDDED_INDEX,    /* head keys the index lists, else (no index) those in model*.safetensors */
	FG_HSRC_EMBEDDED,          /* head keys in the files the row reads (the same load) */
};

/* What a source that exists but holds no key the filter keeps does. */
enum fg_rt_empty {
	FG_EMPTY_NEXT,             /* counts as not found: the next source is tried */
	FG_EMPTY_STOP,             /* the loader stops there: no head (the missing rule applies) */
	FG_EMPTY_BINDS,            /* the head is built with its initial values (no emptiness check) */
};

struct fg_rt_head_src {
	enum fg_rt_head_src_kind kind;
	const char *file;
	enum fg_rt_empty empty;
};

/* How the head's delta norms get their +1. */
enum fg_rt_heal {
	FG_HEAL_NONE,              /* stored as is (MLX gain = w) */
	FG_HEAL_WITH_TRUNK,        /* +1 on .norms exactly when the trunk shift fires */
	FG_HEAL_ALWAYS,            /* +1 on .norms unconditionally */
	FG_HEAL_SET_RULE,          /* +1 on .norms when the set-level detector says delta: q/k and low norms
				    * both present, max q/k < 1.25 and min low < 0.5 (no q/k: never) */
	FG_HEAL_PER_TENSOR,        /* +1 on each 1-D norm whose mean is below .below (unless .manifest) */
	FG_HEAL_RUN_TIME,          /* no stored shift: x * (1 + w) at run time */
};

/* What a loader does when the config declares a head and it finds none. */
enum fg_rt_missing {
	FG_MISSING_AR,             /* plain decoding */
	FG_MISSING_REFUSE,         /* a load error (.missing_reason) */
	FG_MISSING_AR_IF_INDEX,    /* plain decoding when an index lists no head key, else a load error */
	FG_MISSING_UNSTATED,       /* the source does not say */
};

/* The hidden state and the concatenation a runtime feeds its head. */
enum fg_rt_hidden { FG_HIDDEN_UNSTATED, FG_HIDDEN_POST_NORM, FG_HIDDEN_PRE_NORM };
enum fg_rt_concat { FG_CONCAT_UNSTATED, FG_CONCAT_EMBEDDING_FIRST, FG_CONCAT_HIDDEN_FIRST };

/*
 * How a separate head loader learns a quantized head's parameters.
 * FG_HQ_CONFIG_ELSE_4_64 (MTPLX's generic injector): bits and group from the
 * config's quantization block (text_config's or the top level's
 * `quantization` / `quantization_config`), else affine bits=4, group 64; a
 * head quantized otherwise fails at its first draft or decodes to wrong
 * values, unless its keys take the prequantized path (runtimes.c head_quant
 * judges only what reads wrong on both paths).
 */
/*
 * FG_HQ_DEQUANT_BLOCK_ELSE_4_64 (vllm-mlx's Qwen3.5 patch): bits and group
 * from text_config's `quantization`, else the top level's (never
 * `quantization_config`, never a per-module entry; a falsy one gives the
 * defaults), else 4 and 64; every weight/scales/biases triple is
 * dequantized as affine with them (raising when the scales do not fit), and
 * any other key goes into the float module as stored: a head module other
 * than affine with those bits and group fails to load or decodes wrong
 * values (judged by its tensors, runtimes.c head_dequant).
 */
enum fg_rt_head_quant { FG_HQ_UNSTATED, FG_HQ_CONFIG_ELSE_4_64, FG_HQ_DEQUANT_BLOCK_ELSE_4_64 };

/* A skip-the-heal declaration a loader reads next to the head's file (vllm-mlx's manifest.json). */
struct fg_rt_manifest {
	const char *file;          /* beside the weights file */
	const char *key, *value;   /* key == value means absolute: no heal */
	const char *version_key;   /* and version_key == version */
	int version;
};

/*
 * How a row loads the MTP head.  A row has a list; the first whose
 * model_type (top-level config model_type; NULL: any) and families (NULL:
 * any) match is used.  A row with none never runs MTP.
 */
enum fg_rt_head_mode {
	FG_HEAD_NONE,              /* never runs MTP: head keys are the trunk's business */
	FG_HEAD_MODULE,            /* a head module in the trunk's own load consumes the keys it accepts */
	FG_HEAD_SEPARATE,          /* a second load (drafter, injector) reads .sources; the trunk drops or
				    * ignores the head keys by its own rules */
};

#define FG_RT_MAX_SOURCES 8

struct fg_rt_head {
	const char *model_type;
	const char *const *families;
	enum fg_rt_head_mode mode;
	const char *const *count_keys; /* config keys of the head count (merged config), first present
					* wins; a count <= 0 builds no head (NULL: always built) */
	const struct fg_rt_head_src *sources; /* FG_HEAD_SEPARATE: in order, ends with FG_HSRC_END */
	int needs_keys;            /* built only when its files hold a head key it accepts */
	unsigned keys;             /* FG_KEY_* spellings it loads */
	enum fg_rt_strict strict;
	const char *strict_error;  /* what it prints when strict refuses keys */
	enum fg_rt_heal heal;
	unsigned norms;            /* FG_NG_* groups the heal (or the trunk shift) touches */
	double below;              /* FG_HEAL_PER_TENSOR threshold */
	const char *const *declared_keys;   /* config keys (dotted) declaring the head's encoding */
	const char *const *declared_delta;  /* values (trimmed, lower-case) meaning delta: +1 on .norms */
	struct fg_rt_manifest manifest;
	unsigned experts;          /* FG_XL_* head layouts it stacks or keeps */
	unsigned experts_known;
	const char *experts_error; /* what it prints when strict refuses the experts */
	enum fg_rt_missing missing;
	const char *missing_reason;
	const char *missing_reason_moe; /* when the MoE path fails first with another error */
	enum fg_rt_hidden hidden;
	enum fg_rt_concat concat;
	enum fg_rt_head_quant quant;
	const char *source;
};

/*
 * Weight formats a loader reads (bits).  The simulation refuses a trunk
 * holding a format the row does not list (trunk_format_unsupported), or, for
 * a row whose list is only what its sources state (formats_partial), calls
 * the case not modelled.
 */
enum {
	FG_WF_FLOAT = 1 << 0,          /* F32 / F16 / BF16 */
	FG_WF_MLX_AFFINE = 1 << 1,     /* config quantization, mode affine (.scales/.biases) */
	FG_WF_MLX_MXFP4 = 1 << 2,
	FG_WF_MLX_NVFP4 = 1 << 3,
	FG_WF_MLX_MXFP8 = 1 << 4,
	FG_WF_AWQ4 = 1 << 5,           /* AutoAWQ 4-bit, converted; g_idx refused */
	FG_WF_GPTQ_NO_GIDX = 1 << 6,   /* GPTQ 2/4/8-bit without a g_idx tensor */
	FG_WF_GPTQ = 1 << 7,           /* GPTQ 2/4/8-bit with its g_idx, dequantized */
	FG_WF_FP8_BLOCK = 1 << 8,      /* E4M3 + 128x128 scale_inv, only in .fp8_families (NULL: all) */
	FG_WF_COMPRESSED = 1 << 9,     /* compressed-tensors pack-quantized integers, any parameters */
	FG_WF_MODELOPT_NVFP4 = 1 << 10,
	FG_WF_BITNET = 1 << 11,
	FG_WF_U8_RAW = 1 << 12,        /* U8 passed through */
	FG_WF_FP8_SCALED = 1 << 13,    /* E4M3 times a weight_scale (compressed-tensors float-quantized, ModelOpt FP8) */
	FG_WF_CT_INT4_G32 = 1 << 14,   /* compressed-tensors int4, symmetric, group 32, no g_idx: what mlx-lm's
					* deepseek_v3 sanitize remaps to MLX affine; only in .ct_families */
};

/*
 * One weight format the trunk holds, as the simulation reads it: the bits a
 * row's formats must share with any_of for the row to read it (0: no row
 * does), and whether FG_WF_FP8_BLOCK also needs the family in fp8_families
 * (FG_WF_CT_INT4_G32 always needs it in ct_families).
 */
struct fg_format_need {
	unsigned any_of;
	int fp8_block;
	char name[128];            /* the format as forged names it ("gptq bits=4 group=128 ...") */
	const char *example;       /* one trunk module in it (borrowed) */
	size_t modules;            /* how many trunk modules are in it */
};

/*
 * The FG_WF_* bits that read modules of format f (a format fg_qformat_detect
 * gave), 0 for a dense one; g_idx says whether a GPTQ module has a g_idx
 * tensor (llama.cpp's dequantizer needs one), scale_inv whether an FP8
 * module's scale is weight_scale_inv (DeepSeek) rather than weight_scale.
 * *fp8_block is set when the bits are FG_WF_FP8_BLOCK's.
 */
unsigned fg_runtime_format_bits(const struct fg_qformat *f, int g_idx, int scale_inv, int *fp8_block);

/*
 * The 16-bit norm dtypes whose +1 at load a runtime computes in F32 (no
 * 16-bit sum, so no bf16_shift_* verdict for them).
 */
enum {
	FG_SHIFT_F32_BF16 = 1 << 0,
	FG_SHIFT_F32_F16 = 1 << 1,
};

/* What a forge writing for this runtime must produce (phase 2 reads it; nothing acts on it yet). */
struct fg_rt_forge {
	const char *head_file;     /* the file the runtime reads the head from; NULL: the shards
				    * (embedded keys), or no head when the row never runs MTP */
	const char *key_prefix;    /* the spelling it keeps ("mtp."); NULL when no head */
	unsigned experts;          /* the FG_XL_* layout to write the head's experts in */
	enum fg_convention convention; /* the norm encoding it expects on disk (absolute or delta) */
	const char *const *declarations; /* config keys or files it reads about the head */
	int shards_without_head;   /* the trunk's files must hold no head key (presence triggers a shift) */
};

/* Opt-in rows (open pull requests) are never default targets nor version-range results. */
enum { FG_RT_OPT_IN = 1 << 0 };

/* The checkpoint layouts a runtime may be a default target for (bits of default_for). */
enum fg_runtime_layout {
	FG_LAYOUT_MLX = 1 << 0,    /* converted by mlx-lm: conv1d [C,K,1], format mlx, or quantized */
	FG_LAYOUT_HF = 1 << 1,     /* as Hugging Face releases it */
};

struct fg_runtime {
	const char *id;
	const char *product;       /* versioned rows: "mlx-lm", "mtplx"; NULL: the id alone */
	const char *version_min;   /* first release the row describes (inclusive) */
	const char *version_max;   /* first release it no longer describes; NULL: open */
	unsigned flags;            /* FG_RT_* */
	const char *contract;      /* one line for humans */
	/* files */
	enum fg_rt_files files;
	const char *const *patterns;   /* FG_FILES_FIRST_PATTERN, in order */
	const char *const *exclude;    /* names never read */
	enum fg_rt_dups dups;
	int mono_and_shards_refused;   /* no index: model.safetensors next to other model*.safetensors */
	enum fg_rt_index_check index_check;
	const char *no_files_error;
	const char *dups_error;
	/* load */
	enum fg_rt_strict strict;
	const char *strict_error;
	const char *const *unsupported_model_types;
	const char *model_type_error;  /* printf: %s = the model_type */
	const char *const *unsupported_architectures;
	const char *architecture_error;
	const char *const *routes_away;  /* config keys that send the load down a path not modelled */
	const struct fg_rt_family *families; /* ends with family NULL */
	/* guard */
	const char *const *guard_model_types; /* top-level model_type values the guard checks */
	double guard_above;            /* refuses a trunk probe above this after load (0: never) */
	const char *guard_error;
	/* head */
	const struct fg_rt_head *heads;  /* ends with mode FG_HEAD_NONE; NULL: never runs MTP */
	/* weight formats (issue 12) */
	unsigned formats;              /* FG_WF_* it reads */
	const char *const *fp8_families; /* families whose FP8 block scales it dequantizes (NULL: all) */
	const char *const *ct_families;  /* families whose FG_WF_CT_INT4_G32 weights it remaps (NULL: none) */
	int formats_partial;           /* formats lists what the sources state, not everything it reads */
	unsigned shift_f32;            /* FG_SHIFT_F32_*: the 16-bit dtypes whose +1 at load it sums in F32 */
	/* data for later tasks */
	struct fg_rt_forge forge;
	int mlx;                   /* an MLX-style forge target: absolute norms, stacked experts */
	unsigned default_for;      /* FG_LAYOUT_* bits: targeted when inspect is given no runtime */
	const char *const *unconfirmed; /* facts the sources could not confirm (docs/runtimes.md) */
	const char *source;        /* the row's main citation */
};

/* Every runtime row, in report order. */
const struct fg_runtime *fg_runtime_all(size_t *n);

/*
 * The row an id names: the row's own id, an alias's first row ("hf" ->
 * "vllm"), or a versioned id resolved by range ("mlx-lm-0.33" -> the newest
 * non-opt-in mlx-lm row whose range holds 0.33, "mlx-lm-0.32").  NULL when
 * nothing matches.
 */
const struct fg_runtime *fg_runtime_find(const char *id);

/* How fg_runtime_find_reported matched. */
enum fg_runtime_match { FG_RT_MATCH_ID, FG_RT_MATCH_ALIAS, FG_RT_MATCH_RANGE };

const char *fg_runtime_match_name(enum fg_runtime_match m);

/*
 * A runtime as a serving host names it: what fg_runtime_find takes, or a
 * real version string, PRODUCT and VERSION joined by '-', ' ', '==', '=',
 * '/', '@' or ':' (the product in any case, '_' for '-', a 'v' before the
 * version, a "+local" label dropped: "mlx_lm==0.31.3", "MTPLX 2.12.0",
 * "mlx-lm/v0.33.1+cpu"), mapped to the newest row whose range holds VERSION
 * (so "mlx-lm 0.33.1" is mlx-lm-0.32).  NULL when nothing matches
 * (pre-releases such as "2.12.0rc1" are not ordered and never match).
 * *how (may be NULL) says how it matched.
 */
const struct fg_runtime *fg_runtime_find_reported(const char *reported, enum fg_runtime_match *how);

/*
 * The ids a runtime option accepts, for messages: "mlx-lm-0.31, ..., sglang,
 * hf (an alias), or a versioned id (...)" into buf (len bytes, cut short when
 * it does not fit).  Returns the length written.
 */
size_t fg_runtime_ids_text(char *buf, size_t len);

#define FG_RUNTIME_MAX_ALIAS 4

/*
 * Every row id names: one row, or an alias's set ("hf" -> transformers,
 * vllm, sglang).  Returns how many (0: unknown); *by_range is set when a
 * versioned id resolved by range rather than by name.
 */
size_t fg_runtime_resolve(const char *id, const struct fg_runtime *rows[FG_RUNTIME_MAX_ALIAS], int *by_range);

/* An alias: one old or short id standing for a set of rows. */
struct fg_runtime_alias {
	const char *alias;
	const char *const *ids;    /* NULL-terminated; the first is the row where one row is needed */
	const char *doc;
};

/* The aliases, for listings and docs. */
const struct fg_runtime_alias *fg_runtime_aliases(size_t *n);

/*
 * The FG_LAYOUT_* bit of an inspect layout name ("mlx", "hf"); 0 for any
 * other (such as "unknown", for which inspect targets every runtime).
 */
unsigned fg_runtime_layout_bit(const char *layout);

/* ---- the input: the checkpoint as inspect saw it ---- */

/* What the simulation needs to know of each checkpoint file. */
struct fg_file_facts {
	size_t mtp_keys;        /* tensor names containing "mtp." */
	size_t head_tensors;    /* tensors of the MTP head (any scheme) */
	int raw_conv1d;         /* holds a conv1d in Hugging Face layout [C,1,K] */
	int conv1d_last_not_1;  /* holds a conv1d.weight whose last dimension is not 1 (any rank) */
	int conv1d_not_3d;      /* ... and one of those is not 3-D */
	size_t unlisted_mtp_keys; /* mtp.* names the index does not list */
	size_t wrong_file;      /* tensors the index places in another file */
	size_t index_missing;   /* index entries naming this file that its header lacks */
	size_t unlisted;        /* tensors the index does not list */
};

/* One head tensor set with what the simulation reads of it. */
struct fg_head_input {
	int file;                       /* the sidecar file's index in ckpt->files, or -1: embedded */
	const struct fg_tset *set;
	const struct fg_decision *decision;
	const int *tensor_file;         /* per set tensor: its file's index in ckpt->files */
	const unsigned char *unlisted;  /* per set tensor: 1 when the index does not list it (may be NULL) */
	unsigned experts;               /* FG_XL_* layouts of its expert blocks */
	const cJSON *manifest;          /* a manifest.json beside its file, or NULL */
	const struct fg_qmods *qmods;   /* its quantized-module candidates (qmods.h), or NULL */
};

/* Copies of one name in several files a runtime may read. */
struct fg_dup_input {
	const char *name;
	int file_a, file_b;             /* indexes in ckpt->files */
	int differ;                     /* the copies differ (dtype, shape or bytes), or could not be compared */
};

struct fg_runtime_input {
	const struct fg_ckpt *ckpt;
	const struct fg_file_facts *facts;   /* one per ckpt->files */
	const struct fg_family *family;
	enum fg_family_style style;
	int moe;
	long n_layers;                       /* num_hidden_layers, or -1 */
	int pointer_file;                    /* the file config.json's mtp_file names, or -1 */
	const struct fg_decision *trunk;
	unsigned trunk_experts;              /* FG_XL_* layouts of the trunk's expert blocks */
	int trunk_keys_prefixed;             /* 1: every trunk norm starts "language_model.", 0: none, -1: some */
	int declared_mtp;                    /* the family's declared head count, -1 when none */
	const struct fg_head_input *embedded; /* the head keys in the shards, or NULL */
	const struct fg_head_input *sidecars; /* one per sidecar file holding head tensors */
	size_t n_sidecars;
	const struct fg_dup_input *dups;
	size_t n_dups;
	const struct fg_format_need *trunk_formats; /* the trunk's quantized weight formats (dense is implied) */
	size_t n_trunk_formats;
};

/* ---- the result ---- */

/*
 * The trunk, head and outcome words are the inspect report's (a contract:
 * docs/openapi.json); breakage, the load error and the decode mode were
 * added by issue 10.
 */
enum fg_runtime_trunk {
	FG_TRUNK_OK,
	FG_TRUNK_DOUBLE_SHIFTED,   /* effective probe above 2.4: +1 applied to an absolute trunk */
	FG_TRUNK_MISSING_SHIFT,    /* effective probe below 1.25: a delta trunk without its +1 */
};

enum fg_runtime_head {
	FG_HEAD_OK,
	FG_HEAD_INVERTED,          /* loads delta (or mixed) where absolute is expected */
	FG_HEAD_DOUBLE_SHIFTED,
	FG_HEAD_DROPPED,           /* a head exists but this runtime drops or skips its keys */
	FG_HEAD_ABSENT,            /* no head where this runtime looks */
};

enum fg_runtime_outcome {
	FG_OUTCOME_OK,
	FG_OUTCOME_DEGRADED,       /* serves, but the head is wrong, skipped or missing (plain decoding) */
	FG_OUTCOME_BROKEN,         /* the trunk loads wrong */
	FG_OUTCOME_REFUSED,        /* the runtime refuses to load or serve it (load_error says why) */
};

/* Why the runtime shifts the trunk at load. */
enum fg_shift_reason {
	FG_SHIFT_NONE,
	FG_SHIFT_MTP_KEYS,         /* a loaded key contains "mtp." */
	FG_SHIFT_RAW_CONV1D,       /* a conv1d is in Hugging Face layout */
	FG_SHIFT_UNCONDITIONAL,    /* the loader always adds 1 */
	FG_SHIFT_KEY_PREFIX,       /* the norm keys do not start "language_model." (mlx-vlm) */
};

/* Silent breakage (bits of fg_runtime_result.breakage), in report order. */
enum {
	FG_BREAK_TRUNK_DOUBLE_SHIFTED = 1 << 0,
	FG_BREAK_TRUNK_MISSING_SHIFT = 1 << 1,
	FG_BREAK_TRUNK_EXPERTS = 1 << 2,       /* trunk experts keep their initial values */
	FG_BREAK_HEAD_INVERTED = 1 << 3,       /* delta norms used as gains */
	FG_BREAK_HEAD_DEGRADED = 1 << 4,       /* absolute norms shifted again */
	FG_BREAK_HEAD_UNINITIALIZED = 1 << 5,  /* head keys filtered out or skipped: random weights */
	FG_BREAK_HEAD_EXPERTS = 1 << 6,        /* head experts skipped: random experts */
	FG_BREAK_HEAD_CONTRACT = 1 << 7,       /* the head is fed a stage or order its family does not use */
	FG_BREAK_COUNT = 8,
};

/* Why a load fails (the cause behind load_error). */
enum fg_load_cause {
	FG_LOAD_OK,
	FG_LOAD_NO_FILES,
	FG_LOAD_MODEL_TYPE,        /* model_type_unsupported */
	FG_LOAD_ARCHITECTURE,
	FG_LOAD_DUPLICATES,
	FG_LOAD_AMBIGUOUS_FILES,
	FG_LOAD_INDEX,
	FG_LOAD_CONV1D,
	FG_LOAD_EXTRA_KEYS,
	FG_LOAD_EXPERTS,
	FG_LOAD_HEAD_KEYS,
	FG_LOAD_HEAD_EXPERTS,
	FG_LOAD_HEAD_MISSING,
	FG_LOAD_GUARD,             /* the runtime's own double-shift guard */
	FG_LOAD_FORMAT,            /* it does not read the trunk's weight format (trunk_format_unsupported) */
};

enum fg_decode { FG_DECODE_NONE, FG_DECODE_AR, FG_DECODE_MTP };

/* "ok", "double_shifted", "missing_shift"; "unknown" outside the enum. */
const char *fg_runtime_trunk_name(enum fg_runtime_trunk t);

/* "ok", "inverted", "double_shifted", "dropped", "absent"; "unknown" outside the enum. */
const char *fg_runtime_head_name(enum fg_runtime_head h);

/* "ok", "degraded", "broken", "refused"; "unknown" outside the enum. */
const char *fg_runtime_outcome_name(enum fg_runtime_outcome o);

/* "mtp_keys", "raw_conv1d", "unconditional", "key_prefix"; NULL for FG_SHIFT_NONE and outside. */
const char *fg_runtime_shift_reason_name(enum fg_shift_reason r);

/* The name of one FG_BREAK_* bit ("trunk_double_shifted", ...); NULL for anything else. */
const char *fg_runtime_breakage_name(unsigned bit);

/* "ar", "mtp"; NULL for FG_DECODE_NONE (the load fails). */
const char *fg_runtime_decode_name(enum fg_decode d);

/* "no_files", "model_type", ...; NULL for FG_LOAD_OK. */
const char *fg_runtime_load_cause_name(enum fg_load_cause c);

#define FG_RUNTIME_MAX_FILES 64

struct fg_runtime_result {
	const struct fg_runtime *rt;
	int targeted;
	char version_of[48];            /* the id it was targeted as when resolved by range, else "" */
	int modelled;                   /* 0: the row does not cover this family or a fact it needs */
	char unmodelled[160];           /* why, when !modelled */
	size_t n_files;                 /* files the runtime reads (up to FG_RUNTIME_MAX_FILES listed) */
	const char *files[FG_RUNTIME_MAX_FILES];
	int trunk_shift;
	enum fg_shift_reason shift_reason; /* FG_SHIFT_NONE unless trunk_shift */
	int has_probe;
	double trunk_probe_after;
	int head_shift;                 /* any head norm gets +1 at load */
	size_t head_keys_dropped;       /* head keys read and then dropped, filtered or skipped */
	size_t head_keys_loaded;
	const char *head_file;          /* the file the head came from; NULL: the shards or none */
	enum fg_convention head_after;  /* effective head convention (MLX terms) */
	enum fg_runtime_trunk trunk;
	enum fg_runtime_head head;
	enum fg_runtime_outcome outcome;
	unsigned breakage;              /* FG_BREAK_* */
	enum fg_decode decode;
	enum fg_load_cause load_cause;
	char load_error[384];           /* what the runtime would print, when load_cause */
	size_t order_dependent;         /* names with differing copies whose winner depends on order */
	const char *culprit;            /* one tensor the load error or breakage is about, or NULL */
	const struct fg_tset *head_set; /* the head set it loaded, or NULL */
	const struct fg_format_need *unread_format; /* FG_LOAD_FORMAT: the trunk format it does not read */
};

/* Simulate rt on the checkpoint. */
void fg_runtime_simulate(const struct fg_runtime *rt, const struct fg_runtime_input *in,
			 struct fg_runtime_result *out);

/*
 * Whether rt's head loader (for in's checkpoint: its config and family)
 * reads a head quantized as mode ("affine", "mxfp4"), bits and group wrong
 * whatever path it takes (FG_HQ_CONFIG_ELSE_4_64 without a quantization
 * block; FG_HQ_DEQUANT_BLOCK_ELSE_4_64 unless affine with the block's bits
 * and group): 1 with why, else 0.  The forge asks before it writes a head a
 * policy quantizes; the simulation of the written artifact says the same.
 */
int fg_runtime_head_quant_refuses(const struct fg_runtime *rt, const struct fg_runtime_input *in, const char *mode,
				  int bits, int group, char *why, size_t len);

/* The head loader of rt for this input (model type and family), or NULL when it runs no head. */
const struct fg_rt_head *fg_runtime_head_loader(const struct fg_runtime *rt, const struct fg_runtime_input *in);

/* The FG_KEY_* class of a head key as stored (n_layers for appended layers). */
unsigned fg_runtime_key_class(const char *name, long n_layers);

/* The FG_NG_* group of a head norm (0: not a head norm group). */
unsigned fg_runtime_norm_group(const char *name);

/* 1 when rt reads file i of c (its file rule alone). */
int fg_runtime_reads_file(const struct fg_runtime *rt, const struct fg_ckpt *c, size_t i);

#endif
