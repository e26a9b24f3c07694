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
/* Accessors for what Swift cannot reach comfortably: fixed-size C arrays arrive as 140-tuples and
 * the anonymous union is not imported reliably. All return NULL or "" when out of range. */
static inline const struct satellite_t *locationd_gps_satellite(const struct gps_data_t *data, int index) {
  if (index < 0 || index >= MAXCHANNELS) return NULL;
  return &data->skyview[index];
}
static inline const char *locationd_gps_device_path(const struct gps_data_t *data) {
  return data->dev.path;
}
static inline const struct gst_t *locationd_gps_gst(const struct gps_data_t *data) {
  return &data->gst;
}
static inline const char *locationd_gps_error_text(const struct gps_data_t *data) {
  return data->error;
}
#endif
