/*
 * lazy_pq.c: the libpq functions forged calls, loaded on first use
 * (forge/core/lazylib.h): a SQLite store, and every command that opens no
 * store (a local inspection), never load libpq and the libraries it pulls
 * in (OpenSSL, Kerberos, LDAP).  Each stub has libpq-fe.h's prototype and
 * forwards to libpq's own function; a newly used libpq function needs its
 * line here (the link fails until it has one).  Without libpq every call
 * fails the way libpq reports a failure (NULL, CONNECTION_BAD,
 * PGRES_FATAL_ERROR), so a postgres:// store is refused with the reason,
 * printed once by lazylib.
 */
#include <libpq-fe.h>

#include "forge/core/lazylib.h"

#ifndef FG_SONAME_PQ
#define FG_SONAME_PQ "libpq.so.5"
#endif

/* F and V as lazylib.h describes them. */
#define PQ_FNS(F, V) \
	F(PGconn *, PQconnectdb, (const char *conninfo), (conninfo), NULL) \
	F(PGconn *, PQconnectdbParams, (const char *const *keywords, const char *const *values, int expand_dbname), \
	  (keywords, values, expand_dbname), NULL) \
	V(PQfinish, (PGconn *conn), (conn)) \
	V(PQreset, (PGconn *conn), (conn)) \
	F(ConnStatusType, PQstatus, (const PGconn *conn), (conn), CONNECTION_BAD) \
	F(PGTransactionStatusType, PQtransactionStatus, (const PGconn *conn), (conn), PQTRANS_UNKNOWN) \
	F(char *, PQerrorMessage, (const PGconn *conn), (conn), (char *)"libpq could not be loaded\n") \
	F(int, PQsocket, (const PGconn *conn), (conn), -1) \
	F(PQnoticeProcessor, PQsetNoticeProcessor, (PGconn *conn, PQnoticeProcessor proc, void *arg), \
	  (conn, proc, arg), NULL) \
	F(PGresult *, PQexec, (PGconn *conn, const char *query), (conn, query), NULL) \
	F(PGresult *, PQprepare, (PGconn *conn, const char *stmtName, const char *query, int nParams, \
				  const Oid *paramTypes), (conn, stmtName, query, nParams, paramTypes), NULL) \
	F(PGresult *, PQexecPrepared, (PGconn *conn, const char *stmtName, int nParams, \
				       const char *const *paramValues, const int *paramLengths, \
				       const int *paramFormats, int resultFormat), \
	  (conn, stmtName, nParams, paramValues, paramLengths, paramFormats, resultFormat), NULL) \
	F(ExecStatusType, PQresultStatus, (const PGresult *res), (res), PGRES_FATAL_ERROR) \
	F(char *, PQresultErrorMessage, (const PGresult *res), (res), (char *)"libpq could not be loaded\n") \
	F(char *, PQresultErrorField, (const PGresult *res, int fieldcode), (res, fieldcode), NULL) \
	F(int, PQntuples, (const PGresult *res), (res), 0) \
	F(char *, PQgetvalue, (const PGresult *res, int tup_num, int field_num), (res, tup_num, field_num), \
	  (char *)"") \
	F(int, PQgetisnull, (const PGresult *res, int tup_num, int field_num), (res, tup_num, field_num), 1) \
	F(int, PQgetlength, (const PGresult *res, int tup_num, int field_num), (res, tup_num, field_num), 0) \
	F(char *, PQcmdStatus, (PGresult *res), (res), (char *)"") \
	F(char *, PQcmdTuples, (PGresult *res), (res), (char *)"") \
	V(PQclear, (PGresult *res), (res)) \
	F(int, PQconsumeInput, (PGconn *conn), (conn), 0) \
	F(PGnotify *, PQnotifies, (PGconn *conn), (conn), NULL) \
	V(PQfreemem, (void *ptr), (ptr))

static const char *const names[] = { PQ_FNS(FG_LAZY_NAME, FG_LAZY_NAME_V) };
static struct {
	PQ_FNS(FG_LAZY_SLOT, FG_LAZY_SLOT_V)
} lazy_slots;
_Static_assert(sizeof(lazy_slots) == sizeof(names) / sizeof(names[0]) * sizeof(void *), "one slot per name");
static struct fg_lazylib lazy_lib = FG_LAZYLIB_INIT(FG_SONAME_PQ, "PostgreSQL stores (postgres://)", names, &lazy_slots);

PQ_FNS(FG_LAZY_STUB, FG_LAZY_STUB_V)
