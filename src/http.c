/* http.c -- the HTTP server on libmicrohttpd (see http.h): connections,
 * bodies, size limits, the admin token and the answers' headers. What each
 * path does is api.c's, which it reaches only through the handler given to
 * http_start.
 *
 * DESIGN
 * Per-request state (struct request: the body read so far, the answer
 * kept) is allocated on the first callback into *req_cls and freed in the
 * completed callback, as in libmicrohttpd's simplepost.c; the first callback
 * never answers. `inflight` counts requests between their first callback and
 * their completion, so a shutdown can wait for them before closing
 * connections.
 *
 * The loops and the workers (http.h). The handler never queues an answer
 * itself: http_answer and the like keep it in the request (keep_answer), and
 * the loop queues it once the handler is done, on the loop at once, or when
 * a worker has resumed the parked connection, libmicrohttpd calls on_request
 * again and it queues the answer then (libmicrohttpd's documented pattern
 * for MHD_suspend_connection). The workers' queue is a FIFO under work_mu;
 * a worker stops only once it is empty, so a shutdown answers every parked
 * request before libmicrohttpd closes the connections. A handler on the
 * loop may instead defer its request (http_defer: suspended, counted in
 * `deferred`) to a thread that calls http_complete with its answer; a
 * shutdown waits for those too. A parked request's
 * time in the queue is told to the handler (http_request.queued_ms), which
 * takes it off the sale's wait for its lock.
 *
 * Slow clients: libmicrohttpd's connection timeout only closes connections
 * that send nothing; a client trickling a byte a second would keep its slot
 * for ever. So each connection (struct watch, its socket context) records
 * when it last became idle or began receiving a body, and the reaper thread
 * shuts down the socket of any that has not delivered a whole request within
 * server.connection-timeout-s. A request being handled (a sale waiting for
 * its lock, bounded by lock.wait-ms, or parked for a worker) is never cut.
 * The watch list and the phases are guarded by watch_mu. */
#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
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
 * libmicrohttpd's per-connection memory (conn_memory: the default 16 KB
 * holds a header of 15.8 KB) to get that far; larger ones get
 * libmicrohttpd's own HTML 431 or 414, and a request within 200 bytes of
 * the pool's size is closed unanswered, its answer's header not fitting
 * (loadtest/idle-bound.sh). */
#define URL_MAX (8 * 1024)
#define HEADERS_MAX (12 * 1024)

/* libmicrohttpd's own limit of connections: server.max-connections, and
 * room past it for the connections that are answered 503 and closed
 * (refuse). Past this libmicrohttpd stops accepting, and a new connection
 * waits in the kernel's backlog for a slot. */
static int conn_limit(const struct config *cfg) {
    return cfg->max_connections + cfg->max_connections / 8 + 64;
}

/* Each connection's memory pool, server.connection-memory-kb (16 KB by
 * default). libmicrohttpd clears the whole pool after every request, so an
 * idle keep-alive connection costs all of it in RSS. Over 32 KB,
 * libmicrohttpd maps the pool itself and unmaps it when the connection
 * closes; at 32 KB and under it takes it from malloc, whose arenas would
 * keep a closed connection's pool resident, so that RSS followed the most
 * connections ever open rather than those open now (the soak's trend), and
 * http_start has malloc map blocks as large as a pool (map_pools). The pool
 * is malloc's block header short of whole pages, so that it maps exactly
 * the KB configured. */
#define MALLOC_HEADER 32
static size_t conn_memory(const struct config *cfg) {
    return (size_t)cfg->connection_memory_kb * 1024 - MALLOC_HEADER;
}

/* The event loops' way of waiting (server.event-loop). epoll's cost does
 * not grow with the connections open, but libmicrohttpd 0.9.75 takes a
 * suspended connection out of its epoll set and puts it back once resumed:
 * two epoll_ctl calls for each request parked (every sale, and every
 * pipelined one). poll has no such call, but each turn of a loop polls
 * all its connections, so it costs in proportion to the connections held
 * open, busy or idle (docs/speed.md measures both). */
static unsigned loop_flag(const struct config *cfg) {
    return strcmp(cfg->event_loop, "poll") == 0 ? MHD_USE_POLL_INTERNAL_THREAD
                                                : MHD_USE_EPOLL_INTERNAL_THREAD;
}

