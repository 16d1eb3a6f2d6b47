/*
 * forge.c: the forge pipeline (forge.h), stage by stage.
 *
 * Stages: inspect the source and the backbone; plan the head (plan.c, policy.c);
 * build the artifact in `.NAME.forged-tmp-PID-SEQ` beside the destination:
 * shards without head tensors, the sidecar, the originals of changed tensors
 * (zstd), config.json (write.c), the fingerprint and forged.json
 * (provenance.c); inspect the folder for every target; fsync and rename it into
 * place.  Where the head goes is decided first, for all the targets at once
 * (layout.c).  Any failure removes the temporary folder, so the destination holds
 * either nothing new or a complete artifact.
 */
#include "forge/artifact/forge.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "forge/artifact/internal.h"
#include "forge/artifact/provenance.h"
#include "forge/core/fs.h"

static unsigned long forge_seq;

/*
 * Each stage's name and the fraction of the whole run at which it begins; a
 * stage ends where the next begins.
 */
static const struct {
	const char *name;   /* the stage word of progress callbacks and job rows */
	double start;
} stages[] = {
	[FG_ART_INSPECT] = { "inspect", 0.0 },
	[FG_ART_FETCH] = { "fetch", 0.05 },
	[FG_ART_BACKBONE] = { "backbone", 0.1 },
	[FG_ART_SIDECAR] = { "sidecar", 0.4 },
	[FG_ART_PROVENANCE] = { "provenance", 0.7 },
	[FG_ART_CHECK] = { "check", 0.9 },
	[FG_ART_DONE] = { "done", 1.0 },
};

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Tell the caller where the run is (at most every FG_FORGE_PROGRESS_S unless forced). */
static void report(struct forge *f, int force)
{
	const int s = f->stage;
	const double start = stages[s].start, end = s == FG_ART_DONE ? 1.0 : stages[s + 1].start;
	double t = now_s(), part = 0.0, rate = 0.0, eta = -1.0;
	struct fg_forge_progress p;

	if (!f->o->progress || (!force && t - f->last_report < FG_FORGE_PROGRESS_S))
		return;
	f->last_report = t;
	if (f->stage_total)
		part = f->stage_done >= f->stage_total ? 1.0 : (double)f->stage_done / (double)f->stage_total;
	if (f->stage_done && t > f->stage_t0)
		rate = (double)f->stage_done / (t - f->stage_t0);
	if (rate > 0.0 && f->stage_total >= f->stage_done)
		eta = (double)(f->stage_total - f->stage_done) / rate;
	p = (struct fg_forge_progress){ stages[s].name, start + (end - start) * part, f->stage_done, f->stage_total,
					rate, eta };
	if (f->o->progress(f->o->progress_ctx, &p))
		f->stopped = 1;
}

void fg_art_progress(struct forge *f, enum fg_art_stage s)
{
	f->stage = (int)s;
	f->stage_done = f->stage_total = 0;
	f->stage_t0 = now_s();
	report(f, 1);
}

void fg_art_stage_total(struct forge *f, uint64_t total)
{
	f->stage_total = total;
}

void fg_art_stage_done(struct forge *f, uint64_t done)
{
	if (done < f->stage_done)
		return; /* never backwards */
	f->stage_done = done;
	report(f, f->stage_total && done >= f->stage_total);
}

int fg_art_meter(void *ctx, uint64_t done, uint64_t total)
{
	struct fg_art_meter *m = ctx;

	(void)total;
	fg_art_stage_done(m->f, m->base + done);
	return m->f->stopped;
}

double fg_forge_fetch_fraction(uint64_t done, uint64_t total)
{
	return total ? stages[FG_ART_BACKBONE].start * (double)done / (double)total : 0.0;
}

int fg_art_stop_requested(struct forge *f, struct fg_err *err)
{
	return f->stopped ? fg_err_set(err, FG_ECANCELLED, "forge stopped on request") : 0;
}

/* ---- the destination folder ---- */

/*
 * The destination is created through one opened folder, the parent of out
 * (struct place): the temporary folder is made in it with mkdirat, every
 * file is written under "/proc/self/fd/N/TMP" (the magic link resolves to
 * that very folder, wherever it is now), and the result is renamed into
 * place with renameat2 in it.  A parent swapped for a link after it was
 * opened (or, with out_nofollow, before) changes nothing.  Without /proc the
 * paths are spelled from the parent's name instead.
 */
struct place {
	int dirfd;
	char dir[PATH_MAX];      /* how paths reach the folder: /proc/self/fd/N, or its name */
	char base[NAME_MAX + 1]; /* out's last component */
	char tmp_name[NAME_MAX + 1];
};

