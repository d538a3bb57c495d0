/* http.c -- the HTTP server on libmicrohttpd (see http.h): connections,
 * bodies, size limits, the admin token and the answers' headers. What each
 * path does is api.c's, which it reaches only through the handler given to
 * http_start.
 *
 * DESIGN
 * Per-request state (struct request: the body read so far) is allocated on
 * the first callback into *req_cls and freed in the completed callback, as in
 * libmicrohttpd's simplepost.c; the first callback never answers.
 * `inflight` counts requests between their first callback and their
 * completion, so a shutdown can wait for them before closing connections.
 *
 * Slow clients: libmicrohttpd's connection timeout only closes connections
 * that send nothing; a client trickling a byte a second would keep its slot
 * for ever. So each connection (struct watch, its socket context) records
 * when it last became idle or began receiving a body, and the reaper thread
 * shuts down the socket of any that has not delivered a whole request within
 * server.connection-timeout-s. A request being handled (a sale waiting for
 * its lock, bounded by lock.wait-ms) is never cut. The watch list and the
 * phases are guarded by watch_mu. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include "alloc.h"
#include "config.h"
#include "http.h"
#include "log.h"
#include "mclock.h"
#include "web.h"

#define CT_JSON HTTP_CT_JSON
#define CT_TEXT HTTP_CT_TEXT

/* The page loads nothing from elsewhere, and nothing inline. */
#define LAB_CSP "default-src 'self'"

/* Requests this large get the service's own JSON 414/431. They must fit in
 * libmicrohttpd's per-connection memory (its default, 32 KB, kept for the
 * RSS budget) to get that far; larger ones get libmicrohttpd's HTML page. */
#define URL_MAX (8 * 1024)
#define HEADERS_MAX (16 * 1024)

enum watch_phase { WATCH_IDLE, WATCH_BODY, WATCH_HANDLING };

struct watch {
    int fd;
    enum watch_phase phase;
    int64_t since_us;
    int line_cut; /* the current request line holds a NUL byte */
    struct watch *prev, *next;
};

struct http_server {
    struct MHD_Daemon *d;
    pthread_mutex_t watch_mu;
    pthread_cond_t reaper_cond;
    struct watch *watched;
    pthread_t reaper;
    int reaper_running, reaper_stop;
    const struct config *cfg;
    http_handler handler; /* answers each request that gets past refuse() */
    void *handler_cls;
    struct http_hooks hooks; /* the error body, and what is told of each answer */
    int listen_fd;
    int quiesced;
    atomic_int inflight;
};

struct request {
    int line_cut; /* a NUL byte cut the request line short */
    char *body;
    size_t len;
    int too_large;
    size_t url_len; /* checked against URL_MAX */
    size_t header_bytes; /* names and values, against HEADERS_MAX */
};

/* Adds one header (or one query argument, to the URL's length). */
static enum MHD_Result count_value(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value) {
    struct request *req = cls;
    size_t n = strlen(key) + (value ? strlen(value) : 0) + 2;
    if (kind == MHD_GET_ARGUMENT_KIND)
        req->url_len += n;
    else
        req->header_bytes += n + 2;
    return MHD_YES;
}

/* Queues body (taken over, freed by MHD) with code, and the header name:
 * value when name is not NULL. A NULL body is an out of memory: a fixed 500
 * goes out instead. */
static enum MHD_Result answer_with(const struct http_server *s, struct MHD_Connection *conn,
                                   int code, char *body, const char *type, const char *name,
                                   const char *value) {
    struct MHD_Response *resp;
    int oom = !body;
    if (oom) {
        static const char oom_body[] =
            "{\"status\":\"internal_error\",\"error\":\"out of memory\"}";
        code = 500;
        type = CT_JSON;
        resp = MHD_create_response_from_buffer(sizeof(oom_body) - 1, (void *)oom_body,
                                               MHD_RESPMEM_PERSISTENT);
    } else {
        resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    }
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (name && !oom) MHD_add_response_header(resp, name, value);
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)code, resp);
    MHD_destroy_response(resp);
    if (s->hooks.answered) s->hooks.answered(code);
    return ret;
}

/* answer_with and, when allow is not NULL, that Allow header. */
static enum MHD_Result answer(const struct http_server *s, struct MHD_Connection *conn, int code,
                              char *body, const char *type, const char *allow) {
    return answer_with(s, conn, code, body, type, allow ? MHD_HTTP_HEADER_ALLOW : NULL, allow);
}

int http_answer_asset(const struct http_request *rq, const struct web_asset *a) {
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(a->len, (void *)a->data, MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, a->type);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "Content-Security-Policy", LAB_CSP);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    enum MHD_Result ret = MHD_queue_response(rq->conn, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    if (rq->server->hooks.answered) rq->server->hooks.answered(200);
    return ret == MHD_YES;
}

