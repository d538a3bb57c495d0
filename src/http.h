/* http.h -- the HTTP server of the service, on libmicrohttpd.
 *
 * DESIGN
 * Connections live on server.io-threads event loops (libmicrohttpd's epoll
 * mode with a thread pool): they read requests and send answers for every
 * connection. A request the handler answers without waiting on a store or
 * a lock (http_hooks.on_loop: the list of strategies, the metrics, the lab's
 * page, a 404) is answered on the loop. A handler on the loop may also
 * hand its request to a thread that answers it without waiting on it (a
 * pipelined sale): http_defer suspends the connection and http_complete
 * resumes it. Every other request (a sale, a read of the stock, /healthz)
 * is parked: its connection is suspended, and one of
 * server.workers worker threads answers it, oldest first, and resumes the
 * connection so that the loop sends the answer. A sale that waits for a
 * lock thus blocks one worker, never a loop; at most server.workers such
 * requests run at once, and the rest wait their turn, parked. The server
 * reads requests, refuses what no route may take (a NUL byte in the request
 * line, an oversized URL or headers), checks the admin token when asked, and
 * queues answers. What a path does is the handler's, given to http_start
 * (api.c's api_answer, which reads routes.def): it answers through the
 * functions below, which keep the answer for the loop to send. This layer
 * knows nothing of routes, the inventory or Redis. */
#ifndef INVENTORYD_HTTP_H
#define INVENTORYD_HTTP_H

#include <stddef.h>

#define HTTP_CT_JSON "application/json; charset=utf-8"
#define HTTP_CT_TEXT "text/plain; charset=utf-8"

struct config;
struct http_server;
struct web_asset;
struct MHD_Connection;

/* One request, as the server hands it to its handler. Valid during the
 * handler's call only, or until http_complete for a deferred one. */
struct http_request {
    struct http_server *server;
    struct MHD_Connection *conn;
    const char *url; /* the path, percent-decoded, without the query */
    const char *method;
    const char *body; /* NUL-terminated; NULL when there is none */
    size_t len;
    int too_large; /* the body passed server.max-body-bytes and was dropped */
    int text; /* the demo's text is asked for (?format=text, Accept) */
    long queued_ms; /* how long it waited for a worker (0 on the loop) */
    void *state; /* the server's own */
    int on_loop; /* answered on its event loop, where nothing may wait */
};

/* Answers rq with one of the functions below. Returns what they return. */
typedef int (*http_handler)(void *cls, const struct http_request *rq);

/* What the server asks of the layers above it, without knowing them (so
 * that it stays at the bottom of the graph): the body of an error answer
 * in the service's format, and a word of every answer queued. */
struct http_hooks {
    /* A new body (freed by the server; NULL: out of memory) for the error
     * word and its sentence: JSON, or the demo's text when text. Required. */
    char *(*error_body)(const char *word, const char *sentence, int text);
    /* Called with the status of every answer queued (metrics); may be NULL. */
    void (*answered)(int code);
    /* Whether the handler (cls is its own) answers method url without ever
     * waiting on a store or a lock (or defers it, http_defer): such a
     * request is answered on the event loop; every other one is parked and
     * answered by a worker. NULL: every request goes to a worker. */
    int (*on_loop)(void *cls, const char *method, const char *url);
};

/* Starts listening on cfg->bind:cfg->port; every request that the server
 * does not refuse goes to handler(cls, ...). cfg and cls must outlive the
 * server; hooks is copied. NULL on failure, with errstr set (e.g. the port
 * is in use). */
struct http_server *http_start(const struct config *cfg, const struct http_hooks *hooks,
                               http_handler handler, void *cls, char *errstr, size_t errlen);

/* Stops accepting new connections; requests in flight go on. */
void http_quiesce(struct http_server *s);

/* Waits for requests in flight to finish, closes every connection and frees
 * the server. Accepts NULL. */
void http_stop(struct http_server *s);

/* The answers. Each queues one answer for rq with Cache-Control: no-store
 * and returns 1, or 0 when the connection is to be closed instead; a
 * handler returns that. */

/* body (taken over and freed; NULL is an out of memory, answered with a
 * fixed 500) as type, and when allow is not NULL that Allow header. */
int http_answer(const struct http_request *rq, int code, char *body, const char *type,
                const char *allow);

/* The JSON error {"status":word,"error":sentence}, or its text when text. */
int http_answer_error(const struct http_request *rq, int code, const char *word,
                      const char *sentence, int text);

/* The 401 for a request without the admin token, with WWW-Authenticate and
 * the sentence why (from http_admin_allowed). */
int http_answer_unauthorized(const struct http_request *rq, const char *why, int text);

/* One of the page's embedded files, with the page's security headers
 * (Content-Security-Policy and the like) and Cache-Control: no-cache. */
int http_answer_asset(const struct http_request *rq, const struct web_asset *a);

/* For a handler on the loop (rq->on_loop) whose answer comes from another
 * thread without a worker waiting for it (a sale sent pipelined): suspends
 * rq's connection, and the handler returns at once, its return value
 * ignored. rq stays valid until the other thread, having answered with
 * the functions above, calls http_complete with what the handler would
 * have returned; the loop then sends the answer. Returns 1, or 0 when the
 * server is stopping (nothing suspended: answer in the handler). */
int http_defer(const struct http_request *rq);

/* Ends a deferred request (http_defer): its answer is kept; keep is the
 * handler's return value (0 closes the connection). Any thread. */
void http_complete(const struct http_request *rq, int keep);

/* The query argument name of rq, or NULL when absent. */
const char *http_query(const struct http_request *rq, const char *name);

/* Whether rq may do what needs the admin token: always when admin.token is
 * empty. Otherwise 0, with a sentence naming the header in why, when its
 * Authorization header is missing, not Bearer, or another token; what names
 * the refused thing ("a reset"). The token is compared in constant time and
 * never written anywhere. */
int http_admin_allowed(const struct http_request *rq, const char *what, char *why, size_t whylen);

#endif
