/* libmicrohttpd loaded on first use; see CMicroHTTPD.h. */
#include "CMicroHTTPD.h"

#include "CLinux.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int loaded;
static char failure[512];

static struct MHD_Daemon *(*p_start_daemon)(unsigned int, uint16_t, MHD_AcceptPolicyCallback, void *,
                                            MHD_AccessHandlerCallback, void *, ...);
static void (*p_stop_daemon)(struct MHD_Daemon *);
static const char *(*p_lookup)(struct MHD_Connection *, enum MHD_ValueKind, const char *);
static struct MHD_Response *(*p_from_buffer)(size_t, void *, enum MHD_ResponseMemoryMode);
static struct MHD_Response *(*p_from_callback)(uint64_t, size_t, MHD_ContentReaderCallback, void *,
                                               MHD_ContentReaderFreeCallback);
static enum MHD_Result (*p_add_header)(struct MHD_Response *, const char *, const char *);
static enum MHD_Result (*p_queue)(struct MHD_Connection *, unsigned int, struct MHD_Response *);
static void (*p_destroy)(struct MHD_Response *);
static void (*p_suspend)(struct MHD_Connection *);
static void (*p_resume)(struct MHD_Connection *);
static int (*p_values)(struct MHD_Connection *, enum MHD_ValueKind, MHD_KeyValueIterator, void *);
static const union MHD_ConnectionInfo *(*p_connection_info)(struct MHD_Connection *, enum MHD_ConnectionInfoType,
                                                            ...);

static void resolve(void) {
  void *handle = dlopen("libmicrohttpd.so.12", RTLD_LAZY | RTLD_LOCAL);
  if (handle == NULL) {
    snprintf(failure, sizeof failure, "libmicrohttpd is not installed (%s): install libmicrohttpd12 to use --http",
             dlerror());
    return;
  }
  *(void **)&p_start_daemon = dlsym(handle, "MHD_start_daemon");
  *(void **)&p_stop_daemon = dlsym(handle, "MHD_stop_daemon");
  *(void **)&p_lookup = dlsym(handle, "MHD_lookup_connection_value");
  *(void **)&p_from_buffer = dlsym(handle, "MHD_create_response_from_buffer");
  *(void **)&p_from_callback = dlsym(handle, "MHD_create_response_from_callback");
  *(void **)&p_add_header = dlsym(handle, "MHD_add_response_header");
  *(void **)&p_queue = dlsym(handle, "MHD_queue_response");
  *(void **)&p_destroy = dlsym(handle, "MHD_destroy_response");
  *(void **)&p_suspend = dlsym(handle, "MHD_suspend_connection");
  *(void **)&p_resume = dlsym(handle, "MHD_resume_connection");
  *(void **)&p_connection_info = dlsym(handle, "MHD_get_connection_info");
  *(void **)&p_values = dlsym(handle, "MHD_get_connection_values");
  if (!p_start_daemon || !p_stop_daemon || !p_lookup || !p_from_buffer || !p_from_callback || !p_add_header ||
      !p_queue || !p_destroy || !p_suspend || !p_resume || !p_connection_info || !p_values) {
    snprintf(failure, sizeof failure, "libmicrohttpd.so.12 lacks a function locationd uses");
    return;
  }
  loaded = 1;
}

const char *locationd_http_load(void) {
  pthread_once(&once, resolve);
  return loaded ? NULL : failure;
}

/* One connection from MHD_CONNECTION_NOTIFY_STARTED to _CLOSED: when its current request began
 * to arrive, so that a request not received within the header deadline can be cut off however
 * often the client sends a byte (MHD_OPTION_CONNECTION_TIMEOUT only measures inactivity). */
typedef struct tracked_connection {
  struct tracked_connection *previous, *next;
  int fd;
  int loopback;   /* from 127.0.0.0/8, ::1 or ::ffff:127.0.0.0/104: one address for the limit */
  struct sockaddr_storage peer; /* the client's address (port cleared), for the per-address limit */
  int counted;    /* holds a slot of its address's limit (not cut) */
  int awaiting;   /* a request is being received (not yet handed over), or idle between requests */
  int trusted;    /* a response to a request with the valid token was sent on it */
  int cut;        /* shut down by the deadline or the per-address limit */
  struct timespec since;
} tracked_connection;

