/*
 * test_dequant.c: forge/format/quant/dequant.h and qconfig.h.
 *
 * - Golden files from tests/fixtures/dequant_golden.py, an independent numpy
 *   reading of the format rules in the spec notes, in $FORGED_DEQUANT_GOLDEN
 *   (default build/fixtures/dequant_golden; `make test` makes it): every case
 *   is dequantized to F32 and BF16, whole and in bands of rows, through the
 *   generic entry points and the format's own functions, and must match bit
 *   for bit; each case's config.json must make fg_qconfig_parse +
 *   fg_qconfig_for_module + fg_qformat_detect give the case's format.
 * - The hand-worked examples of the notes, typed in here as literal numbers
 *   (so one check does not depend on numpy either).
 * - Every _check rejection with its message, band and usage errors, the
 *   refusals ("unsupported_quantization_format: ..."), the names.
 * - Config reading: targets / ignore resolution (a separate MTP group, an
 *   ignored mtp.* module, exact > regex > class), GPTQModel dynamic, AWQ /
 *   fp8 / ModelOpt / MLX exclusion rules, legacy files, parse errors, and
 *   the regex subset.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "forge/core/error.h"
#include "forge/format/dtype.h"
#include "forge/format/quant/dequant.h"
#include "forge/format/quant/qconfig.h"
#include "tests/unit/support.h"

#define GOLDEN_HOWTO "/usr/bin/python3 tests/fixtures/dequant_golden.py build/fixtures/dequant_golden"
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ---- helpers ------------------------------------------------------------------------ */

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	assert_non_null(p);
	return p;
}

static struct fg_tensor tensor(const char *name, enum fg_dtype dt, const void *data, int rank, uint64_t d0,
			       uint64_t d1)
{
	struct fg_tensor t;

	memset(&t, 0, sizeof(t));
	t.name = name;
	t.dtype = dt;
	t.rank = (unsigned)rank & 7u;
	t.shape = test_shape();
	TSHAPE(t)[0] = d0;
	TSHAPE(t)[1] = d1;
	t.data = data;
	return t;
}

/* err's message contains every one of the NULL-terminated strings. */
static void expect_msg(const struct fg_err *err, ...)
{
	va_list ap;
	const char *s;

	va_start(ap, err);
	while ((s = va_arg(ap, const char *)) != NULL)
		if (!strstr(err->msg, s))
			fail_msg("message '%s' lacks '%s'", err->msg, s);
	va_end(ap);
}

static uint16_t f16(float x)
{
	return fg_f32_to_f16_ref(x);
}

static uint16_t bf16(float x)
{
	return fg_f32_to_bf16_ref(x);
}

/* Dequantize the whole module to BF16 and compare with want (n values). */
static void expect_bf16(const struct fg_qformat *f, const struct fg_qmodule *m, const uint16_t *want, size_t out,
			size_t in)
{
	struct fg_err err = { 0 };
	struct fg_qdims d;
	uint16_t *got = xmalloc(out * in * 2);
	size_t i;

	if (fg_qformat_check(f, m, &d, &err))
		fail_msg("check: %s", err.msg);
	assert_int_equal(d.out, out);
	assert_int_equal(d.in, in);
	if (fg_qformat_dequant_rows_bf16(f, m, 0, out, got, &err))
		fail_msg("dequant: %s", err.msg);
	for (i = 0; i < out * in; i++)
		if (got[i] != want[i])
			fail_msg("W[%zu][%zu] = %04X, expected %04X", i / in, i % in, got[i], want[i]);
	free(got);
}

/* Parse a JSON literal (the test's own, so it must parse). */
static cJSON *json(const char *text)
{
	cJSON *j = cJSON_Parse(text);

	if (!j)
		fail_msg("bad JSON in the test: %s", text);
	return j;
}

/* ---- golden files -------------------------------------------------------------------- */

/* $FORGED_DEQUANT_GOLDEN, else BUILD/fixtures/dequant_golden beside this binary. */
static const char *golden_dir(void)
{
	static char dir[PATH_MAX];

	return fixture_dir_env(dir, sizeof(dir), "FORGED_DEQUANT_GOLDEN", "dequant_golden");
}

static unsigned char *read_file(const char *name, size_t *len)
{
	char path[1024];
	unsigned char *buf;
	FILE *f;
	long n;

	assert_true(snprintf(path, sizeof(path), "%s/%s", golden_dir(), name) < (int)sizeof(path));
	f = fopen(path, "rb");
	if (!f)
		fail_msg("cannot open golden file '%s' (set FORGED_DEQUANT_GOLDEN or generate: " GOLDEN_HOWTO ")", path);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n >= 0);
	assert_int_equal(fseek(f, 0, SEEK_SET), 0);
	buf = xmalloc((size_t)n);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static const char *jstr(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsString(v))
		fail_msg("golden index: '%s' is not a string", key);
	return v->valuestring;
}

static int jint(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsNumber(v))
		fail_msg("golden index: '%s' is not a number", key);
	return v->valueint;
}

static bool jbool(const cJSON *o, const char *key)
{
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, key));
}

static enum fg_qformat_kind kind_of(const char *s)
{
	static const struct {
		const char *name;
		enum fg_qformat_kind kind;
	} kinds[] = {
		{ "gptq", FG_QF_GPTQ },	      { "awq", FG_QF_AWQ },		{ "ct_int", FG_QF_CT_INT },
		{ "fp8", FG_QF_FP8 },	      { "nvfp4", FG_QF_NVFP4 },		{ "mlx_affine", FG_QF_MLX_AFFINE },
		{ "mlx_mxfp4", FG_QF_MLX_MXFP4 }, { "mlx_mxfp8", FG_QF_MLX_MXFP8 }, { "mlx_nvfp4", FG_QF_MLX_NVFP4 },
	};
	size_t i;

	for (i = 0; i < COUNT(kinds); i++)
		if (strcmp(kinds[i].name, s) == 0)
			return kinds[i].kind;
	fail_msg("golden index: unknown kind '%s'", s);
	return FG_QF_DENSE;
}

static enum fg_qscale scale_of(const char *s)
{
	if (strcmp(s, "tensor") == 0)
		return FG_QS_TENSOR;
	if (strcmp(s, "channel") == 0)
		return FG_QS_CHANNEL;
	if (strcmp(s, "group") == 0)
		return FG_QS_GROUP;
	if (strcmp(s, "block") == 0)
		return FG_QS_BLOCK;
	fail_msg("golden index: unknown scale '%s'", s);
	return FG_QS_TENSOR;
}

static struct fg_qformat format_of(const cJSON *j)
{
	struct fg_qformat f;
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(j, "block");

	memset(&f, 0, sizeof(f));
	f.kind = kind_of(jstr(j, "kind"));
	f.bits = jint(j, "bits");
	f.group = jint(j, "group");
	f.sym = jbool(j, "sym");
	f.act_order = jbool(j, "act_order");
	f.version = jint(j, "version");
	f.scale = scale_of(jstr(j, "scale"));
	f.block[0] = cJSON_GetArrayItem(b, 0)->valueint;
	f.block[1] = cJSON_GetArrayItem(b, 1)->valueint;
	return f;
}

/* The per-format functions, to call them directly as well as through the dispatch. */
typedef int (*rows_fn)(const struct fg_qformat *, const struct fg_qmodule *, size_t, size_t, float *,
		       struct fg_err *);
typedef int (*rows16_fn)(const struct fg_qformat *, const struct fg_qmodule *, size_t, size_t, uint16_t *,
			 struct fg_err *);

static void own_fns(enum fg_qformat_kind k, rows_fn *r, rows16_fn *r16)
{
	switch (k) {
	case FG_QF_GPTQ:
		*r = fg_gptq_dequant_rows, *r16 = fg_gptq_dequant_rows_bf16;
		break;
	case FG_QF_AWQ:
		*r = fg_awq_dequant_rows, *r16 = fg_awq_dequant_rows_bf16;
		break;
	case FG_QF_CT_INT:
		*r = fg_ct_int_dequant_rows, *r16 = fg_ct_int_dequant_rows_bf16;
		break;
	case FG_QF_FP8:
		*r = fg_fp8_scaled_dequant_rows, *r16 = fg_fp8_scaled_dequant_rows_bf16;
		break;
	case FG_QF_NVFP4:
		*r = fg_modelopt_nvfp4_dequant_rows, *r16 = fg_modelopt_nvfp4_dequant_rows_bf16;
		break;
	default:
		*r = fg_mlx_dequant_rows, *r16 = fg_mlx_dequant_rows_bf16;
		break;
	}
}

struct loaded {
	struct fg_tensor t[FG_QR_COUNT];
	unsigned char *data[FG_QR_COUNT];
	struct fg_qmodule m;
};

static void load_case(const cJSON *c, struct loaded *L)
{
	const cJSON *tensors = cJSON_GetObjectItemCaseSensitive(c, "tensors"), *e;
	struct fg_err err = { 0 };

	memset(L, 0, sizeof(*L));
	cJSON_ArrayForEach(e, tensors) {
		const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape"), *d;
		enum fg_qrole role;
		enum fg_dtype dt;
		struct fg_tensor *t;
		size_t len, want = 1;
		int i = 0;

		if (fg_qrole_parse(e->string, &role))
			fail_msg("golden: role '%s' unknown", e->string);
		t = &L->t[role];
		t->name = e->string;
		t->shape = test_shape();
		if (fg_dtype_parse(jstr(e, "dtype"), &dt))
			fail_msg("golden: dtype '%s' unknown", jstr(e, "dtype"));
		t->dtype = dt;
		cJSON_ArrayForEach(d, shape) {
			TSHAPE(*t)[i++] = (uint64_t)d->valuedouble;
			want *= (size_t)d->valuedouble;
		}
		t->rank = (unsigned)i & 7u;
		L->data[role] = read_file(jstr(e, "file"), &len);
		assert_int_equal(len, want * fg_dtype_size(t->dtype));
		t->data = L->data[role];
		assert_int_equal(fg_qmodule_add(&L->m, e->string, t, &err), 1);
	}
}

static void free_case(struct loaded *L)
{
	int i;

	for (i = 0; i < FG_QR_COUNT; i++)
		free(L->data[i]);
}

static void check_detect(const cJSON *c, const struct fg_qformat *want, const struct fg_qmodule *m)
{
	const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(c, "config");
	struct fg_qconfig_src src = { cfg, NULL, NULL };
	struct fg_err err = { 0 };
	struct fg_qconfig qc;
	struct fg_qparams p;
	struct fg_qformat got;
	const char *name = jstr(c, "name");

	if (fg_qconfig_parse(&qc, &src, &err))
		fail_msg("%s: config: %s", name, err.msg);
	if (fg_qconfig_for_module(&qc, jstr(c, "module"), &p, &err))
		fail_msg("%s: module: %s", name, err.msg);
	assert_true(p.quantized);
	if (fg_qformat_detect(&p, m, &got, &err))
		fail_msg("%s: detect: %s", name, err.msg);
	if (got.kind != want->kind || got.bits != want->bits || got.group != want->group || got.sym != want->sym ||
	    got.act_order != want->act_order || got.version != want->version ||
	    ((want->kind == FG_QF_CT_INT || want->kind == FG_QF_FP8) && got.scale != want->scale) ||
	    got.block[0] != want->block[0] || got.block[1] != want->block[1]) {
		char a[200], b[200];

		fail_msg("%s: detect gave '%s', expected '%s'", name, fg_qformat_name(&got, a, sizeof(a)),
			 fg_qformat_name(want, b, sizeof(b)));
	}
}

static void run_case(const cJSON *c)
{
	const char *name = jstr(c, "name");
	size_t out = (size_t)jint(c, "out"), in = (size_t)jint(c, "in"), n = out * in, len, r0, nb, i;
	struct fg_qformat f = format_of(cJSON_GetObjectItemCaseSensitive(c, "format"));
	unsigned char *want32, *want16;
	struct fg_err err = { 0 };
	struct fg_qdims d;
	struct loaded L;
	rows_fn own;
	rows16_fn own16;
	float *g32;
	uint16_t *g16;

	load_case(c, &L);
	want32 = read_file(jstr(c, "want_f32"), &len);
	assert_int_equal(len, n * 4);
	want16 = read_file(jstr(c, "want_bf16"), &len);
	assert_int_equal(len, n * 2);
	g32 = xmalloc(n * 4);
	g16 = xmalloc(n * 2);
	if (fg_qformat_check(&f, &L.m, &d, &err))
		fail_msg("%s: check: %s", name, err.msg);
	assert_int_equal(d.out, out);
	assert_int_equal(d.in, in);

	/* whole, generic */
	memset(g32, 0xA5, n * 4);
	if (fg_qformat_dequant_rows(&f, &L.m, 0, out, g32, &err))
		fail_msg("%s: %s", name, err.msg);
	for (i = 0; i < n; i++)
		if (memcmp((unsigned char *)g32 + 4 * i, want32 + 4 * i, 4))
			fail_msg("%s: F32 W[%zu][%zu] = %a, numpy %a", name, i / in, i % in, (double)g32[i],
				 (double)((float *)(void *)want32)[i]);
	if (fg_qformat_dequant_rows_bf16(&f, &L.m, 0, out, g16, &err))
		fail_msg("%s: %s", name, err.msg);
	for (i = 0; i < n; i++)
		if (memcmp((unsigned char *)g16 + 2 * i, want16 + 2 * i, 2))
			fail_msg("%s: BF16 W[%zu][%zu] = %04X, numpy %04X", name, i / in, i % in, g16[i],
				 ((uint16_t *)(void *)want16)[i]);

	/* bands of random heights, the format's own functions */
	own_fns(f.kind, &own, &own16);
	memset(g32, 0, n * 4);
	memset(g16, 0, n * 2);
	for (r0 = 0; r0 < out; r0 += nb) {
		nb = 1 + rng_u32() % 7;
		if (nb > out - r0)
			nb = out - r0;
		if (own(&f, &L.m, r0, nb, g32 + r0 * in, &err) || own16(&f, &L.m, r0, nb, g16 + r0 * in, &err))
			fail_msg("%s: band %zu+%zu: %s", name, r0, nb, err.msg);
	}
	if (memcmp(g32, want32, n * 4) || memcmp(g16, want16, n * 2))
		fail_msg("%s: banded output differs from numpy", name);
	/* an empty band writes nothing and succeeds */
	assert_int_equal(fg_qformat_dequant_rows(&f, &L.m, out, 0, NULL, &err), 0);

	check_detect(c, &f, &L.m);
	free(g32);
	free(g16);
	free(want32);
	free(want16);
	free_case(&L);
}

static void test_golden(void **state)
{
	unsigned char *text;
	const cJSON *c;
	cJSON *root;
	size_t len;
	int n = 0, families = 0;
	const char *last = "";

	(void)state;
	text = read_file("index.json", &len);
	root = cJSON_ParseWithLength((const char *)text, len);
	free(text);
	assert_non_null(root);
	assert_int_equal(jint(root, "version"), 1);
	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(root, "cases")) {
		if (strcmp(jstr(c, "family"), last) != 0)
			families++;
		last = jstr(c, "family");
		run_case(c);
		n++;
	}
	print_message("dequant golden: %d cases\n", n);
	assert_true(n >= 60);
	assert_true(families >= 6);
	cJSON_Delete(root);
}

/* ---- hand-worked examples of the notes, as literals --------------------------------------- */

/* Rows of space-separated hex numbers (as the notes print them) into out. */
static size_t hex_rows(const char *const *rows, size_t n, uint16_t *out)
{
	size_t k = 0, i;

	for (i = 0; i < n; i++) {
		const char *p = rows[i];
		char *end;

		for (;;) {
			unsigned long v = strtoul(p, &end, 16);

			if (end == p)
				break;
			out[k++] = (uint16_t)v;
			p = end;
		}
	}
	return k;
}

/* Notes 2.7.1: out=8, in=16, group 8, asymmetric. */
struct gptq_hand {
	uint32_t qw[16], qz[2];
	uint16_t sc[16];
	int32_t gi[16];
	struct fg_tensor t_qw, t_qz, t_sc, t_gi;
	struct fg_qmodule m;
	struct fg_qformat f;
};

