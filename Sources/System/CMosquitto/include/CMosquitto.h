#ifndef LOCATIOND_CMOSQUITTO_H
#define LOCATIOND_CMOSQUITTO_H
/* libmosquitto (the Mosquitto project's MQTT client library), loaded when the MQTT front-end
 * first starts rather than linked, like libgps and libxml2: libmosquitto brings OpenSSL
 * (libssl, libcrypto), about 1.5 MB of resident memory in a daemon that mostly runs without
 * --mqtt. The header comes from libmosquitto-dev; the library loaded is libmosquitto.so (the
 * -dev package's link) or libmosquitto.so.1. Only MQTTFrontEnd's MQTTSession imports this module.
 *
 * Every call below runs on one thread per client (the session's own): libmosquitto is not
 * thread-safe per client. Callbacks from libmosquitto arrive on that thread, inside
 * locationd_mqtt_loop and locationd_mqtt_connect, as one locationd_mqtt_event each. */
#include <mosquitto.h>
#include <stdbool.h>

#if LIBMOSQUITTO_MAJOR < 1 || (LIBMOSQUITTO_MAJOR == 1 && LIBMOSQUITTO_MINOR < 6)
#error "locationd needs libmosquitto 1.6 or newer"
#endif

enum locationd_mqtt_event_kind {
  LOCATIOND_MQTT_CONNECTED = 1,    /* code: the CONNACK return code (0 accepted) */
  LOCATIOND_MQTT_DISCONNECTED = 2, /* code: 0 after our own disconnect, otherwise unexpected */
  LOCATIOND_MQTT_PUBLISHED = 3,    /* mid: the message the broker acknowledged (QoS 1) or sent (QoS 0) */
  LOCATIOND_MQTT_MESSAGE = 4,      /* topic, payload, payload_length: a message on a subscription */
};

/* One event. topic and payload are valid only during the handler call; payload_length >= 0 bytes
 * at payload (NULL when 0). */
struct locationd_mqtt_event {
  int kind;
  int code;
  int mid;
  const char *topic;
  const void *payload;
  int payload_length;
};

typedef void (*locationd_mqtt_handler)(void *context, const struct locationd_mqtt_event *event);

/* Loads libmosquitto once and calls mosquitto_lib_init (thread-safe). NULL when it is ready,
 * otherwise why it is not. Every call below needs a successful load first. */
const char *locationd_mqtt_load(void);

/* A client speaking MQTT 3.1.1 with a clean session; events go to handler(context, ...). NULL
 * when out of memory or the id is invalid. Free with locationd_mqtt_destroy. */
struct locationd_mqtt_client *locationd_mqtt_new(const char *client_id, void *context, locationd_mqtt_handler handler);
void locationd_mqtt_destroy(struct locationd_mqtt_client *client);

/* Thin wrappers; each returns a MOSQ_ERR_* code (MOSQ_ERR_SUCCESS 0). payload_length is checked
 * to be 0...268435455 (MQTT's limit) before libmosquitto sees it. */
int locationd_mqtt_will_set(struct locationd_mqtt_client *client, const char *topic, const void *payload,
                            int payload_length, int qos, bool retain);
int locationd_mqtt_credentials(struct locationd_mqtt_client *client, const char *user, const char *password);
int locationd_mqtt_tls(struct locationd_mqtt_client *client, const char *ca_file);
int locationd_mqtt_connect(struct locationd_mqtt_client *client, const char *host, int port, int keepalive);
int locationd_mqtt_loop(struct locationd_mqtt_client *client, int timeout_ms);
int locationd_mqtt_publish(struct locationd_mqtt_client *client, int *mid, const char *topic, const void *payload,
                           int payload_length, int qos, bool retain);
int locationd_mqtt_subscribe(struct locationd_mqtt_client *client, const char *pattern, int qos);
int locationd_mqtt_disconnect(struct locationd_mqtt_client *client);

/* libmosquitto's texts for a MOSQ_ERR_* code and a CONNACK code; never NULL. */
const char *locationd_mqtt_strerror(int code);
const char *locationd_mqtt_connack_string(int code);
#endif
