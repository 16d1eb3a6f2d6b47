/*
 * verdicts.c: the verdict table and report verdict lists (verdicts.h).
 */
#include "forge/model/verdicts.h"

#include "forge/core/grow.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct fg_verdict_row fg_verdict_table[FG_VERDICT_COUNT] = {
#define FG_VERDICT_ROW(id, name_, severity_, kind_, meaning_) \
	[FG_V_##id] = { .code = FG_V_##id, .name = name_, .severity = severity_, .kind = kind_, .meaning = meaning_ },
	FG_VERDICT_CODES(FG_VERDICT_ROW)
#undef FG_VERDICT_ROW
};

static const char *const severity_names[FG_SEV_COUNT] = {
	[FG_SEV_INFO] = "info",
	[FG_SEV_WARNING] = "warning",
	[FG_SEV_ERROR] = "error",
};

_Static_assert(FG_SEV_ERROR + 1 == FG_SEV_COUNT, "FG_SEV_COUNT names every severity");

const struct fg_verdict_row *fg_verdict_row(enum fg_verdict_code code)
{
	/* Unsigned, so a negative value cast into the enum is refused too. */
	if ((unsigned)code >= (unsigned)FG_VERDICT_COUNT)
		return NULL;
	return &fg_verdict_table[code];
}

const struct fg_verdict_row *fg_verdict_code_find(const char *name)
{
	for (size_t i = 0; name && i < FG_VERDICT_COUNT; i++)
		if (strcmp(fg_verdict_table[i].name, name) == 0)
			return &fg_verdict_table[i];
	return NULL;
}

const char *fg_severity_name(enum fg_severity s)
{
	if ((unsigned)s >= (unsigned)FG_SEV_COUNT)
		return "unknown";
	return severity_names[s];
}

bool fg_severity_parse(const char *name, enum fg_severity *out)
{
	for (int i = 0; name && i < FG_SEV_COUNT; i++) {
		if (strcmp(severity_names[i], name) == 0) {
			*out = (enum fg_severity)i;
			return true;
		}
	}
	return false;
}

int fg_verdicts_add(struct fg_verdicts *list, enum fg_verdict_code code, const char *set,
		    struct fg_verdict **out, const char *fmt, ...)
{
	const struct fg_verdict_row *row = fg_verdict_row(code);
	struct fg_verdict *v;
	va_list ap;

	if (!row || row->kind == FG_VK_VERIFICATION)
		return FG_EINTERNAL;
	if (FG_GROW(list->v, list->n + 1, list->cap))
		return FG_ENOMEM;
	v = &list->v[list->n];
	memset(v, 0, sizeof(*v));
	v->row = row;
	if (!(v->set = strdup(set ? set : "")))
		return FG_ENOMEM;
	list->n++;
	va_start(ap, fmt);
	vsnprintf(v->detail, sizeof(v->detail), fmt, ap);
	va_end(ap);
	if (out)
		*out = v;
	return 0;
}

void fg_verdict_runtime(struct fg_verdict *v, const char *runtime)
{
	for (size_t i = 0; i < v->n_runtimes; i++)
		if (strcmp(v->runtimes[i], runtime) == 0)
			return;
	if (v->n_runtimes < FG_VERDICT_MAX_RUNTIMES)
		v->runtimes[v->n_runtimes++] = runtime;
}

void fg_verdict_tensor(struct fg_verdict *v, const char *tensor)
{
	if (v->n_tensors < FG_VERDICT_MAX_LIST)
		v->tensors[v->n_tensors] = strdup(tensor);
	v->n_tensors++;
}

const struct fg_verdict *fg_verdicts_first_error(const struct fg_verdicts *list)
{
	for (size_t i = 0; i < list->n; i++)
		if (list->v[i].row->severity == FG_SEV_ERROR)
			return &list->v[i];
	return NULL;
}

bool fg_verdicts_has_error(const struct fg_verdicts *list)
{
	return fg_verdicts_first_error(list) != NULL;
}

const struct fg_verdict *fg_verdicts_find(const struct fg_verdicts *list, enum fg_verdict_code code)
{
	for (size_t i = 0; i < list->n; i++)
		if (list->v[i].row->code == code)
			return &list->v[i];
	return NULL;
}

void fg_verdicts_release(struct fg_verdicts *list)
{
	for (size_t i = 0; list && i < list->n; i++) {
		for (size_t k = 0; k < list->v[i].n_tensors && k < FG_VERDICT_MAX_LIST; k++)
			free(list->v[i].tensors[k]);
		free(list->v[i].set);
	}
	if (list) {
		free(list->v);
		memset(list, 0, sizeof(*list));
	}
}
