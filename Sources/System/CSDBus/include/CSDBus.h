#ifndef LOCATIOND_CSDBUS_H
#define LOCATIOND_CSDBUS_H
/* sd-bus (libsystemd) for the GeoClue2 D-Bus front-end, loaded with dlopen on first use like libgps
 * and libxml2 rather than linked: linking libsystemd brings libgcrypt, libgpg-error, liblz4,
 * libzstd, liblzma and libcap too, about 0.8 MB of resident memory in every daemon, also one
 * that never serves D-Bus (--dbus none, the default). The headers come from libsystemd-dev; the
 * library loaded is libsystemd.so.0 (package libsystemd0, on every systemd system).
 *
 * Swift cannot call sd-bus's variadic functions nor build its vtables (SD_BUS_VTABLE macros), so
 * this target holds the three GeoClue2 vtables and small non-variadic helpers. Every object's
 * userdata is a number (the object's id in the Swift front-end), never a pointer into Swift
 * memory: a stale id finds no object and is answered with an error. The one pointer that
 * crosses is the handler context given to csdbus_set_handlers, which the front-end keeps alive
 * for as long as the bus is open.
 *
 * Every helper checks its pointers (NULL gives -EINVAL) and every buffer length it is given. Not
 * thread-safe: a bus and everything on it is used from one thread. */
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

/* The kinds of objects, passed to the handlers. */
enum {
  CSDBUS_MANAGER = 0,
  CSDBUS_CLIENT = 1,
  CSDBUS_LOCATION = 2,
};

/* Method call on object `kind` with id `object`; `member` is the method name. Return 1 when a
 * reply was sent (or will be sent later with a reference taken by csdbus_message_ref), or a
 * negative errno; set `error` (csdbus_set_error) to answer with a D-Bus error. */
typedef int (*csdbus_method_fn)(void *context, int kind, uint64_t object, const char *member,
                                sd_bus_message *message, sd_bus_error *error);
/* Property read: append the value of `property` to `reply` with the csdbus_append_* helpers. */
typedef int (*csdbus_get_fn)(void *context, int kind, uint64_t object, const char *property,
                             sd_bus_message *reply, sd_bus_error *error);
/* Property write: read the new value from `value` with the csdbus_read_* helpers. */
typedef int (*csdbus_set_fn)(void *context, int kind, uint64_t object, const char *property,
                             sd_bus_message *value, sd_bus_error *error);
/* A signal the bus sent us (NameOwnerChanged): the message, already matched. */
typedef int (*csdbus_signal_fn)(void *context, sd_bus_message *message);

/* Loads libsystemd once (thread-safe). NULL when it is ready, otherwise why it is not. Every other
 * function needs a successful load first (csdbus_open checks it and answers -ENOSYS). */
const char *csdbus_load(void);

/* Sets the handlers for every object registered afterwards (one set per process). */
void csdbus_set_handlers(void *context, csdbus_method_fn method, csdbus_get_fn get, csdbus_set_fn set,
                         csdbus_signal_fn name_owner_changed);

/* Opens the system (which = 0) or session (which = 1) bus; honours DBUS_SYSTEM_BUS_ADDRESS and
 * DBUS_SESSION_BUS_ADDRESS. 0 or a negative errno. */
int csdbus_open(int which, sd_bus **bus);
/* Opens the message bus at `address` (a D-Bus address, `unix:path=/run/x`), as a bus client
 * (Hello sent). 0 or a negative errno (-EINVAL for an empty address). */
int csdbus_open_address(const char *address, sd_bus **bus);
/* Flushes and closes the bus (NULL does nothing). */
void csdbus_close(sd_bus *bus);
/* Requests `name` without queueing: -EEXIST when another connection owns it, -EACCES when the
 * bus policy refuses it. */
int csdbus_request_name(sd_bus *bus, const char *name);
/* Subscribes to org.freedesktop.DBus.NameOwnerChanged (the handler gets every one). */
int csdbus_match_name_owner_changed(sd_bus *bus, sd_bus_slot **slot);
/* Registers the vtable of `kind` at `path` with `object` as its id; *slot owns it
 * (csdbus_slot_free removes the object). Also registers the object manager-less
 * introspection that sd-bus derives from the vtable. */
int csdbus_add_object(sd_bus *bus, sd_bus_slot **slot, const char *path, int kind, uint64_t object);
/* Removes an object (unrefs its slot; NULL does nothing). */
void csdbus_slot_free(sd_bus_slot *slot);

/* Processes every pending message, then waits until the bus or `wake_fd` is readable or
 * `timeout_usec` passed (UINT64_MAX: no limit besides the bus's own). Returns 0, or a negative
 * errno when the connection is gone. */
