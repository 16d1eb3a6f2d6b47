/*
 * dequant.h: reading the quantized-weight formats of public checkpoints back
 * to the dense weight, and deciding which format a module's tensors are in.
 *
 * Formats (the bit-level rules are in /work/notes/quant-formats.md, cited by
 * section below; each .c file repeats the rules it implements):
 *   - GPTQ (AutoGPTQ / GPTQModel, notes section 2): gptq.c
 *   - AutoAWQ GEMM 4-bit (section 3): awq.c
 *   - compressed-tensors pack-quantized int (section 4): ctensors.c
 *   - F8_E4M3 weights times a broadcast scale: compressed-tensors
 *     float-quantized and ModelOpt FP8 (section 5), DeepSeek block FP8
 *     (section 8): ctensors.c
 *   - ModelOpt NVFP4 (section 6): nvfp4.c
 *   - MLX affine, mxfp4, mxfp8 and nvfp4 (section 7): mlx_fp.c (affine and
 *     mxfp4 through quant.h's fg_dequant_affine_rows_dt / fg_dequant_mxfp4_rows)
 *   - roles, the descriptor and its name, the generic dispatch, dense weights
 *     and the shared helpers: qformat.c (internals in dq_internal.h);
 *   - the decision helper fg_qformat_detect and fg_qparams_name: qdetect.c.
 * Reading a checkpoint's quantization_config, and which parameters it gives
 * one module, is qconfig.h (qconfig.c, with qregex.c for "re:" patterns).
 * A caller (forge/model) files a module's tensors (fg_qmodule_add), gets its
 * parameters (fg_qconfig_for_module), decides the format (fg_qformat_detect),
 * checks it once (fg_qformat_check) and streams bands of rows
 * (fg_qformat_dequant_rows / _bf16); bands are independent, so threads may
 * share a module.
 *
 * The result is always the logical weight W[out, in] of the PyTorch / MLX
 * layout (row o = output feature), whatever the storage order.  Arithmetic:
 * every operand is widened to F32 exactly (F16, BF16, E4M3, E2M1, E8M0 all
 * are), the format's formula is evaluated in F32 in the order the notes write
 * it, one rounding per operation, no fused multiply-add; the BF16 outputs are
 * that F32 value rounded to nearest even (dtype.h's conversion).  For the
 * integer formats the product is exact, so BF16 is the correctly rounded
 * true value.
 *
 * Conventions, as quant.h: band-of-rows functions (rows [row0, row0 + n_rows)
 * of W into out, n_rows * in values), nothing allocates, no state between
 * calls, plain C only (these read a head once; they are not a hot path), no
 * alignment needed.  A module's tensors are struct fg_tensor views
 * (safetensors.h) whose data holds the product of the shape elements of the
 * dtype, as the safetensors reader guarantees; the element counts are
 * recomputed here from the shapes, overflow-checked.
 *
 * Errors: FG_EUSAGE for NULL pointers, a band outside the tensor, a tensor
 * without data where data is needed, or a descriptor of the wrong kind;
 * FG_EINPUT for anything about the checkpoint: a shape or dtype that does not
 * fit the others (the message names the tensor role, its shape and the shape
 * it was checked against), an index or scale that cannot be used, and formats
 * or parameters forged does not read, whose message starts
 * FG_QUNSUPPORTED ("unsupported_quantization_format: ") and then the format's name with its
 * parameters (fg_qformat_name) and the reason.  Every _check function reads
 * only shapes and dtypes, except compressed-tensors' two-element weight_shape,
 * which is data; the dequantizers run it first, then read and validate the
 * indices (g_idx) and the scales the band uses (non-finite scales, E4M3 NaN
 * scale codes and the E8M0 byte 255 are refused), and only then write.
 * Non-finite weight values (E4M3 NaN codes in an FP8 weight) pass through as
 * NaN, as fg_fp8_block_dequant_rows does.
 */
#ifndef FG_DEQUANT_H
#define FG_DEQUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "forge/core/error.h"
#include "forge/format/dtype.h"
#include "forge/format/safetensors.h"

