/*
 * fault.c: the kill points of fault.h.
 */
#include "daemon/fault.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_int fault_hits;

void fg_fault_point(const char *point)
{
	const char *old = getenv("FORGED_FAULT_STAGE");
	const char *spec = getenv("FORGED_FAULT");
	char name[32];
	long n = 1;

	if (old && strcmp(old, point) == 0)
		raise(SIGKILL);
	if (!spec || !*spec)
		return;
	snprintf(name, sizeof(name), "%.*s", (int)strcspn(spec, ":"), spec);
	if (strcmp(name, point) != 0)
		return;
	if (spec[strlen(name)] == ':')
		n = strtol(spec + strlen(name) + 1, NULL, 10);
	if (atomic_fetch_add(&fault_hits, 1) + 1 >= n)
		raise(SIGKILL); /* crash tests: die mid-job, like a power cut */
}
