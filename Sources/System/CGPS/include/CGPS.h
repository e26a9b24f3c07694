#ifndef LOCATIOND_CGPS_H
#define LOCATIOND_CGPS_H
/* libgps (gpsd's client library), loaded when the gpsd backend first starts rather than linked:
 * libgps brings libdbus, libsystemd, libgcrypt and five more libraries, about 1 MB of resident
 * memory in a daemon that may never talk to gpsd. The headers come from libgps-dev; the library
 * loaded is the one they belong to (libgps.so, the -dev package's link) or, without it, the
 * newest libgps.so.N installed. Only GPSDBackend imports this module. */
#include <gps.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#if GPSD_API_MAJOR_VERSION < 10
#error "locationd needs libgps API 10 or newer (gpsd 3.21+)"
#endif

/* Loads libgps once (thread-safe). NULL when it is ready, otherwise why it is not. The
 * locationd_gps_open ... _errstr calls below need a successful load first. */
const char *locationd_gps_load(void);

int locationd_gps_open(const char *host, const char *port, struct gps_data_t *data);
int locationd_gps_close(struct gps_data_t *data);
/* gps_read without a message buffer. */
int locationd_gps_read(struct gps_data_t *data);
/* gps_read that also copies the start of the JSON line read (at most length - 1 bytes and a NUL)
   into message: for objects libgps cannot parse, such as gpsd 3.22's DEVICE with "activated":0. */
int locationd_gps_read_message(struct gps_data_t *data, char *message, int length);
bool locationd_gps_waiting(const struct gps_data_t *data, int timeout);
int locationd_gps_stream(struct gps_data_t *data, unsigned int flags, void *device);
/* gpsd's text for an error code; NULL before a successful load. */
const char *locationd_gps_errstr(int code);

/* struct gps_data_t is about 24 KB: keep it on the heap. */
static inline struct gps_data_t *locationd_gps_alloc(void) {
  return (struct gps_data_t *)calloc(1, sizeof(struct gps_data_t));
}
static inline void locationd_gps_free(struct gps_data_t *data) { free(data); }

/* Accessors for what Swift cannot reach comfortably: fixed-size C arrays arrive as 140-tuples and
 * the anonymous union is not imported reliably. All return NULL or "" when out of range. */
static inline const struct satellite_t *locationd_gps_satellite(const struct gps_data_t *data, int index) {
  if (index < 0 || index >= MAXCHANNELS) return NULL;
  return &data->skyview[index];
}
static inline const char *locationd_gps_device_path(const struct gps_data_t *data) {
  /* libgps copies the path with strlcpy; one not terminated within its array is refused. */
  if (memchr(data->dev.path, '\0', sizeof data->dev.path) == NULL) return "";
  return data->dev.path;
}
static inline const struct gst_t *locationd_gps_gst(const struct gps_data_t *data) {
  return &data->gst;
}
static inline const char *locationd_gps_error_text(const struct gps_data_t *data) {
  return data->error;
}
#endif