/* ---- the tensors of one module ---------------------------------------------------
 *
 * A module prefix P (e.g. "model.layers.61.mlp.down_proj") owns the tensors
 * "P.<suffix>"; each suffix forged knows is a role.  The caller (forge/model)
 * finds the tensors and files them with fg_qmodule_add.
 */
enum fg_qrole {
	FG_QR_WEIGHT,              /* weight: float, F8_E4M3, U8 (NVFP4), U32 (MLX), I8 */
	FG_QR_QWEIGHT,             /* GPTQ / AWQ packed codes */
	FG_QR_QZEROS,              /* GPTQ / AWQ packed zero points */
	FG_QR_SCALES,              /* GPTQ / AWQ / MLX scales */
	FG_QR_G_IDX,               /* GPTQ group of each input column */
	FG_QR_BIASES,              /* MLX affine biases (not a linear bias) */
	FG_QR_BIAS,                /* a linear bias: copied, not dequantized */
	FG_QR_WEIGHT_PACKED,       /* compressed-tensors packed codes */
	FG_QR_WEIGHT_SCALE,        /* compressed-tensors / ModelOpt scale */
	FG_QR_WEIGHT_ZERO_POINT,   /* compressed-tensors asymmetric zero points */
	FG_QR_WEIGHT_SHAPE,        /* compressed-tensors [out, in] */
	FG_QR_WEIGHT_G_IDX,        /* compressed-tensors act-order groups */
	FG_QR_WEIGHT_GLOBAL_SCALE, /* compressed-tensors nvfp4 (recognised, not read) */
	FG_QR_WEIGHT_SCALE_2,      /* ModelOpt NVFP4 global scale */
	FG_QR_WEIGHT_SCALE_INV,    /* DeepSeek block FP8 scale (a multiplier) */
	FG_QR_INPUT_SCALE,         /* activation scale: not needed for weights */
	FG_QR_INPUT_GLOBAL_SCALE,  /* compressed-tensors nvfp4 activation scale */
	FG_QR_PRE_QUANT_SCALE,     /* ModelOpt AWQ-style input scale (refused) */
	FG_QR_COUNT
};

struct fg_qmodule {
	const struct fg_tensor *t[FG_QR_COUNT]; /* NULL: absent; borrowed */
};

/* The suffix of a role ("qweight", "weight_scale_2"); never NULL for a valid role. */
const char *fg_qrole_suffix(enum fg_qrole r);

/* The role of a suffix (without the leading dot).  Returns 0, or FG_EINPUT for a suffix that is no role. */
int fg_qrole_parse(const char *suffix, enum fg_qrole *out);

/*
 * File tensor t under its suffix.  Returns 1 when the suffix is a role,
 * 0 when it is not (the tensor is not filed), FG_EINPUT when the role is
 * already taken by another tensor.
 */
int fg_qmodule_add(struct fg_qmodule *m, const char *suffix, const struct fg_tensor *t,
		   struct fg_err *err);

/* ---- format descriptors -------------------------------------------------------- */

/* Which config declared a format (also names it in messages). */
enum fg_qmethod {
	FG_QM_NONE,        /* the config declares no quantization */
	FG_QM_GPTQ,
	FG_QM_AWQ,
	FG_QM_CT,          /* compressed-tensors (llm-compressor) */
	FG_QM_MODELOPT,
	FG_QM_FP8,         /* quant_method "fp8": DeepSeek / HF FineGrainedFP8 */
	FG_QM_MLX,
	FG_QM_UNSUPPORTED, /* a quant_method forged does not read (named in fg_qparams) */
};

enum fg_qformat_kind {
	FG_QF_DENSE,      /* a float weight (F32, F16, BF16): widen / round only */
	FG_QF_GPTQ,
	FG_QF_AWQ,        /* AutoAWQ GEMM */
	FG_QF_CT_INT,     /* compressed-tensors pack-quantized */
	FG_QF_FP8,        /* F8_E4M3 weight times weight_scale or weight_scale_inv */
	FG_QF_NVFP4,      /* ModelOpt NVFP4 */
	FG_QF_MLX_AFFINE,
	FG_QF_MLX_MXFP4,
	FG_QF_MLX_MXFP8,
	FG_QF_MLX_NVFP4,
	FG_QF_COUNT
};

