#ifndef LOCATIOND_CSQLITE_H
#define LOCATIOND_CSQLITE_H
/* SQLite 3 (Debian's libsqlite3-dev headers) for the track store, loaded with dlopen when the
 * store first opens rather than linked, like libgps and libxml2: a daemon started with
 * `track = off` (or without a state directory) never maps the library, and a machine without
 * libsqlite3-0 still runs locationd, with tracking history reported as unavailable instead of
 * the loader refusing to start the daemon. Only TrackStore's SQLite.swift imports this module.
 *
 * Every function below takes lengths as int and checks them here (negative lengths and NULL
 * buffers with a non-zero length are refused with SQLITE_MISUSE), so no caller hands SQLite a
 * length it has not seen checked. */
#include <sqlite3.h>

/* Loads libsqlite3 once (thread-safe). NULL when it is ready, otherwise why it is not. The calls
 * below need a successful load first. */
const char *locationd_sqlite_load(void);
/* The loaded library's version, e.g. "3.40.1"; "" before a successful load. */
const char *locationd_sqlite_version(void);

int locationd_sqlite_open(const char *path, int flags, sqlite3 **database);
int locationd_sqlite_close(sqlite3 *database);
/* sqlite3_exec without a callback: for statements that return no rows. */
int locationd_sqlite_exec(sqlite3 *database, const char *sql);
/* sqlite3_prepare_v2 of a NUL-terminated statement. */
int locationd_sqlite_prepare(sqlite3 *database, const char *sql, sqlite3_stmt **statement);
int locationd_sqlite_step(sqlite3_stmt *statement);
int locationd_sqlite_reset(sqlite3_stmt *statement);
int locationd_sqlite_finalize(sqlite3_stmt *statement);
int locationd_sqlite_clear_bindings(sqlite3_stmt *statement);
int locationd_sqlite_bind_double(sqlite3_stmt *statement, int index, double value);
int locationd_sqlite_bind_int64(sqlite3_stmt *statement, int index, sqlite3_int64 value);
int locationd_sqlite_bind_null(sqlite3_stmt *statement, int index);
/* Text and blobs are copied by SQLite (SQLITE_TRANSIENT), so the buffer need live only for the
 * call. `length` must be 0...buffer's size; a negative length is refused (SQLITE_MISUSE). */
int locationd_sqlite_bind_text(sqlite3_stmt *statement, int index, const char *text, int length);
int locationd_sqlite_bind_blob(sqlite3_stmt *statement, int index, const void *bytes, int length);
int locationd_sqlite_column_count(sqlite3_stmt *statement);
/* SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_TEXT, SQLITE_BLOB or SQLITE_NULL; SQLITE_NULL for an
 * index outside 0..<column_count. */
int locationd_sqlite_column_type(sqlite3_stmt *statement, int index);
double locationd_sqlite_column_double(sqlite3_stmt *statement, int index);
/* The column as a double, or NaN when it is NULL or out of range: one call per optional value. */
double locationd_sqlite_column_double_or_nan(sqlite3_stmt *statement, int index);
sqlite3_int64 locationd_sqlite_column_int64(sqlite3_stmt *statement, int index);
/* A column's bytes (text without its NUL, or blob) and their count; NULL with *length 0 for NULL,
 * empty or out-of-range columns. Valid until the next step, reset or finalize. */
const unsigned char *locationd_sqlite_column_bytes(sqlite3_stmt *statement, int index, int *length);
const char *locationd_sqlite_errmsg(sqlite3 *database);
const char *locationd_sqlite_errstr(int code);
int locationd_sqlite_extended_errcode(sqlite3 *database);
int locationd_sqlite_changes(sqlite3 *database);
sqlite3_int64 locationd_sqlite_last_insert_rowid(sqlite3 *database);
int locationd_sqlite_busy_timeout(sqlite3 *database, int milliseconds);
#endif
