/*
 * qmods.h: the quantized modules of a tensor set, recognised by their tensor
 * families (issue 12), not by a `.scales` suffix.
 *
 * A module is the prefix P of tensors named "P.<role>", a role being one of
 * dequant.h's suffixes (weight, qweight, qzeros, scales, g_idx, biases,
 * weight_packed, weight_scale, weight_shape, weight_scale_2,
 * weight_scale_inv, input_scale, ...).  A module is a candidate when one of
 * its tensors has a role other than weight and bias, or its weight is not a
 * float (U32, U8, F8, I8): every quantized format forged knows has one, and
 * a dense linear or a norm has none.  Each candidate's format is decided by
 * fg_qformat_detect_why from its tensors and the parameters the
 * checkpoint's quantization config gives that module (qconfig.h: targets,
 * ignore lists, GPTQModel's dynamic, MLX per-module overrides).  DeepSeek's
 * block FP8 (an E4M3 weight and its weight_scale_inv, nothing else) names
 * itself: it is read as 128 x 128 blocks even when config.json declares no
 * quantization, as forged always read it.  A module forged cannot read keeps
 * the message, and whether it names a format forged does not read, so the
 * forge refuses it by name (never copies it).
 *
 * Only headers are read, except compressed-tensors' two-element
 * weight_shape when `check` asks for the dequantized shape (head sets: the
 * forge needs it to plan; inspect fetches those few bytes of a remote head).
 */
#ifndef FG_QMODS_H
#define FG_QMODS_H

#include <stddef.h>

#include "forge/core/error.h"
#include "forge/format/quant/dequant.h"
#include "forge/format/quant/qconfig.h"
#include "forge/model/tset.h"

struct fg_qmod {
	char *name;              /* P as stored (owned, whole) */
	struct fg_qmodule m;     /* its tensors by role (borrowed from the set) */
	struct fg_qformat f;     /* the format, when rc == 0 */
	struct fg_qdims dims;    /* W's [out, in] (per expert for a stacked 3-D MLX weight), when checked */
	int checked;             /* fg_qformat_check ran and passed (dims valid) */
	int rc;                  /* 0, or FG_EINPUT: forged cannot read it (why says) */
	int unsupported;         /* rc != 0 because the format or a parameter is one forged does not read */
	char why[FG_ERR_MSG_MAX];/* rc != 0: the message (FG_QUNSUPPORTED... when unsupported) */
};

struct fg_qmods {
	size_t n;
	struct fg_qmod *v;       /* in the order of each module's first tensor */
	/* private: the modules by name (fg_qmods_module, fg_qmods_find), made by fg_qmods_scan */
	size_t mask;
	size_t *slot;            /* module index + 1; 0: empty */
};

/*
 * The candidate modules of set.  cfg is the checkpoint's parsed quantization
 * config, or NULL when it did not parse (cfg_error then says why, and every
 * candidate carries it).  With check, each detected module is also checked
 * (shapes and dtypes, compressed-tensors' weight_shape), giving its dims; a
 * module that fails the check is not read (rc FG_EINPUT).  Returns 0 or
 * FG_ENOMEM; out is the caller's to release with fg_qmods_release.
 */
int fg_qmods_scan(const struct fg_tset *set, const struct fg_qconfig *cfg, const char *cfg_error, int check,
		  struct fg_qmods *out, struct fg_err *err);

void fg_qmods_release(struct fg_qmods *q);

/* The views of one expert's slice and the shapes they point at (fg_qmod_slice). */
struct fg_qslice {
	struct fg_tensor views[FG_QR_COUNT];
	uint64_t shapes[FG_QR_COUNT][FG_ST_MAX_RANK];
};

/*
 * Expert e's 2-D slices of a stacked MLX module (weight [E, out, words],
 * scales and biases [E, out, groups], a linear bias [E, out]) into v, and
 * out filed with them; other tensors are shared as they are.  The views'
 * data point into e's part (NULL when the tensors have no data yet); their
 * shapes are v's, so out is valid while v is (not to be copied away).
 */
void fg_qmod_slice(const struct fg_qmod *q, uint64_t e, struct fg_qslice *v,
		   struct fg_qmodule *out);

/*
 * Whether q's tensors fit format f (fg_qformat_check; an MLX module with a
 * 3-D weight checked on its first expert's slice): 0 with dims, or the
 * error.  f need not be the format q was read as.
 */
int fg_qmod_fits(const struct fg_qmod *q, const struct fg_qformat *f, struct fg_qdims *dims, struct fg_err *err);

/* The number of stacked experts of an MLX module with a 3-D weight, else 0. */
uint64_t fg_qmod_stacked(const struct fg_qmod *q);

/* The module the tensor called name belongs to (its role in *role, may be NULL), or NULL. */
const struct fg_qmod *fg_qmods_find(const struct fg_qmods *q, const char *name, enum fg_qrole *role);

/* The module called name (a prefix), or NULL. */
const struct fg_qmod *fg_qmods_module(const struct fg_qmods *q, const char *name);

/* 1 when the module is quantized: a format other than dense, or one forged cannot read. */
int fg_qmod_quantized(const struct fg_qmod *m);

/* How many of q's modules are quantized. */
size_t fg_qmods_quantized(const struct fg_qmods *q);

/*
 * The module's format for people and records: fg_qformat_name of a read
 * format ("gptq bits=4 group=128 desc_act=false sym=true checkpoint_format=gptq"),
 * else the refusal without its FG_QUNSUPPORTED prefix.  Returns buf.
 */
const char *fg_qmod_name(const struct fg_qmod *m, char *buf, size_t len);

#endif