static enum MHD_Result answer_error(const struct http_server *s, struct MHD_Connection *conn,
                                    int code, const char *word, const char *sentence, int text) {
    return answer(s, conn, code, s->hooks.error_body(word, sentence, text),
                  text ? CT_TEXT : CT_JSON, NULL);
}

int http_answer(const struct http_request *rq, int code, char *body, const char *type,
                const char *allow) {
    return answer(rq->server, rq->conn, code, body, type, allow) == MHD_YES;
}

int http_answer_error(const struct http_request *rq, int code, const char *word,
                      const char *sentence, int text) {
    return answer_error(rq->server, rq->conn, code, word, sentence, text) == MHD_YES;
}

const char *http_query(const struct http_request *rq, const char *name) {
    return MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, name);
}

/* ---- the admin token ----------------------------------------------------------
 * With admin.token set, a reset, a lab run and any fault parameter need
 * "Authorization: Bearer <admin.token>"; without it they answer 401 with
 * WWW-Authenticate. The token is never written anywhere: not in an answer,
 * not in a log line. */

/* Whether the n bytes of given are the token want, in a time that depends on
 * strlen(want) and n only, never on where the first differing byte is. */
static int token_equal(const char *given, size_t n, const char *want) {
    size_t wlen = strlen(want);
    volatile unsigned char diff = (unsigned char)(n != wlen);
    for (size_t i = 0; i < wlen; i++)
        diff |= (unsigned char)want[i] ^ (unsigned char)(i < n ? given[i] : 0);
    return diff == 0;
}

int http_admin_allowed(const struct http_request *rq, const char *what, char *why, size_t whylen) {
    const char *want = rq->server->cfg->admin_token;
    if (!want[0]) return 1;
    const char *h =
        MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h) {
        snprintf(why, whylen,
                 "%s needs the admin token: send the header "
                 "'Authorization: Bearer <admin.token>'",
                 what);
        return 0;
    }
    if (strncasecmp(h, "Bearer ", 7) != 0) {
        snprintf(why, whylen,
                 "%s needs the admin token, and the Authorization header is not "
                 "'Bearer <admin.token>'",
                 what);
        return 0;
    }
    const char *tok = h + 7;
    while (*tok == ' ') tok++;
    size_t n = strlen(tok);
    while (n > 0 && (tok[n - 1] == ' ' || tok[n - 1] == '\t')) n--;
    if (!token_equal(tok, n, want)) {
        snprintf(why, whylen,
                 "%s needs the admin token, and the one in the Authorization "
                 "header is not this instance's admin.token",
                 what);
        log_limited("auth", "refused %s: the Authorization header holds a wrong admin token", what);
        return 0;
    }
    return 1;
}

int http_answer_unauthorized(const struct http_request *rq, const char *why, int text) {
    return answer_with(rq->server, rq->conn, 401,
                       rq->server->hooks.error_body("unauthorized", why, text),
                       text ? CT_TEXT : CT_JSON, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                       "Bearer realm=\"inventoryd\"") == MHD_YES;
}

/* The demo's one-line text is asked for with ?format=text or an Accept header
 * that names text/plain before (or without) application/json. */
static int wants_text(struct MHD_Connection *conn) {
    const char *f = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "format");
    if (f) return strcmp(f, "text") == 0;
    const char *a = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
    if (!a) return 0;
    const char *t = strstr(a, "text/plain"), *j = strstr(a, "application/json");
    return t && (!j || t < j);
}

/* Answers what is refused before the request reaches its route: a NUL byte
 * in the request line, an oversized URL or headers. Returns 1 with *ret set
 * when it answered. */
static int refuse(const struct http_server *s, struct MHD_Connection *conn,
                  const struct request *req, int text, enum MHD_Result *ret) {
    char why[256];
    if (req->line_cut) {
        *ret = answer_error(s, conn, 400, "bad_request", "the request line holds a NUL byte", text);
    } else if (req->url_len > URL_MAX) {
        snprintf(why, sizeof(why), "the URL is %zu bytes; at most %d are accepted", req->url_len,
                 URL_MAX);
        *ret = answer_error(s, conn, 414, "uri_too_long", why, text);
    } else if (req->header_bytes > HEADERS_MAX) {
        snprintf(why, sizeof(why), "the headers are %zu bytes; at most %d are accepted",
                 req->header_bytes, HEADERS_MAX);
        *ret = answer_error(s, conn, 431, "headers_too_large", why, text);
    } else {
        return 0;
    }
    return 1;
}