struct locationd_http_server {
  struct MHD_Daemon *daemon;
  unsigned per_ip_limit;
  unsigned header_deadline; /* seconds; 0: none */
  pthread_mutex_t track_lock; /* tracked (and every field of its entries), reaper_stop */
  pthread_cond_t reaper_wake;
  pthread_t reaper;
  int reaper_running;
  int reaper_stop;
  tracked_connection *tracked;
  uint16_t port;
  size_t max_body;
  void *context;
  locationd_http_on_request on_request;
  locationd_http_on_read on_read;
  locationd_http_on_closed on_closed;
  pthread_mutex_t lock; /* the exchange list; taken before an exchange's lock */
  int stopping;      /* atomic */
  locationd_http_exchange *exchanges;
};

struct locationd_http_exchange {
  locationd_http_server *server;
  struct MHD_Connection *connection;
  locationd_http_exchange *previous, *next; /* in server->exchanges while MHD holds it */
  pthread_mutex_t lock;
  int references;
  uint8_t *body;
  size_t body_length;
  int body_too_large;
  int dispatched;  /* given to on_request */
  int suspended;   /* MHD_suspend_connection called, not yet resumed */
  int wake_pending;
  int completed;   /* MHD finished the request */
  int is_stream;
  int refused;     /* answered from the headers alone (early_refusal) */
  int trusted;     /* the response answers a request with the valid token: keep-alive allowed */
  uint64_t stream;
  struct MHD_Response *response; /* ready to queue */
  unsigned status;
};

static void release(locationd_http_exchange *x) {
  pthread_mutex_lock(&x->lock);
  int left = --x->references;
  pthread_mutex_unlock(&x->lock);
  if (left > 0) return;
  if (x->response) p_destroy(x->response);
  pthread_mutex_destroy(&x->lock);
  free(x->body);
  free(x);
}

/* Adds "Name: value" lines to a response; lines without ": " are skipped. */
static int add_headers(struct MHD_Response *response, const char *content_type, const char *extra) {
  if (content_type && p_add_header(response, "Content-Type", content_type) != MHD_YES) return 0;
  if (!extra) return 1;
  const char *line = extra;
  while (*line) {
    const char *end = strchr(line, '\n');
    size_t length = end ? (size_t)(end - line) : strlen(line);
    const char *colon = memchr(line, ':', length);
    if (colon && colon > line && (size_t)(colon - line) < 128 && length - (size_t)(colon - line) < 2048) {
      char name[128], value[2048];
      size_t name_length = (size_t)(colon - line);
      memcpy(name, line, name_length);
      name[name_length] = 0;
      const char *start = colon + 1;
      while (start < line + length && *start == ' ') start++;
      size_t value_length = (size_t)(line + length - start);
      memcpy(value, start, value_length);
      value[value_length] = 0;
      if (p_add_header(response, name, value) != MHD_YES) return 0;
    }
    line += length;
    if (*line == '\n') line++;
  }
  return 1;
}

static struct MHD_Response *plain_response(const char *text) {
  struct MHD_Response *response = p_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
  if (response) p_add_header(response, "Content-Type", "text/plain; charset=utf-8");
  return response;
}

static ssize_t read_stream(void *cls, uint64_t position, char *buffer, size_t capacity) {
  (void)position;
  locationd_http_exchange *x = cls;
  locationd_http_server *s = x->server;
  if (__atomic_load_n(&s->stopping, __ATOMIC_ACQUIRE)) return MHD_CONTENT_READER_END_OF_STREAM;
  pthread_mutex_lock(&x->lock);
  long count = s->on_read(s->context, x->stream, (uint8_t *)buffer, capacity);
  if (count > 0) {
    pthread_mutex_unlock(&x->lock);
    return (ssize_t)((size_t)count > capacity ? capacity : (size_t)count);
  }
  if (count < 0) {
    pthread_mutex_unlock(&x->lock);
    return MHD_CONTENT_READER_END_OF_STREAM;
  }
  if (x->wake_pending) {
    x->wake_pending = 0;
  } else {
    x->suspended = 1;
    p_suspend(x->connection);
  }
  pthread_mutex_unlock(&x->lock);
  return 0;
}

static void free_stream(void *cls) { (void)cls; }

static void mark_trusted(locationd_http_server *s, struct MHD_Connection *connection);

/* On the MHD thread, under x->lock. */
static enum MHD_Result queue_ready(locationd_http_exchange *x) {
  struct MHD_Response *response = x->response;
  unsigned status = x->status;
  x->response = NULL;
  if (x->trusted) mark_trusted(x->server, x->connection);
  enum MHD_Result result = p_queue(x->connection, status, response);
  p_destroy(response);
  return result;
}

