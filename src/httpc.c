/* httpc.c -- a tiny blocking HTTP/1.1 client over one keep-alive TCP
 * connection (see httpc.h for the contract).
 *
 * DESIGN
 * One struct httpc owns one socket, an input buffer and a body buffer; it is
 * used by one thread at a time and nothing in it is shared. The socket is
 * opened lazily by the first request and reopened when the server closed it.
 *
 * The one rule that shapes the code: a request whose bytes reached the socket
 * is never sent again, because a sale sent twice is two sales. The only
 * replay is when a reused keep-alive connection fails before the first byte
 * of the request was written. To make that case the common one, an idle
 * connection is polled with a zero timeout before reuse: if it is readable,
 * the peer has closed it (or sent something unasked), and a fresh connection
 * is opened before anything is written.
 *
 * Every read and write is bounded by SO_RCVTIMEO / SO_SNDTIMEO (timeout_ms,
 * per system call; connect() honours SO_SNDTIMEO on Linux).
 *
 * Bodies: Content-Length, chunked (nginx error pages may use it), or until
 * close. Not thread safe. */
#include "httpc.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <unistd.h>

#define HTTPC_MAX_HEADER_BYTES (64 * 1024)
#define HTTPC_MAX_BODY_BYTES (64 * 1024 * 1024)

struct httpc {
    char host[256];
    int port;
    int timeout_ms;
    int fd; /* -1 when not connected */
    long connects; /* connections opened so far */
    char errstr[160];

    char *in; /* bytes read from the socket, not yet consumed */
    size_t in_len, in_cap;

    char *body; /* the current answer's body, NUL-terminated */
    size_t body_len, body_cap;

    char *req; /* the request being sent */
    size_t req_cap;
};

static void set_error(struct httpc *h, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->errstr, sizeof(h->errstr), fmt, ap);
    va_end(ap);
}

static void conn_close(struct httpc *h) {
    if (h->fd >= 0) close(h->fd);
    h->fd = -1;
    h->in_len = 0;
}

struct httpc *httpc_create(const char *host, int port, int timeout_ms) {
    struct httpc *h = calloc(1, sizeof(*h));
    if (h == NULL) return NULL;
    snprintf(h->host, sizeof(h->host), "%s", host ? host : "127.0.0.1");
    h->port = port;
    h->timeout_ms = timeout_ms > 0 ? timeout_ms : 10000;
    h->fd = -1;
    h->in_cap = 4096;
    h->body_cap = 4096;
    h->req_cap = 1024;
    h->in = malloc(h->in_cap);
    h->body = malloc(h->body_cap);
    h->req = malloc(h->req_cap);
    if (h->in == NULL || h->body == NULL || h->req == NULL) {
        httpc_free(h);
        return NULL;
    }
    h->body[0] = '\0';
    return h;
}

void httpc_free(struct httpc *h) {
    if (h == NULL) return;
    conn_close(h);
    free(h->in);
    free(h->body);
    free(h->req);
    free(h);
}

const char *httpc_errstr(const struct httpc *h) { return h ? h->errstr : "no client"; }

/* Grows *buf to hold at least need bytes. 0 or -1 (out of memory). */
static int grow(char **buf, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 1024;
    while (n < need) n *= 2;
    char *p = realloc(*buf, n);
    if (p == NULL) return -1;
    *buf = p;
    *cap = n;
    return 0;
}

static int conn_open(struct httpc *h) {
    struct addrinfo hints, *res = NULL, *ai;
    char portstr[16];
    struct timeval tv;
    int one = 1, rc, fd = -1, saved = 0;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(portstr, sizeof(portstr), "%d", h->port);
    rc = getaddrinfo(h->host, portstr, &hints, &res);
    if (rc != 0) {
        set_error(h, "resolve %s: %s", h->host, gai_strerror(rc));
        return -1;
    }
    tv.tv_sec = h->timeout_ms / 1000;
    tv.tv_usec = (h->timeout_ms % 1000) * 1000;
    for (ai = res; ai != NULL; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
        saved = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        if (saved == EAGAIN || saved == EINPROGRESS)
            set_error(h, "connect %s:%d: timed out after %d ms", h->host, h->port, h->timeout_ms);
        else
            set_error(h, "connect %s:%d: %s", h->host, h->port, strerror(saved));
        return -1;
    }
    h->fd = fd;
    h->in_len = 0;
    h->connects++;
    return 0;
}

/* True when an idle keep-alive connection can no longer be used: the peer
 * closed it, reset it, or sent bytes nobody asked for. */