/* Has malloc map (mmap) every block as large as a connection's pool, and
 * unmap it when freed, where libmicrohttpd takes the pool from malloc (32 KB
 * and under). Blocks that large are few besides the pools: the pipeline's
 * batch of sales, a long answer. */
static void map_pools(const struct config *cfg) {
    if (conn_memory(cfg) <= 32 * 1024) mallopt(M_MMAP_THRESHOLD, (int)conn_memory(cfg));
}

enum watch_phase { WATCH_IDLE, WATCH_BODY, WATCH_HANDLING };

struct watch {
    int fd;
    enum watch_phase phase;
    int64_t since_us;
    int line_cut; /* the current request line holds a NUL byte */
    int over; /* opened past server.max-connections: answered 503, then closed */
    struct watch *prev, *next;
};

struct request;

struct http_server {
    struct MHD_Daemon *d;
    /* the workers and their queue of parked requests, under work_mu */
    pthread_mutex_t work_mu;
    pthread_cond_t work_cond;
    struct request *work_head, *work_tail;
    int work_stop;
    pthread_t *workers;
    int nworkers;
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
    atomic_int deferred; /* requests handed on by http_defer, not completed yet */
    atomic_int open_conns; /* connections watched, against server.max-connections */
};

struct request {
    struct http_request rq; /* as the handler sees it; set when the body is in */
    struct MHD_Response *resp; /* the handler's answer, queued on the loop */
    int code;
    int keep; /* what the handler returned: 0 closes the connection */
    int parked; /* handed to a worker or deferred (the connection is suspended) */
    int deferred; /* handed on by its handler (http_defer) */
    int64_t parked_us; /* when */
    atomic_int done; /* the worker is through with it */
    struct request *next; /* in the workers' queue */
    int line_cut; /* a NUL byte cut the request line short */
    int over; /* its connection is one past server.max-connections */
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

/* Keeps resp (NULL: out of memory) as rq's answer with code, to be queued
 * on the loop once the handler returns: a handler in a worker runs while
 * its connection is suspended, and only the loop may queue. Returns 1, or 0
 * when there is no answer to send. */
static int keep_answer(const struct http_request *rq, int code, struct MHD_Response *resp) {
    struct request *req = rq->state;
    if (!resp) return 0;
    if (req->resp) MHD_destroy_response(req->resp); /* a second answer wins */
    req->resp = resp;
    req->code = code;
    if (rq->server->hooks.answered) rq->server->hooks.answered(code);
    return 1;
}

/* Answers body (taken over, freed by MHD) with code, and the header name:
 * value when name is not NULL. A NULL body is an out of memory: a fixed 500
 * goes out instead. */
static int answer_with(const struct http_request *rq, int code, char *body, const char *type,
                       const char *name, const char *value) {
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
        return 0;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (name && !oom) MHD_add_response_header(resp, name, value);
    return keep_answer(rq, code, resp);
}

int http_answer_asset(const struct http_request *rq, const struct web_asset *a) {
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(a->len, (void *)a->data, MHD_RESPMEM_PERSISTENT);
    if (!resp) return 0;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, a->type);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "Content-Security-Policy", LAB_CSP);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    return keep_answer(rq, MHD_HTTP_OK, resp);
}

int http_answer(const struct http_request *rq, int code, char *body, const char *type,
                const char *allow) {
    return answer_with(rq, code, body, type, allow ? MHD_HTTP_HEADER_ALLOW : NULL, allow);
}

