/* Loading libmosquitto on first use; see CMosquitto.h. */
#include "CMosquitto.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int loaded;
static char failure[512];

static int (*lib_init_f)(void);
static struct mosquitto *(*new_f)(const char *, bool, void *);
static void (*destroy_f)(struct mosquitto *);
static int (*will_set_f)(struct mosquitto *, const char *, int, const void *, int, bool);
static int (*username_pw_set_f)(struct mosquitto *, const char *, const char *);
static int (*tls_set_f)(struct mosquitto *, const char *, const char *, const char *, const char *,
                        int (*)(char *, int, int, void *));
static int (*connect_f)(struct mosquitto *, const char *, int, int);
static int (*loop_f)(struct mosquitto *, int, int);
static int (*publish_f)(struct mosquitto *, int *, const char *, int, const void *, int, bool);
static int (*subscribe_f)(struct mosquitto *, int *, const char *, int);
static int (*disconnect_f)(struct mosquitto *);
static const char *(*strerror_f)(int);
static const char *(*connack_string_f)(int);
static int (*int_option_f)(struct mosquitto *, enum mosq_opt_t, int);
static void (*connect_callback_set_f)(struct mosquitto *, void (*)(struct mosquitto *, void *, int));
static void (*disconnect_callback_set_f)(struct mosquitto *, void (*)(struct mosquitto *, void *, int));
static void (*publish_callback_set_f)(struct mosquitto *, void (*)(struct mosquitto *, void *, int));
static void (*message_callback_set_f)(struct mosquitto *, void (*)(struct mosquitto *, void *,
                                                                  const struct mosquitto_message *));

struct locationd_mqtt_client {
  struct mosquitto *mosq;
  void *context;
  locationd_mqtt_handler handler;
};

#define RESOLVE(name, symbol) \
  *(void **)(&name) = dlsym(handle, symbol); \
  if (name == NULL) { \
    snprintf(failure, sizeof failure, "the libmosquitto found lacks %s: install libmosquitto1 1.6 or newer", symbol); \
    return; \
  }

static void resolve(void) {
  void *handle = dlopen("libmosquitto.so", RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) handle = dlopen("libmosquitto.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    snprintf(failure, sizeof failure,
             "libmosquitto is not installed (no libmosquitto.so or libmosquitto.so.1): install "
             "libmosquitto-dev or the distribution's libmosquitto1 package");
    return;
  }
  RESOLVE(lib_init_f, "mosquitto_lib_init");
  RESOLVE(new_f, "mosquitto_new");
  RESOLVE(destroy_f, "mosquitto_destroy");
  RESOLVE(will_set_f, "mosquitto_will_set");
  RESOLVE(username_pw_set_f, "mosquitto_username_pw_set");
  RESOLVE(tls_set_f, "mosquitto_tls_set");
  RESOLVE(connect_f, "mosquitto_connect");
  RESOLVE(loop_f, "mosquitto_loop");
  RESOLVE(publish_f, "mosquitto_publish");
  RESOLVE(subscribe_f, "mosquitto_subscribe");
  RESOLVE(disconnect_f, "mosquitto_disconnect");
  RESOLVE(strerror_f, "mosquitto_strerror");
  RESOLVE(connack_string_f, "mosquitto_connack_string");
  RESOLVE(int_option_f, "mosquitto_int_option");
  RESOLVE(connect_callback_set_f, "mosquitto_connect_callback_set");
  RESOLVE(disconnect_callback_set_f, "mosquitto_disconnect_callback_set");
  RESOLVE(publish_callback_set_f, "mosquitto_publish_callback_set");
  RESOLVE(message_callback_set_f, "mosquitto_message_callback_set");
  if (lib_init_f() != MOSQ_ERR_SUCCESS) {
    snprintf(failure, sizeof failure, "mosquitto_lib_init failed");
    return;
  }
  loaded = 1;
}

const char *locationd_mqtt_load(void) {
  pthread_once(&once, resolve);
  return loaded ? NULL : failure;
}

static void emit(void *obj, int kind, int code, int mid, const char *topic, const void *payload, int length) {
  struct locationd_mqtt_client *client = obj;
  if (client == NULL || client->handler == NULL) return;
  struct locationd_mqtt_event event = {kind, code, mid, topic, length > 0 ? payload : NULL, length > 0 ? length : 0};
  client->handler(client->context, &event);
}

