/*
 * lazy_mhd.c: the libmicrohttpd functions `forged serve` calls, loaded on
 * first use (forge/core/lazylib.h), so that no other command loads it and
 * the GnuTLS it links.  A newly used MHD function needs its line here (the
 * link fails until it has one).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "forge/core/lazylib.h"

#ifndef FG_SONAME_MHD
#define FG_SONAME_MHD "libmicrohttpd.so.12"
#endif

/* F and V as lazylib.h describes them; the variadic functions are written out below. */
#define MHD_FNS(F, V) \
	F(const char *, MHD_get_version, (void), (), "libmicrohttpd (not loaded)") \
	V(MHD_stop_daemon, (struct MHD_Daemon *daemon), (daemon)) \
	F(struct MHD_Response *, MHD_create_response_from_buffer, \
	  (size_t size, void *buffer, enum MHD_ResponseMemoryMode mode), (size, buffer, mode), NULL) \
	F(struct MHD_Response *, MHD_create_response_from_buffer_with_free_callback_cls, \
	  (size_t size, void *buffer, MHD_ContentReaderFreeCallback crfc, void *crfc_cls), \
	  (size, buffer, crfc, crfc_cls), NULL) \
	V(MHD_destroy_response, (struct MHD_Response *response), (response)) \
	F(enum MHD_Result, MHD_add_response_header, \
	  (struct MHD_Response *response, const char *header, const char *content), (response, header, content), \
	  MHD_NO) \
	F(enum MHD_Result, MHD_queue_response, \
	  (struct MHD_Connection *connection, unsigned int status_code, struct MHD_Response *response), \
	  (connection, status_code, response), MHD_NO) \
	F(const char *, MHD_lookup_connection_value, \
	  (struct MHD_Connection *connection, enum MHD_ValueKind kind, const char *key), (connection, kind, key), NULL) \
	V(MHD_suspend_connection, (struct MHD_Connection *connection), (connection)) \
	V(MHD_resume_connection, (struct MHD_Connection *connection), (connection))

static const char *const names[] = { MHD_FNS(FG_LAZY_NAME, FG_LAZY_NAME_V) "MHD_start_daemon_va",
				     "MHD_get_connection_info", "MHD_get_daemon_info" };
static struct {
	MHD_FNS(FG_LAZY_SLOT, FG_LAZY_SLOT_V)
	void *MHD_start_daemon_va, *MHD_get_connection_info, *MHD_get_daemon_info;
} lazy_slots;
_Static_assert(sizeof(lazy_slots) == sizeof(names) / sizeof(names[0]) * sizeof(void *), "one slot per name");
static struct fg_lazylib lazy_lib = FG_LAZYLIB_INIT(FG_SONAME_MHD, "forged serve", names, &lazy_slots);

MHD_FNS(FG_LAZY_STUB, FG_LAZY_STUB_V)

/* The options list is handed on whole (MHD_start_daemon_va is MHD's own entry for that). */
struct MHD_Daemon *(MHD_start_daemon)(unsigned int flags, uint16_t port, MHD_AcceptPolicyCallback apc,
				      void *apc_cls, MHD_AccessHandlerCallback dh, void *dh_cls, ...)
{
	struct MHD_Daemon *(*fn)(unsigned int, uint16_t, MHD_AcceptPolicyCallback, void *,
				 MHD_AccessHandlerCallback, void *, va_list);
	struct MHD_Daemon *d;
	va_list ap;

	if (!fg_lazylib_load(&lazy_lib))
		return NULL;
	fn = (struct MHD_Daemon *(*)(unsigned int, uint16_t, MHD_AcceptPolicyCallback, void *,
				     MHD_AccessHandlerCallback, void *, va_list))lazy_slots.MHD_start_daemon_va;
	va_start(ap, dh_cls);
	d = fn(flags, port, apc, apc_cls, dh, dh_cls, ap);
	va_end(ap);
	return d;
}

/*
 * The two info calls take no argument after the info type in the MHD
 * versions forged supports (the "..." is reserved), so none is passed on.
 */
const union MHD_ConnectionInfo *(MHD_get_connection_info)(struct MHD_Connection *connection,
							  enum MHD_ConnectionInfoType info_type, ...)
{
	if (!fg_lazylib_load(&lazy_lib))
		return NULL;
	return ((const union MHD_ConnectionInfo *(*)(struct MHD_Connection *, enum MHD_ConnectionInfoType, ...))
			lazy_slots.MHD_get_connection_info)(connection, info_type);
}

const union MHD_DaemonInfo *(MHD_get_daemon_info)(struct MHD_Daemon *daemon, enum MHD_DaemonInfoType info_type, ...)
{
	if (!fg_lazylib_load(&lazy_lib))
		return NULL;
	return ((const union MHD_DaemonInfo *(*)(struct MHD_Daemon *, enum MHD_DaemonInfoType, ...))
			lazy_slots.MHD_get_daemon_info)(daemon, info_type);
}