static int conn_stale(struct httpc *h) {
    struct pollfd p = {.fd = h->fd, .events = POLLIN};
    int n;
    do {
        n = poll(&p, 1, 0);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return 1;
    return n > 0 && (p.revents & (POLLIN | POLLERR | POLLHUP | POLLNVAL)) != 0;
}

/* Writes the whole request. Returns 0; -1 when nothing at all was written
 * (safe to retry on a new connection); -2 when part of it was written. */
static int send_all(struct httpc *h, const char *buf, size_t len) {
    size_t off = 0;
    while (off < len) {
        ssize_t n = send(h->fd, buf + off, len - off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                set_error(h, "send: timed out after %d ms", h->timeout_ms);
            else
                set_error(h, "send: %s", strerror(errno));
            return off == 0 ? -1 : -2;
        }
        off += (size_t)n;
    }
    return 0;
}

/* Reads more bytes into h->in. Returns the count, 0 on orderly close, -1 on
 * error or timeout (errstr set). */
static ssize_t fill(struct httpc *h) {
    if (h->in_cap - h->in_len < 2048 && grow(&h->in, &h->in_cap, h->in_len + 4096) != 0) {
        set_error(h, "out of memory");
        return -1;
    }
    for (;;) {
        ssize_t n = recv(h->fd, h->in + h->in_len, h->in_cap - h->in_len, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                set_error(h, "timed out after %d ms waiting for the answer", h->timeout_ms);
            else
                set_error(h, "recv: %s", strerror(errno));
            return -1;
        }
        h->in_len += (size_t)n;
        return n;
    }
}

/* Drops the first n bytes of h->in. */
static void consume(struct httpc *h, size_t n) {
    memmove(h->in, h->in + n, h->in_len - n);
    h->in_len -= n;
}

static int body_append(struct httpc *h, const char *p, size_t n) {
    if (h->body_len + n > HTTPC_MAX_BODY_BYTES) {
        set_error(h, "answer body larger than %d bytes", HTTPC_MAX_BODY_BYTES);
        return -1;
    }
    if (grow(&h->body, &h->body_cap, h->body_len + n + 1) != 0) {
        set_error(h, "out of memory");
        return -1;
    }
    memcpy(h->body + h->body_len, p, n);
    h->body_len += n;
    h->body[h->body_len] = '\0';
    return 0;
}

/* Finds "\r\n\r\n" in h->in; returns the header block's length including it,
 * or 0 when not yet complete. */
static size_t header_end(const struct httpc *h) {
    const char *p = memmem(h->in, h->in_len, "\r\n\r\n", 4);
    return p ? (size_t)(p - h->in) + 4 : 0;
}

/* Copies a header value (trimmed) into dst. */
static void copy_value(char *dst, size_t dstlen, const char *v, size_t vlen) {
    while (vlen > 0 && (*v == ' ' || *v == '\t')) {
        v++;
        vlen--;
    }
    while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t')) vlen--;
    if (vlen >= dstlen) vlen = dstlen - 1;
    memcpy(dst, v, vlen);
    dst[vlen] = '\0';
}

struct head {
    int status;
    int minor; /* HTTP/1.minor */
    long long content_length; /* -1 when absent */
    int chunked;
    int conn_close;
    int conn_keep_alive;
};

/* Parses "HTTP/1.x NNN ..." (the line before eol) into hd. */
static int parse_status_line(struct httpc *h, const char *p, const char *eol, struct head *hd) {
    if (eol == NULL || eol - p < 12 || strncmp(p, "HTTP/1.", 7) != 0 || p[8] != ' ') {
        set_error(h, "malformed status line");
        return -1;
    }
    hd->minor = p[7] - '0';
    if (p[9] < '0' || p[9] > '9' || p[10] < '0' || p[10] > '9' || p[11] < '0' || p[11] > '9') {
        set_error(h, "malformed status code");
        return -1;
    }
    hd->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
    return 0;
}

/* One header, name (nlen bytes) and value v (vlen bytes), into hd and resp;
 * headers the client does not use are skipped. */
static int parse_header(struct httpc *h, const char *name, size_t nlen, const char *v, size_t vlen,
                        struct head *hd, struct httpc_response *resp) {
    char tmp[64];
#define IS(want) (nlen == sizeof(want) - 1 && strncasecmp(name, want, nlen) == 0)
    if (IS("Content-Length")) {
        copy_value(tmp, sizeof(tmp), v, vlen);
        char *e;
        errno = 0;
        long long n = strtoll(tmp, &e, 10);
        if (errno != 0 || e == tmp || *e != '\0' || n < 0) {
            set_error(h, "bad Content-Length '%s'", tmp);
            return -1;
        }
        hd->content_length = n;
    } else if (IS("Content-Type")) {
        copy_value(resp->content_type, sizeof(resp->content_type), v, vlen);
    } else if (IS("Allow")) {
        copy_value(resp->allow, sizeof(resp->allow), v, vlen);
    } else if (IS("WWW-Authenticate")) {
        copy_value(resp->www_authenticate, sizeof(resp->www_authenticate), v, vlen);
    } else if (IS("Transfer-Encoding")) {
        copy_value(tmp, sizeof(tmp), v, vlen);
        if (strcasestr(tmp, "chunked") != NULL) hd->chunked = 1;
    } else if (IS("Connection")) {
        copy_value(tmp, sizeof(tmp), v, vlen);
        if (strcasestr(tmp, "close") != NULL) hd->conn_close = 1;
        if (strcasestr(tmp, "keep-alive") != NULL) hd->conn_keep_alive = 1;
    }
#undef IS
    return 0;
}

/* Parses a header block of len bytes at h->in into *hd and resp. */
static int parse_head(struct httpc *h, size_t len, struct head *hd, struct httpc_response *resp) {
    const char *p = h->in, *end = h->in + len - 2; /* keep the last CRLF out */
    const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);

    memset(hd, 0, sizeof(*hd));
    hd->content_length = -1;
    if (parse_status_line(h, p, eol, hd) != 0) return -1;
    for (p = eol + 2; p < end; p = eol + 2) {
        eol = memmem(p, (size_t)(end - p) + 2, "\r\n", 2);
        if (eol == NULL) break;
        const char *colon = memchr(p, ':', (size_t)(eol - p));
        if (colon != NULL && parse_header(h, p, (size_t)(colon - p), colon + 1,
                                          (size_t)(eol - colon - 1), hd, resp) != 0)
            return -1;
    }
    return 0;
}