static void gptq_hand_init(struct gptq_hand *h, int version, bool act)
{
	static const uint32_t qw[16] = {
		0x52FC9630, 0x630DA741, 0x741EB852, 0x852FC963, 0x9630DA74, 0xA741EB85, 0xB852FC96, 0xC9630DA7,
		0xDA741EB8, 0xEB852FC9, 0xFC9630DA, 0x0DA741EB, 0x1EB852FC, 0x2FC9630D, 0x30DA741E, 0x41EB852F,
	};
	static const uint16_t sc[16] = { 0x3800, 0x3400, 0x3000, 0x3800, 0x3400, 0x3000, 0x3800, 0x3400,
					 0x3C00, 0x3800, 0x3400, 0x3C00, 0x3800, 0x3400, 0x3C00, 0x3800 };
	int c;

	memset(h, 0, sizeof(*h));
	memcpy(h->qw, qw, sizeof(qw));
	memcpy(h->sc, sc, sizeof(sc));
	/* the stored int32 values of the notes, as a loader would see them */
	assert_int_equal((int32_t)h->qw[3], -2060465821);
	h->qz[0] = version == 1 ? 0x76543210u : 0x87654321u;
	h->qz[1] = version == 1 ? 0xCBA98765u : 0xDCBA9876u;
	for (c = 0; c < 16; c++)
		h->gi[c] = act ? c % 2 : c / 8;
	h->t_qw = tensor("p.qweight", FG_DT_I32, h->qw, 2, 2, 8);
	h->t_qz = tensor("p.qzeros", FG_DT_I32, h->qz, 2, 2, 1);
	h->t_sc = tensor("p.scales", FG_DT_F16, h->sc, 2, 2, 8);
	h->t_gi = tensor("p.g_idx", FG_DT_I32, h->gi, 1, 16, 0);
	h->m.t[FG_QR_QWEIGHT] = &h->t_qw;
	h->m.t[FG_QR_QZEROS] = &h->t_qz;
	h->m.t[FG_QR_SCALES] = &h->t_sc;
	h->m.t[FG_QR_G_IDX] = &h->t_gi;
	h->f.kind = FG_QF_GPTQ;
	h->f.bits = 4;
	h->f.group = 8;
	h->f.version = version;
	h->f.act_order = act;
}

static const char *const gptq_271[] = {
	"BF00 3F80 4020 4080 40B0 40E0 3F00 4000 4000 40A0 4100 C0A0 C000 3F80 4080 40E0",
	"BE80 3F00 3FA0 4000 4030 BF00 3E80 3F80 3F80 4020 4080 C020 BF80 3F00 4000 4060",
	"BE00 3E80 3F20 3F80 3FB0 BE80 3E00 3F00 3F00 3FA0 C000 BFA0 BF00 3E80 3F80 3FE0",
	"BF00 3F80 4020 4080 40B0 BF80 3F00 4000 4000 40A0 C100 C0A0 C000 3F80 4080 C110",
	"BE80 3F00 3FA0 4000 BFA0 BF00 3E80 3F80 3F80 4020 C080 C020 BF80 3F00 4000 C090",
	"BE00 3E80 3F20 3F80 BF20 BE80 3E00 3F00 3F00 C030 C000 BFA0 BF00 3E80 3F80 C010",
	"BF00 3F80 4020 4080 C020 BF80 3F00 4000 4000 C130 C100 C0A0 C000 3F80 C140 C110",
	"BE80 3F00 3FA0 C000 BFA0 BF00 3E80 3F80 3F80 C0B0 C080 C020 BF80 3F00 C0C0 C090",
};

static const char *const gptq_272[] = {
	"BF00 C040 4020 4040 40B0 4110 3F00 BF80 4060 40A0 40D0 C0A0 3FC0 3F80 4090 40E0",
	"BE80 BFC0 3FA0 3FC0 4030 C060 3E80 BF00 3FE0 4020 4050 C020 3F40 3F00 4010 4060",
	"BE00 BF40 3F20 3F40 3FB0 BFE0 3E00 BE80 3F60 3FA0 BEC0 BFA0 3EC0 3E80 3F90 3FE0",
	"BF00 C040 4020 4040 40B0 C0E0 3F00 BF80 4060 40A0 BFC0 C0A0 3FC0 3F80 4090 C110",
	"BE80 BFC0 3FA0 3FC0 BFA0 C060 3E80 BF00 3FE0 4020 BF40 C020 3F40 3F00 4010 C090",
	"BE00 BF40 3F20 3F40 BF20 BFE0 3E00 BE80 3F60 C030 BEC0 BFA0 3EC0 3E80 3F90 C010",
	"BF00 C040 4020 4040 C020 C0E0 3F00 BF80 4060 C130 BFC0 C0A0 3FC0 3F80 C060 C110",
	"BE80 BFC0 3FA0 C0D0 BFA0 C060 3E80 BF00 3FE0 C0B0 BF40 C020 3F40 3F00 BFE0 C090",
};

static void test_hand_gptq(void **state)
{
	struct gptq_hand h, wrong;
	uint16_t want[128];
	float w1[128], w2[128];
	struct fg_err err = { 0 };
	int o, c;

	(void)state;
	assert_int_equal(hex_rows(gptq_271, 8, want), 128);
	gptq_hand_init(&h, 1, false);
	expect_bf16(&h.f, &h.m, want, 8, 16);
	/* W[3][15]: q = 0, z = 8 + 1, s = 1 -> -9 */
	assert_int_equal(fg_gptq_dequant_rows(&h.f, &h.m, 3, 1, w1, &err), 0);
	assert_true(w1[15] == -9.0f);
	gptq_hand_init(&h, 2, false);
	expect_bf16(&h.f, &h.m, want, 8, 16);
	/* v1 zeros read as v2: every value moves by +1 * scale */
	gptq_hand_init(&h, 1, false);
	gptq_hand_init(&wrong, 1, false);
	wrong.f.version = 2;
	assert_int_equal(fg_gptq_dequant_rows(&h.f, &h.m, 0, 8, w1, &err), 0);
	assert_int_equal(fg_gptq_dequant_rows(&wrong.f, &wrong.m, 0, 8, w2, &err), 0);
	for (o = 0; o < 8; o++)
		for (c = 0; c < 16; c++)
			assert_true(w2[o * 16 + c] == w1[o * 16 + c] + fg_f16_to_f32_ref(h.sc[(c / 8) * 8 + o]));
	/* 2.7.2: act-order g_idx = c mod 2 */
	assert_int_equal(hex_rows(gptq_272, 8, want), 128);
	gptq_hand_init(&h, 1, true);
	expect_bf16(&h.f, &h.m, want, 8, 16);
	assert_int_equal(fg_gptq_dequant_rows(&h.f, &h.m, 0, 1, w1, &err), 0);
	assert_true(w1[1] == -3.0f);
}

/* Notes 2.7.3: the packing-only goldens through a module each (zeros 0 as v2, scale 1). */
static void test_hand_gptq_packing(void **state)
{
	static const uint32_t w3[3] = { 0x88FAC688, 0xC688FAC6, 0xFAC688FA };
	uint32_t qw[3 * 32], qz[3] = { 0, 0, 0 };
	uint16_t sc[32];
	int32_t gi[32] = { 0 };
	float out[32 * 32];
	struct fg_tensor tq, tz, ts, tg;
	struct fg_qmodule m = { 0 };
	struct fg_qformat f = { .kind = FG_QF_GPTQ, .bits = 3, .group = 32, .version = 2 };
	struct fg_err err = { 0 };
	int r, o, c;

	(void)state;
	assert_int_equal((int32_t)w3[0], -1996831096);
	for (r = 0; r < 3; r++)
		for (o = 0; o < 32; o++)
			qw[r * 32 + o] = w3[r];
	for (o = 0; o < 32; o++)
		sc[o] = f16(1.0f);
	tq = tensor("qweight", FG_DT_I32, qw, 2, 3, 32);
	tz = tensor("qzeros", FG_DT_I32, qz, 2, 1, 3);
	ts = tensor("scales", FG_DT_F16, sc, 2, 1, 32);
	tg = tensor("g_idx", FG_DT_I32, gi, 1, 32, 0);
	m.t[FG_QR_QWEIGHT] = &tq, m.t[FG_QR_QZEROS] = &tz, m.t[FG_QR_SCALES] = &ts, m.t[FG_QR_G_IDX] = &tg;
	assert_int_equal(fg_gptq_dequant_rows(&f, &m, 0, 32, out, &err), 0);
	for (o = 0; o < 32; o++)
		for (c = 0; c < 32; c++)
			assert_true(out[o * 32 + c] == (float)(c % 8));
	/* 2-bit: 16 values k mod 4 in 0xE4E4E4E4; 8-bit: [1, 2, 3, 250] in 0xFA030201 */
	{
		uint32_t q2[16], z2[1] = { 0 }, q8[4];
		uint16_t s2[16], s8[4];
		int32_t g2[16] = { 0 }, g8[4] = { 0 };
		struct fg_qformat f2 = { .kind = FG_QF_GPTQ, .bits = 2, .group = 16, .version = 2 };
		struct fg_qformat f8 = { .kind = FG_QF_GPTQ, .bits = 8, .group = 4, .version = 2 };
		static const float want8[4] = { 1, 2, 3, 250 };

		for (o = 0; o < 16; o++)
			q2[o] = 0xE4E4E4E4u, s2[o] = f16(1.0f);
		for (o = 0; o < 4; o++)
			q8[o] = 0xFA030201u, s8[o] = f16(1.0f);
		assert_int_equal((int32_t)q2[0], -454761244);
		assert_int_equal((int32_t)q8[0], -100466175);
		tq = tensor("qweight", FG_DT_I32, q2, 2, 1, 16);
		tz = tensor("qzeros", FG_DT_I32, z2, 2, 1, 1);
		ts = tensor("scales", FG_DT_F16, s2, 2, 1, 16);
		tg = tensor("g_idx", FG_DT_I32, g2, 1, 16, 0);
		assert_int_equal(fg_gptq_dequant_rows(&f2, &m, 0, 16, out, &err), 0);
		for (o = 0; o < 16; o++)
			for (c = 0; c < 16; c++)
				assert_true(out[o * 16 + c] == (float)(c % 4));
		tq = tensor("qweight", FG_DT_I32, q8, 2, 1, 4);
		ts = tensor("scales", FG_DT_F16, s8, 2, 1, 4);
		tg = tensor("g_idx", FG_DT_I32, g8, 1, 4, 0);
		assert_int_equal(fg_gptq_dequant_rows(&f8, &m, 0, 4, out, &err), 0);
		for (o = 0; o < 4; o++)
			for (c = 0; c < 4; c++)
				assert_true(out[o * 4 + c] == want8[c]);
	}
}

/* Notes 3.5 */
struct awq_hand {
	uint32_t qw[16], qz[2];
	uint16_t sc[16];
	struct fg_tensor t_qw, t_qz, t_sc;
	struct fg_qmodule m;
	struct fg_qformat f;
};

static void awq_hand_init(struct awq_hand *h)
{
	static const uint32_t qw[16] = {
		0x75316420, 0xA8649753, 0xDB97CA86, 0x0ECAFDB9, 0x31FD20EC, 0x6420531F, 0x97538642, 0xCA86B975,
		0xFDB9ECA8, 0x20EC1FDB, 0x531F420E, 0x86427531, 0xB975A864, 0xECA8DB97, 0x1FDB0ECA, 0x420E31FD,
	};
	static const uint16_t sc[16] = { 0x3800, 0x3400, 0x3000, 0x3800, 0x3400, 0x3000, 0x3800, 0x3400,
					 0x3C00, 0x3800, 0x3400, 0x3C00, 0x3800, 0x3400, 0x3C00, 0x3800 };

	memset(h, 0, sizeof(*h));
	memcpy(h->qw, qw, sizeof(qw));
	memcpy(h->sc, sc, sizeof(sc));
	assert_int_equal((int32_t)h->qw[1], -1469802669);
	h->qz[0] = 0x75316420u;
	h->qz[1] = 0xCA86B975u;
	h->t_qw = tensor("p.qweight", FG_DT_I32, h->qw, 2, 16, 1);
	h->t_qz = tensor("p.qzeros", FG_DT_I32, h->qz, 2, 2, 1);
	h->t_sc = tensor("p.scales", FG_DT_F16, h->sc, 2, 2, 8);
	h->m.t[FG_QR_QWEIGHT] = &h->t_qw;
	h->m.t[FG_QR_QZEROS] = &h->t_qz;
	h->m.t[FG_QR_SCALES] = &h->t_sc;
	h->f.kind = FG_QF_AWQ;
	h->f.bits = 4;
	h->f.group = 8;
}

static void test_hand_awq(void **state)
{
	static const char *const rows[] = {
		"0000 3FC0 4040 4090 40C0 40F0 3F80 4020 4040 40C0 4110 C080 BF80 4000 40A0 4100",
		"0000 3F40 3FC0 4010 4040 BE80 3F00 3FA0 3FC0 4040 4090 C000 BF00 3F80 4020 4080",
		"0000 3EC0 3F40 3F90 3FC0 BE00 3E80 3F20 3F40 3FC0 BFE0 BF80 BE80 3F00 3FA0 4000",
		"0000 3FC0 4040 4090 40C0 BF00 3F80 4020 4040 40C0 C0E0 C080 BF80 4000 40A0 C100",
		"0000 3F40 3FC0 4010 BF80 BE80 3F00 3FA0 3FC0 4040 C060 C000 BF00 3F80 4020 C080",
		"0000 3EC0 3F40 3F90 BF00 BE00 3E80 3F20 3F40 C020 BFE0 BF80 BE80 3F00 3FA0 C000",
		"0000 3FC0 4040 4090 C000 BF00 3F80 4020 4040 C120 C0E0 C080 BF80 4000 C130 C100",
		"0000 3F40 3FC0 BFE0 BF80 BE80 3F00 3FA0 3FC0 C0A0 C060 C000 BF00 3F80 C0B0 C080",
	};
	uint16_t want[128];
	struct awq_hand h;
	struct fg_err err = { 0 };
	float row[16];

	(void)state;
	assert_int_equal(hex_rows(rows, 8, want), 128);
	awq_hand_init(&h);
	expect_bf16(&h.f, &h.m, want, 8, 16);
	assert_int_equal(fg_awq_dequant_rows(&h.f, &h.m, 1, 1, row, &err), 0);
	assert_true(row[5] == -0.25f); /* the notes' hand check of W[1][5] */
}

/* Notes 4.6 */
struct ct_hand {
	uint32_t wp[4], zp[2];
	int64_t shape[2];
	uint16_t sc[4];
	struct fg_tensor t_wp, t_shape, t_sc, t_zp;
	struct fg_qmodule m;
	struct fg_qformat f;
};

static void ct_hand_init(struct ct_hand *h, bool sym)
{
	static const uint32_t wp[4] = { 0x52FC9630, 0xDA741EB8, 0xA741EB85, 0x2FC9630D };
	static const uint16_t sc[4] = { 0x3F00, 0x3E80, 0x3E80, 0x3E00 };

	memset(h, 0, sizeof(*h));
	memcpy(h->wp, wp, sizeof(wp));
	memcpy(h->sc, sc, sizeof(sc));
	h->shape[0] = 2;
	h->shape[1] = 16;
	h->zp[0] = 0xD5;
	h->zp[1] = 0x0A;
	h->t_wp = tensor("p.weight_packed", FG_DT_I32, h->wp, 2, 2, 2);
	h->t_shape = tensor("p.weight_shape", FG_DT_I64, h->shape, 1, 2, 0);
	h->t_sc = tensor("p.weight_scale", FG_DT_BF16, h->sc, 2, 2, 2);
	h->t_zp = tensor("p.weight_zero_point", FG_DT_I32, h->zp, 2, 1, 2);
	h->m.t[FG_QR_WEIGHT_PACKED] = &h->t_wp;
	h->m.t[FG_QR_WEIGHT_SHAPE] = &h->t_shape;
	h->m.t[FG_QR_WEIGHT_SCALE] = &h->t_sc;
	if (!sym)
		h->m.t[FG_QR_WEIGHT_ZERO_POINT] = &h->t_zp;
	h->f.kind = FG_QF_CT_INT;
	h->f.bits = 4;
	h->f.group = 8;
	h->f.sym = sym;
	h->f.scale = FG_QS_GROUP;
	h->f.version = 2;
}