/* How a scale broadcasts over W[out, in] (compressed-tensors int, FP8). */
enum fg_qscale {
	FG_QS_TENSOR,  /* one scale: shape [], [1] or [1, 1] */
	FG_QS_CHANNEL, /* one per row: [out, 1] (or [out]) */
	FG_QS_GROUP,   /* group columns of a row: [out, ceil(in / group)] */
	FG_QS_BLOCK,   /* block[0] x block[1] tiles: [ceil(out / b0), ceil(in / b1)] */
};

struct fg_qformat {
	enum fg_qformat_kind kind;
	enum fg_qmethod method; /* naming only */
	int bits;               /* bits per code (GPTQ 2/3/4/8, AWQ 4, CT 2-8, FP8 8, FP4 4, MLX affine) */
	int group;              /* columns per scale; 0 = one per row (GPTQ/AWQ group_size -1) */
	bool sym;               /* CT: no weight_zero_point; GPTQ/AWQ: naming only */
	bool act_order;         /* GPTQ desc_act (naming; g_idx is always used); CT: weight_g_idx present */
	int version;            /* GPTQ: 1 (stored zero - 1, "gptq") or 2 ("gptq_v2");
				 * CT int: 1 padded words (< 0.18), 2 bitstream (>= 0.18), 0 decide by shape */
	enum fg_qscale scale;   /* CT int, FP8 */
	int block[2];           /* FP8 block rows, columns (scale == FG_QS_BLOCK) */
};

/* Shape of the dequantized weight. */
struct fg_qdims {
	size_t out, in;
};

/* "gptq", "awq", "compressed-tensors", ... for a kind; never NULL. */
const char *fg_qformat_kind_name(enum fg_qformat_kind k);

/* The MLX `mode` word of an MLX kind ("affine", "mxfp4", "mxfp8", "nvfp4"), NULL for any other kind. */
const char *fg_qformat_mlx_mode(enum fg_qformat_kind k);

/*
 * Render f for messages, e.g. "gptq bits=4 group=128 desc_act=true sym=true
 * checkpoint_format=gptq", into buf (always terminated when len > 0).
 * Returns buf.
 */
const char *fg_qformat_name(const struct fg_qformat *f, char *buf, size_t len);

/* Generic entry points: switch on f->kind to the functions below. */
int fg_qformat_check(const struct fg_qformat *f, const struct fg_qmodule *m, struct fg_qdims *d,
		     struct fg_err *err);
int fg_qformat_dequant_rows(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
			    size_t n_rows, float *out, struct fg_err *err);
int fg_qformat_dequant_rows_bf16(const struct fg_qformat *f, const struct fg_qmodule *m,
				 size_t row0, size_t n_rows, uint16_t *out, struct fg_err *err);

/*
 * Every format below has the same three functions:
 *   _check: validate f's parameters and every role's dtype and shape against
 *     the others; fill *d (may be NULL).  0 or FG_EINPUT / FG_EUSAGE.
 *   _dequant_rows: rows [row0, row0 + n_rows) of W as F32 into out
 *     (n_rows * d.in values).
 *   _dequant_rows_bf16: the same rounded to BF16.
 * A role a format does not use must be absent (FG_EINPUT names it), except
 * bias (checked as [out] float when present, never read) and input_scale.
 */

/*
 * GPTQ (notes 2): qweight I32 [in*bits/32, out], codes packed along in, LSB
 * first (3 bits: one continuous bitstream per column); qzeros I32
 * [G, out*bits/32] packed along out; scales F16/BF16/F32 [G, out]; g_idx I32
 * [in] (group of input column c; act-order permutes it).  Without g_idx,
 * group c / f->group (f->group 0: one group).  W[o, c] = s * (q - z) with
 * g = g_idx[c], z = (field + 1) & (2^bits - 1) for version 1, field for 2.
 * bits 2, 3, 4, 8; 5, 6, 7 (GPTQModel's planar layout) are refused.  With
 * f->group > 0 the group count G must be ceil(in / group) (1 for group 0).
 */
