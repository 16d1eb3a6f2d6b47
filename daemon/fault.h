/*
 * fault.h: the crash tests' kill points (tests only), read by the CLI's
 * forge and by the workers alike.
 *
 * FORGED_FAULT=POINT[:N] kills the process with SIGKILL the N-th time
 * (default 1) it reaches POINT: a forge stage ("plan", "sidecar", ...),
 * and in the workers "forged" (the forge returned, nothing stored) and
 * "stored" (the artifact and the job's success committed).
 * FORGED_FAULT_STAGE=STAGE is the older spelling of STAGE:1.  Unset, a
 * point costs two getenv calls.
 */
#ifndef FG_FAULT_H
#define FG_FAULT_H

void fg_fault_point(const char *point);

#endif