/* Refuses what the server refuses, then hands the request to the handler
 * (api.c's, which answers the rest by routes.def). */
static enum MHD_Result dispatch(struct http_server *s, struct MHD_Connection *conn, const char *url,
                                const char *method, struct request *req) {
    int text = wants_text(conn);
    enum MHD_Result ret;
    if (refuse(s, conn, req, text, &ret)) return ret;
    struct http_request rq = {s, conn, url, method, req->body, req->len, req->too_large, text};
    return s->handler(s->handler_cls, &rq) ? MHD_YES : MHD_NO;
}

/* Moves conn's watch to phase, from now. */
static void watch_phase(struct http_server *s, struct MHD_Connection *conn,
                        enum watch_phase phase) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct watch *w = ci ? ci->socket_context : NULL;
    if (!w) return;
    pthread_mutex_lock(&s->watch_mu);
    w->phase = phase;
    w->since_us = mclock_us();
    pthread_mutex_unlock(&s->watch_mu);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
    struct http_server *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct watch *w = ci ? calloc(1, sizeof(*w)) : NULL;
        if (!w) return; /* unwatched: the idle timeout still applies */
        w->fd = ci->connect_fd;
        w->phase = WATCH_IDLE;
        w->since_us = mclock_us();
        pthread_mutex_lock(&s->watch_mu);
        w->next = s->watched;
        if (s->watched) s->watched->prev = w;
        s->watched = w;
        pthread_mutex_unlock(&s->watch_mu);
        *socket_context = w;
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        struct watch *w = *socket_context;
        pthread_mutex_lock(&s->watch_mu);
        if (w->prev)
            w->prev->next = w->next;
        else
            s->watched = w->next;
        if (w->next) w->next->prev = w->prev;
        pthread_mutex_unlock(&s->watch_mu);
        free(w);
        *socket_context = NULL;
    }
}

/* Sees every request line as it arrives, before libmicrohttpd hands the
 * URL on as a C string: a raw NUL byte in it would cut it short, and
 * "GET /inventory/sale/<NUL>x" would become the default sale. libmicrohttpd
 * (0.9.75) ends the URI at the space before the version, so that NUL is
 * followed by "HTTP/"; any other byte there means the URI held a NUL of its
 * own. The mark is read by the request's first callback. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
    (void)cls;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct watch *w = ci ? ci->socket_context : NULL;
    if (w) w->line_cut = strncmp(uri + strlen(uri) + 1, "HTTP/", 5) != 0;
    return NULL;
}

/* Every 250 ms: shuts down the sockets of connections idle or receiving a
 * body for longer than server.connection-timeout-s. libmicrohttpd then sees
 * the connection end and closes it in its own thread. */
static void *reaper_main(void *arg) {
    struct http_server *s = arg;
    int64_t limit_us = (int64_t)s->cfg->connection_timeout_s * 1000000;
    pthread_mutex_lock(&s->watch_mu);
    while (!s->reaper_stop) {
        int64_t now = mclock_us();
        for (struct watch *w = s->watched; w; w = w->next) {
            if (w->phase != WATCH_HANDLING && now - w->since_us > limit_us) {
                shutdown(w->fd, SHUT_RDWR);
                w->since_us = INT64_MAX / 2; /* once */
            }
        }
        mclock_cond_wait_until(&s->reaper_cond, &s->watch_mu, now + 250000);
    }
    pthread_mutex_unlock(&s->watch_mu);
    return NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls) {
    (void)version;
    struct http_server *s = cls;
    struct request *req = *req_cls;
    if (!req) {
        req = calloc(1, sizeof(*req));
        if (!req) return MHD_NO;
        *req_cls = req;
        req->url_len = strlen(url);
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        const struct watch *w = ci ? ci->socket_context : NULL;
        req->line_cut = w && w->line_cut;
        MHD_get_connection_values(conn, MHD_HEADER_KIND, count_value, req);
        MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, count_value, req);
        atomic_fetch_add(&s->inflight, 1);
        watch_phase(s, conn, WATCH_BODY); /* the headers are in; a body may follow */
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (req->too_large || req->len + n > (size_t)s->cfg->max_body_bytes) {
            req->too_large = 1;
            return MHD_YES;
        }
        char *b = realloc(req->body, req->len + n + 1);
        if (!b) return MHD_NO;
        memcpy(b + req->len, upload_data, n);
        req->body = b;
        req->len += n;
        req->body[req->len] = '\0';
        return MHD_YES;
    }
    watch_phase(s, conn, WATCH_HANDLING);
    return dispatch(s, conn, url, method, req);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)toe;
    struct http_server *s = cls;
    watch_phase(s, conn, WATCH_IDLE);
    struct request *req = *req_cls;
    if (!req) return;
    free(req->body);
    free(req);
    *req_cls = NULL;
    atomic_fetch_sub(&s->inflight, 1);
}