int fg_gptq_check(const struct fg_qformat *f, const struct fg_qmodule *m, struct fg_qdims *d,
		  struct fg_err *err);
int fg_gptq_dequant_rows(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
			 size_t n_rows, float *out, struct fg_err *err);
int fg_gptq_dequant_rows_bf16(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
			      size_t n_rows, uint16_t *out, struct fg_err *err);

/*
 * AutoAWQ GEMM (notes 3): qweight I32 [in, out/8], qzeros I32 [G, out/8],
 * scales F16/BF16/F32 [G, out], G = in / group; nibble i of a word holds
 * output column 8 * word + [0,2,4,6,1,3,5,7][i].  W[o, c] = s * (q - z), z as
 * stored.  4 bits only; qzeros required (AutoAWQ cannot write GEMM without).
 */
int fg_awq_check(const struct fg_qformat *f, const struct fg_qmodule *m, struct fg_qdims *d,
		 struct fg_err *err);
int fg_awq_dequant_rows(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
			size_t n_rows, float *out, struct fg_err *err);
int fg_awq_dequant_rows_bf16(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
			     size_t n_rows, uint16_t *out, struct fg_err *err);

/*
 * compressed-tensors pack-quantized (notes 4): weight_packed I32 [out, words]
 * packed along in; weight_shape I32/I64 [2] = [out, in] (read by _check);
 * weight_scale F32/F16/BF16 by f->scale (tensor, channel or group with
 * f->group); weight_zero_point I32 [zp_words, scale columns] packed along out,
 * present exactly when !f->sym (not with tensor scales); weight_g_idx I32
 * [in] exactly when f->act_order (all -1: unused).  Codes and zero points are
 * stored as u = v + 2^(bits-1); W[o, c] = (q - zp) * s.  bits 2-8.  Words per
 * row: 32/bits per word for 2, 4, 8; for 3, 5, 6, 7 either floor(32/bits)
 * values per word with the top bits unused (version 1, before 0.18) or one
 * continuous bitstream of ceil(in*bits/32) words (version 2, 0.18 on); version
 * 0 picks the one weight_packed's width fits and refuses a width both fit.
 */
int fg_ct_int_check(const struct fg_qformat *f, const struct fg_qmodule *m, struct fg_qdims *d,
		    struct fg_err *err);
int fg_ct_int_dequant_rows(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
			   size_t n_rows, float *out, struct fg_err *err);
int fg_ct_int_dequant_rows_bf16(const struct fg_qformat *f, const struct fg_qmodule *m,
				size_t row0, size_t n_rows, uint16_t *out, struct fg_err *err);

/*
 * F8_E4M3 weight [out, in] times a scale (notes 5, 8): weight_scale
 * (compressed-tensors float-quantized, ModelOpt FP8) or weight_scale_inv
 * (DeepSeek; a multiplier despite the name), exactly one of them, F32, F16 or
 * BF16, broadcast by f->scale (block: f->block[0] x f->block[1], edge blocks
 * ragged).  W = e4m3(w) * s.
 */
int fg_fp8_scaled_check(const struct fg_qformat *f, const struct fg_qmodule *m, struct fg_qdims *d,
			struct fg_err *err);
int fg_fp8_scaled_dequant_rows(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
			       size_t n_rows, float *out, struct fg_err *err);
int fg_fp8_scaled_dequant_rows_bf16(const struct fg_qformat *f, const struct fg_qmodule *m,
				    size_t row0, size_t n_rows, uint16_t *out, struct fg_err *err);

/*
 * ModelOpt NVFP4 (notes 6): weight U8 [out, in/2], low nibble = even column;
 * weight_scale F8_E4M3 [out, in/16]; weight_scale_2 F32 scalar ([] or [1]).
 * se = e4m3(weight_scale) * weight_scale_2 (F32), W = e2m1(code) * se.
 * E2M1 code 8 is -0 (the sign bit is kept, as in MLX and compressed-tensors
 * and forged's mxfp4; ModelOpt's own table has +0 there): W is -0 for a
 * positive scale, BF16 0x8000.  The value is the same; the sign makes a
 * re-quantization to an FP4 mode give back code 8.  pre_quant_scale
 * (NVFP4_AWQ) is refused.  f->group must be 16 (0 reads as 16).
 */
