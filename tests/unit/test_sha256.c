/*
 * test_sha256.c: forge/core/sha256 against the NIST FIPS 180 example
 * vectors ("abc", the empty string, the 448-bit message, a million 'a'),
 * through each entry point: a buffer, a running hash fed in pieces, and a
 * file read in chunks (one larger than the 1 MiB read chunk too).
 *
 * The running hash is finished with support.c's sha256_finish, the one call
 * of fg_sha256_final_hex, so a change of who frees the hash is one line.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forge/core/sha256.h"
#include "tests/unit/support.h"

#define ABC_HEX   "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#define EMPTY_HEX "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define M448      "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
#define M448_HEX  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
#define MILLION_A_HEX "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"

static char tmp[PATH_MAX];

static int setup(void **state)
{
	(void)state;
	tmpdir_new(tmp, sizeof(tmp), "sha256");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return rm_tree(tmp);
}

/* The running hash of data fed in pieces of step bytes (the last one shorter). */
static void stream_hex(const void *data, size_t len, size_t step, char hex[FG_SHA256_HEX])
{
	struct fg_sha256 *h = fg_sha256_new();
	const unsigned char *p = data;

	assert_non_null(h);
	for (size_t off = 0; off < len; off += step)
		fg_sha256_update(h, p + off, len - off < step ? len - off : step);
	sha256_finish(h, hex);
}

static void test_nist_buffers(void **state)
{
	char hex[FG_SHA256_HEX];

	(void)state;
	fg_sha256_buf("abc", 3, hex);
	assert_string_equal(hex, ABC_HEX);
	fg_sha256_buf("", 0, hex);
	assert_string_equal(hex, EMPTY_HEX);
	assert_int_equal(strlen(M448), 56); /* 448 bits */
	fg_sha256_buf(M448, 56, hex);
	assert_string_equal(hex, M448_HEX);
	assert_int_equal(strlen(hex), FG_SHA256_HEX - 1);
}

static void test_nist_streamed(void **state)
{
	char hex[FG_SHA256_HEX];
	char *million = malloc(1000000);
	struct fg_sha256 *h;

	(void)state;
	/* Byte by byte, in uneven pieces, and in one piece: the same digest. */
	stream_hex(M448, 56, 1, hex);
	assert_string_equal(hex, M448_HEX);
	stream_hex(M448, 56, 7, hex);
	assert_string_equal(hex, M448_HEX);
	stream_hex("abc", 3, 3, hex);
	assert_string_equal(hex, ABC_HEX);
	/* Nothing fed at all. */
	h = fg_sha256_new();
	assert_non_null(h);
	sha256_finish(h, hex);
	assert_string_equal(hex, EMPTY_HEX);
	/* A million 'a' (FIPS 180-2 appendix B.3), in pieces of 4096. */
	assert_non_null(million);
	memset(million, 'a', 1000000);
	stream_hex(million, 1000000, 4096, hex);
	assert_string_equal(hex, MILLION_A_HEX);
	free(million);
	fg_sha256_free(NULL);
}

static void write_bytes(const char *path, const void *data, size_t len)
{
	FILE *fp = fopen(path, "wb");

	assert_non_null(fp);
	assert_int_equal(fwrite(data, 1, len, fp), len);
	assert_int_equal(fclose(fp), 0);
}

static void test_files(void **state)
{
	char path[PATH_MAX + 16], hex[FG_SHA256_HEX], want[FG_SHA256_HEX];
	struct fg_err err = { 0 };
	/* Past the 1 MiB read chunk by a few bytes: two full reads and a short one. */
	size_t big_len = (2u << 20) + 5;
	unsigned char *big = malloc(big_len);

	(void)state;
	path_join(path, sizeof(path), tmp, "abc");
	write_bytes(path, "abc", 3);
	assert_int_equal(fg_sha256_file(path, hex, &err), 0);
	assert_string_equal(hex, ABC_HEX);
	path_join(path, sizeof(path), tmp, "empty");
	write_bytes(path, "", 0);
	assert_int_equal(fg_sha256_file(path, hex, &err), 0);
	assert_string_equal(hex, EMPTY_HEX);
	path_join(path, sizeof(path), tmp, "m448");
	write_bytes(path, M448, 56);
	assert_int_equal(fg_sha256_file(path, hex, &err), 0);
	assert_string_equal(hex, M448_HEX);

	assert_non_null(big);
	for (size_t i = 0; i < big_len; i++)
		big[i] = (unsigned char)(i * 7 + (i >> 13));
	path_join(path, sizeof(path), tmp, "big");
	write_bytes(path, big, big_len);
	fg_sha256_buf(big, big_len, want);
	assert_int_equal(fg_sha256_file(path, hex, &err), 0);
	assert_string_equal(hex, want);
	free(big);

	path_join(path, sizeof(path), tmp, "missing");
	assert_int_equal(fg_sha256_file(path, hex, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "missing: cannot open to hash"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nist_buffers),
		cmocka_unit_test(test_nist_streamed),
		cmocka_unit_test(test_files),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