/* On the MHD thread, under x->lock, which it releases: queues the answer when it has come,
 * otherwise suspends the connection until the answer resumes it. */
static enum MHD_Result queue_or_suspend(locationd_http_exchange *x, struct MHD_Connection *connection) {
  enum MHD_Result result = MHD_YES;
  if (x->response) {
    result = queue_ready(x);
  } else {
    x->suspended = 1;
    p_suspend(connection);
  }
  pthread_mutex_unlock(&x->lock);
  return result;
}

static struct timespec monotonic_now(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now;
}

/* Any 127.0.0.0/8 address, ::1 or ::ffff:127.x.y.z: one machine, one address for the limit. */
/* Headers a request may send only once (RFC 9112 3.2, 6.3; and those the server decides on). */
#define COUNTED_HEADERS 4
static const char *const counted_headers[COUNTED_HEADERS] = {"Host", "Content-Length", "Authorization", "Origin"};
struct header_counts {
  int seen[COUNTED_HEADERS];
  int malformed_name; /* empty, or with a space or tab (before the colon) */
};

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
  (void)kind;
  (void)value;
  struct header_counts *counts = cls;
  if (key == NULL) return MHD_YES;
  if (key[0] == 0 || strpbrk(key, " \t") != NULL) counts->malformed_name = 1;
  for (int i = 0; i < COUNTED_HEADERS; i++) {
    if (strcasecmp(key, counted_headers[i]) == 0 && counts->seen[i] < 2) counts->seen[i]++;
  }
  return MHD_YES;
}

static int is_loopback(const struct sockaddr *address) {
  if (address == NULL) return 0;
  if (address->sa_family == AF_INET) {
    const uint8_t *bytes = (const uint8_t *)&((const struct sockaddr_in *)address)->sin_addr;
    return bytes[0] == 127;
  }
  if (address->sa_family == AF_INET6) {
    const struct in6_addr *v6 = &((const struct sockaddr_in6 *)address)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(v6)) return 1;
    return IN6_IS_ADDR_V4MAPPED(v6) && v6->s6_addr[12] == 127;
  }
  return 0;
}

/* Marks the connection's current request as received (0) or as starting to arrive now (1). */
static void set_awaiting(locationd_http_server *s, struct MHD_Connection *connection, int awaiting) {
  const union MHD_ConnectionInfo *info = p_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  if (info == NULL || info->socket_context == NULL) return;
  tracked_connection *t = info->socket_context;
  pthread_mutex_lock(&s->track_lock);
  t->awaiting = awaiting;
  if (awaiting) t->since = monotonic_now();
  pthread_mutex_unlock(&s->track_lock);
}

/* The connection has carried a request with the valid token: from now on it is never cut to make
 * room under the per-address limit. */
static void mark_trusted(locationd_http_server *s, struct MHD_Connection *connection) {
  const union MHD_ConnectionInfo *info = p_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  if (info == NULL || info->socket_context == NULL) return;
  tracked_connection *t = info->socket_context;
  pthread_mutex_lock(&s->track_lock);
  t->trusted = 1;
  pthread_mutex_unlock(&s->track_lock);
}

/* Copies the client's address without its port (a zeroed storage when unknown). */
static void copy_peer(struct sockaddr_storage *into, const struct sockaddr *address) {
  memset(into, 0, sizeof *into);
  if (address == NULL) return;
  if (address->sa_family == AF_INET) {
    struct sockaddr_in *v4 = (struct sockaddr_in *)into;
    v4->sin_family = AF_INET;
    v4->sin_addr = ((const struct sockaddr_in *)address)->sin_addr;
  } else if (address->sa_family == AF_INET6) {
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)into;
    v6->sin6_family = AF_INET6;
    v6->sin6_addr = ((const struct sockaddr_in6 *)address)->sin6_addr;
  }
}

/* Whether a and b count as one address for the limit: both loopback, or the same address. */
static int same_address(const tracked_connection *a, const tracked_connection *b) {
  if (a->loopback || b->loopback) return a->loopback && b->loopback;
  if (a->peer.ss_family != b->peer.ss_family) return 0;
  if (a->peer.ss_family == AF_INET)
    return memcmp(&((const struct sockaddr_in *)&a->peer)->sin_addr, &((const struct sockaddr_in *)&b->peer)->sin_addr,
                  sizeof(struct in_addr)) == 0;
  if (a->peer.ss_family == AF_INET6)
    return memcmp(&((const struct sockaddr_in6 *)&a->peer)->sin6_addr,
                  &((const struct sockaddr_in6 *)&b->peer)->sin6_addr, sizeof(struct in6_addr)) == 0;
  return 0;
}

