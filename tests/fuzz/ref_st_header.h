/* ref_st_header.h: the reference reader of ref_st_header.c (fuzzing only). */
#ifndef REF_ST_HEADER_H
#define REF_ST_HEADER_H

#include "forge/format/safetensors.h"

/* fg_st_parse as the tree-based reader did it; the file is released with fg_st_close. */
int ref_st_parse(struct fg_st_file **out, const uint8_t *buf, size_t len, const char *label, struct fg_err *err);

#endif