static void test_hand_ct(void **state)
{
	static const char *const sym_rows[] = {
		"C080 C020 BF80 3F00 4000 4060 C040 BFC0 0000 3F40 3FC0 BFE0 BF80 BE80 3F00 3FA0",
		"BF40 0000 3F40 3FC0 BFE0 BF80 BE80 3F00 3F20 BF80 BF20 BE80 3E00 3F00 3F60 BF40",
	};
	static const char *const asym_rows[] = {
		"C020 BF80 3F00 4000 4060 40A0 BFC0 0000 BF00 3E80 3F80 C010 BFC0 BF40 0000 3F40",
		"C000 BFA0 BF00 3E80 C040 C010 BFC0 BF40 3FD0 0000 3EC0 3F40 3F90 3FC0 3FF0 3E80",
	};
	uint16_t want[32];
	struct ct_hand h;
	struct fg_err err = { 0 };
	float row[16];
	int k;

	(void)state;
	assert_int_equal(hex_rows(sym_rows, 2, want), 32);
	ct_hand_init(&h, true);
	expect_bf16(&h.f, &h.m, want, 2, 16);
	assert_int_equal(fg_ct_int_dequant_rows(&h.f, &h.m, 1, 1, row, &err), 0);
	assert_true(row[9] == -1.0f);
	assert_int_equal(hex_rows(asym_rows, 2, want), 32);
	ct_hand_init(&h, false);
	expect_bf16(&h.f, &h.m, want, 2, 16);
	/* I32 weight_shape reads the same */
	{
		int32_t s32[2] = { 2, 16 };

		h.t_shape = tensor("p.weight_shape", FG_DT_I32, s32, 1, 2, 0);
		expect_bf16(&h.f, &h.m, want, 2, 16);
	}
	/* 4.6c: 12 values u_k = k mod 8 at 3 bits, padded (< 0.18) and bitstream (>= 0.18) */
	{
		uint32_t legacy[2] = { 0x08FAC688, 0x0000001A }, dense[2] = { 0x88FAC688, 0x00000006 };
		int64_t shape[2] = { 1, 12 };
		uint16_t one = bf16(1.0f);
		struct fg_tensor tw = tensor("weight_packed", FG_DT_I32, legacy, 2, 1, 2);
		struct fg_tensor tsh = tensor("weight_shape", FG_DT_I64, shape, 1, 2, 0);
		struct fg_tensor tsc = tensor("weight_scale", FG_DT_BF16, &one, 1, 1, 0);
		struct fg_qmodule m = { 0 };
		struct fg_qformat f = { .kind = FG_QF_CT_INT, .bits = 3, .sym = true, .scale = FG_QS_TENSOR, .version = 1 };
		float out[24];

		m.t[FG_QR_WEIGHT_PACKED] = &tw, m.t[FG_QR_WEIGHT_SHAPE] = &tsh, m.t[FG_QR_WEIGHT_SCALE] = &tsc;
		assert_int_equal((int32_t)legacy[0], 150652552);
		assert_int_equal((int32_t)dense[0], -1996831096);
		assert_int_equal(fg_ct_int_dequant_rows(&f, &m, 0, 1, out, &err), 0);
		for (k = 0; k < 12; k++)
			assert_true(out[k] == (float)(k % 8 - 4));
		tw.data = (const uint8_t *)dense;
		f.version = 2;
		assert_int_equal(fg_ct_int_dequant_rows(&f, &m, 0, 1, out, &err), 0);
		for (k = 0; k < 12; k++)
			assert_true(out[k] == (float)(k % 8 - 4));
		/* 2 words fit both packings of 12 values: without a version that is refused */
		f.version = 0;
		assert_int_equal(fg_ct_int_check(&f, &m, NULL, &err), FG_EINPUT);
		expect_msg(&err, "unsupported_quantization_format: compressed-tensors pack-quantized bits=3",
			   "fits both the padded (< 0.18) and the bitstream (>= 0.18) packing of in = 12", NULL);
		/* a width only one packing has decides without a version: 21 values */
		shape[1] = 21;
		TSHAPE(tw)[1] = 3; /* padded: ceil(21 / 10); bitstream would be 2 */
		{
			uint32_t w[3] = { legacy[0], legacy[0], 0x1A };

			tw.data = (const uint8_t *)w;
			assert_int_equal(fg_ct_int_dequant_rows(&f, &m, 0, 1, out, &err), 0);
			assert_true(out[10] == -4.0f && out[11] == -3.0f && out[19] == -3.0f && out[20] == -2.0f);
		}
	}
}

/* Notes 5.4 and 8.1 */
static void test_hand_fp8(void **state)
{
	static const uint8_t w[8] = { 0x38, 0x40, 0xC0, 0x3C, 0x01, 0x7E, 0x08, 0x39 };
	static const uint16_t want_ch[8] = { 0x3F00, 0x3F80, 0xBF80, 0x3F40, 0x394D, 0x4233, 0x3ACD, 0x3DE7 };
	static const uint16_t want_t[8] = { 0x4000, 0x4080, 0xC080, 0x4040, 0x3B80, 0x4460, 0x3D00, 0x4010 };
	static const float exact[4] = { 1.9550323486328125e-4f, 44.84375f, 1.56402587890625e-3f, 0.11260986328125f };
	uint16_t sc[2] = { 0x3F00, 0x3DCD }, two = 0x4000;
	struct fg_tensor tw = tensor("weight", FG_DT_F8_E4M3, w, 2, 2, 4);
	struct fg_tensor ts = tensor("weight_scale", FG_DT_BF16, sc, 2, 2, 1);
	struct fg_qmodule m = { 0 };
	struct fg_qformat f = { .kind = FG_QF_FP8, .bits = 8, .scale = FG_QS_CHANNEL };
	struct fg_err err = { 0 };
	float out[12];
	int k;

	(void)state;
	m.t[FG_QR_WEIGHT] = &tw, m.t[FG_QR_WEIGHT_SCALE] = &ts;
	expect_bf16(&f, &m, want_ch, 2, 4);
	assert_int_equal(fg_fp8_scaled_dequant_rows(&f, &m, 1, 1, out, &err), 0);
	for (k = 0; k < 4; k++)
		assert_true(out[k] == exact[k]);
	ts = tensor("weight_scale", FG_DT_BF16, &two, 1, 1, 0);
	f.scale = FG_QS_TENSOR;
	expect_bf16(&f, &m, want_t, 2, 4);
	ts.rank = 0; /* shape [] */
	expect_bf16(&f, &m, want_t, 2, 4);
	/* 8.1: a [2, 2] block grid, the last block row ragged, weight_scale_inv */
	{
		static const uint8_t w3[12] = { 0x38, 0x40, 0x30, 0xB8, 0x44, 0xC4, 0x3C, 0x00, 0x48, 0x34, 0x50, 0xBC };
		static const uint16_t want[12] = { 0x3F00, 0x3F80, 0x3F80, 0xC000, 0x3FC0, 0xBFC0,
						   0x4040, 0x0000, 0x4180, 0x4040, 0x4000, 0xBEC0 };
		float si[4] = { 0.5f, 2.0f, 4.0f, 0.25f };
		struct fg_tensor t3 = tensor("weight", FG_DT_F8_E4M3, w3, 2, 3, 4);
		struct fg_tensor tsi = tensor("weight_scale_inv", FG_DT_F32, si, 2, 2, 2);
		struct fg_qmodule mb = { 0 };
		struct fg_qformat fb = { .kind = FG_QF_FP8, .bits = 8, .scale = FG_QS_BLOCK, .block = { 2, 2 } };

		mb.t[FG_QR_WEIGHT] = &t3, mb.t[FG_QR_WEIGHT_SCALE_INV] = &tsi;
		expect_bf16(&fb, &mb, want, 3, 4);
		assert_int_equal(fg_fp8_scaled_dequant_rows(&fb, &mb, 2, 1, out, &err), 0);
		assert_true(out[0] == 16.0f && out[3] == -0.375f);
	}
}

/* Notes 6.6 */
struct nv_hand {
	uint8_t w[16], sc[2];
	float s2;
	struct fg_tensor t_w, t_sc, t_s2;
	struct fg_qmodule m;
	struct fg_qformat f;
};

static void nv_hand_init(struct nv_hand *h, uint32_t s2_bits)
{
	static const uint8_t w[16] = { 0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE,
				       0x21, 0x21, 0x21, 0x21, 0x21, 0x21, 0x21, 0x21 };

	memset(h, 0, sizeof(*h));
	memcpy(h->w, w, sizeof(w));
	h->sc[0] = 0x30;
	h->sc[1] = 0x4C;
	memcpy(&h->s2, &s2_bits, 4);
	h->t_w = tensor("p.weight", FG_DT_U8, h->w, 2, 2, 8);
	h->t_sc = tensor("p.weight_scale", FG_DT_F8_E4M3, h->sc, 2, 2, 1);
	h->t_s2 = tensor("p.weight_scale_2", FG_DT_F32, &h->s2, 0, 0, 0);
	h->m.t[FG_QR_WEIGHT] = &h->t_w;
	h->m.t[FG_QR_WEIGHT_SCALE] = &h->t_sc;
	h->m.t[FG_QR_WEIGHT_SCALE_2] = &h->t_s2;
	h->f.kind = FG_QF_NVFP4;
	h->f.bits = 4;
	h->f.group = 16;
}

static void test_hand_nvfp4(void **state)
{
	static const char *const rows[] = {
		"0000 3D80 3E00 3E40 3E80 3EC0 3F00 3F40 8000 BD80 BE00 BE40 BE80 BEC0 BF00 BF40",
		"3F40 3FC0 3F40 3FC0 3F40 3FC0 3F40 3FC0 3F40 3FC0 3F40 3FC0 3F40 3FC0 3F40 3FC0",
	};
	static const char *const rows2[] = {
		"0000 3B4A 3BCA 3C17 3C4A 3C97 3CCA 3D17 8000 BB4A BBCA BC17 BC4A BC97 BCCA BD17",
		"3D17 3D97 3D17 3D97 3D17 3D97 3D17 3D97 3D17 3D97 3D17 3D97 3D17 3D97 3D17 3D97",
	};
	static const uint32_t f32_row0[16] = {
		0x00000000, 0x3B4985F0, 0x3BC985F0, 0x3C172474, 0x3C4985F0, 0x3C972474, 0x3CC985F0, 0x3D172474,
		0x80000000, 0xBB4985F0, 0xBBC985F0, 0xBC172474, 0xBC4985F0, 0xBC972474, 0xBCC985F0, 0xBD172474,
	};
	uint16_t want[32];
	struct nv_hand h;
	struct fg_err err = { 0 };
	float out[32];
	int k;

	(void)state;
	assert_int_equal(hex_rows(rows, 2, want), 32);
	nv_hand_init(&h, 0x3E800000u); /* 0.25 */
	expect_bf16(&h.f, &h.m, want, 2, 16);
	/* code 8 is -0: the decision documented in dequant.h */
	assert_int_equal(fg_modelopt_nvfp4_dequant_rows(&h.f, &h.m, 0, 1, out, &err), 0);
	assert_true(out[8] == 0.0f && signbit(out[8]));
	assert_int_equal(hex_rows(rows2, 2, want), 32);
	nv_hand_init(&h, 0x3C4985F0u); /* f32(0.0123) */
	expect_bf16(&h.f, &h.m, want, 2, 16);
	assert_int_equal(fg_modelopt_nvfp4_dequant_rows(&h.f, &h.m, 0, 2, out, &err), 0);
	for (k = 0; k < 16; k++) {
		uint32_t u;

		memcpy(&u, &out[k], 4);
		assert_int_equal(u, f32_row0[k]);
		memcpy(&u, &out[16 + k], 4);
		assert_int_equal(u, k % 2 ? 0x3D972474u : 0x3D172474u);
	}
	/* weight_scale_2 of shape [1] reads the same */
	h.t_s2.rank = 1;
	TSHAPE(h.t_s2)[0] = 1;
	expect_bf16(&h.f, &h.m, want, 2, 16);
}

/* Notes 7.6 */
static void test_hand_mlx(void **state)
{
	static const char *const fp4_row = "0000 3E80 3F00 3F40 3F80 3FC0 4000 4040 8000 BE80 BF00 BF40 BF80 BFC0 C000 C040";
	static const char *const affine_rows[] = {
		"C080 C060 C040 C020 C000 BFC0 BF80 BF00 0000 3F00 3F80 3FC0 4000 4020 4040 4060",
		"4098 4090 4088 4080 4070 4060 4050 4040 4030 4020 4010 4000 3FE0 3FC0 3FA0 3F80",
	};
	uint32_t wa[8] = { 0x76543210, 0xFEDCBA98, 0x76543210, 0xFEDCBA98,
			   0x89ABCDEF, 0x01234567, 0x89ABCDEF, 0x01234567 };
	uint16_t sa[2] = { 0x3F00, 0x3E80 }, ba[2] = { 0xC080, 0x3F80 };
	uint16_t want[64], got16[32];
	float got[32];
	struct fg_err err = { 0 };
	int k;

	(void)state;
	/* (a) affine 4-bit through the module entry (quant.h's dequantizer underneath) */
	{
		struct fg_tensor tw = tensor("weight", FG_DT_U32, wa, 2, 2, 4);
		struct fg_tensor ts = tensor("scales", FG_DT_BF16, sa, 2, 2, 1);
		struct fg_tensor tb = tensor("biases", FG_DT_BF16, ba, 2, 2, 1);
		struct fg_qmodule m = { 0 };
		struct fg_qformat f = { .kind = FG_QF_MLX_AFFINE, .bits = 4, .group = 32 };

		m.t[FG_QR_WEIGHT] = &tw, m.t[FG_QR_SCALES] = &ts, m.t[FG_QR_BIASES] = &tb;
		assert_int_equal(hex_rows(affine_rows, 1, want), 16);
		memcpy(want + 16, want, 32);
		hex_rows(affine_rows + 1, 1, want + 32);
		memcpy(want + 48, want + 32, 32);
		expect_bf16(&f, &m, want, 2, 32);
	}
	/* (c) mxfp4, scale 2^-1 */
	{
		uint32_t w[4] = { 0x76543210, 0xFEDCBA98, 0x76543210, 0xFEDCBA98 };
		uint8_t s = 0x7E;
		struct fg_tensor tw = tensor("weight", FG_DT_U32, w, 2, 1, 4);
		struct fg_tensor ts = tensor("scales", FG_DT_U8, &s, 2, 1, 1);
		struct fg_qmodule m = { 0 };
		struct fg_qformat f = { .kind = FG_QF_MLX_MXFP4 };

		m.t[FG_QR_WEIGHT] = &tw, m.t[FG_QR_SCALES] = &ts;
		hex_rows(&fp4_row, 1, want);
		memcpy(want + 16, want, 32);
		expect_bf16(&f, &m, want, 1, 32);
	}
	/* (d) nvfp4, E4M3 scale 0.5: the same 16 values */
	{
		uint32_t w[2] = { 0x76543210, 0xFEDCBA98 };
		uint8_t s = 0x30;
		struct fg_tensor tw = tensor("weight", FG_DT_U32, w, 2, 1, 2);
		struct fg_tensor ts = tensor("scales", FG_DT_U8, &s, 2, 1, 1);
		struct fg_qmodule m = { 0 };
		struct fg_qformat f = { .kind = FG_QF_MLX_NVFP4 };

		m.t[FG_QR_WEIGHT] = &tw, m.t[FG_QR_SCALES] = &ts;
		hex_rows(&fp4_row, 1, want);
		expect_bf16(&f, &m, want, 1, 16);
		assert_int_equal(fg_dequant_nvfp4_rows_bf16(w, &s, 1, 16, got16, &err), 0);
		assert_memory_equal(got16, want, 32);
		assert_int_equal(fg_dequant_nvfp4_rows(w, &s, 1, 16, got, &err), 0);
		assert_true(got[8] == 0.0f && signbit(got[8]) && got[15] == -3.0f);
	}
	/* (e) mxfp8, scale 2^1 */
	{
		uint32_t w[8] = { 0x01C04038 };
		uint8_t s = 0x80;
		struct fg_tensor tw = tensor("weight", FG_DT_U32, w, 2, 1, 8);
		struct fg_tensor ts = tensor("scales", FG_DT_U8, &s, 2, 1, 1);
		struct fg_qmodule m = { 0 };
		struct fg_qformat f = { .kind = FG_QF_MLX_MXFP8 };

		m.t[FG_QR_WEIGHT] = &tw, m.t[FG_QR_SCALES] = &ts;
		memset(want, 0, sizeof(want));
		want[0] = 0x4000, want[1] = 0x4080, want[2] = 0xC080, want[3] = 0x3B80;
		expect_bf16(&f, &m, want, 1, 32);
		assert_int_equal(fg_dequant_mxfp8_rows(w, &s, 1, 32, got, &err), 0);
		assert_true(got[0] == 2.0f && got[1] == 4.0f && got[2] == -4.0f && got[3] == 0.00390625f);
		for (k = 4; k < 32; k++)
			assert_true(got[k] == 0.0f);
		/* E8M0 byte 0 is 2^-127 (MLX's CPU kernel) */
		s = 0;
		assert_int_equal(fg_dequant_mxfp8_rows(w, &s, 1, 32, got, &err), 0);
		assert_true(got[0] == ldexpf(1.0f, -127));
	}
}

