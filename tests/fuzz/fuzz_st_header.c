/*
 * fuzz_st_header.c: libFuzzer target for the safetensors header parser.
 *
 * Feeds arbitrary bytes to fg_st_parse as a whole file and, when they parse,
 * walks every tensor the way `forged tensors` does (lookup by name, statistics
 * of float tensors) so that a header the parser accepts can never lead a later
 * stage to read outside the buffer.  Built and run by `make fuzz` with
 * ASan+UBSan.
 */
#include <stddef.h>
#include <stdint.h>

#include "forge/format/safetensors.h"
#include "forge/model/stats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fg_st_file *f = NULL;
	struct fg_err err = { 0 };

	if (fg_st_parse(&f, data, size, "fuzz", &err) != 0)
		return 0;
	for (size_t i = 0; i < f->n_tensors; i++) {
		const struct fg_tensor *t = &f->tensors[i];
		struct fg_tstats s;

		if (fg_st_find(f, t->name) != t)
			__builtin_trap();
		if (fg_tensor_end(t) > f->file_size - f->data_start)
			__builtin_trap();
		fg_tstats_compute(t, &s);
	}
	fg_st_close(f);
	return 0;
}
