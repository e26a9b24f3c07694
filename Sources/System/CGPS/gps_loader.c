/* Loading libgps on first use; see CGPS.h. */
#include "CGPS.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int loaded;
static char failure[512];
static int (*gps_open_f)(const char *, const char *, struct gps_data_t *);
static int (*gps_close_f)(struct gps_data_t *);
static int (*gps_read_f)(struct gps_data_t *, char *, int);
static bool (*gps_waiting_f)(const struct gps_data_t *, int);
static int (*gps_stream_f)(struct gps_data_t *, unsigned int, void *);
static const char *(*gps_errstr_f)(const int);

static void resolve(void) {
  void *handle = dlopen("libgps.so", RTLD_NOW | RTLD_LOCAL);
  char name[32];
  for (int version = 40; handle == NULL && version >= 20; version--) {
    snprintf(name, sizeof name, "libgps.so.%d", version);
    handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  }
  if (handle == NULL) {
    snprintf(failure, sizeof failure,
             "libgps is not installed (no libgps.so or libgps.so.N): install libgps-dev or the "
             "distribution's libgps package");
    return;
  }
  gps_open_f = (int (*)(const char *, const char *, struct gps_data_t *))dlsym(handle, "gps_open");
  gps_close_f = (int (*)(struct gps_data_t *))dlsym(handle, "gps_close");
  gps_read_f = (int (*)(struct gps_data_t *, char *, int))dlsym(handle, "gps_read");
  gps_waiting_f = (bool (*)(const struct gps_data_t *, int))dlsym(handle, "gps_waiting");
  gps_stream_f = (int (*)(struct gps_data_t *, unsigned int, void *))dlsym(handle, "gps_stream");
  gps_errstr_f = (const char *(*)(const int))dlsym(handle, "gps_errstr");
  if (!gps_open_f || !gps_close_f || !gps_read_f || !gps_waiting_f || !gps_stream_f || !gps_errstr_f) {
    snprintf(failure, sizeof failure, "the libgps found lacks gps_open, gps_read or gps_stream");
    return;
  }
  loaded = 1;
}

const char *locationd_gps_load(void) {
  pthread_once(&once, resolve);
  return loaded ? NULL : failure;
}

int locationd_gps_open(const char *host, const char *port, struct gps_data_t *data) {
  return gps_open_f(host, port, data);
}
int locationd_gps_close(struct gps_data_t *data) { return gps_close_f(data); }
int locationd_gps_read(struct gps_data_t *data) { return gps_read_f(data, NULL, 0); }

int locationd_gps_read_message(struct gps_data_t *data, char *message, int length) {
  if (message != NULL && length > 0) message[0] = '\0';
  return gps_read_f(data, message, length);
}
bool locationd_gps_waiting(const struct gps_data_t *data, int timeout) {
  return gps_waiting_f(data, timeout);
}
int locationd_gps_stream(struct gps_data_t *data, unsigned int flags, void *device) {
  return gps_stream_f(data, flags, device);
}
const char *locationd_gps_errstr(int code) { return loaded ? gps_errstr_f(code) : NULL; }