static void split_out(const char *out, char *parent, size_t plen, char *base, size_t blen)
{
	char copy[PATH_MAX];
	size_t n;
	char *slash;

	snprintf(copy, sizeof(copy), "%s", out);
	n = strlen(copy);
	while (n > 1 && copy[n - 1] == '/')
		copy[--n] = '\0';
	slash = strrchr(copy, '/');
	if (!slash) {
		snprintf(parent, plen, ".");
		snprintf(base, blen, "%s", copy);
	} else {
		snprintf(base, blen, "%s", slash + 1);
		if (slash == copy)
			slash[1] = '\0';
		else
			*slash = '\0';
		snprintf(parent, plen, "%s", copy);
	}
}

/* Open path's folders one by one without following a symbolic link. */
static int open_nofollow(const char *path, struct fg_err *err)
{
	char copy[PATH_MAX], *save = NULL, *c;
	int fd, next;

	if (path[0] != '/')
		return fg_err_set(err, FG_EUSAGE, "%s: a confined output needs an absolute path", path);
	snprintf(copy, sizeof(copy), "%s", path);
	fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (c = strtok_r(copy, "/", &save); fd >= 0 && c; c = strtok_r(NULL, "/", &save)) {
		next = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0 && (errno == ELOOP || errno == ENOTDIR)) {
			close(fd);
			return fg_err_set(err, FG_EFORBIDDEN, "%s: '%s' is not a folder or is a symbolic link", path, c);
		}
		close(fd);
		fd = next;
	}
	if (fd < 0)
		return fg_err_set(err, FG_EINPUT, "%s: cannot open the output's folder: %s", path, strerror(errno));
	return fd;
}

