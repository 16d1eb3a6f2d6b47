/*
 * fuzz_ckpt_open.c: libFuzzer target for opening a checkpoint folder, the
 * way `forged inspect` and `forged forge` do it.
 *
 * The input is cut at each "\n--\n" into a config.json, an index and up to
 * four shards.  A shard part is a 2-byte little-endian data length (capped
 * at 4 KiB) followed by its JSON header text; its data section is filled
 * with the input's own bytes, repeated.  Shards are named
 * model-0000i-of-00004.safetensors, except a part whose header is preceded
 * by 'S' (after the length), which becomes the sidecar mtp.safetensors.  The folder is written under a
 * per-process temporary folder, then inspected (every verdict and the JSON
 * report built) and, when the inspection holds a head, planned for MTPLX as
 * a forge would and every plan entry materialized from the mapped shards.
 * Seeds: tests/fuzz/seeds/ckpt_open (written by tests/fuzz/make_seeds_ckpt.py).
 */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "forge/artifact/layout.h"
#include "forge/artifact/plan.h"
#include "forge/core/fs.h"
#include "forge/model/inspect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char root[64];

static void put(const char *name, const uint8_t *a, size_t n, const uint8_t *b, size_t m)
{
	char path[160];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", root, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return;
	if (n && fg_fs_write_all(fd, a, n) != 0)
		__builtin_trap();
	if (m && fg_fs_write_all(fd, b, m) != 0)
		__builtin_trap();
	close(fd);
}

static const uint8_t *next_part(const uint8_t *p, const uint8_t *end, size_t *len)
{
	const uint8_t *q = p;

	while (q + 4 <= end && memcmp(q, "\n--\n", 4) != 0)
		q++;
	if (q + 4 > end)
		q = end;
	*len = (size_t)(q - p);
	return q;
}

struct mat {
	const struct fg_plan *plan;
	uint8_t *buf;
};

static int materialize_all(void *ctx, struct fg_err *err)
{
	struct mat *m = ctx;

	for (size_t i = 0; i < m->plan->n; i++) {
		const struct fg_plan_entry *e = &m->plan->t[i];
		uint64_t n = 1;
		int over = 0;

		for (int d = 0; d < e->rank; d++)
			over |= __builtin_mul_overflow(n, e->shape[d], &n);
		over |= __builtin_mul_overflow(n, fg_dtype_size(e->dtype), &n);
		if (over || n > (1u << 20))
			continue;
		m->buf = malloc(n ? (size_t)n : 1);
		if (m->buf && fg_plan_materialize(m->plan, e, m->buf, err) != 0) {
			free(m->buf);
			m->buf = NULL;
			return 0;
		}
		free(m->buf);
		m->buf = NULL;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data, *end = data + size;
	struct fg_inspect *r = NULL;
	struct fg_err err = { 0 };
	size_t n_shards = 0, len;
	char cmd[160];

	if (!root[0]) {
		snprintf(root, sizeof(root), "/tmp/fg-fuzz-ckpt-%ld", (long)getpid());
		mkdir(root, 0755);
	}
	{
		static const char *const names[] = {
			"config.json", "model.safetensors.index.json", "mtp.safetensors",
			"model-00001-of-00004.safetensors", "model-00002-of-00004.safetensors",
			"model-00003-of-00004.safetensors", "model-00004-of-00004.safetensors",
		};

		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
			snprintf(cmd, sizeof(cmd), "%s/%s", root, names[i]);
			unlink(cmd);
		}
	}
	p = next_part(p, end, &len);
	put("config.json", data, len, NULL, 0);
	if (p < end) {
		const uint8_t *s = p + 4;

		p = next_part(s, end, &len);
		if (len)
			put("model.safetensors.index.json", s, len, NULL, 0);
	}
	while (p < end && n_shards < 4) {
		const uint8_t *s = p + 4;
		uint8_t head[8], *payload;
		size_t dlen, hlen;
		char name[64];
		int side;

		p = next_part(s, end, &len);
		if (len < 2)
			continue;
		side = len > 2 && s[2] == 'S';
		dlen = (size_t)(s[0] | (s[1] << 8)) & 4095;
		hlen = len - 2 - (size_t)side;
		for (int b = 0; b < 8; b++)
			head[b] = (uint8_t)((uint64_t)hlen >> (8 * b));
		payload = malloc(hlen + dlen + 1);
		if (!payload)
			return 0;
		memcpy(payload, s + 2 + side, hlen);
		for (size_t k = 0; k < dlen; k++)
			payload[hlen + k] = data[k % size];
		if (side)
			snprintf(name, sizeof(name), "mtp.safetensors");
		else
			snprintf(name, sizeof(name), "model-%05zu-of-00004.safetensors", n_shards + 1);
		put(name, head, 8, payload, hlen + dlen);
		free(payload);
		n_shards++;
	}
	if (fg_inspect_run(&r, root, NULL, 0, &err) != 0)
		return 0;
	cJSON_Delete(fg_inspect_json(r));
	if (fg_inspect_head(r)) {
		struct fg_plan plan;

		memset(&plan, 0, sizeof(plan));
		if (fg_plan_build(r, "mtplx-2.12", &plan, &err) == 0) {
			const struct fg_tensor **want = calloc(4 * plan.n + 1, sizeof(*want));
			size_t n = 0;

			for (size_t i = 0; want && i < plan.n; i++) {
				if (plan.t[i].src)
					want[n++] = plan.t[i].src;
				if (plan.t[i].scale_inv)
					want[n++] = plan.t[i].scale_inv;
			}
			if (want && fg_ckpt_map(r->ckpt, want, n, &err) == 0) {
				struct mat m = { &plan, NULL };

				for (size_t i = 0; i < r->ckpt->n_files; i++)
					fg_ckpt_map_file(r->ckpt, i, &err);
				fg_st_guard(materialize_all, &m, "fuzz", &err);
			}
			free(want);
		}
		fg_plan_release(&plan);
		/* The layout for a list (forge/artifact/layout.c): trial plans, their headers, the simulation. */
		{
			const struct fg_runtime *rows[FG_LAYOUT_MAX_TARGETS];
			struct fg_layout l;
			size_t n_rows;

			if (fg_layout_targets("mtplx-2.12,vllm,vllm-mlx", rows, &n_rows, &err) == 0) {
				fg_layout_decide(r, r, rows, n_rows, NULL, &l, &plan, &err);
				fg_plan_release(&plan);
			}
		}
	}
	fg_inspect_free(r);
	return 0;
}