static void test_dense(void **state)
{
	uint16_t w[6] = { 0x3C00, 0x3C01, 0xC000, 0x0001, 0x7BFF, 0x8000 }; /* F16 */
	struct fg_tensor t = tensor("weight", FG_DT_F16, w, 2, 2, 3);
	struct fg_qmodule m = { 0 };
	struct fg_qformat f = { .kind = FG_QF_DENSE };
	struct fg_err err = { 0 };
	uint16_t got16[6];
	float got[6];
	int i;

	(void)state;
	m.t[FG_QR_WEIGHT] = &t;
	assert_int_equal(fg_qformat_dequant_rows(&f, &m, 0, 2, got, &err), 0);
	assert_int_equal(fg_qformat_dequant_rows_bf16(&f, &m, 0, 2, got16, &err), 0);
	for (i = 0; i < 6; i++) {
		assert_true(got[i] == fg_f16_to_f32_ref(w[i]));
		assert_int_equal(got16[i], bf16(got[i]));
	}
	assert_int_equal(got16[1], 0x3F80); /* 1 + 2^-10 rounds to 1 in BF16 */
	assert_int_equal(fg_qformat_detect(NULL, &m, &f, &err), 0);
	assert_int_equal(f.kind, FG_QF_DENSE);
}

/* ---- _check rejections and errors -------------------------------------------------------------- */

/* f / m must be refused by check (and so by dequant) with FG_EINPUT and every string given. */
#define REJECT(f, m, ...)                                                                     \
	do {                                                                                  \
		struct fg_err e_ = { 0 };                                                     \
		float o_[256];                                                                \
		assert_int_equal(fg_qformat_check((f), (m), NULL, &e_), FG_EINPUT);            \
		expect_msg(&e_, __VA_ARGS__, NULL);                                           \
		memset(&e_, 0, sizeof(e_));                                                   \
		assert_int_equal(fg_qformat_dequant_rows((f), (m), 0, 1, o_, &e_), FG_EINPUT); \
		expect_msg(&e_, __VA_ARGS__, NULL);                                           \
	} while (0)

static void test_check_gptq(void **state)
{
	struct gptq_hand h;
	struct fg_tensor bad;
	struct fg_err err = { 0 };
	float out[16];

	(void)state;
#define FRESH() gptq_hand_init(&h, 1, false)
	FRESH();
	TSHAPE(h.t_sc)[1] = 7;
	REJECT(&h.f, &h.m, "gptq: scales [2, 7] does not fit qweight [2, 8]: expected [G, 8]");
	FRESH();
	TSHAPE(h.t_qz)[1] = 2;
	REJECT(&h.f, &h.m, "gptq: qzeros [2, 2] does not fit scales [2, 8]: expected [2, 1]");
	FRESH();
	TSHAPE(h.t_gi)[0] = 15;
	REJECT(&h.f, &h.m, "gptq: qweight [2, 8] does not fit g_idx [15]", "in = 15");
	FRESH();
	h.t_qw.dtype = FG_DT_F32;
	REJECT(&h.f, &h.m, "gptq: qweight [2, 8] has dtype F32, expected I32");
	FRESH();
	h.t_sc.dtype = FG_DT_I32;
	REJECT(&h.f, &h.m, "scales [2, 8] has dtype I32, expected F32, F16, BF16");
	FRESH();
	h.t_qw.rank = 3;
	REJECT(&h.f, &h.m, "qweight [2, 8, 0] has rank 3, expected 2");
	FRESH();
	h.m.t[FG_QR_QZEROS] = NULL;
	REJECT(&h.f, &h.m, "gptq: qzeros is missing");
	FRESH();
	bad = tensor("p.weight_scale", FG_DT_F32, h.sc, 1, 1, 0);
	h.m.t[FG_QR_WEIGHT_SCALE] = &bad;
	REJECT(&h.f, &h.m, "gptq: unexpected tensor weight_scale [1]");
	FRESH();
	h.f.group = 4;
	REJECT(&h.f, &h.m, "scales [2, 8] does not fit qweight [2, 8]: expected 4 groups for in = 16 at group size 4");
	FRESH();
	h.f.group = 0;
	REJECT(&h.f, &h.m, "expected 1 groups for in = 16 at group size -1");
	FRESH();
	TSHAPE(h.t_sc)[1] = 12; /* 12 output columns at 4 bits do not fill qzeros words */
	TSHAPE(h.t_qw)[1] = 12;
	REJECT(&h.f, &h.m, "12 output columns do not fill whole qzeros words at 4 bits");
	FRESH();
	TSHAPE(h.t_qw)[0] = (uint64_t)1 << 61;
	TSHAPE(h.t_qw)[1] = 1u << 4;
	REJECT(&h.f, &h.m, "qweight [2305843009213693952, 16] is too large to address");
	FRESH();
	bad = tensor("p.bias", FG_DT_F16, h.sc, 1, 7, 0);
	h.m.t[FG_QR_BIAS] = &bad;
	REJECT(&h.f, &h.m, "gptq: bias [7] does not fit the weight's 8 output rows");
	/* format parameters */
	FRESH();
	h.f.bits = 5;
	REJECT(&h.f, &h.m, "unsupported_quantization_format: gptq bits=5 group=8", "planar layout (gptq_p)");
	FRESH();
	h.f.bits = 16;
	REJECT(&h.f, &h.m, "unsupported_quantization_format: gptq bits=16", "no 16-bit layout");
	FRESH();
	h.f.version = 3;
	REJECT(&h.f, &h.m, "unsupported_quantization_format: gptq", "checkpoint_format=unknown");
	/* data-dependent: g_idx outside the groups, non-finite scales (found before writing) */
	FRESH();
	h.gi[3] = 2;
	memset(out, 0x5A, sizeof(out));
	assert_int_equal(fg_gptq_dequant_rows(&h.f, &h.m, 0, 1, out, &err), FG_EINPUT);
	expect_msg(&err, "g_idx[3] = 2 is outside the 2 groups of scales", NULL);
	{
		uint32_t u;

		memcpy(&u, out, 4);
		assert_int_equal(u, 0x5A5A5A5Au); /* nothing written */
	}
	FRESH();
	h.gi[3] = -1;
	assert_int_equal(fg_gptq_dequant_rows(&h.f, &h.m, 0, 1, out, &err), FG_EINPUT);
	FRESH();
	h.sc[8 + 3] = 0x7C00; /* +inf at scales[1, 3] */
	assert_int_equal(fg_gptq_dequant_rows(&h.f, &h.m, 3, 1, out, &err), FG_EINPUT);
	expect_msg(&err, "scales[1, 3] is not finite", NULL);
	assert_int_equal(fg_gptq_dequant_rows(&h.f, &h.m, 2, 1, out, &err), 0); /* row 2 does not use it */
	/* usage: bands, NULL, header-only views, the wrong kind */
	FRESH();
	assert_int_equal(fg_gptq_dequant_rows(&h.f, &h.m, 7, 2, out, &err), FG_EUSAGE);
	expect_msg(&err, "rows 7-9 are outside the weight's 8 rows", NULL);
	assert_int_equal(fg_gptq_dequant_rows(&h.f, &h.m, 9, 0, out, &err), FG_EUSAGE);
	assert_int_equal(fg_gptq_dequant_rows(&h.f, &h.m, 0, 1, NULL, &err), FG_EUSAGE);
	assert_int_equal(fg_gptq_dequant_rows(NULL, &h.m, 0, 1, out, &err), FG_EUSAGE);
	h.t_qz.data = NULL;
	assert_int_equal(fg_gptq_check(&h.f, &h.m, NULL, &err), 0); /* headers are enough to check */
	assert_int_equal(fg_gptq_dequant_rows(&h.f, &h.m, 0, 1, out, &err), FG_EUSAGE);
	expect_msg(&err, "qzeros has no data", NULL);
	FRESH();
	h.f.kind = FG_QF_AWQ;
	assert_int_equal(fg_gptq_check(&h.f, &h.m, NULL, &err), FG_EUSAGE);
	h.f.kind = (enum fg_qformat_kind)99;
	assert_int_equal(fg_qformat_check(&h.f, &h.m, NULL, &err), FG_EUSAGE);
#undef FRESH
}

static void test_check_awq(void **state)
{
	struct awq_hand h;

	(void)state;
#define FRESH() awq_hand_init(&h)
	FRESH();
	h.f.bits = 8;
	REJECT(&h.f, &h.m, "unsupported_quantization_format: awq bits=8 group=8 version=gemm", "4-bit codes only");
	FRESH();
	h.m.t[FG_QR_QZEROS] = NULL;
	REJECT(&h.f, &h.m, "unsupported_quantization_format: awq", "qzeros is missing");
	FRESH();
	TSHAPE(h.t_sc)[1] = 9;
	REJECT(&h.f, &h.m, "awq: scales [2, 9] does not fit qweight [16, 1]: expected [G, 8]");
	FRESH();
	TSHAPE(h.t_qz)[0] = 3;
	REJECT(&h.f, &h.m, "awq: qzeros [3, 1] does not fit scales [2, 8]: expected [2, 1]");
	FRESH();
	TSHAPE(h.t_qw)[0] = 15;
	REJECT(&h.f, &h.m, "scales [2, 8] does not fit qweight [15, 1]: expected a group count dividing in = 15");
	FRESH();
	h.f.group = 4;
	REJECT(&h.f, &h.m, "expected 4 groups for in = 16 at group size 4");
	FRESH();
	h.t_qz.dtype = FG_DT_U32;
	REJECT(&h.f, &h.m, "awq: qzeros [2, 1] has dtype U32, expected I32");
#undef FRESH
}

static void test_check_ct(void **state)
{
	struct ct_hand h;
	struct fg_tensor bad;
	struct fg_err err = { 0 };
	int32_t gi[16];
	float out[16];
	int c;

	(void)state;
#define FRESH(sym) ct_hand_init(&h, sym)
	FRESH(true);
	TSHAPE(h.t_shape)[0] = 3;
	REJECT(&h.f, &h.m, "weight_shape [3] does not fit weight_packed [2, 2]: expected [2] ([out, in])");
	FRESH(true);
	h.shape[0] = 3;
	REJECT(&h.f, &h.m, "weight_shape [3, 16] does not fit weight_packed [2, 2]: expected [2, in]");
	FRESH(true);
	h.shape[1] = -5;
	REJECT(&h.f, &h.m, "weight_shape[1] = -5 is not a dimension");
	FRESH(true);
	h.shape[1] = 24;
	REJECT(&h.f, &h.m, "weight_packed [2, 2] does not fit weight_shape [2]: expected [2, 3] for in = 24 at 4 bits");
	FRESH(true);
	h.f.bits = 3;
	h.f.version = 0;
	h.shape[1] = 40; /* bitstream 4 words, padded 4 words too: shape [2, 2] fits neither */
	REJECT(&h.f, &h.m, "expected [2, 4] (bitstream) or [2, 4] (padded) for in = 40 at 3 bits");
	FRESH(true);
	h.m.t[FG_QR_WEIGHT_ZERO_POINT] = &h.t_zp;
	REJECT(&h.f, &h.m, "weight_zero_point is present but the format is symmetric");
	FRESH(false);
	h.m.t[FG_QR_WEIGHT_ZERO_POINT] = NULL;
	REJECT(&h.f, &h.m, "compressed-tensors pack-quantized: weight_zero_point is missing");
	FRESH(false);
	TSHAPE(h.t_zp)[1] = 3;
	REJECT(&h.f, &h.m, "weight_zero_point [1, 3] does not fit weight_scale [2, 2]: expected [1, 2]");
	FRESH(true);
	TSHAPE(h.t_sc)[1] = 3;
	REJECT(&h.f, &h.m, "weight_scale [2, 3] does not fit weight_packed [2, 2]: expected [2, 2] for group 8 of in = 16");
	FRESH(true);
	h.f.scale = FG_QS_CHANNEL;
	REJECT(&h.f, &h.m, "weight_scale [2, 2] does not fit weight_packed [2, 2]: expected [2, 1] for strategy channel");
	FRESH(true);
	h.f.scale = FG_QS_TENSOR;
	REJECT(&h.f, &h.m, "expected one value ([], [1] or [1, 1]) for strategy tensor");
	FRESH(false);
	h.f.scale = FG_QS_TENSOR;
	REJECT(&h.f, &h.m, "unsupported_quantization_format: compressed-tensors pack-quantized bits=4 strategy=tensor symmetric=false",
	       "asymmetric per-tensor zero point");
	FRESH(true);
	h.f.scale = FG_QS_BLOCK;
	REJECT(&h.f, &h.m, "unsupported_quantization_format", "block strategy");
	FRESH(true);
	h.f.bits = 9;
	REJECT(&h.f, &h.m, "unsupported_quantization_format: compressed-tensors pack-quantized bits=9", "2 to 8 bits");
	FRESH(true);
	h.f.scale = FG_QS_GROUP;
	h.f.group = 0;
	REJECT(&h.f, &h.m, "strategy group needs a group size");
	/* act-order g_idx */
	FRESH(true);
	for (c = 0; c < 16; c++)
		gi[c] = 1 - c / 8;
	bad = tensor("p.weight_g_idx", FG_DT_I32, gi, 1, 16, 0);
	h.m.t[FG_QR_WEIGHT_G_IDX] = &bad;
	REJECT(&h.f, &h.m, "weight_g_idx is present but the format has no act-order");
	h.f.act_order = true;
	assert_int_equal(fg_ct_int_dequant_rows(&h.f, &h.m, 0, 1, out, &err), 0);
	assert_true(out[0] == -8.0f * 0.25f); /* column 0 now uses group 1's scale */
	TSHAPE(bad)[0] = 15;
	REJECT(&h.f, &h.m, "weight_g_idx [15] does not fit weight_shape [2]: expected [16] ([in])");
	TSHAPE(bad)[0] = 16;
	gi[5] = -1;
	assert_int_equal(fg_ct_int_dequant_rows(&h.f, &h.m, 0, 1, out, &err), FG_EINPUT);
	expect_msg(&err, "weight_g_idx mixes -1 (unset) with group indices", NULL);
	gi[5] = 2;
	assert_int_equal(fg_ct_int_dequant_rows(&h.f, &h.m, 0, 1, out, &err), FG_EINPUT);
	expect_msg(&err, "weight_g_idx[5] = 2 is outside the 2 groups of weight_scale", NULL);
	FRESH(true);
	h.f.act_order = true;
	REJECT(&h.f, &h.m, "weight_g_idx is missing");
	/* weight_shape is data: a header-only view cannot be checked */
	FRESH(true);
	h.t_shape.data = NULL;
	assert_int_equal(fg_ct_int_check(&h.f, &h.m, NULL, &err), FG_EUSAGE);
	expect_msg(&err, "weight_shape has no data", NULL);
	/* a NaN scale the band uses */
	FRESH(true);
	h.sc[3] = 0x7FC0;
	assert_int_equal(fg_ct_int_dequant_rows(&h.f, &h.m, 0, 1, out, &err), 0);
	assert_int_equal(fg_ct_int_dequant_rows(&h.f, &h.m, 1, 1, out, &err), FG_EINPUT);
	expect_msg(&err, "weight_scale[1, 1] is not finite", NULL);
#undef FRESH
}