/* Shuts a connection down (MHD sees the end and closes it) and frees its slot. Under track_lock. */
static void cut(tracked_connection *t) {
  if (t->fd >= 0) shutdown(t->fd, SHUT_RDWR);
  t->cut = 1;
  t->counted = 0;
}

/* Whether the peer of an idle kept-alive connection has shut down its sending side: nothing but
 * its end is left to read, so no next request can come. MHD met that end while the last request
 * waited for its answer, and would only find it again at the connection's timeout. */
static int peer_has_finished(const tracked_connection *t) {
  char byte;
  return t->fd >= 0 && recv(t->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* Descriptors kept free below the soft RLIMIT_NOFILE limit: SystemIO's DescriptorReserve.count,
 * whose comment says why. */
enum { DESCRIPTOR_RESERVE = 16 };

/* Makes room for the newcomer t under its address's limit (under track_lock, on MHD's thread,
 * between requests of every connection). When the limit is reached, a connection of that address
 * that waits for a request its client can no longer send (peer_has_finished) is cut; else the
 * oldest that never carried the valid token and is idle or still receiving its request; only when
 * every slot holds a live token holder's connection or a request being answered is the newcomer
 * itself cut. So a client without the token cannot keep a token holder out by holding
 * connections, and finished clients do not hold slots until their timeout. A newcomer that
 * leaves fewer than DESCRIPTOR_RESERVE descriptors free is cut before any of that. */
static void admit(locationd_http_server *s, tracked_connection *t) {
  if (locationd_free_descriptors(DESCRIPTOR_RESERVE) < DESCRIPTOR_RESERVE) {
    cut(t);
    return;
  }
  t->counted = 1;
  if (s->per_ip_limit == 0) return;
  unsigned count = 0;
  tracked_connection *victim = NULL, *finished = NULL;
  for (tracked_connection *other = s->tracked; other; other = other->next) {
    if (!other->counted || !same_address(other, t)) continue;
    count++;
    /* The list is newest first: the last match is the oldest. */
    if (!other->trusted && other->awaiting) victim = other;
  }
  if (count < s->per_ip_limit) return;
  /* Looked for only once the limit is reached: a peek per waiting connection of the address. */
  for (tracked_connection *other = s->tracked; other && finished == NULL; other = other->next) {
    if (other->counted && same_address(other, t) && other->awaiting && peer_has_finished(other)) finished = other;
  }
  if (finished) cut(finished);
  else if (victim) cut(victim);
  else if (t->fd >= 0) cut(t);
}

static void notify_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                              enum MHD_ConnectionNotificationCode code) {
  locationd_http_server *s = cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    tracked_connection *t = calloc(1, sizeof *t);
    if (t == NULL) return;
    const union MHD_ConnectionInfo *fd_info = p_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *address = p_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    t->fd = fd_info ? fd_info->connect_fd : -1;
    t->loopback = address ? is_loopback(address->client_addr) : 0;
    copy_peer(&t->peer, address ? address->client_addr : NULL);
    t->awaiting = 1;
    t->since = monotonic_now();
    pthread_mutex_lock(&s->track_lock);
    admit(s, t);
    t->next = s->tracked;
    if (s->tracked) s->tracked->previous = t;
    s->tracked = t;
    pthread_mutex_unlock(&s->track_lock);
    *socket_context = t;
  } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
    tracked_connection *t = *socket_context;
    if (t == NULL) return;
    *socket_context = NULL;
    pthread_mutex_lock(&s->track_lock);
    if (t->previous) t->previous->next = t->next;
    else if (s->tracked == t) s->tracked = t->next;
    if (t->next) t->next->previous = t->previous;
    pthread_mutex_unlock(&s->track_lock);
    free(t);
  }
}

/* Once a second: shuts down connections whose request has been arriving for longer than the
 * header deadline. The fd stays MHD's (shutdown, not close); it is open while tracked, since
 * MHD notifies _CLOSED before closing it and that notification waits for track_lock. */