int csdbus_run_once(sd_bus *bus, int wake_fd, uint64_t timeout_usec);
/* The first half of csdbus_run_once: processes pending messages, at most 4096. Returns 0 when
 * none is left, 1 when more may be waiting (wait with no timeout then), or a negative errno when
 * the connection is gone. */
int csdbus_process(sd_bus *bus);
/* The second half: waits until the bus (reading, or writing while sd-bus has output queued) or
 * `wake_fd` is ready or `timeout_usec` passed; reads the eventfd when it woke. Returns 0 or a
 * negative errno. */
int csdbus_wait(sd_bus *bus, int wake_fd, uint64_t timeout_usec);
/* 1 while sd-bus holds messages it could not write to the bus socket yet (its write queue), 0
 * when all are written, or a negative errno. */
int csdbus_output_pending(sd_bus *bus);

/* Replies. Each returns 0 or a negative errno. */
int csdbus_reply_empty(sd_bus_message *call);
int csdbus_reply_object_path(sd_bus_message *call, const char *path);
int csdbus_reply_error(sd_bus_message *call, const char *name, const char *text);
/* Fills `error` with a D-Bus error name and text (both copied). Returns the negative errno
 * sd-bus expects a handler to return. */
int csdbus_set_error(sd_bus_error *error, const char *name, const char *text);

/* Reference counting for a call answered later (after the service decided). */
sd_bus_message *csdbus_message_ref(sd_bus_message *message);
void csdbus_message_unref(sd_bus_message *message);
/* The message being processed now (inside a handler), or NULL. */
sd_bus_message *csdbus_current_message(sd_bus *bus);
/* The sender's unique name (":1.42"), or NULL. Valid while the message lives. */
const char *csdbus_message_sender(sd_bus_message *message);

/* Property values. */
int csdbus_append_double(sd_bus_message *reply, double value);
int csdbus_append_bool(sd_bus_message *reply, int value);
int csdbus_append_u32(sd_bus_message *reply, uint32_t value);
int csdbus_append_string(sd_bus_message *reply, const char *value);
int csdbus_append_object_path(sd_bus_message *reply, const char *value);
/* The (tt) structure: seconds and microseconds. */
int csdbus_append_timestamp(sd_bus_message *reply, uint64_t seconds, uint64_t microseconds);

/* Reads one value of the type named (u: uint32; o or s: a string copied into buffer, at most
 * capacity - 1 bytes plus a NUL; longer strings give -ENAMETOOLONG). */
int csdbus_read_u32(sd_bus_message *message, uint32_t *value);
int csdbus_read_string(sd_bus_message *message, char type, char *buffer, size_t capacity);

/* NameOwnerChanged's (sss) into three buffers of `capacity` bytes each (longer: -ENAMETOOLONG). */
int csdbus_read_name_owner_changed(sd_bus_message *message, char *name, char *old_owner, char *new_owner,
                                   size_t capacity);

/* The sender's credentials as the bus driver reports them (GetConnectionCredentials: UnixUserID,
 * ProcessID, UnixGroupIDs; a blocking call to the bus driver): uid, pid, and the gids, of which
 * the first `capacity` are stored in `groups`; *count is set to how many the bus reported (more
 * than `capacity` means some were not stored: ask again with room for *count). *known is a bit
 * set: 1 uid, 2 pid, 4 groups. Returns 0 or a negative errno. */
int csdbus_sender_credentials(sd_bus_message *message, uint32_t *uid, int32_t *pid, uint32_t *groups,
                              size_t capacity, size_t *count, int *known);

/* The process ID of the connection that owns the bus name `name`, as the bus driver reports it
 * (GetConnectionUnixProcessID; a blocking call). Returns 0 or a negative errno (-ENXIO style
 * errors from the driver when nobody owns the name). */
int csdbus_name_owner_pid(sd_bus *bus, const char *name, int32_t *pid);

/* Emits the Client's LocationUpdated(old, new) to `destination` only (as GeoClue does). */
int csdbus_emit_location_updated(sd_bus *bus, const char *destination, const char *path, const char *old_path,
                                 const char *new_path);
/* Emits PropertiesChanged for the properties of `interface` at `path` named in `names`,
 * separated by single spaces (at most 16 names, 255 bytes); the values are read through the get
 * handler. */
int csdbus_emit_properties_changed(sd_bus *bus, const char *path, const char *interface, const char *names);
/* The same, sent to `destination` only (a unicast signal, as LocationUpdated): for properties
 * only that connection may read. `kind` and `object` name the object whose get handler gives the
 * values (the handler is called with no current message). Names as above; a name the vtable of
 * `kind` lacks gives -ENOENT. Returns 0 or more, or a negative errno. */
int csdbus_emit_properties_changed_to(sd_bus *bus, const char *destination, const char *path,
                                      const char *interface, const char *names, int kind, uint64_t object);
#endif
