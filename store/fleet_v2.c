/*
 * fleet_v2.c: the parts of fleet health "forged.fleet_health.v2" that both
 * backends build alike from the rows they read (store/internal.h): the
 * after-load probe of each served (artifact, runtime) against its family's
 * band (probe_qnorm), one entry of hosts[], and probe_after_load's bands.
 *
 * The backends read the rows (sqlite/fleet.c, pg/fleet.c); what the rows
 * mean is decided here once.  probe_qnorm, version 2: the trunk probe each
 * serving host's runtime loads (the artifact's report,
 * runtimes[].trunk_probe_after of the reported runtime: artifact_probes),
 * never the stored one.  The top-level buckets and counts sum the banded
 * families (their shared band: Qwen3.5/3.8's), as v1's readers read them;
 * by_family has every family.
 */
#include "store/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forge/model/family.h"

/* ---- the after-load probe against each family's band ---- */

/*
 * The five buckets of a banded family: below its plausible band, between
 * plausible and healthy, the healthy band (closed), above it but plausible,
 * above the plausible band (shifted twice).
 */
#define BUCKETS 5
#define BUCKET_HEALTHY 2
#define FAMILIES_MAX 32

static const char *const bucket_names[BUCKETS] = { "below", "low", "healthy", "high", "above" };

static int bucket_of(const struct fg_probe_band *b, double v)
{
	if (v < b->plausible_lo)
		return 0;
	if (v < b->healthy_lo)
		return 1;
	if (v <= b->healthy_hi)
		return 2;
	if (v <= b->plausible_hi)
		return 3;
	return 4;
}

struct fam_probe {
	char family[64];
	const struct fg_probe_band *band;
	int64_t artifacts, reports;
	int64_t b_artifacts[BUCKETS], b_reports[BUCKETS];
	int64_t outside_band, outside_plausible;
	double min, max;
};

struct fg_probe_acc {
	struct fam_probe fam[FAMILIES_MAX];
	size_t n_fam;
	int64_t matched;
	/* the artifact being read (rows come by artifact id) */
	int64_t cur;
	struct fam_probe *cur_fam;
	unsigned cur_buckets;
};

static struct fam_probe *fam_of(struct fg_probe_acc *acc, const char *family)
{
	for (size_t i = 0; i < acc->n_fam; i++)
		if (strcmp(acc->fam[i].family, family) == 0)
			return &acc->fam[i];
	if (acc->n_fam == FAMILIES_MAX)
		return NULL;
	memset(&acc->fam[acc->n_fam], 0, sizeof(acc->fam[0]));
	snprintf(acc->fam[acc->n_fam].family, sizeof(acc->fam[0].family), "%s", family);
	acc->fam[acc->n_fam].band = fg_family_probe_band(family);
	return &acc->fam[acc->n_fam++];
}

/* The artifact just read: counted once in each bucket it was served in, once if any is outside. */
static void flush_artifact(struct fg_probe_acc *acc)
{
	struct fam_probe *f = acc->cur_fam;

	if (!f)
		return;
	f->artifacts++;
	for (int b = 0; b < BUCKETS; b++)
		if (acc->cur_buckets & (1u << b))
			f->b_artifacts[b]++;
	if (f->band && (acc->cur_buckets & ~(1u << BUCKET_HEALTHY)))
		f->outside_band++;
	if (f->band && (acc->cur_buckets & ((1u << 0) | (1u << 4))))
		f->outside_plausible++;
	acc->cur_fam = NULL;
	acc->cur_buckets = 0;
}

struct fg_probe_acc *fg_store_probe_acc_new(void)
{
	return calloc(1, sizeof(struct fg_probe_acc));
}

void fg_store_probe_acc_free(struct fg_probe_acc *acc)
{
	free(acc);
}

void fg_store_probe_acc_add(struct fg_probe_acc *acc, int64_t id, const char *family, double v)
{
	struct fam_probe *f;

	if (!isfinite(v) || !family)
		return;
	if (id != acc->cur) {
		flush_artifact(acc);
		acc->cur = id;
		acc->cur_fam = fam_of(acc, family);
	}
	if (!(f = acc->cur_fam))
		return;
	acc->matched++;
	f->reports++;
	if (f->reports == 1 || v < f->min)
		f->min = v;
	if (f->reports == 1 || v > f->max)
		f->max = v;
	if (f->band) {
		int b = bucket_of(f->band, v);

		f->b_reports[b]++;
		acc->cur_buckets |= 1u << b;
	}
}