/* Reads exactly n body bytes (some may already be in h->in). */
static int read_fixed(struct httpc *h, size_t n) {
    while (n > 0) {
        if (h->in_len == 0) {
            ssize_t r = fill(h);
            if (r < 0) return -1;
            if (r == 0) {
                set_error(h, "connection closed mid-answer");
                return -1;
            }
        }
        size_t take = h->in_len < n ? h->in_len : n;
        if (body_append(h, h->in, take) != 0) return -1;
        consume(h, take);
        n -= take;
    }
    return 0;
}

/* Reads one CRLF-terminated line into line (without CRLF). */
static int read_line(struct httpc *h, char *line, size_t linelen) {
    for (;;) {
        const char *eol = memmem(h->in, h->in_len, "\r\n", 2);
        if (eol != NULL) {
            size_t n = (size_t)(eol - h->in);
            copy_value(line, linelen, h->in, n);
            consume(h, n + 2);
            return 0;
        }
        if (h->in_len > 4096) {
            set_error(h, "malformed chunked body");
            return -1;
        }
        ssize_t r = fill(h);
        if (r < 0) return -1;
        if (r == 0) {
            set_error(h, "connection closed mid-answer");
            return -1;
        }
    }
}

static int read_chunked(struct httpc *h) {
    char line[128];
    for (;;) {
        if (read_line(h, line, sizeof(line)) != 0) return -1;
        char *e;
        unsigned long long n = strtoull(line, &e, 16);
        if (e == line) {
            set_error(h, "malformed chunk size '%s'", line);
            return -1;
        }
        if (n == 0) break;
        if (n > HTTPC_MAX_BODY_BYTES) {
            set_error(h, "chunk too large");
            return -1;
        }
        if (read_fixed(h, (size_t)n) != 0 || read_line(h, line, sizeof(line)) != 0) return -1;
    }
    /* Trailers, up to the empty line. */
    do {
        if (read_line(h, line, sizeof(line)) != 0) return -1;
    } while (line[0] != '\0');
    return 0;
}

static int read_until_close(struct httpc *h) {
    for (;;) {
        if (h->in_len > 0) {
            if (body_append(h, h->in, h->in_len) != 0) return -1;
            h->in_len = 0;
        }
        ssize_t r = fill(h);
        if (r < 0) return -1;
        if (r == 0) return 0;
    }
}

/* Builds the request into h->req; returns its length or 0 (out of memory). */
static size_t build_request(struct httpc *h, const char *method, const char *path,
                            const char *extra_headers, const char *body) {
    size_t blen = body ? strlen(body) : 0;
    int need_len = body != NULL || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 ||
                   strcmp(method, "PATCH") == 0;
    int need_type = body != NULL && blen > 0 &&
                    (extra_headers == NULL || strcasestr(extra_headers, "content-type:") == NULL);
    size_t need = strlen(method) + strlen(path) + strlen(h->host) +
                  (extra_headers ? strlen(extra_headers) : 0) + blen + 160;
    if (grow(&h->req, &h->req_cap, need) != 0) return 0;
    int n = snprintf(h->req, h->req_cap, "%s %s HTTP/1.1\r\nHost: %s:%d\r\n%s%s", method, path,
                     h->host, h->port, need_type ? "Content-Type: application/json\r\n" : "",
                     extra_headers ? extra_headers : "");
    if (need_len)
        n += snprintf(h->req + n, h->req_cap - (size_t)n, "Content-Length: %zu\r\n", blen);
    n += snprintf(h->req + n, h->req_cap - (size_t)n, "\r\n");
    if (blen > 0) memcpy(h->req + n, body, blen);
    return (size_t)n + blen;
}