static void test_check_fp8(void **state)
{
	uint8_t w[8] = { 0x38, 0x40, 0xC0, 0x3C, 0x01, 0x7E, 0x08, 0x7F };
	uint16_t sc[4] = { 0x3F00, 0x3DCD, 0x3F80, 0x3F80 };
	float si[1] = { 2.0f }, out[8];
	struct fg_tensor tw, ts, tsi;
	struct fg_qmodule m;
	struct fg_qformat f;
	struct fg_err err = { 0 };

	(void)state;
#define FRESH()                                                               \
	do {                                                                  \
		memset(&m, 0, sizeof(m));                                     \
		tw = tensor("weight", FG_DT_F8_E4M3, w, 2, 2, 4);             \
		ts = tensor("weight_scale", FG_DT_BF16, sc, 2, 2, 1);         \
		tsi = tensor("weight_scale_inv", FG_DT_F32, si, 2, 1, 1);     \
		m.t[FG_QR_WEIGHT] = &tw, m.t[FG_QR_WEIGHT_SCALE] = &ts;       \
		f = (struct fg_qformat){ .kind = FG_QF_FP8, .bits = 8, .scale = FG_QS_CHANNEL }; \
	} while (0)
	FRESH();
	/* a NaN weight code passes through as NaN */
	assert_int_equal(fg_fp8_scaled_dequant_rows(&f, &m, 0, 2, out, &err), 0);
	assert_true(isnan(out[7]));
	m.t[FG_QR_WEIGHT_SCALE_INV] = &tsi;
	REJECT(&f, &m, "fp8: both weight_scale and weight_scale_inv are present");
	FRESH();
	m.t[FG_QR_WEIGHT_SCALE] = NULL;
	REJECT(&f, &m, "unsupported_quantization_format: fp8 e4m3 strategy=channel", "has no weight_scale or weight_scale_inv");
	FRESH();
	TSHAPE(ts)[1] = 2;
	REJECT(&f, &m, "fp8: weight_scale [2, 2] does not fit weight [2, 4]: expected [2, 1] for strategy channel");
	FRESH();
	m.t[FG_QR_WEIGHT_SCALE] = NULL;
	m.t[FG_QR_WEIGHT_SCALE_INV] = &tsi;
	f.scale = FG_QS_BLOCK;
	f.block[0] = 2;
	f.block[1] = 2;
	REJECT(&f, &m, "weight_scale_inv [1, 1] does not fit weight [2, 4]: expected [1, 2], the 2x2 block grid of [2, 4]");
	f.block[0] = 0;
	REJECT(&f, &m, "strategy block needs block sizes > 0");
	FRESH();
	f.bits = 4;
	REJECT(&f, &m, "unsupported_quantization_format", "8 bits, not 4");
	FRESH();
	tw.dtype = FG_DT_F8_E5M2;
	REJECT(&f, &m, "fp8: weight [2, 4] has dtype F8_E5M2, expected F8_E4M3");
	FRESH();
	sc[1] = 0xFF80; /* -inf */
	assert_int_equal(fg_fp8_scaled_dequant_rows(&f, &m, 0, 1, out, &err), 0);
	assert_int_equal(fg_fp8_scaled_dequant_rows_bf16(&f, &m, 1, 1, (uint16_t *)(void *)out, &err), FG_EINPUT);
	expect_msg(&err, "weight_scale[1, 0] is not finite", NULL);
#undef FRESH
}

static void test_check_nvfp4(void **state)
{
	struct nv_hand h;
	struct fg_tensor bad;
	struct fg_err err = { 0 };
	float out[32];

	(void)state;
#define FRESH() nv_hand_init(&h, 0x3E800000u)
	FRESH();
	TSHAPE(h.t_sc)[1] = 2;
	REJECT(&h.f, &h.m, "modelopt nvfp4: weight_scale [2, 2] does not fit weight [2, 8]: expected [2, 1] ([out, in/16], in = 16)");
	FRESH();
	h.t_s2.rank = 1;
	TSHAPE(h.t_s2)[0] = 2;
	REJECT(&h.f, &h.m, "weight_scale_2 [2] does not fit weight [2, 8]: expected a scalar");
	FRESH();
	TSHAPE(h.t_w)[1] = 4;
	REJECT(&h.f, &h.m, "weight [2, 4] holds 8 columns, not a multiple of 16");
	FRESH();
	h.t_s2.dtype = FG_DT_BF16;
	REJECT(&h.f, &h.m, "weight_scale_2 [] has dtype BF16, expected F32");
	FRESH();
	bad = tensor("p.pre_quant_scale", FG_DT_BF16, h.w, 1, 16, 0);
	h.m.t[FG_QR_PRE_QUANT_SCALE] = &bad;
	REJECT(&h.f, &h.m, "unsupported_quantization_format: modelopt nvfp4 group=16", "pre_quant_scale");
	FRESH();
	h.f.group = 32;
	REJECT(&h.f, &h.m, "unsupported_quantization_format: modelopt nvfp4 group=32", "16 columns");
	FRESH();
	h.sc[1] = 0xFF;
	assert_int_equal(fg_modelopt_nvfp4_dequant_rows(&h.f, &h.m, 0, 1, out, &err), 0);
	assert_int_equal(fg_modelopt_nvfp4_dequant_rows(&h.f, &h.m, 0, 2, out, &err), FG_EINPUT);
	expect_msg(&err, "weight_scale[1, 0] is the E4M3 NaN code 0xff", NULL);
	FRESH();
	h.s2 = INFINITY;
	assert_int_equal(fg_modelopt_nvfp4_dequant_rows(&h.f, &h.m, 0, 1, out, &err), FG_EINPUT);
	expect_msg(&err, "weight_scale_2 is not finite", NULL);
#undef FRESH
}

static void test_check_mlx(void **state)
{
	uint32_t w[8] = { 0 };
	uint8_t s[2] = { 127, 127 };
	uint16_t sa[2] = { 0x3F80, 0x3F80 }, ba[2] = { 0, 0 };
	struct fg_tensor tw, ts, tb;
	struct fg_qmodule m;
	struct fg_qformat f;
	struct fg_err err = { 0 };
	uint16_t o16[64];
	float out[64];

	(void)state;
#define FRESH(kind_, rows_, words_)                                                 \
	do {                                                                        \
		memset(&m, 0, sizeof(m));                                           \
		tw = tensor("weight", FG_DT_U32, w, 2, rows_, words_);              \
		ts = tensor("scales", FG_DT_U8, s, 2, rows_, 1);                    \
		m.t[FG_QR_WEIGHT] = &tw, m.t[FG_QR_SCALES] = &ts;                   \
		f = (struct fg_qformat){ .kind = kind_ };                           \
	} while (0)
	FRESH(FG_QF_MLX_MXFP8, 1, 8);
	assert_int_equal(fg_mlx_check(&f, &m, NULL, &err), 0);
	s[0] = 0xFF;
	assert_int_equal(fg_mlx_dequant_rows(&f, &m, 0, 1, out, &err), FG_EINPUT);
	expect_msg(&err, "scales[0, 0] is the E8M0 byte 0xff (NaN)", NULL);
	assert_int_equal(fg_dequant_mxfp8_rows_bf16(w, s, 1, 32, o16, &err), FG_EINPUT);
	s[0] = 127;
	FRESH(FG_QF_MLX_MXFP4, 1, 4);
	s[0] = 0xFF;
	assert_int_equal(fg_mlx_dequant_rows_bf16(&f, &m, 0, 1, o16, &err), FG_EINPUT);
	expect_msg(&err, "E8M0 byte 0xff", NULL);
	s[0] = 127;
	FRESH(FG_QF_MLX_NVFP4, 1, 2);
	s[0] = 0x7F;
	assert_int_equal(fg_mlx_dequant_rows(&f, &m, 0, 1, out, &err), FG_EINPUT);
	expect_msg(&err, "scales[0, 0] is the E4M3 NaN code 0x7f", NULL);
	s[0] = 127;
	FRESH(FG_QF_MLX_NVFP4, 1, 2);
	TSHAPE(ts)[1] = 2;
	REJECT(&f, &m, "mlx: scales [1, 2] does not fit weight [1, 2]: expected [1, 1] ([out, in/16], in = 16)");
	FRESH(FG_QF_MLX_MXFP8, 1, 8);
	ts.dtype = FG_DT_BF16;
	REJECT(&f, &m, "mlx: scales [1, 1] has dtype BF16, expected U8");
	FRESH(FG_QF_MLX_MXFP8, 1, 7);
	REJECT(&f, &m, "weight [1, 7] holds 28 columns, not a multiple of the group size 32");
	FRESH(FG_QF_MLX_NVFP4, 1, 2);
	f.bits = 8;
	REJECT(&f, &m, "unsupported_quantization_format: mlx nvfp4 bits=8", "bits=4 group=16 only");
	FRESH(FG_QF_MLX_MXFP4, 1, 4);
	tb = tensor("biases", FG_DT_U8, s, 2, 1, 1);
	m.t[FG_QR_BIASES] = &tb;
	REJECT(&f, &m, "mlx: unexpected tensor biases [1, 1]");
	/* affine */
	FRESH(FG_QF_MLX_AFFINE, 1, 4);
	f.bits = 4;
	f.group = 32;
	ts = tensor("scales", FG_DT_BF16, sa, 2, 1, 1);
	tb = tensor("biases", FG_DT_BF16, ba, 2, 1, 1);
	m.t[FG_QR_BIASES] = &tb;
	assert_int_equal(fg_mlx_dequant_rows(&f, &m, 0, 1, out, &err), 0);
	TSHAPE(tb)[1] = 2;
	REJECT(&f, &m, "mlx: biases [1, 2] does not fit scales [1, 1]: expected [1, 1]");
	TSHAPE(tb)[1] = 1;
	tb.dtype = FG_DT_F16;
	REJECT(&f, &m, "mlx: biases [1, 1] has dtype F16, expected BF16");
	tb.dtype = FG_DT_BF16;
	m.t[FG_QR_BIASES] = NULL;
	REJECT(&f, &m, "mlx: biases is missing");
	m.t[FG_QR_BIASES] = &tb;
	f.group = 48;
	REJECT(&f, &m, "unsupported_quantization_format: mlx affine bits=4 group=48", "group size 48 not supported");
	f.group = 32;
	f.bits = 7;
	REJECT(&f, &m, "unsupported_quantization_format: mlx affine bits=7");
	f.bits = 4;
	ba[0] = 0x7F80;
	assert_int_equal(fg_mlx_dequant_rows_bf16(&f, &m, 0, 1, o16, &err), FG_EINPUT);
	expect_msg(&err, "biases[0, 0] is not finite", NULL);
	ba[0] = 0;
	/* raw functions */
	assert_int_equal(fg_dequant_mxfp8_rows(w, s, 1, 20, out, &err), FG_EINPUT);
	expect_msg(&err, "weight [1, 20] has 20 columns, not a multiple of the group size 32", NULL);
	assert_int_equal(fg_dequant_nvfp4_rows(NULL, s, 1, 16, out, &err), FG_EUSAGE);
	assert_int_equal(fg_dequant_nvfp4_rows(NULL, NULL, 0, 16, NULL, &err), 0);
#undef FRESH
}

static void test_roles(void **state)
{
	struct fg_qmodule m = { 0 };
	struct fg_tensor a = tensor("p.qweight", FG_DT_I32, NULL, 2, 1, 1), b = a;
	struct fg_err err = { 0 };
	enum fg_qrole r;
	int i;

	(void)state;
	for (i = 0; i < FG_QR_COUNT; i++) {
		assert_int_equal(fg_qrole_parse(fg_qrole_suffix((enum fg_qrole)i), &r), 0);
		assert_int_equal(r, i);
	}
	assert_int_equal(fg_qrole_parse("weight_scales", &r), FG_EINPUT);
	assert_int_equal(fg_qmodule_add(&m, "qweight", &a, &err), 1);
	assert_int_equal(fg_qmodule_add(&m, "qweight", &a, &err), 1);
	assert_int_equal(fg_qmodule_add(&m, "k_scale", &a, &err), 0);
	b.name = "q.qweight";
	assert_int_equal(fg_qmodule_add(&m, "qweight", &b, &err), FG_EINPUT);
	expect_msg(&err, "two tensors for role qweight ('p.qweight' and 'q.qweight')", NULL);
	assert_string_equal(fg_qformat_kind_name(FG_QF_CT_INT), "compressed-tensors pack-quantized");
	assert_string_equal(fg_qrole_suffix((enum fg_qrole)FG_QR_COUNT), "invalid");
}

static void test_names(void **state)
{
	char buf[200];
	struct fg_qformat f = { .kind = FG_QF_GPTQ, .bits = 4, .group = 128, .sym = true, .act_order = true, .version = 2 };
	struct fg_qparams p;

	(void)state;
	assert_string_equal(fg_qformat_name(&f, buf, sizeof(buf)),
			    "gptq bits=4 group=128 desc_act=true sym=true checkpoint_format=gptq_v2");
	f = (struct fg_qformat){ .kind = FG_QF_AWQ, .bits = 4, .group = 64 };
	assert_string_equal(fg_qformat_name(&f, buf, sizeof(buf)), "awq bits=4 group=64 version=gemm zero_point=true");
	f = (struct fg_qformat){ .kind = FG_QF_CT_INT, .bits = 4, .group = 128, .sym = true, .scale = FG_QS_GROUP,
				 .version = 2 };
	assert_string_equal(fg_qformat_name(&f, buf, sizeof(buf)),
			    "compressed-tensors pack-quantized bits=4 group=128 strategy=group symmetric=true actorder=none packing=bitstream");
	f = (struct fg_qformat){ .kind = FG_QF_FP8, .method = FG_QM_FP8, .bits = 8, .scale = FG_QS_BLOCK,
				 .block = { 128, 128 } };
	assert_string_equal(fg_qformat_name(&f, buf, sizeof(buf)), "fp8 e4m3 strategy=block block=[128,128]");
	f.method = FG_QM_CT;
	f.scale = FG_QS_CHANNEL;
	assert_string_equal(fg_qformat_name(&f, buf, sizeof(buf)), "compressed-tensors float-quantized fp8 strategy=channel");
	f = (struct fg_qformat){ .kind = FG_QF_MLX_MXFP8, .bits = 8, .group = 32 };
	assert_string_equal(fg_qformat_name(&f, buf, sizeof(buf)), "mlx mxfp8 bits=8 group=32");
	assert_string_equal(fg_qformat_name(&f, buf, 5), "mlx ");
	fg_qparams_init(&p);
	p.method = FG_QM_AWQ;
	p.bits = 4;
	p.group_size = 128;
	p.sym = 0;
	snprintf(p.fmt, sizeof(p.fmt), "gemv");
	assert_string_equal(fg_qparams_name(&p, buf, sizeof(buf)), "awq bits=4 group=128 version=gemv zero_point=true");
	p.method = FG_QM_UNSUPPORTED;
	snprintf(p.method_name, sizeof(p.method_name), "bitsandbytes");
	assert_string_equal(fg_qparams_name(&p, buf, sizeof(buf)), "bitsandbytes");
}

/* ---- config reading, resolution, detection and refusals ---------------------------------------- */

struct cfg {
	cJSON *config, *hf, *legacy;
	struct fg_qconfig qc;
};

static void cfg_open(struct cfg *c, const char *config, const char *hf, const char *legacy)
{
	struct fg_qconfig_src src;
	struct fg_err err = { 0 };

	c->config = config ? json(config) : NULL;
	c->hf = hf ? json(hf) : NULL;
	c->legacy = legacy ? json(legacy) : NULL;
	src.config = c->config;
	src.hf_quant_config = c->hf;
	src.quantize_config = c->legacy;
	if (fg_qconfig_parse(&c->qc, &src, &err))
		fail_msg("config: %s", err.msg);
}

static void cfg_close(struct cfg *c)
{
	cJSON_Delete(c->config);
	cJSON_Delete(c->hf);
	cJSON_Delete(c->legacy);
}

static struct fg_qparams for_module(const struct cfg *c, const char *module)
{
	struct fg_qparams p;
	struct fg_err err = { 0 };

	if (fg_qconfig_for_module(&c->qc, module, &p, &err))
		fail_msg("module %s: %s", module, err.msg);
	return p;
}

/* config.json text must fail to parse with every string given. */
static void bad_config(const char *config, ...)
{
	struct fg_qconfig_src src = { NULL, NULL, NULL };
	struct fg_qconfig qc;
	struct fg_err err = { 0 };
	cJSON *j = json(config);
	va_list ap;
	const char *s;

	src.config = j;
	if (fg_qconfig_parse(&qc, &src, &err) != FG_EINPUT)
		fail_msg("config parsed but should not: %s", config);
	va_start(ap, config);
	while ((s = va_arg(ap, const char *)) != NULL)
		if (!strstr(err.msg, s))
			fail_msg("message '%s' lacks '%s'", err.msg, s);
	va_end(ap);
	cJSON_Delete(j);
}