static void *reap(void *cls) {
  locationd_http_server *s = cls;
  pthread_mutex_lock(&s->track_lock);
  while (!s->reaper_stop) {
    struct timespec now = monotonic_now();
    for (tracked_connection *t = s->tracked; t; t = t->next) {
      if (!t->awaiting || t->cut || t->fd < 0) continue;
      if (now.tv_sec - t->since.tv_sec >= (time_t)s->header_deadline) cut(t);
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 1;
    pthread_cond_timedwait(&s->reaper_wake, &s->track_lock, &until);
  }
  pthread_mutex_unlock(&s->track_lock);
  return NULL;
}

/* Queues a JSON error answer from the headers alone, and closes the connection after it.
 * Returns 1 when queued, -1 on failure. */
static int refuse_early(struct MHD_Connection *connection, unsigned status, const char *body, size_t length) {
  struct MHD_Response *response = p_from_buffer(length, (void *)body, MHD_RESPMEM_MUST_COPY);
  if (response == NULL) return -1;
  p_add_header(response, "Content-Type", "application/json");
  p_add_header(response, "Cache-Control", "no-store");
  p_add_header(response, "X-Content-Type-Options", "nosniff");
  p_add_header(response, "Connection", "close");
  enum MHD_Result result = p_queue(connection, status, response);
  p_destroy(response);
  return result == MHD_YES ? 1 : -1;
}

/* Refusals decided from the headers alone, before any body is read. Returns 1 when answered, 0
 * to go on, -1 on failure.
 * - Both Content-Length and Transfer-Encoding, two Content-Lengths, or a header name with
 *   whitespace (`Transfer-Encoding :`): which framing a proxy in front used to find the end of
 *   the body is unknown, so what follows could be a request smuggled inside it; refused, and the
 *   connection closed after the answer (RFC 9112 5.1, 6.1, 6.3).
 * - A client that waits for "100 Continue" before sending a body larger than the limit is
 *   answered 413 at once: MHD sends no 100 Continue once a response is queued, so the body is
 *   never asked for. */
static int early_refusal(locationd_http_server *s, struct MHD_Connection *connection) {
  const char *length = p_lookup(connection, MHD_HEADER_KIND, "Content-Length");
  if (length != NULL && p_lookup(connection, MHD_HEADER_KIND, "Transfer-Encoding") != NULL) {
    static const char body[] = "{\"class\":\"ERROR\",\"code\":\"badRequest\",\"message\":\"the request has both "
                               "Content-Length and Transfer-Encoding: send one of them\"}";
    return refuse_early(connection, 400, body, sizeof body - 1);
  }
  struct header_counts counts;
  memset(&counts, 0, sizeof counts);
  p_values(connection, MHD_HEADER_KIND, count_header, &counts);
  if (counts.seen[1] > 1) { /* counted_headers[1]: two lengths, one of them hiding a request */
    static const char body[] = "{\"class\":\"ERROR\",\"code\":\"badRequest\",\"message\":\"the Content-Length "
                               "header is sent more than once\"}";
    return refuse_early(connection, 400, body, sizeof body - 1);
  }
  if (counts.malformed_name) { /* RFC 9112 5.1: "Transfer-Encoding :" is not Transfer-Encoding */
    static const char body[] = "{\"class\":\"ERROR\",\"code\":\"badRequest\",\"message\":\"a header name holds "
                               "whitespace or is empty (RFC 9112 5.1)\"}";
    return refuse_early(connection, 400, body, sizeof body - 1);
  }
  const char *expect = p_lookup(connection, MHD_HEADER_KIND, "Expect");
  if (expect == NULL || strcasecmp(expect, "100-continue") != 0 || length == NULL) return 0;
  unsigned long long declared = 0;
  int digits = 0;
  for (const char *c = length; *c; c++) {
    if (*c < '0' || *c > '9') return 0; /* MHD itself refuses a malformed length */
    if (++digits > 19) { declared = ULLONG_MAX; break; }
    declared = declared * 10 + (unsigned long long)(*c - '0');
  }
  if (declared <= (unsigned long long)s->max_body) return 0;
  char body[160];
  int written = snprintf(body, sizeof body,
                         "{\"class\":\"ERROR\",\"code\":\"bodyTooLarge\",\"message\":\"the request body is "
                         "larger than %zu bytes\"}",
                         s->max_body);
  if (written < 0 || (size_t)written >= sizeof body) return -1;
  return refuse_early(connection, 413, body, (size_t)written);
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Percent-decoding of the path and of query values (RFC 3986 2.1), in place, as microhttpd's own
 * except that "%00" stays as written: a decoded NUL would end the C string the handler reads, so
 * "/%00anything" would be taken for "/". Returns the new length. */
static size_t unescape_keeping_nul(void *cls, struct MHD_Connection *connection, char *text) {
  (void)cls;
  (void)connection;
  size_t read = 0, written = 0;
  while (text[read] != 0) {
    if (text[read] == '%' && text[read + 1] != 0 && text[read + 2] != 0) {
      int high = hex_value(text[read + 1]), low = hex_value(text[read + 2]);
      if (high >= 0 && low >= 0 && (high | low) != 0) {
        text[written++] = (char)(high * 16 + low);
        read += 3;
        continue;
      }
    }
    text[written++] = text[read++];
  }
  text[written] = 0;
  return written;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *connection, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_data_size,
                              void **con_cls) {
  (void)version;
  locationd_http_server *s = cls;
  locationd_http_exchange *x = *con_cls;
  if (x == NULL) {
    x = calloc(1, sizeof *x);
    if (x == NULL) return MHD_NO;
    pthread_mutex_init(&x->lock, NULL);
    x->server = s;
    x->connection = connection;
    x->references = 1;
    pthread_mutex_lock(&s->lock);
    x->next = s->exchanges;
    if (s->exchanges) s->exchanges->previous = x;
    s->exchanges = x;
    pthread_mutex_unlock(&s->lock);
    *con_cls = x;
    int refusal = early_refusal(s, connection);
    if (refusal < 0) return MHD_NO;
    x->refused = refusal;
    return MHD_YES;
  }
  if (x->refused) {
    *upload_data_size = 0; /* a body sent anyway is dropped; the 413 is already queued */
    return MHD_YES;
  }
  if (*upload_data_size > 0) {
    size_t size = *upload_data_size;
    *upload_data_size = 0;
    if (x->body_too_large) return MHD_YES;
    if (size > s->max_body || x->body_length > s->max_body - size) {
      x->body_too_large = 1;
      free(x->body);
      x->body = NULL;
      x->body_length = 0;
      return MHD_YES;
    }
    uint8_t *grown = realloc(x->body, x->body_length + size);
    if (grown == NULL) return MHD_NO;
    memcpy(grown + x->body_length, upload_data, size);
    x->body = grown;
    x->body_length += size;
    return MHD_YES;
  }
  pthread_mutex_lock(&x->lock);
  if (x->response) return queue_or_suspend(x, connection);
  if (x->dispatched) {
    if (__atomic_load_n(&s->stopping, __ATOMIC_ACQUIRE)) {
      struct MHD_Response *response = plain_response("locationd is stopping\n");
      enum MHD_Result result = response ? p_queue(connection, 503, response) : MHD_NO;
      if (response) p_destroy(response);
      pthread_mutex_unlock(&x->lock);
      return result;
    }
    /* Resumed before the answer came (a stray wake): wait again. */
    return queue_or_suspend(x, connection);
  }
  x->dispatched = 1;
  x->references++; /* the caller's, until it answers */
  pthread_mutex_unlock(&x->lock);
  set_awaiting(s, connection, 0);

  locationd_http_request request;
  memset(&request, 0, sizeof request);
  struct header_counts counts;
  memset(&counts, 0, sizeof counts);
  p_values(connection, MHD_HEADER_KIND, count_header, &counts);
  for (int i = 0; i < COUNTED_HEADERS; i++) {
    if (counts.seen[i] > 1) {
      request.repeated_header = counted_headers[i];
      break;
    }
  }
  request.method = method;
  request.path = url;
  request.host = p_lookup(connection, MHD_HEADER_KIND, "Host");
  request.origin = p_lookup(connection, MHD_HEADER_KIND, "Origin");
  request.authorization = p_lookup(connection, MHD_HEADER_KIND, "Authorization");
  request.content_type = p_lookup(connection, MHD_HEADER_KIND, "Content-Type");
  request.last_event_id = p_lookup(connection, MHD_HEADER_KIND, "Last-Event-ID");
  request.sec_fetch_site = p_lookup(connection, MHD_HEADER_KIND, "Sec-Fetch-Site");
  static const uint8_t empty[1] = {0};
  request.body = x->body ? x->body : empty;
  request.body_length = x->body_length;
  request.body_too_large = x->body_too_large;
  const union MHD_ConnectionInfo *info = p_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (info && info->client_addr) {
    const struct sockaddr *address = info->client_addr;
    if (address->sa_family == AF_INET)
      inet_ntop(AF_INET, &((const struct sockaddr_in *)address)->sin_addr, request.peer, sizeof request.peer);
    else if (address->sa_family == AF_INET6)
      inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)address)->sin6_addr, request.peer, sizeof request.peer);
  }
  s->on_request(s->context, x, &request);

  pthread_mutex_lock(&x->lock);
  if (x->response) return queue_or_suspend(x, connection);
  /* The answer comes later. Not suspended yet: MHD does not record a suspended connection's
   * state, so it would still be marked as reading the request, and on resuming MHD reads before
   * it writes; a client that has shut down its sending side (legal once the request is sent)
   * then reads as gone and the connection is closed unanswered. Returned without an answer, MHD
   * marks the connection as waiting for the application and calls again on its next turn, where
   * the branch above for `dispatched` suspends it (or queues the answer if it came meanwhile). */
  pthread_mutex_unlock(&x->lock);
  return MHD_YES;
}