/* Sends the built request, on the kept connection or a new one. On failure
 * the connection is closed. */
static int send_request(struct httpc *h, size_t reqlen) {
    if (h->fd >= 0 && (h->in_len > 0 || conn_stale(h))) conn_close(h);
    int reused = h->fd >= 0;
    if (!reused && conn_open(h) != 0) return -1;

    int rc = send_all(h, h->req, reqlen);
    if (rc == -1 && reused) {
        /* The idle connection died between the poll and the write, and not
         * one byte went out: the one case where sending again is safe. */
        conn_close(h);
        if (conn_open(h) != 0) return -1;
        rc = send_all(h, h->req, reqlen);
    }
    if (rc != 0) conn_close(h);
    return rc;
}

/* Reads the answer's head into hd and resp, skipping interim 1xx answers.
 * On failure the connection is closed. */
static int read_head(struct httpc *h, struct head *hd, struct httpc_response *resp) {
    size_t hlen;
    for (;;) {
        while ((hlen = header_end(h)) == 0) {
            if (h->in_len > HTTPC_MAX_HEADER_BYTES) {
                set_error(h, "answer head larger than %d bytes", HTTPC_MAX_HEADER_BYTES);
                conn_close(h);
                return -1;
            }
            ssize_t r = fill(h);
            if (r <= 0) {
                if (r == 0)
                    set_error(h, h->in_len == 0 ? "connection closed before the answer"
                                                : "connection closed mid-answer");
                conn_close(h);
                return -1;
            }
        }
        if (parse_head(h, hlen, hd, resp) != 0) {
            conn_close(h);
            return -1;
        }
        consume(h, hlen);
        if (hd->status >= 200 || hd->status == 101) return 0;
        resp->content_type[0] = '\0';
        resp->allow[0] = '\0';
        resp->www_authenticate[0] = '\0';
    }
}

/* Reads the body that hd announces; *keep is cleared when the body ends
 * with the connection. */
static int read_body(struct httpc *h, const char *method, const struct head *hd, int *keep) {
    if (strcmp(method, "HEAD") == 0 || hd->status == 204 || hd->status == 304) return 0;
    if (hd->chunked) return read_chunked(h);
    if (hd->content_length < 0) {
        *keep = 0;
        return read_until_close(h);
    }
    if (hd->content_length > HTTPC_MAX_BODY_BYTES) {
        set_error(h, "answer body larger than %d bytes", HTTPC_MAX_BODY_BYTES);
        return -1;
    }
    return read_fixed(h, (size_t)hd->content_length);
}

static int request_once(struct httpc *h, const char *method, const char *path,
                        const char *extra_headers, const char *body, struct httpc_response *resp) {
    struct head hd;

    memset(resp, 0, sizeof(*resp));
    h->body_len = 0;
    h->body[0] = '\0';
    resp->body = h->body;
    h->errstr[0] = '\0';

    size_t reqlen = build_request(h, method, path, extra_headers, body);
    if (reqlen == 0) {
        set_error(h, "out of memory");
        return -1;
    }
    if (send_request(h, reqlen) != 0 || read_head(h, &hd, resp) != 0) return -1;

    int keep = hd.minor >= 1 ? !hd.conn_close : hd.conn_keep_alive;
    if (read_body(h, method, &hd, &keep) != 0) {
        conn_close(h);
        return -1;
    }
    /* Leftover bytes were not asked for: the connection can't be trusted. */
    if (!keep || h->in_len > 0) conn_close(h);

    resp->status = hd.status;
    resp->body = h->body;
    resp->body_len = h->body_len;
    return 0;
}

int httpc_request(struct httpc *h, const char *method, const char *path, const char *extra_headers,
                  const char *body, struct httpc_response *resp) {
    int rc = request_once(h, method, path, extra_headers, body, resp);
    /* The body buffer may have moved while growing, on any path. */
    resp->body = h->body;
    resp->body_len = h->body_len;
    if (rc != 0) resp->status = 0;
    return rc;
}

long httpc_connects(const struct httpc *h) { return h->connects; }