static const char ct_mtp_config[] =
	"{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"format\": \"pack-quantized\","
	" \"version\": \"0.18.0\", \"config_groups\": {"
	"  \"group_0\": {\"targets\": [\"Linear\"], \"weights\": {\"num_bits\": 4, \"type\": \"int\", \"symmetric\": true,"
	"               \"group_size\": 128, \"strategy\": \"group\", \"actorder\": null}},"
	"  \"group_1\": {\"targets\": [\"re:.*mtp.*\"], \"weights\": {\"num_bits\": 8, \"type\": \"int\", \"symmetric\": true,"
	"               \"strategy\": \"channel\"}},"
	"  \"group_2\": {\"targets\": [\"re:model\\\\.mtp\\\\..*o_proj\", \"model.mtp.layers.0.self_attn.o_proj\"],"
	"               \"format\": \"pack-quantized\", \"weights\": {\"num_bits\": 4, \"type\": \"int\","
	"               \"symmetric\": false, \"group_size\": 32}}},"
	" \"ignore\": [\"lm_head\", \"re:.*\\\\.mlp\\\\.gate$\", \"mtp.layers.0.eh_proj\"]}}";

static void test_config_ct_targets(void **state)
{
	struct cfg c;
	struct fg_qparams p;

	(void)state;
	cfg_open(&c, ct_mtp_config, NULL, NULL);
	assert_int_equal(c.qc.base.method, FG_QM_CT);
	assert_int_equal(c.qc.base.ct_version[0], 0);
	assert_int_equal(c.qc.base.ct_version[1], 18);
	/* a trunk module: the class-name group */
	p = for_module(&c, "model.layers.0.mlp.down_proj");
	assert_true(p.quantized && p.have_weights);
	assert_int_equal(p.bits, 4);
	assert_int_equal(p.group_size, 128);
	assert_string_equal(p.strategy, "group");
	assert_string_equal(p.fmt, "pack-quantized");
	assert_string_equal(p.why, "config group 'group_0' (target 'Linear')");
	/* the MTP head has its own group: a regex beats the class name */
	p = for_module(&c, "model.mtp.layers.0.mlp.down_proj");
	assert_int_equal(p.bits, 8);
	assert_string_equal(p.strategy, "channel");
	assert_int_equal(p.sym, 1);
	assert_string_equal(p.why, "config group 'group_1' (target 're:.*mtp.*')");
	/* an exact name beats every regex, including its own group's */
	p = for_module(&c, "model.mtp.layers.0.self_attn.o_proj");
	assert_int_equal(p.bits, 4);
	assert_int_equal(p.group_size, 32);
	assert_int_equal(p.sym, 0);
	assert_string_equal(p.strategy, "group"); /* inferred from group_size */
	assert_string_equal(p.why, "config group 'group_2' (target 'model.mtp.layers.0.self_attn.o_proj')");
	/* two regexes: the first group in the file wins */
	p = for_module(&c, "model.mtp.layers.1.self_attn.o_proj");
	assert_string_equal(p.why, "config group 'group_1' (target 're:.*mtp.*')");
	p = for_module(&c, "model.mtpx.o_proj"); /* group_2's regex needs "model.mtp." */
	assert_string_equal(p.why, "config group 'group_1' (target 're:.*mtp.*')");
	/* ignore wins over targets */
	p = for_module(&c, "model.layers.5.mlp.gate");
	assert_false(p.quantized);
	assert_false(p.have_weights);
	assert_string_equal(p.why, "ignored by 're:.*\\.mlp\\.gate$'");
	p = for_module(&c, "model.layers.5.mlp.gate_proj"); /* $ anchors the end */
	assert_true(p.quantized);
	p = for_module(&c, "lm_head");
	assert_false(p.quantized);
	p = for_module(&c, "mtp.layers.0.eh_proj");
	assert_false(p.quantized);
	assert_string_equal(p.why, "ignored by 'mtp.layers.0.eh_proj'");
	cfg_close(&c);
}

static void test_config_ct_ignored_mtp(void **state)
{
	struct cfg c;
	struct fg_qparams p;
	struct ct_hand h;
	struct fg_qformat f;
	struct fg_err err = { 0 };

	(void)state;
	cfg_open(&c,
		 "{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"format\": \"pack-quantized\","
		 " \"config_groups\": {\"W4A16\": [\"Linear\"]}, \"ignore\": [\"lm_head\", \"re:mtp.*\"]}}",
		 NULL, NULL);
	/* re.match anchors at the start: "re:mtp.*" ignores mtp.* but not model.mtp.* */
	p = for_module(&c, "mtp.layers.0.mlp.up_proj");
	assert_false(p.quantized);
	assert_string_equal(p.why, "ignored by 're:mtp.*'");
	p = for_module(&c, "model.mtp.layers.0.mlp.up_proj");
	assert_true(p.quantized && p.have_weights);
	/* the preset W4A16: int4, group 128, symmetric */
	assert_int_equal(p.bits, 4);
	assert_int_equal(p.group_size, 128);
	assert_int_equal(p.sym, 1);
	assert_string_equal(p.type, "int");
	assert_int_equal(p.ct_version[0], -1);
	/* an ignored module whose tensors are packed anyway is a contradiction, named */
	ct_hand_init(&h, true);
	p = for_module(&c, "mtp.layers.0.mlp.up_proj");
	assert_int_equal(fg_qformat_detect(&p, &h.m, &f, &err), FG_EINPUT);
	expect_msg(&err, "no config group gives its weights' parameters (ignored by 're:mtp.*')", NULL);
	{
		/* a contradiction is no unsupported format; a format forged does not read is, by the flag */
		bool unsupported = true;
		struct fg_qparams gp;

		assert_int_equal(fg_qformat_detect_why(&p, &h.m, &f, &unsupported, &err), FG_EINPUT);
		assert_false(unsupported);
		gp = p;
		gp.method = FG_QM_UNSUPPORTED;
		snprintf(gp.method_name, sizeof(gp.method_name), "bitsandbytes");
		assert_int_equal(fg_qformat_detect_why(&gp, &h.m, &f, &unsupported, &err), FG_EINPUT);
		assert_true(unsupported);
		expect_msg(&err, FG_QUNSUPPORTED "bitsandbytes", NULL);
	}
	/* a dense weight in an ignored module is simply dense */
	{
		uint16_t w[4] = { 0 };
		struct fg_tensor t = tensor("weight", FG_DT_BF16, w, 2, 2, 2);
		struct fg_qmodule m = { 0 };

		m.t[FG_QR_WEIGHT] = &t;
		assert_int_equal(fg_qformat_detect(&p, &m, &f, &err), 0);
		assert_int_equal(f.kind, FG_QF_DENSE);
	}
	/* the 4.6 example detected under the preset: group 128 does not fit its 2 scale columns */
	p = for_module(&c, "model.mtp.layers.0.mlp.up_proj");
	assert_int_equal(fg_qformat_detect(&p, &h.m, &f, &err), 0);
	assert_int_equal(f.kind, FG_QF_CT_INT);
	assert_int_equal(f.version, 0); /* no version in the config: decided by shape */
	assert_int_equal(fg_qformat_check(&f, &h.m, NULL, &err), FG_EINPUT);
	expect_msg(&err, "weight_scale [2, 2] does not fit weight_packed [2, 2]: expected [2, 1] for group 128 of in = 16", NULL);
	cfg_close(&c);
	/* groups that quantize no weights, or target nothing */
	cfg_open(&c,
		 "{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"format\": \"mixed-precision\","
		 " \"config_groups\": {\"a\": {\"targets\": [\"re:.*mtp.*\"], \"weights\": null,"
		 "  \"input_activations\": {\"num_bits\": 8}}, \"b\": {\"targets\": [\"re:model\\\\.layers\\\\.\"],"
		 "  \"format\": \"float-quantized\", \"weights\": {\"num_bits\": 8, \"type\": \"float\", \"strategy\": \"channel\"}},"
		 " \"c\": {\"targets\": [\"Embedding\"], \"weights\": {\"num_bits\": 4}}}}}",
		 NULL, NULL);
	p = for_module(&c, "model.mtp.fc");
	assert_false(p.quantized);
	assert_string_equal(p.why, "config group 'a' quantizes no weights");
	p = for_module(&c, "lm_head");
	assert_false(p.quantized);
	assert_string_equal(p.why, "no config group targets it");
	p = for_module(&c, "model.layers.3.mlp.up_proj");
	assert_string_equal(p.fmt, "float-quantized"); /* the group's format under mixed-precision */
	cfg_close(&c);
}

static void test_config_gptq_awq(void **state)
{
	struct cfg c;
	struct fg_qparams p;
	struct gptq_hand h;
	struct fg_qformat f;
	struct fg_err err = { 0 };

	(void)state;
	cfg_open(&c,
		 "{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 128,"
		 " \"desc_act\": true, \"sym\": true, \"format\": \"GPTQ_v2\", \"dynamic\": {"
		 "  \"-:.*mtp.*\": {}, \"+:.*down_proj\": {\"bits\": 8, \"group_size\": 64}, \".*up_proj\": {\"bits\": 2}}}}",
		 NULL, NULL);
	assert_string_equal(c.qc.base.fmt, "gptq_v2"); /* format, lower-cased, when checkpoint_format is absent */
	p = for_module(&c, "model.layers.0.self_attn.q_proj");
	assert_true(p.quantized);
	assert_int_equal(p.bits, 4);
	assert_int_equal(p.desc_act, 1);
	p = for_module(&c, "model.layers.0.mlp.down_proj");
	assert_int_equal(p.bits, 8);
	assert_int_equal(p.group_size, 64);
	assert_string_equal(p.why, "dynamic '+:.*down_proj'");
	p = for_module(&c, "model.layers.0.mlp.up_proj");
	assert_int_equal(p.bits, 2);
	p = for_module(&c, "model.mtp.layers.0.mlp.down_proj"); /* first match wins: "-:" */
	assert_false(p.quantized);
	gptq_hand_init(&h, 2, false);
	assert_int_equal(fg_qformat_detect(&p, &h.m, &f, &err), FG_EINPUT);
	expect_msg(&err, "the tensors are GPTQ but the config does not quantize the module (dynamic '-:.*mtp.*')", NULL);
	cfg_close(&c);

	/* text_config.quantization_config; checkpoint_format wins over format */
	cfg_open(&c,
		 "{\"text_config\": {\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 8,"
		 " \"checkpoint_format\": \"gptq\", \"format\": \"gptq_v2\"}}}",
		 NULL, NULL);
	p = for_module(&c, "x");
	assert_string_equal(p.fmt, "gptq");
	gptq_hand_init(&h, 1, false);
	assert_int_equal(fg_qformat_detect(&p, &h.m, &f, &err), 0);
	assert_int_equal(f.kind, FG_QF_GPTQ);
	assert_int_equal(f.version, 1);
	assert_true(f.sym); /* AutoGPTQ's default */
	cfg_close(&c);

	/* legacy files */
	cfg_open(&c, "{}", NULL, "{\"bits\": 4, \"group_size\": 128, \"desc_act\": false, \"sym\": false}");
	assert_int_equal(c.qc.base.method, FG_QM_GPTQ);
	assert_string_equal(c.qc.base.fmt, "gptq");
	assert_int_equal(c.qc.base.sym, 0);
	cfg_close(&c);
	cfg_open(&c, NULL, NULL, "{\"zero_point\": true, \"q_group_size\": 128, \"w_bit\": 4, \"version\": \"GEMM\"}");
	assert_int_equal(c.qc.base.method, FG_QM_AWQ);
	assert_string_equal(c.qc.base.fmt, "gemm");
	assert_int_equal(c.qc.base.bits, 4);
	assert_int_equal(c.qc.base.group_size, 128);
	assert_int_equal(c.qc.base.sym, 0);
	cfg_close(&c);

	/* AWQ: modules_to_not_convert is a substring match */
	cfg_open(&c,
		 "{\"quantization_config\": {\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 8, \"zero_point\": true,"
		 " \"version\": \"gemm\", \"modules_to_not_convert\": [\"mtp\", \"visual\"]}}",
		 NULL, NULL);
	p = for_module(&c, "model.mtp.layers.0.fc");
	assert_false(p.quantized);
	assert_string_equal(p.why, "not converted: 'mtp'");
	p = for_module(&c, "model.layers.0.mlp.up_proj");
	assert_true(p.quantized);
	{
		struct awq_hand a;

		awq_hand_init(&a);
		assert_int_equal(fg_qformat_detect(&p, &a.m, &f, &err), 0);
		assert_int_equal(f.kind, FG_QF_AWQ);
		assert_int_equal(f.group, 8);
		/* GPTQ-shaped tensors under an AWQ config */
		assert_int_equal(fg_qformat_detect(&p, &h.m, &f, &err), FG_EINPUT);
		expect_msg(&err, "the tensors are GPTQ (qweight with [G, out] scales) but the config says awq bits=4 group=8", NULL);
	}
	cfg_close(&c);
}

static void test_config_modelopt_fp8_mlx(void **state)
{
	struct cfg c;
	struct fg_qparams p;
	struct nv_hand h;
	struct fg_qformat f;
	struct fg_err err = { 0 };

	(void)state;
	cfg_open(&c, "{\"architectures\": [\"X\"]}",
		 "{\"producer\": {\"name\": \"modelopt\", \"version\": \"0.29.0\"}, \"quantization\": {"
		 " \"quant_algo\": \"NVFP4\", \"group_size\": 16, \"kv_cache_quant_algo\": null,"
		 " \"exclude_modules\": [\"lm_head\", \"model.layers.61*\", \"*mtp*\"]}}",
		 NULL);
	assert_int_equal(c.qc.base.method, FG_QM_MODELOPT);
	p = for_module(&c, "model.layers.61.mlp.down_proj");
	assert_false(p.quantized);
	assert_string_equal(p.why, "excluded by 'model.layers.61*'");
	p = for_module(&c, "model.mtp.fc");
	assert_false(p.quantized);
	p = for_module(&c, "model.layers.6.mlp.down_proj"); /* wildcards match the whole name */
	assert_true(p.quantized);
	assert_string_equal(p.fmt, "nvfp4");
	nv_hand_init(&h, 0x3E800000u);
	assert_int_equal(fg_qformat_detect(&p, &h.m, &f, &err), 0);
	assert_int_equal(f.kind, FG_QF_NVFP4);
	cfg_close(&c);
	/* MIXED_PRECISION: per-layer algorithms */
	cfg_open(&c, NULL,
		 "{\"producer\": {\"name\": \"modelopt\"}, \"quantization\": {\"quant_algo\": \"MIXED_PRECISION\","
		 " \"quantized_layers\": {\"model.layers.0.mlp.down_proj\": {\"quant_algo\": \"FP8\"},"
		 " \"model.layers.1.mlp.down_proj\": {\"quant_algo\": \"NVFP4_AWQ\", \"group_size\": 16}}}}",
		 NULL);
	p = for_module(&c, "model.layers.0.mlp.down_proj");
	assert_string_equal(p.fmt, "fp8");
	assert_int_equal(fg_qformat_detect(&p, &h.m, &f, &err), FG_EINPUT);
	expect_msg(&err, "the tensors are NVFP4 but the config says modelopt quant_algo=fp8 by quantized_layers", NULL);
	p = for_module(&c, "model.layers.1.mlp.down_proj");
	assert_int_equal(fg_qformat_detect(&p, &h.m, &f, &err), FG_EINPUT);
	expect_msg(&err, "unsupported_quantization_format: modelopt quant_algo=nvfp4_awq group=16", "pre_quant_scale", NULL);
	p = for_module(&c, "model.layers.2.mlp.down_proj");
	assert_false(p.quantized);
	assert_string_equal(p.why, "not in quantized_layers");
	cfg_close(&c);

	/* fp8: substring and prefix exclusion, the block size */
	cfg_open(&c,
		 "{\"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": \"e4m3\", \"activation_scheme\": \"dynamic\","
		 " \"weight_block_size\": [128, 64], \"modules_to_not_convert\": [\"mtp.eh\"], \"ignored_layers\": [\"model.layers.61\"]}}",
		 NULL, NULL);
	p = for_module(&c, "model.layers.61.mlp.gate");
	assert_false(p.quantized);
	assert_string_equal(p.why, "not converted: 'model.layers.61'");
	p = for_module(&c, "model.layers.611.mlp.gate"); /* a prefix ends at a dot */
	assert_true(p.quantized);
	assert_int_equal(p.block[0], 128);
	assert_int_equal(p.block[1], 64);
	p = for_module(&c, "model.mtp.eh_proj");
	assert_false(p.quantized);
	{
		uint8_t w[1] = { 0x38 };
		float s[1] = { 1.0f };
		struct fg_tensor tw = tensor("weight", FG_DT_F8_E4M3, w, 2, 1, 1);
		struct fg_tensor ts = tensor("weight_scale_inv", FG_DT_F32, s, 2, 1, 1);
		struct fg_qmodule m = { 0 };

		m.t[FG_QR_WEIGHT] = &tw, m.t[FG_QR_WEIGHT_SCALE_INV] = &ts;
		p = for_module(&c, "model.layers.0.mlp.gate");
		assert_int_equal(fg_qformat_detect(&p, &m, &f, &err), 0);
		assert_int_equal(f.scale, FG_QS_BLOCK);
		assert_int_equal(f.block[0], 128);
		assert_int_equal(f.block[1], 64);
		m.t[FG_QR_WEIGHT_SCALE_INV] = NULL;
		assert_int_equal(fg_qformat_detect(&p, &m, &f, &err), FG_EINPUT);
		expect_msg(&err, "unsupported_quantization_format: fp8 fmt=e4m3 weight_block_size=[128,64]",
			   "has no weight_scale or weight_scale_inv", NULL);
	}
	cfg_close(&c);

	/* MLX: top-level quantization with per-module overrides */
	cfg_open(&c,
		 "{\"quantization\": {\"group_size\": 64, \"bits\": 4, \"mode\": \"affine\","
		 " \"model.layers.0.mlp.gate\": {\"group_size\": 64, \"bits\": 8}, \"model.mtp.fc\": false},"
		 " \"quantization_config\": {\"group_size\": 64, \"bits\": 4, \"mode\": \"affine\"}}",
		 NULL, NULL);
	assert_int_equal(c.qc.base.method, FG_QM_MLX);
	p = for_module(&c, "model.layers.0.mlp.gate");
	assert_int_equal(p.bits, 8);
	p = for_module(&c, "model.mtp.fc");
	assert_false(p.quantized);
	assert_string_equal(p.why, "quantization['model.mtp.fc'] is false");
	p = for_module(&c, "model.layers.1.mlp.gate");
	assert_int_equal(p.bits, 4);
	assert_string_equal(p.fmt, "affine");
	cfg_close(&c);
	cfg_open(&c, "{\"quantization_config\": {\"group_size\": 32, \"bits\": 8, \"mode\": \"mxfp8\"}}", NULL, NULL);
	assert_int_equal(c.qc.base.method, FG_QM_MLX); /* mlx-lm's copy, no quant_method */
	assert_string_equal(c.qc.base.fmt, "mxfp8");
	cfg_close(&c);
}