static int hex_digit(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* Percent-decodes the path and each query argument in place, as
 * libmicrohttpd's own unescaper does, except that "%00" stays as it is: a
 * decoded NUL would cut the string short and make "/inventory/sale/%00x"
 * the default sale. Left undecoded, it is a byte sequence no route or item
 * name can contain, so such a request gets 404 or 400 and sells nothing. */
static size_t unescape(void *cls, struct MHD_Connection *conn, char *s) {
    (void)cls;
    (void)conn;
    char *w = s;
    for (const char *r = s; *r;) {
        int hi = r[0] == '%' ? hex_digit(r[1]) : -1, lo = hi >= 0 ? hex_digit(r[2]) : -1;
        if (lo >= 0 && (hi || lo)) {
            *w++ = (char)(hi * 16 + lo);
            r += 3;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
    return (size_t)(w - s);
}

/* Opens the listening socket ourselves, so that "port in use" is reported
 * as such rather than as a bare start failure. */
static int listen_on(const char *bind_addr, int port, char *errstr, size_t errlen) {
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, bind_addr, &sa.sin_addr) != 1) {
        snprintf(errstr, errlen, "server.bind: '%s' is not an IPv4 address", bind_addr);
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(errstr, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 4096) < 0) {
        snprintf(errstr, errlen, "cannot listen on %s:%d: %s%s", bind_addr, port, strerror(errno),
                 errno == EADDRINUSE ? " (another process has this port; pick another with "
                                       "--set server.port=N)"
                                     : "");
        close(fd);
        return -1;
    }
    return fd;
}

struct http_server *http_start(const struct config *cfg, const struct http_hooks *hooks,
                               http_handler handler, void *cls, char *errstr, size_t errlen) {
    if (!hooks || !hooks->error_body) {
        snprintf(errstr, errlen, "http_start: no error_body hook");
        return NULL;
    }
    struct http_server *s = alloc_zeroed(sizeof(*s), errstr, errlen);
    if (!s) return NULL;
    s->hooks = *hooks;
    s->cfg = cfg;
    s->handler = handler;
    s->handler_cls = cls;
    s->listen_fd = listen_on(cfg->bind, cfg->port, errstr, errlen);
    if (s->listen_fd < 0) {
        free(s);
        return NULL;
    }
    pthread_mutex_init(&s->watch_mu, NULL);
    mclock_cond_init(&s->reaper_cond);
    s->d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
            MHD_USE_ITC | MHD_USE_ERROR_LOG,
        0, NULL, NULL, on_request, s, MHD_OPTION_LISTEN_SOCKET, s->listen_fd,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)cfg->connection_timeout_s, MHD_OPTION_THREAD_STACK_SIZE, (size_t)(256 * 1024),
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
        s, MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL, MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
        MHD_OPTION_END);
    if (!s->d) {
        snprintf(errstr, errlen, "libmicrohttpd could not start on %s:%d", cfg->bind, cfg->port);
        close(s->listen_fd);
        pthread_cond_destroy(&s->reaper_cond);
        pthread_mutex_destroy(&s->watch_mu);
        free(s);
        return NULL;
    }
    if (cfg->connection_timeout_s > 0 && pthread_create(&s->reaper, NULL, reaper_main, s) == 0)
        s->reaper_running = 1;
    return s;
}

void http_quiesce(struct http_server *s) {
    if (!s || s->quiesced) return;
    MHD_socket fd = MHD_quiesce_daemon(s->d);
    if (fd != MHD_INVALID_SOCKET) close(fd);
    s->quiesced = 1;
}

void http_stop(struct http_server *s) {
    if (!s) return;
    http_quiesce(s);
    /* Let sales in flight finish and their answers go out; a sale cannot
     * wait for its lock longer than lock.wait-ms, so this is bounded. */
    int64_t deadline = mclock_ms() + s->cfg->lock_wait_ms + s->cfg->redis_timeout_ms * 3 + 2000;
    while (atomic_load(&s->inflight) > 0 && mclock_ms() < deadline) mclock_sleep_ms(10);
    if (s->reaper_running) {
        pthread_mutex_lock(&s->watch_mu);
        s->reaper_stop = 1;
        pthread_cond_signal(&s->reaper_cond);
        pthread_mutex_unlock(&s->watch_mu);
        pthread_join(s->reaper, NULL);
    }
    MHD_stop_daemon(s->d); /* frees every watch through on_connection */
    pthread_cond_destroy(&s->reaper_cond);
    pthread_mutex_destroy(&s->watch_mu);
    free(s);
}