static void on_connect(struct mosquitto *mosq, void *obj, int rc) {
  (void)mosq;
  emit(obj, LOCATIOND_MQTT_CONNECTED, rc, 0, NULL, NULL, 0);
}
static void on_disconnect(struct mosquitto *mosq, void *obj, int rc) {
  (void)mosq;
  emit(obj, LOCATIOND_MQTT_DISCONNECTED, rc, 0, NULL, NULL, 0);
}
static void on_publish(struct mosquitto *mosq, void *obj, int mid) {
  (void)mosq;
  emit(obj, LOCATIOND_MQTT_PUBLISHED, 0, mid, NULL, NULL, 0);
}
static void on_message(struct mosquitto *mosq, void *obj, const struct mosquitto_message *message) {
  (void)mosq;
  if (message == NULL || message->topic == NULL || message->payloadlen < 0) return;
  emit(obj, LOCATIOND_MQTT_MESSAGE, 0, message->mid, message->topic, message->payload, message->payloadlen);
}

struct locationd_mqtt_client *locationd_mqtt_new(const char *client_id, void *context, locationd_mqtt_handler handler) {
  if (!loaded) return NULL;
  struct locationd_mqtt_client *client = calloc(1, sizeof *client);
  if (client == NULL) return NULL;
  client->context = context;
  client->handler = handler;
  client->mosq = new_f(client_id, true, client);
  if (client->mosq == NULL) {
    free(client);
    return NULL;
  }
  int_option_f(client->mosq, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V311);
  connect_callback_set_f(client->mosq, on_connect);
  disconnect_callback_set_f(client->mosq, on_disconnect);
  publish_callback_set_f(client->mosq, on_publish);
  message_callback_set_f(client->mosq, on_message);
  return client;
}

void locationd_mqtt_destroy(struct locationd_mqtt_client *client) {
  if (client == NULL) return;
  destroy_f(client->mosq);
  free(client);
}

static int valid_length(int length) { return length >= 0 && length <= 268435455; }

int locationd_mqtt_will_set(struct locationd_mqtt_client *client, const char *topic, const void *payload,
                            int payload_length, int qos, bool retain) {
  if (client == NULL || topic == NULL || !valid_length(payload_length) || (payload_length > 0 && payload == NULL))
    return MOSQ_ERR_INVAL;
  return will_set_f(client->mosq, topic, payload_length, payload, qos, retain);
}
int locationd_mqtt_credentials(struct locationd_mqtt_client *client, const char *user, const char *password) {
  if (client == NULL) return MOSQ_ERR_INVAL;
  return username_pw_set_f(client->mosq, user, password);
}
int locationd_mqtt_tls(struct locationd_mqtt_client *client, const char *ca_file) {
  if (client == NULL || ca_file == NULL) return MOSQ_ERR_INVAL;
  return tls_set_f(client->mosq, ca_file, NULL, NULL, NULL, NULL);
}
int locationd_mqtt_connect(struct locationd_mqtt_client *client, const char *host, int port, int keepalive) {
  if (client == NULL || host == NULL) return MOSQ_ERR_INVAL;
  return connect_f(client->mosq, host, port, keepalive);
}
int locationd_mqtt_loop(struct locationd_mqtt_client *client, int timeout_ms) {
  if (client == NULL) return MOSQ_ERR_INVAL;
  return loop_f(client->mosq, timeout_ms, 1);
}
int locationd_mqtt_publish(struct locationd_mqtt_client *client, int *mid, const char *topic, const void *payload,
                           int payload_length, int qos, bool retain) {
  if (client == NULL || topic == NULL || !valid_length(payload_length) || (payload_length > 0 && payload == NULL))
    return MOSQ_ERR_INVAL;
  return publish_f(client->mosq, mid, topic, payload_length, payload, qos, retain);
}
int locationd_mqtt_subscribe(struct locationd_mqtt_client *client, const char *pattern, int qos) {
  if (client == NULL || pattern == NULL) return MOSQ_ERR_INVAL;
  return subscribe_f(client->mosq, NULL, pattern, qos);
}
int locationd_mqtt_disconnect(struct locationd_mqtt_client *client) {
  if (client == NULL) return MOSQ_ERR_INVAL;
  return disconnect_f(client->mosq);
}
const char *locationd_mqtt_strerror(int code) {
  const char *text = loaded ? strerror_f(code) : NULL;
  return text != NULL ? text : "unknown error";
}
const char *locationd_mqtt_connack_string(int code) {
  const char *text = loaded ? connack_string_f(code) : NULL;
  return text != NULL ? text : "unknown CONNACK code";
}
