/* The GeoClue2 vtables and non-variadic sd-bus helpers for Swift (see include/CSDBus.h). */
#include "CSDBus.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

/* Every sd-bus function this file calls, resolved from libsystemd.so.0 on first use. */
#define CSDBUS_FUNCTIONS(X) \
  X(sd_bus_add_object_vtable) \
  X(sd_bus_call_method) \
  X(sd_bus_emit_properties_changed_strv) \
  X(sd_bus_error_free) \
  X(sd_bus_error_set) \
  X(sd_bus_flush_close_unref) \
  X(sd_bus_get_current_message) \
  X(sd_bus_get_events) \
  X(sd_bus_get_fd) \
  X(sd_bus_get_timeout) \
  X(sd_bus_match_signal) \
  X(sd_bus_message_append_basic) \
  X(sd_bus_message_close_container) \
  X(sd_bus_message_enter_container) \
  X(sd_bus_message_exit_container) \
  X(sd_bus_message_get_bus) \
  X(sd_bus_message_get_member) \
  X(sd_bus_message_get_sender) \
  X(sd_bus_message_new_signal) \
  X(sd_bus_message_append_strv) \
  X(sd_bus_message_open_container) \
  X(sd_bus_message_read_basic) \
  X(sd_bus_message_ref) \
  X(sd_bus_message_set_destination) \
  X(sd_bus_message_skip) \
  X(sd_bus_message_unref) \
  X(sd_bus_new) \
  X(sd_bus_open_system) \
  X(sd_bus_open_user) \
  X(sd_bus_process) \
  X(sd_bus_reply_method_error) \
  X(sd_bus_reply_method_return) \
  X(sd_bus_request_name) \
  X(sd_bus_send) \
  X(sd_bus_set_address) \
  X(sd_bus_set_bus_client) \
  X(sd_bus_start) \
  X(sd_bus_unref) \
  X(sd_bus_slot_unref) \

static struct {
#define CSDBUS_DECLARE(name) __typeof__(name) *name;
  CSDBUS_FUNCTIONS(CSDBUS_DECLARE)
#undef CSDBUS_DECLARE
} api;
static sd_bus_vtable manager_vtable[], client_vtable[], location_vtable[];
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int loaded;
static char failure[256];

static void resolve(void) {
  void *handle = dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    snprintf(failure, sizeof failure,
             "libsystemd is not installed (no libsystemd.so.0): install the distribution's libsystemd0 package");
    return;
  }
  const char *missing = NULL;
#define CSDBUS_RESOLVE(name) \
  api.name = (__typeof__(api.name))dlsym(handle, #name); \
  if (api.name == NULL && missing == NULL) missing = #name;
  CSDBUS_FUNCTIONS(CSDBUS_RESOLVE)
#undef CSDBUS_RESOLVE
  const unsigned *format = (const unsigned *)dlsym(handle, "sd_bus_object_vtable_format");
  if (format == NULL && missing == NULL) missing = "sd_bus_object_vtable_format";
  if (missing != NULL) {
    snprintf(failure, sizeof failure, "the libsystemd found lacks %s: sd-bus of systemd 246 or newer is needed", missing);
    return;
  }
  manager_vtable[0].x.start.vtable_format_reference = format;
  client_vtable[0].x.start.vtable_format_reference = format;
  location_vtable[0].x.start.vtable_format_reference = format;
  loaded = 1;
}

const char *csdbus_load(void) {
  pthread_once(&once, resolve);
  return loaded ? NULL : failure;
}


static void *handler_context;
static csdbus_method_fn method_handler;
static csdbus_get_fn get_handler;
static csdbus_set_fn set_handler;
static csdbus_signal_fn name_owner_handler;

void csdbus_set_handlers(void *context, csdbus_method_fn method, csdbus_get_fn get, csdbus_set_fn set,
                         csdbus_signal_fn name_owner_changed) {
  handler_context = context;
  method_handler = method;
  get_handler = get;
  set_handler = set;
  name_owner_handler = name_owner_changed;
}

static uint64_t object_id(void *userdata) { return (uint64_t)(uintptr_t)userdata; }

