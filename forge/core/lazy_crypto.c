/*
 * lazy_crypto.c: the libcrypto (OpenSSL) functions forged calls, loaded
 * on first use (lazylib.h): SHA-256 of forges, caches and tokens.  An
 * inspection of a local folder never loads it.  A newly used libcrypto
 * function needs its line here (the link fails until it has one).
 */
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "forge/core/lazylib.h"

#include <string.h>

#ifndef FG_SONAME_CRYPTO
#define FG_SONAME_CRYPTO "libcrypto.so.3"
#endif

/* F and V as lazylib.h describes them; OPENSSL_cleanse is written out below (it must wipe either way). */
#define CRYPTO_FNS(F, V) \
	F(EVP_MD_CTX *, EVP_MD_CTX_new, (void), (), NULL) \
	V(EVP_MD_CTX_free, (EVP_MD_CTX *ctx), (ctx)) \
	F(const EVP_MD *, EVP_sha256, (void), (), NULL) \
	F(int, EVP_DigestInit_ex, (EVP_MD_CTX *ctx, const EVP_MD *type, ENGINE *impl), (ctx, type, impl), 0) \
	F(int, EVP_DigestUpdate, (EVP_MD_CTX *ctx, const void *d, size_t cnt), (ctx, d, cnt), 0) \
	F(int, EVP_DigestFinal_ex, (EVP_MD_CTX *ctx, unsigned char *md, unsigned int *s), (ctx, md, s), 0) \
	F(int, EVP_Digest, (const void *data, size_t count, unsigned char *md, unsigned int *size, \
			    const EVP_MD *type, ENGINE *impl), (data, count, md, size, type, impl), 0) \
	F(int, CRYPTO_memcmp, (const void *in_a, const void *in_b, size_t len), (in_a, in_b, len), 1) \
	F(const char *, OpenSSL_version, (int type), (type), "OpenSSL (not loaded)")

static const char *const names[] = { CRYPTO_FNS(FG_LAZY_NAME, FG_LAZY_NAME_V) "OPENSSL_cleanse" };
static struct {
	CRYPTO_FNS(FG_LAZY_SLOT, FG_LAZY_SLOT_V)
	void *OPENSSL_cleanse;
} lazy_slots;
_Static_assert(sizeof(lazy_slots) == sizeof(names) / sizeof(names[0]) * sizeof(void *), "one slot per name");
static struct fg_lazylib lazy_lib = FG_LAZYLIB_INIT(FG_SONAME_CRYPTO, "SHA-256", names, &lazy_slots);

CRYPTO_FNS(FG_LAZY_STUB, FG_LAZY_STUB_V)

void(OPENSSL_cleanse)(void *ptr, size_t len)
{
	if (fg_lazylib_load(&lazy_lib))
		((void (*)(void *, size_t))lazy_slots.OPENSSL_cleanse)(ptr, len);
	else
		explicit_bzero(ptr, len);
}