int fg_modelopt_nvfp4_check(const struct fg_qformat *f, const struct fg_qmodule *m,
			    struct fg_qdims *d, struct fg_err *err);
int fg_modelopt_nvfp4_dequant_rows(const struct fg_qformat *f, const struct fg_qmodule *m,
				   size_t row0, size_t n_rows, float *out, struct fg_err *err);
int fg_modelopt_nvfp4_dequant_rows_bf16(const struct fg_qformat *f, const struct fg_qmodule *m,
					size_t row0, size_t n_rows, uint16_t *out,
					struct fg_err *err);

/*
 * MLX (notes 7), kinds FG_QF_MLX_AFFINE / _MXFP4 / _MXFP8 / _NVFP4: weight U32
 * [out, in*bits/32]; scales [out, in/group] (affine: F32/F16/BF16 with biases
 * of the same dtype and shape; the fp modes: U8, no biases).  mxfp4 group 32
 * bits 4, mxfp8 group 32 bits 8, nvfp4 group 16 bits 4 (f->bits and f->group
 * 0 read as these); affine bits and group as fg_quant_affine_check.
 */
int fg_mlx_check(const struct fg_qformat *f, const struct fg_qmodule *m, struct fg_qdims *d,
		 struct fg_err *err);
int fg_mlx_dequant_rows(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
			size_t n_rows, float *out, struct fg_err *err);
int fg_mlx_dequant_rows_bf16(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
			     size_t n_rows, uint16_t *out, struct fg_err *err);

/* A float weight [out, in] (F32, F16, BF16): widened exactly, or rounded to BF16. */
int fg_dense_check(const struct fg_qformat *f, const struct fg_qmodule *m, struct fg_qdims *d,
		   struct fg_err *err);
int fg_dense_dequant_rows(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
			  size_t n_rows, float *out, struct fg_err *err);
int fg_dense_dequant_rows_bf16(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
			       size_t n_rows, uint16_t *out, struct fg_err *err);

/* ---- MLX mxfp8 and nvfp4 on raw buffers, in the style of fg_dequant_mxfp4_rows ----
 *
 * rows x cols values from rows packed rows (a band: offset the pointers).
 * mxfp8: packed [rows, cols/4] U32 (byte k of the row = E4M3 value k),
 * scales [rows, cols/32] E8M0 bytes, W = e4m3 * 2^(s - 127) (byte 0 reads as
 * 2^-127, byte 255 is refused).  nvfp4: packed [rows, cols/8] U32 (code k at
 * bits 4k of the row's stream), scales [rows, cols/16] E4M3 bytes (NaN codes
 * refused), W = e2m1 * e4m3(s), no global scale.  cols must be a multiple of
 * the group.
 */
int fg_dequant_mxfp8_rows(const uint32_t *packed, const uint8_t *scales, size_t rows, size_t cols,
			  float *out, struct fg_err *err);
int fg_dequant_mxfp8_rows_bf16(const uint32_t *packed, const uint8_t *scales, size_t rows,
			       size_t cols, uint16_t *out, struct fg_err *err);
int fg_dequant_nvfp4_rows(const uint32_t *packed, const uint8_t *scales, size_t rows, size_t cols,
			  float *out, struct fg_err *err);
int fg_dequant_nvfp4_rows_bf16(const uint32_t *packed, const uint8_t *scales, size_t rows,
			       size_t cols, uint16_t *out, struct fg_err *err);

/* ---- deciding the format of a module ---------------------------------------------
 *
 * A module's quantization parameters as the checkpoint's config gives them
 * for that module (qconfig.h's fg_qconfig_for_module fills this from
 * config.json; a caller may also fill it by hand).  Strings are lower case;
 * "" and the -1 / 0 markers mean "not given".
 */
#define FG_QSTR 32

