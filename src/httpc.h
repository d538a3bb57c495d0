/* httpc.h -- a tiny blocking HTTP/1.1 client over one keep-alive TCP
 * connection: the project's one HTTP client, used by the lab's runs
 * (lab.c), the load driver (tools/loadgen.c) and the tests. Not thread
 * safe: one struct httpc per thread. Speaks what inventoryd and nginx
 * answer: Content-Length, chunked, or until close. */
#ifndef INVENTORYD_HTTPC_H
#define INVENTORYD_HTTPC_H

#include <stddef.h>

struct httpc_response {
    int status; /* e.g. 200; 0 when no answer came */
    char *body; /* NUL-terminated; owned by the struct httpc,
                              valid until its next request */
    size_t body_len;
    char content_type[64];
    char allow[64]; /* the Allow header, if any */
    char www_authenticate[64]; /* the WWW-Authenticate header of a 401, if any */
};

struct httpc;

/* Makes a client for host:port with an I/O timeout. The connection is opened
 * on the first request and reopened when the server closed it. Never returns
 * NULL except when out of memory. */
struct httpc *httpc_create(const char *host, int port, int timeout_ms);

/* Frees the client and closes its connection. Accepts NULL. */
void httpc_free(struct httpc *h);

/* Sends one request and reads the whole answer. extra_headers is NULL or
 * lines each ending in "\r\n"; body may be NULL. Returns 0, or -1 with
 * httpc_errstr() saying why (refused, timed out, closed mid-answer). A request
 * is sent at most once: if the connection dies before the answer, it is not
 * retried (a sale must never be sent twice), except when a reused keep-alive
 * connection turns out closed before any byte was written. */
int httpc_request(struct httpc *h, const char *method, const char *path, const char *extra_headers,
                  const char *body, struct httpc_response *resp);

const char *httpc_errstr(const struct httpc *h);

/* How many connections the client has opened: 1 after any number of
 * requests on one kept-alive connection; each silent reopen adds one. */
long httpc_connects(const struct httpc *h);

#endif