static void completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                      enum MHD_RequestTerminationCode code) {
  (void)code;
  locationd_http_server *s = cls;
  /* A kept-alive connection's next request starts arriving now. */
  if (connection) set_awaiting(s, connection, 1);
  locationd_http_exchange *x = *con_cls;
  if (x == NULL) return;
  *con_cls = NULL;
  pthread_mutex_lock(&s->lock);
  if (x->previous) x->previous->next = x->next;
  else if (s->exchanges == x) s->exchanges = x->next;
  if (x->next) x->next->previous = x->previous;
  x->previous = x->next = NULL;
  pthread_mutex_unlock(&s->lock);
  pthread_mutex_lock(&x->lock);
  x->completed = 1;
  int stream = x->is_stream;
  pthread_mutex_unlock(&x->lock);
  if (stream) s->on_closed(s->context, x->stream);
  release(x);
}

static int bind_socket(const char *address, uint16_t port, int *error_number, char *message, size_t capacity,
                       uint16_t *bound) {
  struct sockaddr_storage storage;
  memset(&storage, 0, sizeof storage);
  socklen_t length;
  int family;
  struct sockaddr_in *v4 = (struct sockaddr_in *)&storage;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&storage;
  if (inet_pton(AF_INET, address, &v4->sin_addr) == 1) {
    family = AF_INET;
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    length = sizeof *v4;
  } else if (inet_pton(AF_INET6, address, &v6->sin6_addr) == 1) {
    family = AF_INET6;
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    length = sizeof *v6;
  } else {
    *error_number = EINVAL;
    snprintf(message, capacity, "%s is not a numeric IPv4 or IPv6 address", address);
    return -1;
  }
  int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error_number = errno;
    snprintf(message, capacity, "socket: %s", strerror(errno));
    return -1;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&storage, length) != 0 || listen(fd, 128) != 0) {
    *error_number = errno;
    snprintf(message, capacity, strchr(address, ':') ? "cannot listen on [%s] port %u: %s" : "cannot listen on %s port %u: %s",
             address, (unsigned)port, strerror(errno));
    close(fd);
    return -1;
  }
  length = sizeof storage;
  getsockname(fd, (struct sockaddr *)&storage, &length);
  *bound = ntohs(family == AF_INET ? v4->sin_port : v6->sin6_port);
  return fd;
}

