/* Loading libsqlite3 on first use; see CSQLite.h. */
#include "CSQLite.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int loaded;
static char failure[512];

static int (*open_v2)(const char *, sqlite3 **, int, const char *);
static int (*close_v2)(sqlite3 *);
static int (*exec)(sqlite3 *, const char *, int (*)(void *, int, char **, char **), void *, char **);
static int (*prepare_v2)(sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
static int (*step)(sqlite3_stmt *);
static int (*reset)(sqlite3_stmt *);
static int (*finalize)(sqlite3_stmt *);
static int (*clear_bindings)(sqlite3_stmt *);
static int (*bind_double)(sqlite3_stmt *, int, double);
static int (*bind_int64)(sqlite3_stmt *, int, sqlite3_int64);
static int (*bind_null)(sqlite3_stmt *, int);
static int (*bind_text)(sqlite3_stmt *, int, const char *, int, void (*)(void *));
static int (*bind_blob)(sqlite3_stmt *, int, const void *, int, void (*)(void *));
static int (*column_count)(sqlite3_stmt *);
static int (*column_type)(sqlite3_stmt *, int);
static double (*column_double)(sqlite3_stmt *, int);
static sqlite3_int64 (*column_int64)(sqlite3_stmt *, int);
static const void *(*column_blob)(sqlite3_stmt *, int);
static const unsigned char *(*column_text)(sqlite3_stmt *, int);
static int (*column_bytes)(sqlite3_stmt *, int);
static const char *(*errmsg)(sqlite3 *);
static const char *(*errstr)(int);
static int (*extended_errcode)(sqlite3 *);
static int (*changes)(sqlite3 *);
static sqlite3_int64 (*last_insert_rowid)(sqlite3 *);
static int (*busy_timeout)(sqlite3 *, int);
static const char *(*libversion)(void);

#define RESOLVE(slot, name) (*(void **)(&(slot)) = dlsym(handle, name), (slot) != NULL)

static void resolve(void) {
  void *handle = dlopen("libsqlite3.so.0", RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    snprintf(failure, sizeof failure, "libsqlite3 is not installed (%s): install libsqlite3-0 to keep a track",
             dlerror());
    return;
  }
  int ok = RESOLVE(open_v2, "sqlite3_open_v2") & RESOLVE(close_v2, "sqlite3_close_v2") &
           RESOLVE(exec, "sqlite3_exec") & RESOLVE(prepare_v2, "sqlite3_prepare_v2") &
           RESOLVE(step, "sqlite3_step") & RESOLVE(reset, "sqlite3_reset") &
           RESOLVE(finalize, "sqlite3_finalize") & RESOLVE(clear_bindings, "sqlite3_clear_bindings") &
           RESOLVE(bind_double, "sqlite3_bind_double") & RESOLVE(bind_int64, "sqlite3_bind_int64") &
           RESOLVE(bind_null, "sqlite3_bind_null") & RESOLVE(bind_text, "sqlite3_bind_text") &
           RESOLVE(bind_blob, "sqlite3_bind_blob") & RESOLVE(column_count, "sqlite3_column_count") &
           RESOLVE(column_type, "sqlite3_column_type") & RESOLVE(column_double, "sqlite3_column_double") &
           RESOLVE(column_int64, "sqlite3_column_int64") & RESOLVE(column_blob, "sqlite3_column_blob") &
           RESOLVE(column_text, "sqlite3_column_text") & RESOLVE(column_bytes, "sqlite3_column_bytes") &
           RESOLVE(errmsg, "sqlite3_errmsg") & RESOLVE(errstr, "sqlite3_errstr") &
           RESOLVE(extended_errcode, "sqlite3_extended_errcode") & RESOLVE(changes, "sqlite3_changes") &
           RESOLVE(last_insert_rowid, "sqlite3_last_insert_rowid") &
           RESOLVE(busy_timeout, "sqlite3_busy_timeout") & RESOLVE(libversion, "sqlite3_libversion");
  if (!ok) {
    snprintf(failure, sizeof failure, "libsqlite3.so.0 lacks a function locationd uses");
    return;
  }
  loaded = 1;
}

const char *locationd_sqlite_load(void) {
  pthread_once(&once, resolve);
  return loaded ? NULL : failure;
}
const char *locationd_sqlite_version(void) { return loaded ? libversion() : ""; }

int locationd_sqlite_open(const char *path, int flags, sqlite3 **database) {
  if (path == NULL || database == NULL) return SQLITE_MISUSE;
  return open_v2(path, database, flags, NULL);
}
int locationd_sqlite_close(sqlite3 *database) { return close_v2(database); }
int locationd_sqlite_exec(sqlite3 *database, const char *sql) {
  if (sql == NULL) return SQLITE_MISUSE;
  return exec(database, sql, NULL, NULL, NULL);
}
int locationd_sqlite_prepare(sqlite3 *database, const char *sql, sqlite3_stmt **statement) {
  if (sql == NULL || statement == NULL) return SQLITE_MISUSE;
  return prepare_v2(database, sql, -1, statement, NULL);
}
int locationd_sqlite_step(sqlite3_stmt *statement) { return step(statement); }
int locationd_sqlite_reset(sqlite3_stmt *statement) { return reset(statement); }
int locationd_sqlite_finalize(sqlite3_stmt *statement) { return finalize(statement); }
int locationd_sqlite_clear_bindings(sqlite3_stmt *statement) { return clear_bindings(statement); }
int locationd_sqlite_bind_double(sqlite3_stmt *statement, int index, double value) {
  return bind_double(statement, index, value);
}
int locationd_sqlite_bind_int64(sqlite3_stmt *statement, int index, sqlite3_int64 value) {
  return bind_int64(statement, index, value);
}
int locationd_sqlite_bind_null(sqlite3_stmt *statement, int index) { return bind_null(statement, index); }
int locationd_sqlite_bind_text(sqlite3_stmt *statement, int index, const char *text, int length) {
  if (length < 0 || (text == NULL && length != 0)) return SQLITE_MISUSE;
  return bind_text(statement, index, text == NULL ? "" : text, length, SQLITE_TRANSIENT);
}
int locationd_sqlite_bind_blob(sqlite3_stmt *statement, int index, const void *bytes, int length) {
  if (length < 0 || (bytes == NULL && length != 0)) return SQLITE_MISUSE;
  /* A zero-length blob with a NULL pointer would be stored as NULL: give it an address. */
  static const unsigned char empty = 0;
  return bind_blob(statement, index, bytes == NULL ? &empty : bytes, length, SQLITE_TRANSIENT);
}
int locationd_sqlite_column_count(sqlite3_stmt *statement) { return column_count(statement); }
int locationd_sqlite_column_type(sqlite3_stmt *statement, int index) {
  if (index < 0 || index >= column_count(statement)) return SQLITE_NULL;
  return column_type(statement, index);
}
double locationd_sqlite_column_double(sqlite3_stmt *statement, int index) {
  if (index < 0 || index >= column_count(statement)) return 0;
  return column_double(statement, index);
}
double locationd_sqlite_column_double_or_nan(sqlite3_stmt *statement, int index) {
  if (index < 0 || index >= column_count(statement) || column_type(statement, index) == SQLITE_NULL) return NAN;
  return column_double(statement, index);
}
sqlite3_int64 locationd_sqlite_column_int64(sqlite3_stmt *statement, int index) {
  if (index < 0 || index >= column_count(statement)) return 0;
  return column_int64(statement, index);
}
const unsigned char *locationd_sqlite_column_bytes(sqlite3_stmt *statement, int index, int *length) {
  if (length == NULL) return NULL;
  *length = 0;
  if (index < 0 || index >= column_count(statement)) return NULL;
  int type = column_type(statement, index);
  const unsigned char *bytes;
  if (type == SQLITE_NULL) return NULL;
  /* Ask for the pointer first, then the count: sqlite3_column_bytes after the conversion. */
  bytes = type == SQLITE_BLOB ? (const unsigned char *)column_blob(statement, index) : column_text(statement, index);
  int count = column_bytes(statement, index);
  if (bytes == NULL || count <= 0) return NULL;
  *length = count;
  return bytes;
}
const char *locationd_sqlite_errmsg(sqlite3 *database) { return errmsg(database); }
const char *locationd_sqlite_errstr(int code) { return loaded ? errstr(code) : "libsqlite3 not loaded"; }
int locationd_sqlite_extended_errcode(sqlite3 *database) { return extended_errcode(database); }
int locationd_sqlite_changes(sqlite3 *database) { return changes(database); }
sqlite3_int64 locationd_sqlite_last_insert_rowid(sqlite3 *database) { return last_insert_rowid(database); }
int locationd_sqlite_busy_timeout(sqlite3 *database, int milliseconds) {
  return busy_timeout(database, milliseconds);
}