static int place_open(struct place *pl, const char *out, int nofollow, struct fg_err *err)
{
	char parent[PATH_MAX], proc[64];
	struct stat a, b;
	int fd;

	split_out(out, parent, sizeof(parent), pl->base, sizeof(pl->base));
	if (!pl->base[0] || strcmp(pl->base, ".") == 0 || strcmp(pl->base, "..") == 0 || strcmp(pl->base, "/") == 0)
		return fg_err_set(err, FG_EUSAGE, "%s: not a name for a new folder", out);
	if (nofollow) {
		fd = open_nofollow(parent, err);
		if (fd < 0)
			return fd;
	} else if ((fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		return fg_err_set(err, FG_EINPUT, "%s: cannot open the output's folder: %s", parent, strerror(errno));
	}
	pl->dirfd = fd;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (stat(proc, &a) == 0 && fstat(fd, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		snprintf(pl->dir, sizeof(pl->dir), "%s", proc);
	else
		snprintf(pl->dir, sizeof(pl->dir), "%s", parent);
	return 0;
}

/* Remove temporary folders of dead forges of the same destination. */
static void clean_stale(const struct place *pl)
{
	int fd = dup(pl->dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	char prefix[NAME_MAX + 32];

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	snprintf(prefix, sizeof(prefix), ".%s.forged-tmp-", pl->base);
	while ((de = readdir(d))) {
		char path[PATH_MAX];
		long pid;

		if (strncmp(de->d_name, prefix, strlen(prefix)) != 0)
			continue;
		pid = strtol(de->d_name + strlen(prefix), NULL, 10);
		if (pid > 0 && (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", pl->dir, de->d_name) < (int)sizeof(path))
			fg_fs_rm_rf(path);
	}
	closedir(d);
}

/* ---- stages ---- */

/*
 * The artifact digest over every file written so far (all of them:
 * forged.json and mtplx_runtime.json, written after, describe the artifact
 * and are not in its file list).  The head's file and its fingerprints were
 * hashed while it was written (write.c): nothing is read back.  A sidecar
 * is the mtp file MTPLX's framing covers (the config points at it); an
 * embedded head has none (MTPLX fingerprints no such artifact:
 * head_fingerprint stays empty, as does the legacy fingerprint without an
 * mtp.safetensors).
 */
static int identities(struct forge *f, struct fg_err *err)
{
	return fg_artifact_digest(f->files, f->res->digest, err);
}
static void rfc3339(time_t t, char out[32])
{
	struct tm tm;

	if (!gmtime_r(&t, &tm) || !strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(out, 32, "1970-01-01T00:00:00Z");
}

/*
 * An MTPLX target gets MTPLX's own runtime file, unverified until a
 * verification is posted: the first MTPLX row of the target list, when the
 * layout gives MTPLX an mtp file to fingerprint (an embedded head has none,
 * and the file's artifact_fingerprint would have nothing to name).
 */
static const struct fg_runtime *mtplx_target(const struct forge *f)
{
	if (!f->res->head_fingerprint[0])
		return NULL;
	for (size_t i = 0; i < f->n_targets; i++)
		if (f->targets[i]->product && strcmp(f->targets[i]->product, "mtplx") == 0)
			return f->targets[i];
	return NULL;
}

static int write_runtime(struct forge *f, struct fg_err *err)
{
	const struct fg_runtime *rt = mtplx_target(f);
	char when[32], path[PATH_MAX];
	const char *mt = fg_ckpt_model_type(f->bb->ckpt);
	struct fg_mtplx_pack pack = {
		.target = rt ? rt->id : NULL,
		.target_version = rt ? rt->version_min : NULL,
		.family = f->src->family->id,
		.model_type = mt,
		.head_layers = f->src->declared_mtp,
		.source = f->src->ckpt->source,
		.source_commit = f->src->ckpt->pull ? fg_pull_resolved_commit(f->src->ckpt->pull) : NULL,
		.source_layout = f->src->layout,
		.backbone = f->bb->ckpt->source,
		.policy = f->res->policy,
		.forged_version = f->o->version ? f->o->version : "unknown",
		.forged_at = when,
		.head_fingerprint = f->res->head_fingerprint,
		.digest = f->res->digest,
		.mtp_file = f->layout.file,
	};
	cJSON *doc;
	int rc;

	if (!rt)
		return 0;
	rfc3339(f->created_at, when);
	doc = fg_mtplx_runtime_new(&pack);
	if (!doc)
		return fg_err_set(err, FG_ENOMEM, "out of memory building %s", FG_MTPLX_RUNTIME_FILE);
	rc = fg_fs_join(path, sizeof(path), f->tmp, FG_MTPLX_RUNTIME_FILE, err);
	if (!rc)
		rc = fg_art_write_json(path, doc, NULL, err);
	if (rc) {
		cJSON_Delete(doc);
		return rc;
	}
	f->res->mtplx_runtime = doc;
	return 0;
}

/* forged.json, kept in the result as written. */
static int write_provenance(struct forge *f, struct fg_err *err)
{
	cJSON *quantization = fg_policy_record_json(&f->plan, &f->policy, f->quant_record);
	const struct fg_provenance p = {
		.forged_version = f->o->version,
		.created_at = f->created_at,
		.source = f->src->ckpt->source,
		.family = f->src->family->id,
		.head_set = fg_inspect_head(f->src)->set.name,
		/* An hf:// source: the revision as named and the commit it resolved to (else null). */
		.revision = f->src->ckpt->pull ? fg_pull_revision(f->src->ckpt->pull) : NULL,
		.resolved_commit = f->src->ckpt->pull ? fg_pull_resolved_commit(f->src->ckpt->pull) : NULL,
		.backbone = f->bb->ckpt->source,
		.target = f->res->target,
		.policy = f->res->policy,
		.source_convention = f->plan.source_conv,
		.target_convention = f->plan.target_conv,
		.shifted = f->res->shifted,
		.n_shifted = f->res->n_shifted,
		.expert_layout = f->plan.expert_layout,
		.quantization = quantization,
		.removed = f->res->removed,
		.n_removed = f->res->n_removed,
		.originals = f->originals,
		.relayouts = f->relayouts,
		.files = f->files,
		.fingerprint = f->res->fingerprint,
		.layout = f->res->layout,
		.head_fingerprint = f->res->head_fingerprint,
		.digest = f->res->digest,
		.mtplx_runtime = mtplx_target(f) ? FG_MTPLX_RUNTIME_FILE : NULL,
		.job = f->o->job,
	};
	char path[PATH_MAX];
	cJSON *doc = quantization ? fg_provenance_json(&p) : NULL;
	int rc;

	cJSON_Delete(quantization);
	if (!doc)
		return fg_err_set(err, FG_ENOMEM, "out of memory building forged.json");
	rc = fg_fs_join(path, sizeof(path), f->tmp, "forged.json", err);
	if (!rc)
		rc = fg_art_write_json(path, doc, NULL, err);
	if (rc) {
		cJSON_Delete(doc);
		return rc;
	}
	f->res->provenance = doc;
	return 0;
}

/* The tensors the plan reads, gathered (fg_plan_entry_inputs' ctx). */
struct wanted {
	const struct fg_tensor **t;
	size_t n;
};

static int want_input(void *ctx, const struct fg_tensor *t)
{
	struct wanted *w = ctx;

	w->t[w->n++] = t;
	return 0;
}

/*
 * The head tensors are made readable before writing: a remote source's are
 * fetched (by ranges, cached), a local one's files are mapped for streaming.
 */
static int fetch_head(struct forge *f, struct fg_err *err)
{
	struct wanted w = { NULL, 0 };
	size_t cap = 0;
	int rc;

	for (size_t i = 0; i < f->plan.n; i++)
		cap += fg_plan_entry_max_inputs(&f->plan.t[i]);
	w.t = calloc(cap ? cap : 1, sizeof(*w.t));
	if (!w.t)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	for (size_t i = 0; i < f->plan.n; i++)
		fg_plan_entry_inputs(&f->plan.t[i], want_input, &w);
	if (f->src->ckpt->pull)
		fg_art_progress(f, FG_ART_FETCH);
	rc = fg_ckpt_map(f->src->ckpt, w.t, w.n, err);
	free(w.t);
	return rc;
}

static int check_backbone(const struct fg_inspect *src, const struct fg_inspect *bb, struct fg_err *err)
{
	const cJSON *hs = cJSON_GetObjectItemCaseSensitive(src->ckpt->config, "hidden_size");
	const cJSON *hb = cJSON_GetObjectItemCaseSensitive(bb->ckpt->config, "hidden_size");

	if (!bb->ckpt->config_raw)
		return fg_err_set(err, FG_EINPUT, "backbone %s has no config.json", bb->ckpt->source);
	if (strcmp(src->family->id, bb->family->id) != 0)
		return fg_err_set(err, FG_EINPUT, "backbone %s is family %s, the source is %s",
				  bb->ckpt->source, bb->family->id, src->family->id);
	if (cJSON_IsNumber(hs) && cJSON_IsNumber(hb) && hs->valuedouble != hb->valuedouble)
		return fg_err_set(err, FG_EINPUT, "backbone hidden_size %g differs from the source's %g",
				  hb->valuedouble, hs->valuedouble);
	return 0;
}

/*
 * The opened folder's absolute path as people read it ("" for the root, so
 * that "DIR/NAME" joins), when pl->dir is its /proc/self/fd link; NULL
 * otherwise (pl->dir is the folder's own name then).
 */
static const char *place_shown(const struct place *pl, char *buf, size_t len)
{
	ssize_t n = strncmp(pl->dir, "/proc/self/fd/", 14) == 0 ? readlink(pl->dir, buf, len - 1) : -1;

	if (n <= 0 || buf[0] != '/')
		return NULL;
	buf[n] = '\0';
	return strcmp(buf, "/") == 0 ? "" : buf;
}

/* The artifact's absolute path: the opened folder's, then out's name. */
static void artifact_path(const struct place *pl, const char *out, char *buf, size_t len)
{
	char dir[PATH_MAX];
	const char *shown = place_shown(pl, dir, sizeof(dir));

	if (shown && snprintf(buf, len, "%s/%s", shown, pl->base) < (int)len)
		return;
	if (!realpath(out, buf))
		snprintf(buf, len, "%s", out);
}

/*
 * Put the finished folder at out: without force only where nothing is
 * (RENAME_NOREPLACE: of two forges to one out, the second fails rather than
 * replacing the first); with force, swapped with the old artifact in one
 * step (RENAME_EXCHANGE), which is then removed.
 */
static int put_in_place(struct forge *f, const struct place *pl, struct fg_err *err)
{
	char old[PATH_MAX];
	struct stat st;

	if (!f->o->force || fstatat(pl->dirfd, pl->base, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		if (renameat2(pl->dirfd, pl->tmp_name, pl->dirfd, pl->base, RENAME_NOREPLACE) == 0)
			return 0;
		if (errno == EEXIST || errno == ENOTEMPTY)
			return fg_err_set(err, FG_EUSAGE, "%s already exists (use --force to replace it)", f->o->out);
		if (errno != EINVAL && errno != ENOSYS)
			return fg_err_set(err, fg_fs_write_errcode(errno), "%s: cannot rename into place: %s",
					  f->o->out, strerror(errno));
		/* No RENAME_NOREPLACE here: a plain rename still refuses a folder that is not empty. */
		if (fstatat(pl->dirfd, pl->base, &st, AT_SYMLINK_NOFOLLOW) == 0 && !f->o->force)
			return fg_err_set(err, FG_EUSAGE, "%s already exists (use --force to replace it)", f->o->out);
		if (renameat(pl->dirfd, pl->tmp_name, pl->dirfd, pl->base) != 0)
			return fg_err_set(err,
					  errno == EEXIST || errno == ENOTEMPTY ? FG_EUSAGE : fg_fs_write_errcode(errno),
					  "%s: cannot rename into place: %s", f->o->out, strerror(errno));
		return 0;
	}
	if (renameat2(pl->dirfd, pl->tmp_name, pl->dirfd, pl->base, RENAME_EXCHANGE) == 0) {
		fg_fs_rm_rf(f->tmp); /* the old artifact, now under the temporary name */
		return 0;
	}
	if (errno != EINVAL && errno != ENOSYS)
		return fg_err_set(err, fg_fs_write_errcode(errno), "%s: cannot swap in the new artifact: %s",
				  f->o->out, strerror(errno));
	/* Without RENAME_EXCHANGE: the old one aside, the new one in, the old one gone. */
	if (snprintf(old, sizeof(old), "%s-old", pl->tmp_name) >= (int)sizeof(old))
		return fg_err_set(err, FG_EUSAGE, "%s: path too long", f->o->out);
	if (renameat(pl->dirfd, pl->base, pl->dirfd, old) != 0)
		return fg_err_set(err, fg_fs_write_errcode(errno), "%s: cannot move the old artifact aside: %s",
				  f->o->out, strerror(errno));
	if (renameat(pl->dirfd, pl->tmp_name, pl->dirfd, pl->base) != 0) {
		int rc = fg_err_set(err, fg_fs_write_errcode(errno), "%s: cannot rename into place: %s",
				    f->o->out, strerror(errno));

		renameat(pl->dirfd, old, pl->dirfd, pl->base);
		return rc;
	}
	if (snprintf(f->tmp, sizeof(f->tmp), "%s/%s", pl->dir, old) < (int)sizeof(f->tmp))
		fg_fs_rm_rf(f->tmp);
	return 0;
}

/*
 * Before anything is written: a head the policy quantizes in a format a
 * target's head loader reads wrong whatever path it takes is refused now,
 * with what the check of the written artifact would say (runtimes.h
 * fg_runtime_head_quant_refuses), instead of after the whole head is
 * quantized and written.
 */
static int quantized_head_readable(struct forge *f, struct fg_err *err)
{
	const struct fg_runtime_input in = { .ckpt = f->bb->ckpt, .family = f->src->family };
	const struct fg_plan_quant *last = NULL;
	char why[FG_ERR_MSG_MAX / 2];

	/*
	 * Every spec the plan quantizes with, each once in a row: under match a
	 * module takes its own entry of the backbone's block, which a loader that
	 * reads only the block's bits and group (vllm-mlx) does not see.
	 */
	for (size_t i = 0; i < f->plan.n; i++) {
		const struct fg_plan_quant *q = &f->plan.t[i].quant;

		if (f->plan.t[i].op != FG_OP_QUANT ||
		    (last && last->mxfp4 == q->mxfp4 && last->bits == q->bits && last->group == q->group))
			continue;
		last = q;
		for (size_t t = 0; t < f->layout.n_targets; t++)
			if (fg_runtime_head_quant_refuses(f->layout.targets[t], &in, q->mxfp4 ? "mxfp4" : "affine",
							  q->bits, q->group, why, sizeof(why)))
				return fg_err_verdict(err, FG_V_RUNTIME_LOAD_ERROR,
						      "the artifact would not inspect clean for %s: the runtime refuses to "
						      "load it (format): %s", f->layout.targets[t]->id, why);
	}
	return 0;
}

/*
 * Every target loads what the layout promised: an error verdict refuses the
 * artifact (the first names the refusal), and so does a target that, with
 * no error verdict, decodes plain or loads the head wrong (layout_conflict).
 */
static int check_targets(struct forge *f, struct fg_err *err)
{
	const struct fg_inspect *check = f->res->check;
	const struct fg_verdict *first = fg_verdicts_first_error(&check->verdicts);

	f->res->ok = check->ok;
	if (!f->res->ok)
		return fg_err_verdict(err, first ? (int)first->row->code : FG_ERR_NO_VERDICT,
				      "the artifact would not inspect clean for %s%s%s", f->res->target,
				      first ? ": " : "", first ? first->detail : "");
	for (size_t t = 0; t < f->layout.n_targets; t++)
		for (size_t i = 0; i < check->n_runtimes; i++) {
			const struct fg_runtime_result *r = &check->runtimes[i];
			char why[256];

			/* As the layout judged it (layout.c fit_of): not modelled is no excuse for a bad outcome. */
			if (r->rt != f->layout.targets[t] || r->outcome == FG_OUTCOME_OK)
				continue;
			fg_layout_describe(r, why, sizeof(why));
			f->res->ok = 0;
			f->res->n_refusal_runtimes = 1;
			f->res->refusal_runtimes[0] = r->rt->id;
			return fg_err_verdict(err, FG_V_LAYOUT_CONFLICT, "the artifact as written: %s %s (%s in %s)",
					      r->rt->id, why, fg_runtime_outcome_name(r->outcome), f->layout.file);
		}
	return 0;
}

static int finish(struct forge *f, const struct place *pl, struct fg_err *err)
{
	int rc;

	fg_art_progress(f, FG_ART_CHECK);
	if ((rc = fg_art_stop_requested(f, err)) != 0)
		return rc;
	rc = fg_inspect_run(&f->res->check, f->tmp, f->res->targets, f->res->n_targets, err);
	if (rc)
		return fg_err_prefix(err, rc, "inspecting the new artifact: ");
	if ((rc = check_targets(f, err)) != 0)
		return rc;
	if ((rc = fg_fs_fsync_dir(f->tmp)) != 0)
		return fg_err_set(err, fg_fs_write_errcode(-rc), "%s: fsync: %s", f->tmp, strerror(-rc));
	if ((rc = put_in_place(f, pl, err)) != 0)
		return rc;
	f->tmp[0] = '\0'; /* renamed: nothing of ours is left to remove */
	fsync(pl->dirfd);
	artifact_path(pl, f->o->out, f->res->artifact, sizeof(f->res->artifact));
	fg_art_progress(f, FG_ART_DONE);
	return 0;
}

/*
 * What is written into the temporary folder, in order.  A step that begins
 * a stage reports it first and stops there when the caller asked to.
 * config.json comes before the sidecar: the head fingerprints hash it first.
 */
static const struct {
	int begins_stage;
	enum fg_art_stage stage;
	int (*run)(struct forge *f, struct fg_err *err);
} steps[] = {
	{ 1, FG_ART_BACKBONE, fg_art_write_backbone },
	{ 1, FG_ART_SIDECAR, fg_art_write_config },
	{ 0, FG_ART_SIDECAR, fg_art_write_sidecar },
	{ 1, FG_ART_PROVENANCE, fg_art_write_originals },
	{ 0, FG_ART_PROVENANCE, identities },
	{ 0, FG_ART_PROVENANCE, write_provenance },
	{ 0, FG_ART_PROVENANCE, write_runtime },
	{ 0, FG_ART_PROVENANCE, fg_art_check_sources }, /* what was read is one version of each file */
};

/* The target list: its rows (f->layout.targets), their ids and the text as given without blanks (f->res). */
static int parse_targets(const char *text, struct forge *f, struct fg_err *err)
{
	const char *given = text && *text ? text : FG_FORGE_DEFAULT_TARGET;
	size_t k = 0;
	int rc = fg_layout_targets(given, f->targets, &f->n_targets, err);

	if (rc)
		return fg_err_prefix(err, rc, "--target: ");
	if (strlen(given) >= sizeof(f->res->target))
		return fg_err_set(err, FG_EUSAGE, "the target list is longer than %d characters", FG_FORGE_TARGET_MAX - 1);
	for (const char *p = given; *p; p++)
		if (*p != ' ' && *p != '\t')
			f->res->target[k++] = *p;
	f->res->target[k] = '\0';
	f->res->n_targets = f->n_targets;
	for (size_t i = 0; i < f->n_targets; i++)
		f->res->targets[i] = f->targets[i]->id;
	return 0;
}

struct step_call {
	struct forge *f;
	int (*run)(struct forge *f, struct fg_err *err);
};

static int run_step(void *ctx, struct fg_err *err)
{
	struct step_call *s = ctx;

	return s->run(s->f, err);
}

int fg_forge_run(const struct fg_forge_opts *o, struct fg_forge_result *res, struct fg_err *err)
{
	struct forge f;
	struct place pl = { .dirfd = -1 };
	char cache[PATH_MAX];
	struct stat st;
	int rc;

	memset(res, 0, sizeof(*res));
	memset(&f, 0, sizeof(f));
	f.o = o;
	f.res = res;
	f.cache_dir = o->pull ? o->pull->cache_dir : fg_ckpt_default_cache_dir(cache, sizeof(cache));
	f.created_at = time(NULL);
	if ((rc = parse_targets(o->target, &f, err)))
		goto out;
	if ((rc = fg_policy_parse(o->quant, &f.policy, err)))
		goto out;
	f.policy.allow_requantize = o->allow_requantize != 0;
	snprintf(res->policy, sizeof(res->policy), "%s", f.policy.text);
	if (!o->out || !*o->out) {
		rc = fg_err_set(err, FG_EUSAGE, "--out DIR is required");
		goto out;
	}
	if ((rc = place_open(&pl, o->out, o->out_nofollow, err)))
		goto out;
	if (fstatat(pl.dirfd, pl.base, &st, AT_SYMLINK_NOFOLLOW) == 0 && !o->force) {
		rc = fg_err_set(err, FG_EUSAGE, "%s already exists (use --force to replace it)", o->out);
		goto out;
	}
	fg_art_progress(&f, FG_ART_INSPECT);
	if (fg_pull_is_url(o->backbone ? o->backbone : o->source)) {
		/* The artifact is the backbone's shards: they must be local files to link. */
		rc = fg_err_set(err, FG_EUSAGE, "the backbone must be a local folder (--backbone DIR); "
				"a remote source's head is fetched, its shards are not");
		goto out;
	}
	rc = fg_inspect_run_opts(&f.src, o->source, NULL, 0, o->pull, err);
	if (rc)
		goto out;
	if (o->backbone && strcmp(o->backbone, o->source) != 0) {
		rc = fg_inspect_run(&f.bb, o->backbone, NULL, 0, err);
		if (!rc)
			rc = check_backbone(f.src, f.bb, err);
		if (rc)
			goto out;
	} else {
		f.bb = f.src;
		if (!f.bb->ckpt->config_raw) {
			rc = fg_err_set(err, FG_EINPUT, "%s: a forge source needs a config.json", o->source);
			goto out;
		}
	}
	{
		const struct fg_plan_opts popts = { .config = f.bb->ckpt->config_raw,
						    .dequant_all = fg_policy_dequantizes_all(&f.policy) };

		rc = fg_layout_decide(f.src, f.bb, f.targets, f.n_targets, &popts, &f.layout, &f.plan, err);
	}
	res->n_refusal_runtimes = f.layout.n_conflict;
	for (size_t i = 0; i < f.layout.n_conflict; i++)
		res->refusal_runtimes[i] = f.layout.conflict[i];
	if (rc)
		goto out;
	f.plan.target = res->target;
	snprintf(res->head_file, sizeof(res->head_file), "%s", f.layout.file);
	if (!(res->layout = fg_layout_json(&f.layout))) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	f.quant_record = cJSON_CreateObject();
	if (!f.quant_record) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	if ((rc = fg_policy_apply(&f.plan, &f.policy, f.bb, f.quant_record, err)) ||
	    (rc = quantized_head_readable(&f, err)) || (rc = fetch_head(&f, err)))
		goto out;
	clean_stale(&pl);
	/* pid, then a sequence number: worker threads of one daemon forge at once. */
	if (snprintf(pl.tmp_name, sizeof(pl.tmp_name), ".%s.forged-tmp-%ld-%lu", pl.base, (long)getpid(),
		     __atomic_fetch_add(&forge_seq, 1, __ATOMIC_RELAXED)) >= (int)sizeof(pl.tmp_name) ||
	    snprintf(f.tmp, sizeof(f.tmp), "%s/%s", pl.dir, pl.tmp_name) >= (int)sizeof(f.tmp)) {
		rc = fg_err_set(err, FG_EUSAGE, "%s: path too long", o->out);
		f.tmp[0] = '\0';
		goto out;
	}
	fg_fs_rm_rf(f.tmp);
	if (mkdirat(pl.dirfd, pl.tmp_name, 0755) != 0) {
		rc = fg_err_set(err, fg_fs_write_errcode(errno), "%s: cannot create: %s", f.tmp, strerror(errno));
		f.tmp[0] = '\0';
		goto out;
	}
	f.files = cJSON_CreateObject();
	f.originals = cJSON_CreateArray();
	f.relayouts = cJSON_CreateArray();
	f.weight_map = cJSON_CreateObject();
	f.source_hashes = cJSON_CreateObject();
	if (!f.files || !f.originals || !f.relayouts || !f.weight_map || !f.source_hashes) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		if (steps[i].begins_stage) {
			fg_art_progress(&f, steps[i].stage);
			if ((rc = fg_art_stop_requested(&f, err)))
				goto out;
		}
		/* Steps read mapped source bytes: a file that shrinks meanwhile fails the step, not the process. */
		struct step_call sc = { &f, steps[i].run };

		if ((rc = fg_st_guard(run_step, &sc, o->source, err)))
			goto out;
	}
	rc = finish(&f, &pl, err);
out:
	if (rc && err) {
		/* Files were reached through the opened folder's magic link: name the folder. */
		char dir[PATH_MAX];
		const char *shown = place_shown(&pl, dir, sizeof(dir));

		if (shown)
			fg_err_respell(err, pl.dir, shown);
	}
	if (rc == FG_EVERDICT && err)
		res->refusal = *err;
	if (f.tmp[0])
		fg_fs_rm_rf(f.tmp);
	if (pl.dirfd >= 0)
		close(pl.dirfd);
	fg_art_sources_close(&f);
	fg_sha256_free(f.framed);
	fg_sha256_free(f.legacy);
	fg_plan_release(&f.plan);
	cJSON_Delete(f.quant_record);
	cJSON_Delete(f.files);
	cJSON_Delete(f.originals);
	cJSON_Delete(f.relayouts);
	cJSON_Delete(f.weight_map);
	cJSON_Delete(f.source_hashes);
	if (f.bb != f.src)
		fg_inspect_free(f.bb);
	fg_inspect_free(f.src);
	return rc;
}

void fg_forge_result_release(struct fg_forge_result *res)
{
	if (!res)
		return;
	for (size_t i = 0; i < res->n_removed; i++)
		free(res->removed[i]);
	for (size_t i = 0; i < res->n_shifted; i++)
		free(res->shifted[i]);
	free(res->removed);
	free(res->shifted);
	fg_inspect_free(res->check);
	cJSON_Delete(res->provenance);
	cJSON_Delete(res->layout);
	cJSON_Delete(res->mtplx_runtime);
	memset(res, 0, sizeof(*res));
}

/* The runtimes a refusal names (a layout conflict's targets), as a JSON array. */
static cJSON *refusal_runtimes(const struct fg_forge_result *res)
{
	cJSON *a = cJSON_CreateArray();

	for (size_t i = 0; a && i < res->n_refusal_runtimes; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(res->refusal_runtimes[i]));
	return a;
}

/* {code, severity, detail, runtimes} of a refusal. */
static cJSON *refusal_json(const struct fg_verdict_row *row, const struct fg_forge_result *res)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "code", row->name);
	cJSON_AddStringToObject(o, "severity", fg_severity_name(row->severity));
	cJSON_AddStringToObject(o, "detail", res->refusal.msg);
	cJSON_AddItemToObject(o, "runtimes", refusal_runtimes(res));
	return o;
}

/* A refusal in the verdict shape of the inspect report (forged.inspect.v1 verdicts[]). */
static cJSON *refusal_verdict_json(const struct fg_verdict_row *row, const struct fg_forge_result *res)
{
	const struct fg_err *refusal = &res->refusal;
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "code", row->name);
	cJSON_AddStringToObject(o, "severity", fg_severity_name(row->severity));
	cJSON_AddNullToObject(o, "set");
	cJSON_AddItemToObject(o, "runtimes", refusal_runtimes(res));
	cJSON_AddArrayToObject(o, "tensors");
	cJSON_AddNumberToObject(o, "tensor_count", 0);
	cJSON_AddStringToObject(o, "detail", refusal->msg);
	return o;
}

static void add_or_null(cJSON *o, const char *key, const char *s)
{
	if (s)
		cJSON_AddStringToObject(o, key, s);
	else
		cJSON_AddNullToObject(o, key);
}

cJSON *fg_forge_result_json(const struct fg_forge_result *res, const struct fg_forge_opts *opts)
{
	cJSON *o = cJSON_CreateObject(), *report, *targets;
	const struct fg_verdict_row *refusal = fg_verdict_row(fg_err_refusal(&res->refusal));

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "schema", "forged.forge.v1");
	if (res->ok && res->artifact[0])
		cJSON_AddStringToObject(o, "artifact", res->artifact);
	else
		cJSON_AddNullToObject(o, "artifact");
	if (res->fingerprint[0] && res->ok)
		cJSON_AddStringToObject(o, "fingerprint", res->fingerprint);
	else
		cJSON_AddNullToObject(o, "fingerprint");
	/* Issue 13, new fields: both identities, MTPLX's runtime file, what was asked. */
	add_or_null(o, "head_fingerprint", res->ok && res->head_fingerprint[0] ? res->head_fingerprint : NULL);
	add_or_null(o, "digest", res->ok && res->digest[0] ? res->digest : NULL);
	add_or_null(o, "mtplx_runtime", res->ok && res->mtplx_runtime ? FG_MTPLX_RUNTIME_FILE : NULL);
	add_or_null(o, "source", opts ? opts->source : NULL);
	add_or_null(o, "out", opts ? opts->out : NULL);
	cJSON_AddStringToObject(o, "target", res->target);
	targets = cJSON_AddArrayToObject(o, "targets");
	for (size_t i = 0; targets && i < res->n_targets; i++)
		cJSON_AddItemToArray(targets, cJSON_CreateString(res->targets[i]));
	if (res->layout)
		cJSON_AddItemToObject(o, "layout", cJSON_Duplicate(res->layout, 1));
	else
		cJSON_AddNullToObject(o, "layout");
	cJSON_AddStringToObject(o, "policy", res->policy);
	cJSON_AddNumberToObject(o, "head_tensors", (double)res->head_tensors);
	cJSON_AddItemToObject(o, "removed_from_backbone", fg_art_string_array(res->removed, res->n_removed));
	cJSON_AddItemToObject(o, "shifted_tensors", fg_art_string_array(res->shifted, res->n_shifted));
	report = res->check ? fg_inspect_json(res->check) : NULL;
	if (report) {
		cJSON_AddItemToObject(o, "verdicts", cJSON_DetachItemFromObjectCaseSensitive(report, "verdicts"));
		cJSON_Delete(report);
	} else {
		cJSON *list = cJSON_AddArrayToObject(o, "verdicts");

		/* Refused before there was an artifact to inspect: the refusal is the verdict. */
		if (list && refusal)
			cJSON_AddItemToArray(list, refusal_verdict_json(refusal, res));
	}
	if (refusal)
		cJSON_AddItemToObject(o, "refusal", refusal_json(refusal, res));
	else
		cJSON_AddNullToObject(o, "refusal");
	cJSON_AddBoolToObject(o, "ok", res->ok);
	return o;
}