static void test_refusals(void **state)
{
	struct gptq_hand g;
	struct awq_hand a;
	struct ct_hand ct;
	struct fg_qformat f;
	struct fg_err err = { 0 };
	struct cfg c;
	struct fg_qparams p;

	(void)state;
	gptq_hand_init(&g, 1, false);
#define REFUSE(config, module_, ...)                                                  \
	do {                                                                          \
		cfg_open(&c, config, NULL, NULL);                                     \
		p = for_module(&c, "model.layers.0.mlp.down_proj");                   \
		assert_int_equal(fg_qformat_detect(&p, (module_), &f, &err), FG_EINPUT); \
		expect_msg(&err, __VA_ARGS__, NULL);                                  \
		cfg_close(&c);                                                        \
	} while (0)
#define GPTQ_CFG(extra) "{\"quantization_config\": {\"quant_method\": \"gptq\", \"group_size\": 8, \"desc_act\": false, " extra "}}"
	REFUSE(GPTQ_CFG("\"bits\": 5"), &g.m,
	       "unsupported_quantization_format: gptq bits=5 group=8 desc_act=false checkpoint_format=gptq: 5-bit GPTQ is GPTQModel's planar layout");
	REFUSE(GPTQ_CFG("\"bits\": 4, \"checkpoint_format\": \"marlin\""), &g.m,
	       "unsupported_quantization_format: gptq bits=4 group=8 desc_act=false checkpoint_format=marlin",
	       "another kernel's layout");
	REFUSE(GPTQ_CFG("\"bits\": 4, \"is_marlin_format\": true"), &g.m, "is_marlin_format=true: the marlin layout is not read");
	REFUSE(GPTQ_CFG("\"bits\": 4, \"pack_dtype\": \"int16\""), &g.m, "pack_dtype=int16: codes packed in int16 words");
	REFUSE(GPTQ_CFG("\"bits\": 4, \"format\": \"gptq_p\""), &g.m, "checkpoint_format=gptq_p");
	REFUSE(GPTQ_CFG("\"bits\": 8"), &g.m, "the config says bits=8 but qweight [2, 8] and g_idx [16] hold 4-bit codes");
	REFUSE("{\"quantization_config\": {\"quant_method\": \"bitsandbytes\", \"load_in_4bit\": true}}", &g.m,
	       "unsupported_quantization_format: bitsandbytes: quant_method bitsandbytes is not read");
	REFUSE("{\"quantization_config\": {\"quant_method\": \"auto-round\", \"packing_format\": \"auto_round:gptq\"}}", &g.m,
	       "unsupported_quantization_format: auto-round");
	REFUSE("{}", &g.m, "the tensors are GPTQ (qweight with [G, out] scales) but the config declares no quantization");
	awq_hand_init(&a);
#define AWQ_CFG(extra) "{\"quantization_config\": {\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 8, " extra "}}"
	REFUSE(AWQ_CFG("\"version\": \"GEMV\", \"zero_point\": true"), &a.m,
	       "unsupported_quantization_format: awq bits=4 group=8 version=gemv zero_point=true: the gemv kernel's layout is not read");
	REFUSE(AWQ_CFG("\"version\": \"gemm\", \"zero_point\": false"), &a.m, "zero_point=false", "without zero points");
	a.m.t[FG_QR_QZEROS] = NULL;
	TSHAPE(a.t_sc)[1] = 8;
	REFUSE(AWQ_CFG("\"version\": \"gemm\""), &a.m, "unsupported_quantization_format: awq", "qzeros is missing");
	/* compressed-tensors layouts forged does not read */
	{
		uint8_t b[16] = { 0 };
		float gs = 1.0f;
		struct fg_tensor wp = tensor("weight_packed", FG_DT_U8, b, 2, 2, 8);
		struct fg_tensor ws = tensor("weight_scale", FG_DT_F8_E4M3, b, 2, 2, 1);
		struct fg_tensor wg = tensor("weight_global_scale", FG_DT_F32, &gs, 1, 1, 0);
		struct fg_tensor w8 = tensor("weight", FG_DT_F8_E4M3, b, 2, 2, 8);
		struct fg_tensor wi8 = tensor("weight", FG_DT_I8, b, 2, 2, 8);
		struct fg_tensor we5 = tensor("weight", FG_DT_F8_E5M2, b, 2, 2, 8);
		struct fg_tensor su8 = tensor("weight_scale", FG_DT_U8, b, 2, 2, 1);
		struct fg_tensor sbf = tensor("weight_scale", FG_DT_BF16, b, 2, 2, 1);
		struct fg_qmodule m = { 0 };
		const char *ctc = "{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"format\": \"nvfp4-pack-quantized\","
				  " \"config_groups\": {\"NVFP4\": [\"Linear\"]}}}";

		m.t[FG_QR_WEIGHT_PACKED] = &wp, m.t[FG_QR_WEIGHT_SCALE] = &ws, m.t[FG_QR_WEIGHT_GLOBAL_SCALE] = &wg;
		REFUSE(ctc, &m, "unsupported_quantization_format: compressed-tensors format=nvfp4-pack-quantized",
		       "nvfp4-pack-quantized (U8 weight_packed with weight_global_scale) is not read");
		memset(&m, 0, sizeof(m));
		m.t[FG_QR_WEIGHT] = &w8, m.t[FG_QR_WEIGHT_SCALE] = &su8;
		REFUSE(ctc, &m, "mxfp8-quantized (E8M0 weight_scale) is not read");
		m.t[FG_QR_WEIGHT] = &wi8, m.t[FG_QR_WEIGHT_SCALE] = &sbf;
		REFUSE(ctc, &m, "int-quantized (I8 weight with weight_scale) is not read");
		m.t[FG_QR_WEIGHT] = &we5;
		REFUSE(ctc, &m, "F8_E5M2 weights are not read");
		/* FP8 under a CT config whose strategy cannot be read from the shape */
		m.t[FG_QR_WEIGHT] = &w8;
		TSHAPE(sbf)[1] = 3;
		REFUSE("{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"config_groups\": {\"g\": {"
		       "\"targets\": [\"Linear\"], \"weights\": {\"num_bits\": 8, \"type\": \"float\", \"strategy\": \"tensor_group\"}}}}}",
		       &m, "strategy tensor_group is not read for FP8 weights");
		/* an MLX mode forged does not know */
		{
			uint32_t w[2] = { 0 };
			uint8_t s = 0;
			struct fg_tensor tw = tensor("weight", FG_DT_U32, w, 2, 1, 2);
			struct fg_tensor ts = tensor("scales", FG_DT_U8, &s, 2, 1, 1);
			struct fg_qmodule mm = { 0 };

			mm.t[FG_QR_WEIGHT] = &tw, mm.t[FG_QR_SCALES] = &ts;
			REFUSE("{\"quantization\": {\"group_size\": 32, \"bits\": 4, \"mode\": \"mxfp6\"}}", &mm,
			       "unsupported_quantization_format: mlx mode=mxfp6 bits=4 group=32: MLX mode mxfp6 is not read");
			REFUSE("{\"quantization\": {\"group_size\": 16, \"bits\": 4, \"mode\": \"affine\"}}", &mm,
			       "the tensors are an MLX fp mode (no biases)");
		}
	}
	/* compressed-tensors: symmetry from the tensors must agree with the config; asymmetric tensor */
	ct_hand_init(&ct, false);
	REFUSE("{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"config_groups\": {\"g\": {"
	       "\"targets\": [\"Linear\"], \"weights\": {\"num_bits\": 4, \"type\": \"int\", \"symmetric\": true, \"group_size\": 8}}}}}",
	       &ct.m, "the tensors are asymmetric (weight_zero_point present)");
	REFUSE("{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"config_groups\": {\"g\": {"
	       "\"targets\": [\"Linear\"], \"weights\": {\"num_bits\": 4, \"type\": \"int\", \"symmetric\": false}}}}}",
	       &ct.m, "unsupported_quantization_format: compressed-tensors type=int bits=4 strategy=tensor symmetric=false",
	       "asymmetric per-tensor zero point");
	REFUSE("{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"config_groups\": {\"g\": {"
	       "\"targets\": [\"Linear\"], \"weights\": {\"num_bits\": 4, \"type\": \"int\", \"symmetric\": false, \"group_size\": 8,"
	       " \"actorder\": \"group\"}}}}}",
	       &ct.m, "without act-order groups (no weight_g_idx)");
	/* no weight tensor at all; an unknown pairing */
	{
		struct fg_qmodule m = { 0 };
		uint16_t x[2] = { 0 };
		struct fg_tensor t = tensor("weight", FG_DT_BF16, x, 2, 1, 2);
		struct fg_tensor s = tensor("scales", FG_DT_BF16, x, 2, 1, 1);

		m.t[FG_QR_SCALES] = &s;
		assert_int_equal(fg_qformat_detect(NULL, &m, &f, &err), FG_EINPUT);
		expect_msg(&err, "no weight, qweight or weight_packed tensor (has: scales)", NULL);
		m.t[FG_QR_WEIGHT] = &t;
		assert_int_equal(fg_qformat_detect(NULL, &m, &f, &err), FG_EINPUT);
		expect_msg(&err, "a BF16 weight with scales is no format forged knows", NULL);
	}
#undef REFUSE
#undef GPTQ_CFG
#undef AWQ_CFG
}

static void test_config_errors(void **state)
{
	struct fg_qconfig qc;
	struct fg_qconfig_src src = { NULL, NULL, NULL };
	struct fg_err err = { 0 };
	cJSON *j;

	(void)state;
	bad_config("{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": \"4\"}}",
		   "quantization_config.bits is not an integer in [1, 32]", NULL);
	bad_config("{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4.5}}", "bits is not an integer", NULL);
	bad_config("{\"quantization_config\": {\"quant_method\": \"gptq\", \"group_size\": 0}}", "group_size is 0", NULL);
	bad_config("{\"quantization_config\": {\"quant_method\": \"gptq\", \"desc_act\": 1}}", "desc_act is not true or false", NULL);
	bad_config("{\"quantization_config\": {\"quant_method\": \"gptq\", \"dynamic\": {\"-:(?=mtp)\": {}}}}",
		   "quantization_config.dynamic['-:(?=mtp)']", "(?...) extensions", NULL);
	bad_config("{\"quantization_config\": {\"quant_method\": \"gptq\", \"dynamic\": {\".*\": 3}}}", "is not an object", NULL);
	bad_config("{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"ignore\": \"lm_head\"}}",
		   "quantization_config.ignore is not a list", NULL);
	bad_config("{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"ignore\": [\"re:a)\"]}}",
		   "quantization_config.ignore: ", "unbalanced parenthesis", NULL);
	bad_config("{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"config_groups\": {\"W3A5\": [\"Linear\"]}}}",
		   "preset scheme 'W3A5' is not one forged knows", NULL);
	bad_config("{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"config_groups\": {\"g\": {\"weights\": {}}}}}",
		   "config_groups.g has no targets", NULL);
	bad_config("{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"config_groups\": {\"g\": {"
		   "\"targets\": [\"Linear\"], \"weights\": {\"num_bits\": 4, \"block_structure\": [128]}}}}}",
		   "config_groups.g.weights.block_structure is not two positive integers", NULL);
	bad_config("{\"quantization_config\": {\"quant_method\": \"fp8\", \"weight_block_size\": [128]}}",
		   "weight_block_size is not two positive integers", NULL);
	bad_config("{\"quantization_config\": {\"quant_method\": \"gptq\", \"checkpoint_format\": \"a-very-long-format-name-nobody-writes\"}}",
		   "checkpoint_format is too long", NULL);
	bad_config("{\"quantization\": {\"bits\": 4, \"model.x\": 3}}", "quantization['model.x'] is neither false nor", NULL);
	bad_config("{\"quantization_config\": {\"quant_method\": \"\"}}", "quant_method is empty", NULL);
	bad_config("{\"quantization_config\": [1]}", "config.quantization_config is not an object", NULL);
	/* hf_quant_config.json from someone else */
	j = json("{\"producer\": {\"name\": \"other\"}, \"quantization\": {}}");
	src.hf_quant_config = j;
	assert_int_equal(fg_qconfig_parse(&qc, &src, &err), FG_EINPUT);
	expect_msg(&err, "hf_quant_config.json is not ModelOpt's (producer 'other')", NULL);
	cJSON_Delete(j);
	/* no config at all */
	src.hf_quant_config = NULL;
	assert_int_equal(fg_qconfig_parse(&qc, &src, &err), 0);
	assert_int_equal(qc.base.method, FG_QM_NONE);
	{
		struct fg_qparams p;

		assert_int_equal(fg_qconfig_for_module(&qc, "x", &p, &err), 0);
		assert_false(p.quantized);
	}
	assert_int_equal(fg_qconfig_parse(NULL, &src, &err), FG_EUSAGE);
}

/*
 * An MLX block with many per-module keys (indexed at parse): each module
 * reads its own entry, a repeated key its first, false excludes, and an
 * unlisted module the block's defaults, as with few keys (a scan).
 */