static cJSON *pair(double lo, double hi, int lo_open, int hi_open)
{
	cJSON *r = cJSON_CreateArray();

	if (!r || !cJSON_AddItemToArray(r, lo_open ? cJSON_CreateNull() : cJSON_CreateNumber(lo)) ||
	    !cJSON_AddItemToArray(r, hi_open ? cJSON_CreateNull() : cJSON_CreateNumber(hi))) {
		cJSON_Delete(r);
		return NULL;
	}
	return r;
}

/* Bucket b's [lo, hi] for band (v1 wrote [0, 1.25] for the first: kept). */
static cJSON *bucket_range(const struct fg_probe_band *band, int b)
{
	const double edges[BUCKETS + 1] = { 0.0, band->plausible_lo, band->healthy_lo, band->healthy_hi,
					    band->plausible_hi, 0.0 };

	return pair(edges[b], edges[b + 1], 0, b == BUCKETS - 1);
}

static int put(cJSON *o, const char *key, cJSON *item)
{
	if (item && cJSON_AddItemToObject(o, key, item))
		return 1;
	cJSON_Delete(item);
	return 0;
}

static cJSON *band_json(const struct fg_probe_band *b)
{
	cJSON *o = cJSON_CreateObject();

	if (!o || !put(o, "healthy", pair(b->healthy_lo, b->healthy_hi, 0, 0)) ||
	    !put(o, "plausible", pair(b->plausible_lo, b->plausible_hi, 0, 0)) ||
	    !cJSON_AddStringToObject(o, "source", b->source)) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static cJSON *family_json(const struct fam_probe *f)
{
	cJSON *o = cJSON_CreateObject(), *list;
	int ok = o != NULL;

	if (ok && f->band) {
		ok = put(o, "band", band_json(f->band)) && cJSON_AddNumberToObject(o, "artifacts", (double)f->artifacts) &&
		     cJSON_AddNumberToObject(o, "reports", (double)f->reports) &&
		     (list = cJSON_AddArrayToObject(o, "buckets")) != NULL;
		for (int b = 0; ok && b < BUCKETS; b++) {
			cJSON *it = cJSON_CreateObject();

			ok = it && cJSON_AddItemToArray(list, it) && cJSON_AddStringToObject(it, "name", bucket_names[b]) &&
			     put(it, "range", bucket_range(f->band, b)) &&
			     cJSON_AddNumberToObject(it, "artifacts", (double)f->b_artifacts[b]) &&
			     cJSON_AddNumberToObject(it, "reports", (double)f->b_reports[b]);
			if (!ok && it && !cJSON_GetArrayItem(list, b))
				cJSON_Delete(it);
		}
		ok = ok && cJSON_AddNumberToObject(o, "outside_band", (double)f->outside_band) &&
		     cJSON_AddNumberToObject(o, "outside_plausible", (double)f->outside_plausible);
	} else if (ok) {
		ok = cJSON_AddNullToObject(o, "band") &&
		     cJSON_AddStringToObject(o, "note", "no published band for this family: the distribution is "
							"shown, nothing is counted outside a band") &&
		     cJSON_AddNumberToObject(o, "artifacts", (double)f->artifacts) &&
		     cJSON_AddNumberToObject(o, "reports", (double)f->reports) &&
		     cJSON_AddNumberToObject(o, "min", f->min) && cJSON_AddNumberToObject(o, "max", f->max);
	}
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

int fg_store_probe_qnorm_section(cJSON *doc, struct fg_probe_acc *acc, int64_t total, struct fg_err *err)
{
	static const struct fg_probe_band none = { 0, 0, 0, 0, "" };
	const struct fg_probe_band *shared = fg_family_probe_band("qwen3_5");
	cJSON *sec = cJSON_AddObjectToObject(doc, "probe_qnorm"), *list = NULL, *fams = NULL;
	int64_t buckets[BUCKETS] = { 0 }, outside = 0, implausible = 0;
	int ok;

	if (!sec)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	if (!shared)
		shared = &none;
	flush_artifact(acc);
	for (size_t i = 0; i < acc->n_fam; i++) {
		if (!acc->fam[i].band)
			continue;
		for (int b = 0; b < BUCKETS; b++)
			buckets[b] += acc->fam[i].b_artifacts[b];
		outside += acc->fam[i].outside_band;
		implausible += acc->fam[i].outside_plausible;
	}
	ok = cJSON_AddStringToObject(sec, "basis", "after_load") &&
	     put(sec, "healthy_band", pair(shared->healthy_lo, shared->healthy_hi, 0, 0)) &&
	     put(sec, "plausible_band", pair(shared->plausible_lo, shared->plausible_hi, 0, 0)) &&
	     (list = cJSON_AddArrayToObject(sec, "buckets")) != NULL;
	for (int b = 0; ok && b < BUCKETS; b++) {
		cJSON *it = cJSON_CreateObject();

		ok = it && cJSON_AddItemToArray(list, it);
		if (!ok)
			cJSON_Delete(it);
		ok = ok && put(it, "range", bucket_range(shared, b)) &&
		     cJSON_AddNumberToObject(it, "count", (double)buckets[b]);
	}
	ok = ok && cJSON_AddNumberToObject(sec, "outside_band", (double)outside) &&
	     cJSON_AddNumberToObject(sec, "outside_plausible", (double)implausible) &&
	     cJSON_AddNumberToObject(sec, "reports", (double)acc->matched) &&
	     cJSON_AddNumberToObject(sec, "not_counted", (double)(total > acc->matched ? total - acc->matched : 0)) &&
	     (fams = cJSON_AddObjectToObject(sec, "by_family")) != NULL;
	for (size_t i = 0; ok && i < acc->n_fam; i++)
		ok = put(fams, acc->fam[i].family, family_json(&acc->fam[i]));
	return ok ? 0 : fg_err_set(err, FG_ENOMEM, "out of memory");
}

/* ---- every host report ---- */

static int str_or_null(cJSON *o, const char *key, const char *t)
{
	return (t ? cJSON_AddStringToObject(o, key, t) : cJSON_AddNullToObject(o, key)) != NULL;
}

int fg_store_host_item(cJSON *arr, const struct fg_store_host_row *r, struct fg_err *err)
{
	const struct fg_probe_band *band = fg_family_probe_band(r->family);
	int probe = r->has_probe && isfinite(r->probe_after);
	cJSON *o = cJSON_CreateObject(), *observed;

	if (!o || !cJSON_AddItemToArray(arr, o)) {
		cJSON_Delete(o);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	if (!str_or_null(o, "host", r->host) || !str_or_null(o, "runtime", r->runtime) ||
	    !str_or_null(o, "runtime_reported", r->runtime_reported) ||
	    !cJSON_AddNumberToObject(o, "artifact_id", (double)r->artifact_id) || !str_or_null(o, "family", r->family))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	observed = r->observed ? cJSON_Parse(r->observed) : cJSON_CreateNull();
	if (!observed)
		return fg_err_set(err, FG_ESTATE, "a host's observed figures: the stored text is not JSON");
	if (!cJSON_AddItemToObject(o, "observed", observed)) {
		cJSON_Delete(observed);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	if (!str_or_null(o, "reported_at", r->reported_at) ||
	    !(probe ? cJSON_AddNumberToObject(o, "probe_after", r->probe_after) : cJSON_AddNullToObject(o, "probe_after")) ||
	    !(band && probe ? cJSON_AddStringToObject(o, "probe_bucket", bucket_names[bucket_of(band, r->probe_after)])
			    : cJSON_AddNullToObject(o, "probe_bucket")))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	return 0;
}

/* ---- probe_after_load's bands ---- */

int fg_store_dist_bands(cJSON *sec, const cJSON *by_family, struct fg_err *err)
{
	/* Issue 13: each family's own band (null: none published), beside the shared healthy_band. */
	cJSON *bands = cJSON_AddObjectToObject(sec, "bands");
	const cJSON *fam;

	if (!bands)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	cJSON_ArrayForEach(fam, by_family) {
		const struct fg_probe_band *b = fg_family_probe_band(fam->string);
		cJSON *o = b ? cJSON_CreateObject() : cJSON_CreateNull(), *h = NULL, *p = NULL;

		if (b && o) {
			h = cJSON_AddArrayToObject(o, "healthy");
			p = cJSON_AddArrayToObject(o, "plausible");
		}
		if (!o || (b && (!h || !p || !cJSON_AddItemToArray(h, cJSON_CreateNumber(b->healthy_lo)) ||
				 !cJSON_AddItemToArray(h, cJSON_CreateNumber(b->healthy_hi)) ||
				 !cJSON_AddItemToArray(p, cJSON_CreateNumber(b->plausible_lo)) ||
				 !cJSON_AddItemToArray(p, cJSON_CreateNumber(b->plausible_hi)))) ||
		    !cJSON_AddItemToObject(bands, fam->string, o)) {
			cJSON_Delete(o);
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		}
	}
	return 0;
}