locationd_http_server *locationd_http_start(const char *address, uint16_t port, unsigned connection_limit,
                                            unsigned per_ip_limit, unsigned timeout_seconds,
                                            unsigned header_deadline_seconds, size_t max_body, void *context, locationd_http_on_request on_request,
                                            locationd_http_on_read on_read, locationd_http_on_closed on_closed,
                                            int *error_number, char *message, size_t message_capacity) {
  *error_number = 0;
  if (message_capacity > 0) message[0] = 0;
  const char *why = locationd_http_load();
  if (why) {
    snprintf(message, message_capacity, "%s", why);
    return NULL;
  }
  uint16_t bound = 0;
  int fd = bind_socket(address, port, error_number, message, message_capacity, &bound);
  if (fd < 0) return NULL;
  locationd_http_server *s = calloc(1, sizeof *s);
  if (s == NULL) {
    close(fd);
    *error_number = ENOMEM;
    snprintf(message, message_capacity, "out of memory");
    return NULL;
  }
  pthread_mutex_init(&s->lock, NULL);
  pthread_mutex_init(&s->track_lock, NULL);
  pthread_condattr_t condition_attributes;
  pthread_condattr_init(&condition_attributes);
  pthread_cond_init(&s->reaper_wake, &condition_attributes);
  pthread_condattr_destroy(&condition_attributes);
  s->per_ip_limit = per_ip_limit;
  s->header_deadline = header_deadline_seconds;
  s->port = bound;
  s->max_body = max_body;
  s->context = context;
  s->on_request = on_request;
  s->on_read = on_read;
  s->on_closed = on_closed;
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME;
  if (strchr(address, ':')) flags |= MHD_USE_IPv6;
  s->daemon = p_start_daemon(flags, 0, NULL, NULL, handle, s, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
                             MHD_OPTION_CONNECTION_LIMIT, connection_limit, MHD_OPTION_CONNECTION_TIMEOUT, timeout_seconds,
                             MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(32 * 1024), MHD_OPTION_NOTIFY_COMPLETED,
                             completed, s, MHD_OPTION_NOTIFY_CONNECTION, notify_connection, s,
                             MHD_OPTION_UNESCAPE_CALLBACK, unescape_keeping_nul, NULL, MHD_OPTION_END);
  if (s->daemon == NULL) {
    close(fd);
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->track_lock);
    pthread_cond_destroy(&s->reaper_wake);
    free(s);
    snprintf(message, message_capacity, "libmicrohttpd could not start its daemon");
    return NULL;
  }
  if (header_deadline_seconds > 0 && pthread_create(&s->reaper, NULL, reap, s) == 0) s->reaper_running = 1;
  return s;
}