int http_answer_error(const struct http_request *rq, int code, const char *word,
                      const char *sentence, int text) {
    return http_answer(rq, code, rq->server->hooks.error_body(word, sentence, text),
                       text ? CT_TEXT : CT_JSON, NULL);
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
    return answer_with(rq, 401, rq->server->hooks.error_body("unauthorized", why, text),
                       text ? CT_TEXT : CT_JSON, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                       "Bearer realm=\"inventoryd\"");
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

/* Answers what is refused before the request reaches its route: a
 * connection past server.max-connections (503, closed after it), a NUL
 * byte in the request line, an oversized URL or headers. Returns 1 when it
 * answered. */
static int refuse(const struct request *req) {
    const struct http_request *rq = &req->rq;
    char why[256];
    if (req->over) {
        snprintf(why, sizeof(why),
                 "this instance holds server.max-connections (%d) connections; try again shortly",
                 rq->server->cfg->max_connections);
        http_answer_error(rq, 503, "too_many_connections", why, rq->text);
        if (req->resp) {
            MHD_add_response_header(req->resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
            MHD_add_response_header(req->resp, MHD_HTTP_HEADER_CONNECTION, "close");
        }
    } else if (req->line_cut) {
        http_answer_error(rq, 400, "bad_request", "the request line holds a NUL byte", rq->text);
    } else if (req->url_len > URL_MAX) {
        snprintf(why, sizeof(why), "the URL is %zu bytes; at most %d are accepted", req->url_len,
                 URL_MAX);
        http_answer_error(rq, 414, "uri_too_long", why, rq->text);
    } else if (req->header_bytes > HEADERS_MAX) {
        snprintf(why, sizeof(why), "the headers are %zu bytes; at most %d are accepted",
                 req->header_bytes, HEADERS_MAX);
        http_answer_error(rq, 431, "headers_too_large", why, rq->text);
    } else {
        return 0;
    }
    return 1;
}

/* Queues the answer the handler kept for req: MHD_NO (close) when there is
 * none or the handler asked for the connection to be closed. */
static enum MHD_Result queue_kept(struct MHD_Connection *conn, struct request *req) {
    if (!req->resp) return MHD_NO;
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)req->code, req->resp);
    MHD_destroy_response(req->resp);
    req->resp = NULL;
    return req->keep && ret == MHD_YES ? MHD_YES : MHD_NO;
}

/* Hands req to the workers: its connection is suspended until one has
 * answered it (worker_main), so the loop goes on with the others. Returns
 * 0 without parking once the workers are stopping (a shutdown, after the
 * requests in flight were waited for): a request that a keep-alive
 * connection sends then is answered on the loop instead, since no worker
 * may be left to take it, and libmicrohttpd refuses to stop with a
 * connection suspended. The check and the queueing are under work_mu, so a
 * request queued is one a worker takes before it leaves. */
static int park(struct http_server *s, struct request *req) {
    pthread_mutex_lock(&s->work_mu);
    if (s->work_stop) {
        pthread_mutex_unlock(&s->work_mu);
        return 0;
    }
    req->parked = 1;
    req->parked_us = mclock_us();
    MHD_suspend_connection(req->rq.conn);
    req->next = NULL;
    if (s->work_tail)
        s->work_tail->next = req;
    else
        s->work_head = req;
    s->work_tail = req;
    pthread_cond_signal(&s->work_cond);
    pthread_mutex_unlock(&s->work_mu);
    return 1;
}

/* A worker: answers parked requests, oldest first, then resumes each one's
 * connection so that the loop queues the answer. Leaves once told to stop
 * and the queue is empty, so nothing parked is left unanswered. */
static void *worker_main(void *arg) {
    struct http_server *s = arg;
    pthread_mutex_lock(&s->work_mu);
    for (;;) {
        while (!s->work_head && !s->work_stop) pthread_cond_wait(&s->work_cond, &s->work_mu);
        struct request *req = s->work_head;
        if (!req) break;
        s->work_head = req->next;
        if (!s->work_head) s->work_tail = NULL;
        pthread_mutex_unlock(&s->work_mu);
        req->rq.queued_ms = (long)((mclock_us() - req->parked_us) / 1000);
        req->keep = s->handler(s->handler_cls, &req->rq);
        atomic_store(&req->done, 1);
        MHD_resume_connection(req->rq.conn);
        pthread_mutex_lock(&s->work_mu);
    }
    pthread_mutex_unlock(&s->work_mu);
    return NULL;
}

int http_defer(const struct http_request *rq) {
    struct http_server *s = rq->server;
    struct request *req = rq->state;
    pthread_mutex_lock(&s->work_mu);
    int ok = !s->work_stop && !req->parked;
    if (ok) {
        req->parked = req->deferred = 1;
        atomic_fetch_add(&s->deferred, 1);
        MHD_suspend_connection(rq->conn);
    }
    pthread_mutex_unlock(&s->work_mu);
    return ok;
}

void http_complete(const struct http_request *rq, int keep) {
    struct http_server *s = rq->server;
    struct request *req = rq->state;
    req->keep = keep;
    atomic_store(&req->done, 1);
    MHD_resume_connection(rq->conn);
    atomic_fetch_sub(&s->deferred, 1); /* after the resume: http_stop waits for it */
}

/* Refuses what the server refuses, then hands the request to the handler
 * (api.c's, which answers the rest by routes.def): on the loop when the
 * handler says it cannot wait on a store, else in a worker. */
