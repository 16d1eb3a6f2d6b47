/*
 * version.h: forged's version, for every layer that names it (the CLI's
 * --version, provenance, the User-Agent of remote reads).
 */
#ifndef FG_VERSION_H
#define FG_VERSION_H

#define FG_VERSION "0.1.0"

#endif
