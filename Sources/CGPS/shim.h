#ifndef LOCATIOND_CGPS_SHIM_H
#define LOCATIOND_CGPS_SHIM_H
/* The only C seam of locationd: libgps (gpsd's client library, Debian libgps-dev). */
#include <gps.h>
#include <stdlib.h>

#if GPSD_API_MAJOR_VERSION < 10
#error "locationd needs libgps API 10 or newer (gpsd 3.21+)"
#endif

/* struct gps_data_t is about 24 KB: keep it on the heap. */
static inline struct gps_data_t *locationd_gps_alloc(void) {
  return (struct gps_data_t *)calloc(1, sizeof(struct gps_data_t));
}
static inline void locationd_gps_free(struct gps_data_t *data) { free(data); }

/* gps_send is variadic and does not import into Swift. */
static inline int locationd_gps_send_string(struct gps_data_t *data, const char *text) {
  return gps_send(data, "%s", text);
}
#endif