static void test_mlx_many_modules(void **state)
{
	struct fg_qconfig_src src = { NULL, NULL, NULL };
	struct fg_qconfig qc;
	struct fg_err err = { 0 };
	struct fg_qparams p;
	char *text = malloc(64 * 1024), name[64];
	size_t at;
	cJSON *j;

	(void)state;
	assert_non_null(text);
	at = (size_t)snprintf(text, 64 * 1024, "{\"quantization\": {\"group_size\": 64, \"bits\": 4, \"mode\": \"affine\"");
	/* m.0 .. m.199: bits 2 + i % 7, group 32 (m.7 repeated below with bits 8, which must not win), m.5 false */
	for (int i = 0; i < 200; i++)
		at += (size_t)snprintf(text + at, 64 * 1024 - at, i == 5 ? ", \"m.%d\": false" : ", \"m.%d\": {\"group_size\": 32, \"bits\": %d}",
				       i, 2 + i % 7);
	snprintf(text + at, 64 * 1024 - at, ", \"m.7\": {\"group_size\": 128, \"bits\": 8}}}");
	j = json(text);
	src.config = j;
	assert_int_equal(fg_qconfig_parse(&qc, &src, &err), 0);
	assert_non_null(qc.mlx_keys.slot); /* indexed: this case tests the index */
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "m.%d", i);
		assert_int_equal(fg_qconfig_for_module(&qc, name, &p, &err), 0);
		if (i == 5) {
			assert_false(p.quantized);
			continue;
		}
		assert_true(p.quantized);
		assert_int_equal(p.bits, 2 + i % 7);
		assert_int_equal(p.group_size, 32);
	}
	assert_int_equal(fg_qconfig_for_module(&qc, "m.200", &p, &err), 0);
	assert_true(p.quantized);
	assert_int_equal(p.bits, 4);
	assert_int_equal(p.group_size, 64);
	/* the block's own keys are never modules */
	assert_int_equal(fg_qconfig_for_module(&qc, "bits", &p, &err), 0);
	assert_int_equal(p.bits, 4);
	fg_qconfig_release(&qc);
	assert_null(qc.mlx_keys.slot);
	fg_qconfig_release(NULL);
	cJSON_Delete(j);
	free(text);
}

/*
 * forged's own record of a head it quantized over a float trunk
 * (mtp_quantization.modules, no quantization block): a head module it
 * quantized resolves as MLX with its own fields, one it kept as floats (null,
 * or bits null) and one it does not name go by the config (none here), a
 * trunk lookup never reads it, over a trunk format it still describes the
 * head modules it names, and a malformed record fails the parse.
 */
static void test_own_record(void **state)
{
	static const char *rec = "{\"mtp_quantization\": {\"policy\": \"mxfp4\", \"modules\": {"
		"\"mtp.fc\": null,"
		" \"mtp.layers.0.self_attn.q_proj\": {\"bits\": 4, \"group_size\": 32, \"mode\": \"mxfp4\"},"
		" \"mtp.layers.0.mlp.up_proj\": {\"bits\": 8, \"group_size\": 64, \"mode\": \"affine\", \"source\": \"x\"},"
		" \"mtp.layers.0.mlp.gate_proj\": {\"bits\": 2, \"group_size\": 128},"
		" \"mtp.layers.0.mlp.down_proj\": {\"bits\": null, \"group_size\": null, \"mode\": null,"
		" \"dequantized_from\": \"gptq bits=4\"}}}}";
	struct fg_qconfig_src src = { NULL, NULL, NULL };
	struct fg_qconfig qc;
	struct fg_err err = { 0 };
	struct fg_qparams p;
	cJSON *j = json(rec);

	(void)state;
	src.config = j;
	assert_int_equal(fg_qconfig_parse(&qc, &src, &err), 0);
	assert_int_equal(qc.base.method, FG_QM_NONE); /* no trunk format */
	assert_int_equal(fg_qconfig_for_head_module(&qc, "mtp.layers.0.self_attn.q_proj", &p, &err), 0);
	assert_true(p.quantized);
	assert_true(p.have_weights);
	assert_int_equal(p.method, FG_QM_MLX);
	assert_int_equal(p.bits, 4);
	assert_int_equal(p.group_size, 32);
	assert_string_equal(p.fmt, "mxfp4");
	assert_string_equal(p.why, "mtp_quantization.modules['mtp.layers.0.self_attn.q_proj']");
	assert_int_equal(fg_qconfig_for_head_module(&qc, "mtp.layers.0.mlp.up_proj", &p, &err), 0);
	assert_int_equal(p.bits, 8);
	assert_int_equal(p.group_size, 64);
	assert_string_equal(p.fmt, "affine");
	assert_int_equal(fg_qconfig_for_head_module(&qc, "mtp.layers.0.mlp.gate_proj", &p, &err), 0);
	assert_int_equal(p.bits, 2);
	assert_string_equal(p.fmt, "affine"); /* no mode: MLX's default */
	assert_int_equal(fg_qconfig_for_head_module(&qc, "mtp.layers.0.mlp.down_proj", &p, &err), 0);
	assert_false(p.quantized);
	assert_string_equal(p.why, "the checkpoint has no quantization config");
	assert_int_equal(fg_qconfig_for_head_module(&qc, "mtp.fc", &p, &err), 0);
	assert_false(p.quantized);
	assert_int_equal(fg_qconfig_for_head_module(&qc, "model.layers.0.mlp.up_proj", &p, &err), 0);
	assert_false(p.quantized);
	assert_int_equal(p.method, FG_QM_NONE);
	/* a trunk lookup never reads the record */
	assert_int_equal(fg_qconfig_for_module(&qc, "mtp.layers.0.self_attn.q_proj", &p, &err), 0);
	assert_false(p.quantized);
	fg_qconfig_release(&qc);
	cJSON_Delete(j);

	/*
	 * Over a trunk format, the record still describes the head modules it names with bits
	 * (a Hugging Face trunk's config says nothing of MLX head modules); the others, and
	 * every trunk lookup, go by the config.
	 */
	j = json("{\"quantization_config\": {\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 128},"
		 " \"mtp_quantization\": {\"modules\": {\"mtp.x\": {\"bits\": 8, \"group_size\": 32}, \"mtp.y\": null}}}");
	src.config = j;
	assert_int_equal(fg_qconfig_parse(&qc, &src, &err), 0);
	assert_int_equal(qc.base.method, FG_QM_AWQ);
	assert_int_equal(fg_qconfig_for_head_module(&qc, "mtp.x", &p, &err), 0);
	assert_int_equal(p.method, FG_QM_MLX);
	assert_int_equal(p.bits, 8);
	assert_int_equal(p.group_size, 32);
	assert_int_equal(fg_qconfig_for_head_module(&qc, "mtp.y", &p, &err), 0);
	assert_int_equal(p.method, FG_QM_AWQ);
	assert_int_equal(p.group_size, 128);
	assert_int_equal(fg_qconfig_for_module(&qc, "mtp.x", &p, &err), 0);
	assert_int_equal(p.method, FG_QM_AWQ);
	assert_int_equal(p.bits, 4);
	fg_qconfig_release(&qc);
	cJSON_Delete(j);

	/* A record of many modules (a large MoE head) is indexed, and reads the same. */
	{
		char text[8192], name[32];
		size_t at = (size_t)snprintf(text, sizeof(text), "{\"mtp_quantization\": {\"modules\": {\"m.0\": null");

		for (int i = 1; i < 100; i++)
			at += (size_t)snprintf(text + at, sizeof(text) - at, ", \"m.%d\": {\"bits\": %d, \"group_size\": 64}", i,
					       2 + i % 7);
		snprintf(text + at, sizeof(text) - at, "}}}");
		j = json(text);
		src.config = j;
		assert_int_equal(fg_qconfig_parse(&qc, &src, &err), 0);
		assert_non_null(qc.record_keys.slot);
		for (int i = 0; i < 101; i++) {
			snprintf(name, sizeof(name), "m.%d", i);
			assert_int_equal(fg_qconfig_for_head_module(&qc, name, &p, &err), 0);
			assert_int_equal(p.quantized, i > 0 && i < 100);
			if (p.quantized)
				assert_int_equal(p.bits, 2 + i % 7);
		}
		fg_qconfig_release(&qc);
		assert_null(qc.record_keys.slot);
		cJSON_Delete(j);
	}

	/* A malformed record is named. */
	bad_config("{\"mtp_quantization\": {\"modules\": {\"mtp.x\": 3}}}",
		   "mtp_quantization.modules['mtp.x'] is neither null nor a module's record", NULL);
	bad_config("{\"mtp_quantization\": {\"modules\": {\"mtp.x\": {\"bits\": 4}}}}",
		   "mtp_quantization.modules['mtp.x'].group_size is missing", NULL);
	bad_config("{\"mtp_quantization\": {\"modules\": {\"mtp.x\": {\"bits\": 4.5, \"group_size\": 64}}}}",
		   "bits is not an integer", NULL);
	bad_config("{\"mtp_quantization\": {\"modules\": []}}", "config.mtp_quantization.modules is not an object", NULL);
	bad_config("{\"mtp_quantization\": 7}", "config.mtp_quantization is not an object", NULL);
	/* A record that fails after an MLX block of many keys was indexed: the failed parse frees the index. */
	{
		char text[4096];
		size_t at = (size_t)snprintf(text, sizeof(text), "{\"quantization\": {\"bits\": 4, \"group_size\": 64");

		for (int i = 0; i < 40; i++)
			at += (size_t)snprintf(text + at, sizeof(text) - at, ", \"m.%d\": false", i);
		snprintf(text + at, sizeof(text) - at, "}, \"mtp_quantization\": {\"modules\": {\"mtp.x\": 3}}}");
		j = json(text);
		src.config = j;
		assert_int_equal(fg_qconfig_parse(&qc, &src, &err), FG_EINPUT);
		expect_msg(&err, "mtp_quantization.modules['mtp.x'] is neither null nor a module's record", NULL);
		assert_null(qc.mlx_keys.slot);
		cJSON_Delete(j);
	}
}

static void test_regex(void **state)
{
	static const struct {
		const char *pat, *name;
		bool want;
	} cases[] = {
		{ ".*mtp.*", "model.mtp.layers.0", true },
		{ "mtp.*", "model.mtp.layers.0", false }, /* anchored at the start */
		{ "model\\.layers\\.6", "model.layers.61.mlp", true }, /* not at the end */
		{ "model\\.layers\\.6$", "model.layers.61", false },
		{ "model\\.layers\\.6$", "model.layers.6", true },
		{ "a$", "a\n", true }, /* Python's $ also matches before a final newline */
		{ "a\\Z", "a\n", false },
		{ "\\Amodel", "model.x", true },
		{ "model\\.layers\\.(6|7)\\.", "model.layers.7.x", true },
		{ "model\\.layers\\.(6|7)\\.", "model.layers.8.x", false },
		{ "[a-c]+\\d{2,3}x", "abca123x", true },
		{ "[a-c]+\\d{2,3}x", "abca1x", false },
		{ "[a-c]+\\d{2,3}x", "abca1234x", false },
		{ "[^.]*\\.weight", "abc.weight", true },
		{ "[^.]*\\.weight", "a.b.weight", false },
		{ "(?:a|b)*c", "ababc", true },
		{ "a{,2}b", "aab", true },
		{ "a{,2}b", "aaab", false },
		{ "a{2,}b", "aaaab", true },
		{ "a{2}b", "ab", false },
		{ "\\w+\\s?\\W", "ab_9 .", true },
		{ "\\D\\S", "a1", true },
		{ "\\D\\S", "1a", false },
		{ "x{", "x{", true }, /* not a quantifier: a literal brace */
		{ "x{a}", "x{a}", true },
		{ "a*?b", "aab", true },
		{ "a+?", "", false },
		{ "", "anything", true },
		{ "[]a]", "]", true },
		{ "[a-]", "-", true },
		{ "[\\]x]", "]", true },
		{ "[\\d.]+$", "1.25", true },
		{ "\\x41", "A", true },
		{ "a|", "b", true }, /* the empty alternative matches */
		{ "(a*)*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaac", false },
		{ "re:x", "re:x", true },
	};
	static const struct {
		const char *pat, *why;
	} refused[] = {
		{ "(?=a)", "(?...) extensions" },     { "(?P<n>a)", "(?...) extensions" }, { "(?i)a", "(?...) extensions" },
		{ "(a)\\1", "backreferences" },      { "\\bfoo", "word boundaries" },    { "a**", "multiple repeat" },
		{ "a*+", "possessive" },             { "*a", "nothing to repeat" },      { "(a", "missing )" },
		{ "a)", "unbalanced parenthesis" },  { "[a", "unterminated character class" }, { "\\q", "bad escape" },
		{ "a{3,2}", "min repeat greater than max" }, { "{2}", "nothing to repeat" }, { "[z-a]", "bad character range" },
		{ "^*", "nothing to repeat" },       { "a\\", "ends with a backslash" },
	};
	struct fg_err err = { 0 };
	char big[700], name[3000];
	size_t i;
	bool m;

	(void)state;
	for (i = 0; i < COUNT(cases); i++) {
		if (fg_qpattern_match(cases[i].pat, cases[i].name, &m, &err))
			fail_msg("'%s': %s", cases[i].pat, err.msg);
		if (m != cases[i].want)
			fail_msg("re.match('%s', '%s') should be %s", cases[i].pat, cases[i].name, cases[i].want ? "true" : "false");
	}
	for (i = 0; i < COUNT(refused); i++) {
		assert_int_equal(fg_qpattern_match(refused[i].pat, "x", &m, &err), FG_EINPUT);
		expect_msg(&err, "regular expression", refused[i].why, NULL);
	}
	/* hostile sizes: long patterns are refused, long names and nested stars stay linear */
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	assert_int_equal(fg_qpattern_match(big, "a", &m, &err), FG_EINPUT);
	expect_msg(&err, "too long", NULL);
	memset(name, 'x', sizeof(name) - 1);
	name[sizeof(name) - 1] = 0;
	assert_int_equal(fg_qpattern_match("(x+x+)+y", name, &m, &err), 0);
	assert_false(m);
	assert_int_equal(fg_qpattern_match("(((x*)*)*)*$", name, &m, &err), 0);
	assert_true(m);
	assert_int_equal(fg_qpattern_match("(x{1,100}){1,100}y", "xy", &m, &err), FG_EINPUT);
	expect_msg(&err, "too complex", NULL);
	{
		char deep[200];

		memset(deep, '(', 100);
		memset(deep + 100, ')', 99);
		deep[199] = 0;
		assert_int_equal(fg_qpattern_match(deep, "", &m, &err), FG_EINPUT);
		expect_msg(&err, "nested too deeply", NULL);
	}
	/* the other rules */
	assert_int_equal(fg_qmatch_entry(FG_QMATCH_WILDCARD, "*mlp*gate", "model.layers.0.mlp.gate", &m, &err), 0);
	assert_true(m);
	assert_int_equal(fg_qmatch_entry(FG_QMATCH_WILDCARD, "model.layers.1*", "model.layers.2.x", &m, &err), 0);
	assert_false(m);
	assert_int_equal(fg_qmatch_entry(FG_QMATCH_WILDCARD, "lm_head", "lm_head", &m, &err), 0);
	assert_true(m);
	assert_int_equal(fg_qmatch_entry(FG_QMATCH_PREFIX, "model.layers.6", "model.layers.6", &m, &err), 0);
	assert_true(m);
	assert_int_equal(fg_qmatch_entry(FG_QMATCH_SUBSTRING, "", "x", &m, &err), 0);
	assert_false(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_golden),
		cmocka_unit_test(test_hand_gptq),
		cmocka_unit_test(test_hand_gptq_packing),
		cmocka_unit_test(test_hand_awq),
		cmocka_unit_test(test_hand_ct),
		cmocka_unit_test(test_hand_fp8),
		cmocka_unit_test(test_hand_nvfp4),
		cmocka_unit_test(test_hand_mlx),
		cmocka_unit_test(test_dense),
		cmocka_unit_test(test_check_gptq),
		cmocka_unit_test(test_check_awq),
		cmocka_unit_test(test_check_ct),
		cmocka_unit_test(test_check_fp8),
		cmocka_unit_test(test_check_nvfp4),
		cmocka_unit_test(test_check_mlx),
		cmocka_unit_test(test_roles),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_config_ct_targets),
		cmocka_unit_test(test_config_ct_ignored_mtp),
		cmocka_unit_test(test_config_gptq_awq),
		cmocka_unit_test(test_config_modelopt_fp8_mlx),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_config_errors),
		cmocka_unit_test(test_mlx_many_modules),
		cmocka_unit_test(test_own_record),
		cmocka_unit_test(test_regex),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