static int call(int kind, sd_bus_message *m, void *userdata, sd_bus_error *error) {
  if (method_handler == NULL) return -ENOTCONN;
  const char *member = api.sd_bus_message_get_member(m);
  if (member == NULL) return -EINVAL;
  return method_handler(handler_context, kind, object_id(userdata), member, m, error);
}
static int manager_call(sd_bus_message *m, void *u, sd_bus_error *e) { return call(CSDBUS_MANAGER, m, u, e); }
static int client_call(sd_bus_message *m, void *u, sd_bus_error *e) { return call(CSDBUS_CLIENT, m, u, e); }

static int get(int kind, const char *property, sd_bus_message *reply, void *userdata, sd_bus_error *error) {
  if (get_handler == NULL || property == NULL) return -ENOTCONN;
  return get_handler(handler_context, kind, object_id(userdata), property, reply, error);
}
static int manager_get(sd_bus *b, const char *p, const char *i, const char *name, sd_bus_message *r, void *u,
                       sd_bus_error *e) {
  (void)b; (void)p; (void)i;
  return get(CSDBUS_MANAGER, name, r, u, e);
}
static int client_get(sd_bus *b, const char *p, const char *i, const char *name, sd_bus_message *r, void *u,
                      sd_bus_error *e) {
  (void)b; (void)p; (void)i;
  return get(CSDBUS_CLIENT, name, r, u, e);
}
static int location_get(sd_bus *b, const char *p, const char *i, const char *name, sd_bus_message *r, void *u,
                        sd_bus_error *e) {
  (void)b; (void)p; (void)i;
  return get(CSDBUS_LOCATION, name, r, u, e);
}
static int client_set(sd_bus *b, const char *p, const char *i, const char *name, sd_bus_message *value, void *u,
                      sd_bus_error *e) {
  (void)b; (void)p; (void)i;
  if (set_handler == NULL || name == NULL) return -ENOTCONN;
  return set_handler(handler_context, CSDBUS_CLIENT, object_id(u), name, value, e);
}

#define EMITS SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE

/* SD_BUS_VTABLE_START takes the address of libsystemd's sd_bus_object_vtable_format, which a
 * library loaded with dlopen cannot give at link time: the same entry with the reference set by
 * resolve(), before any vtable is registered (registration needs a successful load). */
#define CSDBUS_VTABLE_START                                                                      \
  {                                                                                              \
    .type = _SD_BUS_VTABLE_START, .flags = 0,                                                    \
    .x = {.start = {.element_size = sizeof(sd_bus_vtable), .features = _SD_BUS_VTABLE_PARAM_NAMES, \
                    .vtable_format_reference = NULL}},                                           \
  }