uint16_t locationd_http_port(const locationd_http_server *server) { return server->port; }

void locationd_http_stop(locationd_http_server *s) {
  __atomic_store_n(&s->stopping, 1, __ATOMIC_RELEASE);
  if (s->reaper_running) {
    pthread_mutex_lock(&s->track_lock);
    s->reaper_stop = 1;
    pthread_cond_signal(&s->reaper_wake);
    pthread_mutex_unlock(&s->track_lock);
    pthread_join(s->reaper, NULL);
    s->reaper_running = 0;
  }
  pthread_mutex_lock(&s->lock);
  for (locationd_http_exchange *x = s->exchanges; x; x = x->next) {
    pthread_mutex_lock(&x->lock);
    if (x->suspended) {
      x->suspended = 0;
      p_resume(x->connection);
    }
    pthread_mutex_unlock(&x->lock);
  }
  pthread_mutex_unlock(&s->lock);
  p_stop_daemon(s->daemon);
  s->daemon = NULL;
}

/* Stores a response for the MHD thread and resumes the connection. Consumes response. */
static int deliver(locationd_http_exchange *x, unsigned status, struct MHD_Response *response, int is_stream,
                   uint64_t stream, int trusted) {
  int stopping = __atomic_load_n(&x->server->stopping, __ATOMIC_ACQUIRE);
  pthread_mutex_lock(&x->lock);
  if (x->completed || stopping || response == NULL) {
    pthread_mutex_unlock(&x->lock);
    if (response) p_destroy(response);
    return 0;
  }
  x->response = response;
  x->status = status;
  x->is_stream = is_stream;
  x->stream = stream;
  x->trusted = trusted;
  if (x->suspended) {
    x->suspended = 0;
    p_resume(x->connection);
  }
  pthread_mutex_unlock(&x->lock);
  return 1;
}

int locationd_http_respond(locationd_http_exchange *x, unsigned status, const char *content_type,
                           const char *extra_headers, const uint8_t *body, size_t length, int trusted) {
  struct MHD_Response *response = p_from_buffer(length, (void *)body, MHD_RESPMEM_MUST_COPY);
  if (response && (!add_headers(response, content_type, extra_headers) ||
                   (!trusted && p_add_header(response, "Connection", "close") != MHD_YES))) {
    p_destroy(response);
    response = NULL;
  }
  int queued = deliver(x, status, response, 0, 0, trusted);
  release(x);
  return queued;
}

int locationd_http_respond_stream(locationd_http_exchange *x, unsigned status, const char *content_type,
                                  const char *extra_headers, uint64_t stream, int trusted) {
  struct MHD_Response *response = p_from_callback(MHD_SIZE_UNKNOWN, 4096, read_stream, x, free_stream);
  if (response && (!add_headers(response, content_type, extra_headers) ||
                   (!trusted && p_add_header(response, "Connection", "close") != MHD_YES))) {
    p_destroy(response);
    response = NULL;
  }
  return deliver(x, status, response, 1, stream, trusted);
}

void locationd_http_wake(locationd_http_exchange *x) {
  pthread_mutex_lock(&x->lock);
  if (x->suspended) {
    x->suspended = 0;
    p_resume(x->connection);
  } else {
    x->wake_pending = 1;
  }
  pthread_mutex_unlock(&x->lock);
}

void locationd_http_release(locationd_http_exchange *x) { release(x); }
