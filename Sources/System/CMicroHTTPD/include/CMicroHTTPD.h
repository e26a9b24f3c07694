#ifndef LOCATIOND_CMICROHTTPD_H
#define LOCATIOND_CMICROHTTPD_H
/* libmicrohttpd (Debian libmicrohttpd-dev, libmicrohttpd.so.12) behind a small API of its own,
 * loaded with dlopen when the HTTP front-end starts rather than linked: a daemon without --http
 * maps none of it (no resident memory, no code reachable from the network), and a machine
 * without the library runs every other part of locationd. MHD's headers stay in the .c file, so
 * its types and its variadic MHD_start_daemon never reach Swift.
 *
 * Threading: one MHD daemon with its internal polling thread on epoll
 * (MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME). Every callback
 * below runs on that thread and must not block. A request is handed to the caller once its
 * body is complete; the connection is then suspended until the caller answers from any thread
 * (locationd_http_respond*). A stream's connection is suspended whenever the caller has nothing
 * to send and resumed by locationd_http_wake. Suspension and resumption of one exchange happen
 * under that exchange's mutex, so a wake can never be lost between "nothing to read" and the
 * suspension. */
#include <stddef.h>
#include <stdint.h>

/* One HTTP request/response on a connection. Counted references: one held by MHD until the
 * request completes, one by the caller from on_request until it answers with
 * locationd_http_respond (which releases it) or, for a stream, until locationd_http_release. */
typedef struct locationd_http_exchange locationd_http_exchange;
typedef struct locationd_http_server locationd_http_server;

/* What the caller sees of a request. Header values are NULL when absent; every pointer is valid
 * only during on_request. body holds body_length bytes (at most the server's max_body; when the
 * client sent more, body_too_large is 1 and body is empty). */
typedef struct {
  const char *method;
  const char *path;
  const char *host;
  const char *origin;
  const char *authorization;
  const char *content_type;
  const char *last_event_id;
  const char *sec_fetch_site;
  const uint8_t *body;
  size_t body_length;
  int body_too_large;
  /* The peer's numeric address ("127.0.0.1", "::1"), NUL-terminated. */
  char peer[64];
  /* The first of Host, Content-Length, Authorization, Origin that the request sends more than
   * once (RFC 9112 3.2 and 6.3: such a request must be refused), NULL when none is. */
  const char *repeated_header;
} locationd_http_request;

typedef void (*locationd_http_on_request)(void *context, locationd_http_exchange *exchange,
                                          const locationd_http_request *request);
/* Copies at most capacity bytes of stream's next data into buffer. Returns the count (1 or more),
 * 0 when nothing is ready (the connection is suspended until a wake), -1 to end the stream.
 * Called on the MHD thread under the exchange's mutex. */
typedef long (*locationd_http_on_read)(void *context, uint64_t stream, uint8_t *buffer, size_t capacity);
/* The stream's connection has ended (client gone, or server stopping). Called once per stream. */
typedef void (*locationd_http_on_closed)(void *context, uint64_t stream);

/* Loads libmicrohttpd once (thread-safe). NULL when ready, otherwise why not (static text). */
const char *locationd_http_load(void);

/* Binds address:port (numeric IPv4 or IPv6; port 0 picks a free one) and starts serving.
 * per_ip_limit bounds connections from one address (0: no bound), counting all of 127.0.0.0/8,
 * ::1 and ::ffff:127.0.0.0/104 as one. When a new connection finds its address's limit reached,
 * the oldest connection of that address that has not carried a trusted answer (see
 * locationd_http_respond) and is idle or still receiving its request is shut down to make room;
 * only when there is none is the newcomer refused. timeout_seconds is the idle timeout; a connection whose request
 * (headers and body) has not fully arrived header_deadline_seconds after it began (0: no such
 * deadline) is shut down, however steadily the client trickles bytes.
 *
 * Returns NULL on failure with error_number set (errno of socket/bind/listen, or 0 when MHD
 * refused to start) and a message in message (NUL-terminated, message_capacity bytes). */
locationd_http_server *locationd_http_start(const char *address, uint16_t port, unsigned connection_limit,
                                            unsigned per_ip_limit, unsigned timeout_seconds,
                                            unsigned header_deadline_seconds, size_t max_body, void *context, locationd_http_on_request on_request,
                                            locationd_http_on_read on_read, locationd_http_on_closed on_closed,
                                            int *error_number, char *message, size_t message_capacity);

/* The port actually bound. */
uint16_t locationd_http_port(const locationd_http_server *server);

/* Ends every stream, resumes every suspended connection and stops MHD (waits for its thread).
 * The server's memory is kept (exchanges answered later still point at it). Call once. */
void locationd_http_stop(locationd_http_server *server);

/* Answers a request: status, Content-Type, extra headers ("Name: value" lines separated by '\n',
 * or NULL) and length bytes of body (copied). trusted is 1 when the request carried the valid
 * token: the connection may stay open for more requests and is never cut to make room under the
 * per-address limit; with 0 the answer says "Connection: close" and the connection ends after it.
 * Releases the caller's reference: the exchange must
 * not be used afterwards. Returns 1 when the response was queued, 0 when the connection had gone
 * or the server stops. */
int locationd_http_respond(locationd_http_exchange *exchange, unsigned status, const char *content_type,
                           const char *extra_headers, const uint8_t *body, size_t length, int trusted);

/* Answers with a stream of unknown length read through on_read with this stream number (trusted as
 * for locationd_http_respond). The
 * caller keeps its reference until locationd_http_release (after on_closed). Returns 1 or 0 as
 * locationd_http_respond; on 0 on_closed is not called and the caller must release. */
int locationd_http_respond_stream(locationd_http_exchange *exchange, unsigned status, const char *content_type,
                                  const char *extra_headers, uint64_t stream, int trusted);

/* Resumes a stream suspended for lack of data (any thread; never while holding a lock that
 * on_read takes). A wake that arrives while on_read runs is remembered. */
void locationd_http_wake(locationd_http_exchange *exchange);

/* Drops the caller's reference to a stream's exchange. */
void locationd_http_release(locationd_http_exchange *exchange);
#endif