/* org.freedesktop.GeoClue2.Manager as /usr/share/dbus-1/interfaces/org.freedesktop.GeoClue2.Manager.xml. */
static sd_bus_vtable manager_vtable[] = {
  CSDBUS_VTABLE_START,
  SD_BUS_PROPERTY("InUse", "b", manager_get, 0, EMITS),
  SD_BUS_PROPERTY("AvailableAccuracyLevel", "u", manager_get, 0, EMITS),
  SD_BUS_METHOD_WITH_NAMES("GetClient", "", , "o", SD_BUS_PARAM(client), manager_call,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_NAMES("CreateClient", "", , "o", SD_BUS_PARAM(client), manager_call,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_NAMES("DeleteClient", "o", SD_BUS_PARAM(client), "", , manager_call,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD_WITH_NAMES("AddAgent", "s", SD_BUS_PARAM(id), "", , manager_call,
                           SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_VTABLE_END,
};

/* org.freedesktop.GeoClue2.Client. */
static sd_bus_vtable client_vtable[] = {
  CSDBUS_VTABLE_START,
  SD_BUS_PROPERTY("Location", "o", client_get, 0, EMITS),
  SD_BUS_WRITABLE_PROPERTY("DistanceThreshold", "u", client_get, client_set, 0, EMITS | SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_WRITABLE_PROPERTY("TimeThreshold", "u", client_get, client_set, 0, EMITS | SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_WRITABLE_PROPERTY("DesktopId", "s", client_get, client_set, 0, EMITS | SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_WRITABLE_PROPERTY("RequestedAccuracyLevel", "u", client_get, client_set, 0,
                           EMITS | SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_PROPERTY("Active", "b", client_get, 0, EMITS),
  SD_BUS_METHOD("Start", "", "", client_call, SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_METHOD("Stop", "", "", client_call, SD_BUS_VTABLE_UNPRIVILEGED),
  SD_BUS_SIGNAL_WITH_NAMES("LocationUpdated", "oo", SD_BUS_PARAM(old) SD_BUS_PARAM(new), 0),
  SD_BUS_VTABLE_END,
};

/* org.freedesktop.GeoClue2.Location. */
static sd_bus_vtable location_vtable[] = {
  CSDBUS_VTABLE_START,
  SD_BUS_PROPERTY("Latitude", "d", location_get, 0, EMITS),
  SD_BUS_PROPERTY("Longitude", "d", location_get, 0, EMITS),
  SD_BUS_PROPERTY("Accuracy", "d", location_get, 0, EMITS),
  SD_BUS_PROPERTY("Altitude", "d", location_get, 0, EMITS),
  SD_BUS_PROPERTY("Speed", "d", location_get, 0, EMITS),
  SD_BUS_PROPERTY("Heading", "d", location_get, 0, EMITS),
  SD_BUS_PROPERTY("Description", "s", location_get, 0, EMITS),
  SD_BUS_PROPERTY("Timestamp", "(tt)", location_get, 0, EMITS),
  SD_BUS_VTABLE_END,
};

int csdbus_open(int which, sd_bus **bus) {
  if (bus == NULL) return -EINVAL;
  *bus = NULL;
  if (csdbus_load() != NULL) return -ENOSYS;
  if (which == 0) return api.sd_bus_open_system(bus);
  if (which == 1) return api.sd_bus_open_user(bus);
  return -EINVAL;
}

int csdbus_open_address(const char *address, sd_bus **bus) {
  if (bus == NULL || address == NULL || address[0] == '\0') return -EINVAL;
  *bus = NULL;
  if (csdbus_load() != NULL) return -ENOSYS;
  sd_bus *opened = NULL;
  int r = api.sd_bus_new(&opened);
  if (r < 0) return r;
  r = api.sd_bus_set_address(opened, address);
  if (r >= 0) r = api.sd_bus_set_bus_client(opened, 1);
  if (r >= 0) r = api.sd_bus_start(opened);
  if (r < 0) {
    api.sd_bus_unref(opened);
    return r;
  }
  *bus = opened;
  return 0;
}

void csdbus_close(sd_bus *bus) {
  if (bus != NULL) api.sd_bus_flush_close_unref(bus);
}

int csdbus_request_name(sd_bus *bus, const char *name) {
  if (bus == NULL || name == NULL) return -EINVAL;
  return api.sd_bus_request_name(bus, name, 0);
}

static int on_name_owner_changed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
  (void)userdata; (void)error;
  if (name_owner_handler == NULL) return 0;
  return name_owner_handler(handler_context, m);
}

int csdbus_match_name_owner_changed(sd_bus *bus, sd_bus_slot **slot) {
  if (bus == NULL || slot == NULL) return -EINVAL;
  return api.sd_bus_match_signal(bus, slot, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                             "NameOwnerChanged", on_name_owner_changed, NULL);
}

int csdbus_add_object(sd_bus *bus, sd_bus_slot **slot, const char *path, int kind, uint64_t object) {
  if (bus == NULL || slot == NULL || path == NULL) return -EINVAL;
  const sd_bus_vtable *table;
  const char *interface;
  switch (kind) {
  case CSDBUS_MANAGER: table = manager_vtable; interface = "org.freedesktop.GeoClue2.Manager"; break;
  case CSDBUS_CLIENT: table = client_vtable; interface = "org.freedesktop.GeoClue2.Client"; break;
  case CSDBUS_LOCATION: table = location_vtable; interface = "org.freedesktop.GeoClue2.Location"; break;
  default: return -EINVAL;
  }
  return api.sd_bus_add_object_vtable(bus, slot, path, interface, table, (void *)(uintptr_t)object);
}

void csdbus_slot_free(sd_bus_slot *slot) {
  if (slot != NULL) api.sd_bus_slot_unref(slot);
}

int csdbus_process(sd_bus *bus) {
  if (bus == NULL) return -EINVAL;
  /* At most 4096 messages per round, so that queued jobs (fixes) are not starved by a flood. */
  for (int i = 0; i < 4096; i++) {
    int r = api.sd_bus_process(bus, NULL);
    if (r < 0) return r;
    if (r == 0) return 0;
  }
  return 1;
}

int csdbus_wait(sd_bus *bus, int wake_fd, uint64_t timeout_usec) {
  if (bus == NULL) return -EINVAL;
  int r;
  int events = api.sd_bus_get_events(bus);
  if (events < 0) return events;
  int fd = api.sd_bus_get_fd(bus);
  if (fd < 0) return fd;
  uint64_t until = UINT64_MAX;
  r = api.sd_bus_get_timeout(bus, &until);
  if (r < 0) return r;
  uint64_t wait = timeout_usec;
  if (until != UINT64_MAX) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t current = (uint64_t)now.tv_sec * 1000000u + (uint64_t)now.tv_nsec / 1000u;
    uint64_t left = until > current ? until - current : 0;
    if (left < wait) wait = left;
  }
  int milliseconds = wait == UINT64_MAX ? -1 : (wait / 1000u > 60000u ? 60000 : (int)((wait + 999u) / 1000u));
  struct pollfd fds[2] = {{.fd = fd, .events = (short)events}, {.fd = wake_fd, .events = POLLIN}};
  r = poll(fds, wake_fd >= 0 ? 2 : 1, milliseconds);
  if (r < 0 && errno != EINTR) return -errno;
  if (wake_fd >= 0 && r > 0 && (fds[1].revents & POLLIN)) {
    uint64_t value;
    ssize_t n = read(wake_fd, &value, sizeof value);
    (void)n; /* an eventfd read of 8 bytes; EAGAIN only when another reader drained it */
  }
  return 0;
}

int csdbus_run_once(sd_bus *bus, int wake_fd, uint64_t timeout_usec) {
  int r = csdbus_process(bus);
  if (r < 0) return r;
  return csdbus_wait(bus, wake_fd, r > 0 ? 0 : timeout_usec);
}

int csdbus_reply_empty(sd_bus_message *call) {
  if (call == NULL) return -EINVAL;
  return api.sd_bus_reply_method_return(call, NULL);
}

int csdbus_reply_object_path(sd_bus_message *call, const char *path) {
  if (call == NULL || path == NULL) return -EINVAL;
  return api.sd_bus_reply_method_return(call, "o", path);
}

int csdbus_reply_error(sd_bus_message *call, const char *name, const char *text) {
  if (call == NULL || name == NULL || text == NULL) return -EINVAL;
  sd_bus_error error = SD_BUS_ERROR_NULL;
  int r = api.sd_bus_error_set(&error, name, text);
  if (r >= 0 || error.name != NULL) r = api.sd_bus_reply_method_error(call, &error);
  api.sd_bus_error_free(&error);
  return r;
}

int csdbus_set_error(sd_bus_error *error, const char *name, const char *text) {
  if (error == NULL || name == NULL || text == NULL) return -EINVAL;
  return api.sd_bus_error_set(error, name, text);
}

sd_bus_message *csdbus_message_ref(sd_bus_message *message) {
  return message == NULL ? NULL : api.sd_bus_message_ref(message);
}

void csdbus_message_unref(sd_bus_message *message) {
  if (message != NULL) api.sd_bus_message_unref(message);
}

sd_bus_message *csdbus_current_message(sd_bus *bus) {
  return bus == NULL ? NULL : api.sd_bus_get_current_message(bus);
}

const char *csdbus_message_sender(sd_bus_message *message) {
  return message == NULL ? NULL : api.sd_bus_message_get_sender(message);
}

int csdbus_append_double(sd_bus_message *reply, double value) {
  if (reply == NULL) return -EINVAL;
  return api.sd_bus_message_append_basic(reply, 'd', &value);
}

int csdbus_append_bool(sd_bus_message *reply, int value) {
  if (reply == NULL) return -EINVAL;
  int flag = value ? 1 : 0;
  return api.sd_bus_message_append_basic(reply, 'b', &flag);
}

int csdbus_append_u32(sd_bus_message *reply, uint32_t value) {
  if (reply == NULL) return -EINVAL;
  return api.sd_bus_message_append_basic(reply, 'u', &value);
}

int csdbus_append_string(sd_bus_message *reply, const char *value) {
  if (reply == NULL || value == NULL) return -EINVAL;
  return api.sd_bus_message_append_basic(reply, 's', value);
}

int csdbus_append_object_path(sd_bus_message *reply, const char *value) {
  if (reply == NULL || value == NULL) return -EINVAL;
  return api.sd_bus_message_append_basic(reply, 'o', value);
}

int csdbus_append_timestamp(sd_bus_message *reply, uint64_t seconds, uint64_t microseconds) {
  if (reply == NULL) return -EINVAL;
  int r = api.sd_bus_message_open_container(reply, 'r', "tt");
  if (r < 0) return r;
  r = api.sd_bus_message_append_basic(reply, 't', &seconds);
  if (r < 0) return r;
  r = api.sd_bus_message_append_basic(reply, 't', &microseconds);
  if (r < 0) return r;
  return api.sd_bus_message_close_container(reply);
}

int csdbus_read_u32(sd_bus_message *message, uint32_t *value) {
  if (message == NULL || value == NULL) return -EINVAL;
  return api.sd_bus_message_read_basic(message, 'u', value);
}

static int copy_string(const char *text, char *buffer, size_t capacity) {
  if (text == NULL || buffer == NULL || capacity == 0) return -EINVAL;
  size_t length = strnlen(text, capacity);
  if (length >= capacity) return -ENAMETOOLONG;
  memcpy(buffer, text, length + 1);
  return 0;
}

int csdbus_read_string(sd_bus_message *message, char type, char *buffer, size_t capacity) {
  if (message == NULL || buffer == NULL || capacity == 0) return -EINVAL;
  if (type != 's' && type != 'o') return -EINVAL;
  const char *text = NULL;
  int r = api.sd_bus_message_read_basic(message, type, &text);
  if (r < 0) return r;
  if (r == 0) return -ENXIO;
  return copy_string(text, buffer, capacity);
}

int csdbus_read_name_owner_changed(sd_bus_message *message, char *name, char *old_owner, char *new_owner,
                                   size_t capacity) {
  if (message == NULL) return -EINVAL;
  char *targets[3] = {name, old_owner, new_owner};
  for (int i = 0; i < 3; i++) {
    const char *text = NULL;
    int r = api.sd_bus_message_read_basic(message, 's', &text);
    if (r < 0) return r;
    if (r == 0) return -ENXIO;
    r = copy_string(text, targets[i], capacity);
    if (r < 0) return r;
  }
  return 0;
}

/* Reads the variant value of one GetConnectionCredentials entry the caller wants. */
static int read_credential(sd_bus_message *reply, const char *key, uint32_t *uid, int32_t *pid, uint32_t *groups,
                           size_t capacity, size_t *count, int *known) {
  int r;
  if (strcmp(key, "UnixUserID") == 0 || strcmp(key, "ProcessID") == 0) {
    uint32_t value;
    r = api.sd_bus_message_enter_container(reply, 'v', "u");
    if (r <= 0) return r < 0 ? r : -EBADMSG;
    r = api.sd_bus_message_read_basic(reply, 'u', &value);
    if (r <= 0) return r < 0 ? r : -EBADMSG;
    if (strcmp(key, "UnixUserID") == 0) {
      *uid = value;
      *known |= 1;
    } else {
      *pid = (int32_t)value;
      *known |= 2;
    }
    return api.sd_bus_message_exit_container(reply);
  }
  if (strcmp(key, "UnixGroupIDs") == 0) {
    r = api.sd_bus_message_enter_container(reply, 'v', "au");
    if (r <= 0) return r < 0 ? r : -EBADMSG;
    r = api.sd_bus_message_enter_container(reply, 'a', "u");
    if (r <= 0) return r < 0 ? r : -EBADMSG;
    uint32_t value;
    /* Every gid is read and counted (the message must be consumed); only the first `capacity`
     * are stored, so a caller seeing *count > capacity asks again with room for all. */
    while ((r = api.sd_bus_message_read_basic(reply, 'u', &value)) > 0) {
      if (*count < capacity) groups[*count] = value;
      (*count)++;
    }
    if (r < 0) return r;
    *known |= 4;
    r = api.sd_bus_message_exit_container(reply);
    if (r < 0) return r;
    return api.sd_bus_message_exit_container(reply);
  }
  return api.sd_bus_message_skip(reply, "v");
}

int csdbus_sender_credentials(sd_bus_message *message, uint32_t *uid, int32_t *pid, uint32_t *groups,
                              size_t capacity, size_t *count, int *known) {
  if (message == NULL || uid == NULL || pid == NULL || count == NULL || known == NULL) return -EINVAL;
  if (groups == NULL && capacity > 0) return -EINVAL;
  *known = 0;
  *count = 0;
  const char *sender = api.sd_bus_message_get_sender(message);
  sd_bus *bus = api.sd_bus_message_get_bus(message);
  if (sender == NULL || bus == NULL) return -ENXIO;
  /* The bus driver's own answer (libsystemd 252's sd_bus_get_name_creds does not read
   * UnixGroupIDs), so that groups come from the kernel as the bus daemon recorded them. */
  sd_bus_error error = SD_BUS_ERROR_NULL;
  sd_bus_message *reply = NULL;
  int r = api.sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                             "GetConnectionCredentials", &error, &reply, "s", sender);
  api.sd_bus_error_free(&error);
  if (r < 0) return r;
  r = api.sd_bus_message_enter_container(reply, 'a', "{sv}");
  while (r > 0) {
    r = api.sd_bus_message_enter_container(reply, 'e', "sv");
    if (r <= 0) break;
    const char *key = NULL;
    r = api.sd_bus_message_read_basic(reply, 's', &key);
    if (r <= 0 || key == NULL) {
      r = r < 0 ? r : -EBADMSG;
      break;
    }
    r = read_credential(reply, key, uid, pid, groups, capacity, count, known);
    if (r < 0) break;
    r = api.sd_bus_message_exit_container(reply);
    if (r >= 0) r = 1;
  }
  api.sd_bus_message_unref(reply);
  return r < 0 ? r : 0;
}

int csdbus_name_owner_pid(sd_bus *bus, const char *name, int32_t *pid) {
  if (bus == NULL || name == NULL || pid == NULL) return -EINVAL;
  sd_bus_error error = SD_BUS_ERROR_NULL;
  sd_bus_message *reply = NULL;
  int r = api.sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                 "GetConnectionUnixProcessID", &error, &reply, "s", name);
  api.sd_bus_error_free(&error);
  if (r < 0) return r;
  uint32_t value = 0;
  r = api.sd_bus_message_read_basic(reply, 'u', &value);
  api.sd_bus_message_unref(reply);
  if (r < 0) return r;
  if (r == 0 || value == 0 || value > INT32_MAX) return -EBADMSG;
  *pid = (int32_t)value;
  return 0;
}

int csdbus_emit_location_updated(sd_bus *bus, const char *destination, const char *path, const char *old_path,
                                 const char *new_path) {
  if (bus == NULL || destination == NULL || path == NULL || old_path == NULL || new_path == NULL) return -EINVAL;
  sd_bus_message *m = NULL;
  int r = api.sd_bus_message_new_signal(bus, &m, path, "org.freedesktop.GeoClue2.Client", "LocationUpdated");
  if (r < 0) return r;
  r = api.sd_bus_message_set_destination(m, destination);
  if (r >= 0) r = api.sd_bus_message_append_basic(m, 'o', old_path);
  if (r >= 0) r = api.sd_bus_message_append_basic(m, 'o', new_path);
  if (r >= 0) r = api.sd_bus_send(bus, m, NULL);
  api.sd_bus_message_unref(m);
  return r;
}

int csdbus_emit_properties_changed(sd_bus *bus, const char *path, const char *interface, const char *names) {
  if (bus == NULL || path == NULL || interface == NULL || names == NULL) return -EINVAL;
  char copy[256];
  size_t length = strnlen(names, sizeof copy);
  if (length == 0 || length >= sizeof copy) return -EINVAL;
  memcpy(copy, names, length + 1);
  char *list[17];
  size_t count = 0;
  char *cursor = copy;
  while (*cursor != '\0') {
    if (count == 16) return -E2BIG;
    list[count++] = cursor;
    while (*cursor != '\0' && *cursor != ' ') cursor++;
    if (*cursor == ' ') *cursor++ = '\0';
  }
  list[count] = NULL;
  return api.sd_bus_emit_properties_changed_strv(bus, path, interface, list);
}

/* The D-Bus signature of property `name` in the vtable of `kind`, or NULL. */
static const char *property_signature(int kind, const char *name) {
  const sd_bus_vtable *table;
  switch (kind) {
  case CSDBUS_MANAGER: table = manager_vtable; break;
  case CSDBUS_CLIENT: table = client_vtable; break;
  case CSDBUS_LOCATION: table = location_vtable; break;
  default: return NULL;
  }
  for (const sd_bus_vtable *entry = table + 1; entry->type != _SD_BUS_VTABLE_END; entry++) {
    if ((entry->type == _SD_BUS_VTABLE_PROPERTY || entry->type == _SD_BUS_VTABLE_WRITABLE_PROPERTY) &&
        strcmp(entry->x.property.member, name) == 0)
      return entry->x.property.signature;
  }
  return NULL;
}

int csdbus_emit_properties_changed_to(sd_bus *bus, const char *destination, const char *path,
                                      const char *interface, const char *names, int kind, uint64_t object) {
  if (bus == NULL || destination == NULL || path == NULL || interface == NULL || names == NULL) return -EINVAL;
  if (get_handler == NULL) return -ENOTCONN;
  char copy[256];
  size_t length = strnlen(names, sizeof copy);
  if (length == 0 || length >= sizeof copy) return -EINVAL;
  memcpy(copy, names, length + 1);
  sd_bus_message *m = NULL;
  int r = api.sd_bus_message_new_signal(bus, &m, path, "org.freedesktop.DBus.Properties", "PropertiesChanged");
  if (r < 0) return r;
  r = api.sd_bus_message_set_destination(m, destination);
  if (r >= 0) r = api.sd_bus_message_append_basic(m, 's', interface);
  if (r >= 0) r = api.sd_bus_message_open_container(m, 'a', "{sv}");
  char *cursor = copy;
  while (r >= 0 && *cursor != '\0') {
    char *name = cursor;
    while (*cursor != '\0' && *cursor != ' ') cursor++;
    if (*cursor == ' ') *cursor++ = '\0';
    const char *signature = property_signature(kind, name);
    if (signature == NULL) {
      r = -ENOENT;
      break;
    }
    sd_bus_error error = SD_BUS_ERROR_NULL;
    r = api.sd_bus_message_open_container(m, 'e', "sv");
    if (r >= 0) r = api.sd_bus_message_append_basic(m, 's', name);
    if (r >= 0) r = api.sd_bus_message_open_container(m, 'v', signature);
    if (r >= 0) r = get_handler(handler_context, kind, object, name, m, &error);
    api.sd_bus_error_free(&error);
    if (r >= 0) r = api.sd_bus_message_close_container(m);
    if (r >= 0) r = api.sd_bus_message_close_container(m);
  }
  if (r >= 0) r = api.sd_bus_message_close_container(m);
  if (r >= 0) r = api.sd_bus_message_append_strv(m, NULL);
  if (r >= 0) r = api.sd_bus_send(bus, m, NULL);
  api.sd_bus_message_unref(m);
  return r;
}

int csdbus_output_pending(sd_bus *bus) {
  if (bus == NULL) return -EINVAL;
  int events = api.sd_bus_get_events(bus);
  if (events < 0) return events;
  return (events & POLLOUT) ? 1 : 0;
}