struct fg_qparams {
	enum fg_qmethod method;
	char method_name[FG_QSTR]; /* quant_method as written, "mlx", or "" */
	bool quantized;            /* the config quantizes this module */
	bool have_weights;         /* the fields below describe this module's weights (a caller
				    * filling p by hand sets it; quantized tensors with it false are
				    * refused as a contradiction with the config) */
	int bits;                  /* 0: not given */
	int group_size;            /* 0: not given; -1: one group per row */
	int sym;                   /* -1 not given, 0, 1 (AWQ: zero_point == false) */
	int desc_act;              /* -1 not given, 0, 1 (GPTQ desc_act) */
	char fmt[FG_QSTR];         /* gptq: checkpoint_format, else format ("gptq" default);
				    * awq: version; ct: the group's format, else the top one;
				    * modelopt: quant_algo; fp8: fmt; mlx: mode */
	char type[FG_QSTR];        /* ct weights.type ("int", "float") */
	char strategy[FG_QSTR];    /* ct weights.strategy (inferred when absent) */
	char actorder[FG_QSTR];    /* ct weights.actorder ("" for null / false) */
	int block[2];              /* ct block_structure, fp8 weight_block_size; 0: absent */
	int ct_version[2];         /* compressed-tensors "version" major, minor; -1: unknown */
	bool marlin;               /* gptq is_marlin_format */
	char pack_dtype[FG_QSTR];  /* gptq pack_dtype ("" = int32) */
	char why[96];              /* which config rule decided (for messages and tests) */
};

/* Parameters that say "no config": method FG_QM_NONE, nothing given. */
void fg_qparams_init(struct fg_qparams *p);

/*
 * Render p for refusals, e.g. "awq bits=4 group=128 version=gemv" or
 * "bitsandbytes".  Returns buf.
 */
const char *fg_qparams_name(const struct fg_qparams *p, char *buf, size_t len);

/*
 * Decide which format the tensors of m are in, with the config's parameters
 * p (NULL: no quantization_config).  The tensors decide (notes section 9):
 *   qweight + g_idx, or qweight with [G, out] scales: GPTQ; qweight with
 *   scales 8 times wider: AWQ; weight_packed I32 + weight_shape:
 *   compressed-tensors pack-quantized; weight U8 + F8_E4M3 weight_scale +
 *   weight_scale_2: ModelOpt NVFP4; weight F8_E4M3 + weight_scale_inv or a
 *   float weight_scale: FP8; weight U32 + scales: MLX (biases: affine, else
 *   the mode); a float weight alone: dense.
 * p supplies what the tensors cannot say (bits, group, v1/v2, the mode, the
 * block size) and must agree with them.  Writes *out and returns 0, or
 * FG_EINPUT: "unsupported_quantization_format: <name>: <reason>" for a format
 * or parameter forged does not read (GPTQ 5/6/7 bits, marlin and other
 * GPTQModel layouts, non-int32 packing, AWQ gemv/marlin/other versions, AWQ
 * without qzeros, compressed-tensors nvfp4/mxfp4/mxfp8/int-quantized formats,
 * asymmetric per-tensor packing, ModelOpt NVFP4 with pre_quant_scale, FP8
 * without a scale, E5M2 weights, any quant_method not listed), or a plain
 * message when tensors and config contradict each other.
 */
int fg_qformat_detect(const struct fg_qparams *p, const struct fg_qmodule *m,
		      struct fg_qformat *out, struct fg_err *err);

/* The prefix of every message naming a format or parameter forged does not read. */
#define FG_QUNSUPPORTED "unsupported_quantization_format: "

/*
 * fg_qformat_detect, and *unsupported (may be NULL) says whether a failure is
 * one of the refusals above, whose message starts FG_QUNSUPPORTED and then
 * the format's name (false: the tensors are no known format, or tensors and
 * config contradict each other), so a caller tells the two apart without
 * reading the message.
 */
int fg_qformat_detect_why(const struct fg_qparams *p, const struct fg_qmodule *m, struct fg_qformat *out,
			  bool *unsupported, struct fg_err *err);

#endif