static enum MHD_Result dispatch(struct http_server *s, struct MHD_Connection *conn, const char *url,
                                const char *method, struct request *req) {
    req->rq = (struct http_request){
        s, conn, url, method, req->body, req->len, req->too_large, wants_text(conn), 0, req, 0};
    if (refuse(req)) {
        req->keep = 1;
        return queue_kept(conn, req);
    }
    if ((!s->hooks.on_loop || !s->hooks.on_loop(s->handler_cls, method, url)) && park(s, req))
        return MHD_YES;
    req->rq.on_loop = 1;
    int keep = s->handler(s->handler_cls, &req->rq);
    if (req->deferred) return MHD_YES; /* http_complete sets keep and resumes */
    req->keep = keep;
    return queue_kept(conn, req);
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
        w->over = atomic_fetch_add(&s->open_conns, 1) >= s->cfg->max_connections;
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
        atomic_fetch_sub(&s->open_conns, 1);
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
        req->over = w && w->over;
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
    if (req->parked) /* resumed: a worker has answered */
        return atomic_load(&req->done) ? queue_kept(conn, req) : MHD_YES;
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
    if (req->resp) MHD_destroy_response(req->resp);
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

/* Tells the workers to stop once the queue is empty, and joins them. */
static void stop_workers(struct http_server *s) {
    pthread_mutex_lock(&s->work_mu);
    s->work_stop = 1;
    pthread_cond_broadcast(&s->work_cond);
    pthread_mutex_unlock(&s->work_mu);
    for (int i = 0; i < s->nworkers; i++) pthread_join(s->workers[i], NULL);
    free(s->workers);
    s->workers = NULL;
    s->nworkers = 0;
}

/* Starts server.workers workers (512 KB stacks: a sale's deepest path, with
 * room for the sanitizers). */
static int start_workers(struct http_server *s, char *errstr, size_t errlen) {
    s->workers = alloc_zeroed(sizeof(*s->workers) * (size_t)s->cfg->workers, errstr, errlen);
    if (!s->workers) return -1;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 512 * 1024);
    int rc = 0;
    while (s->nworkers < s->cfg->workers && rc == 0) {
        rc = pthread_create(&s->workers[s->nworkers], &attr, worker_main, s);
        if (rc == 0) s->nworkers++;
    }
    pthread_attr_destroy(&attr);
    if (rc == 0) return 0;
    snprintf(errstr, errlen, "server.workers: could not start worker %d of %d: %s", s->nworkers + 1,
             s->cfg->workers, strerror(rc));
    stop_workers(s);
    return -1;
}

static void destroy_server(struct http_server *s) {
    pthread_cond_destroy(&s->work_cond);
    pthread_mutex_destroy(&s->work_mu);
    pthread_cond_destroy(&s->reaper_cond);
    pthread_mutex_destroy(&s->watch_mu);
    free(s);
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
    pthread_mutex_init(&s->work_mu, NULL);
    pthread_cond_init(&s->work_cond, NULL);
    if (start_workers(s, errstr, errlen) != 0) {
        close(s->listen_fd);
        destroy_server(s);
        return NULL;
    }
    map_pools(cfg);
    s->d = MHD_start_daemon(
        loop_flag(cfg) | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0, NULL, NULL, on_request, s,
        MHD_OPTION_LISTEN_SOCKET, s->listen_fd, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)cfg->io_threads, MHD_OPTION_CONNECTION_MEMORY_LIMIT, conn_memory(cfg),
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)conn_limit(cfg), MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)cfg->connection_timeout_s, MHD_OPTION_THREAD_STACK_SIZE, (size_t)(256 * 1024),
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
        s, MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL, MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
        MHD_OPTION_END);
    if (!s->d) {
        snprintf(errstr, errlen, "libmicrohttpd could not start on %s:%d", cfg->bind, cfg->port);
        close(s->listen_fd);
        stop_workers(s);
        destroy_server(s);
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
    stop_workers(s); /* each answers what is parked first, and the loop sends it */
    /* Requests deferred before the workers stopped (none can be after) are
     * completed within their store's timeout: libmicrohttpd must not be
     * stopped with a connection still suspended. */
    while (atomic_load(&s->deferred) > 0) mclock_sleep_ms(5);
    MHD_stop_daemon(s->d); /* frees every watch through on_connection */
    destroy_server(s);
}
