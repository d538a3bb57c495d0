/* http.c -- the HTTP front on libmicrohttpd (see http.h).
 *
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
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
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
#include "config.h"
#include "http.h"
#include "item.h"
#include "inventory.h"
#include "lab.h"
#include "log.h"
#include "mclock.h"
#include "metrics.h"
#include "reply.h"
#include "route.h"
#include "strategy.h"
#include "web.h"

#define CT_JSON "application/json; charset=utf-8"
#define CT_TEXT "text/plain; charset=utf-8"
#define CT_PROM "text/plain; version=0.0.4; charset=utf-8"
#define CT_CSV "text/csv; charset=utf-8"

/* The page loads nothing from elsewhere, and nothing inline. */
#define LAB_CSP "default-src 'self'"

#define NESTED_MAX 16
#define HISTORY_LIMIT_MAX 5000

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
    int line_cut;              /* the current request line holds a NUL byte */
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
    struct inventory *inv;
    struct lab *lab;           /* NULL: lab.enabled=false */
    const struct strategy *default_strategy;
    int listen_fd;
    int quiesced;
    atomic_int inflight;
};

struct request {
    int line_cut;              /* a NUL byte cut the request line short */
    char *body;
    size_t len;
    int too_large;
    size_t url_len;            /* checked against URL_MAX */
    size_t header_bytes;       /* names and values, against HEADERS_MAX */
};

/* Adds one header (or one query argument, to the URL's length). */
static enum MHD_Result count_value(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value) {
    struct request *req = cls;
    size_t n = strlen(key) + (value ? strlen(value) : 0) + 2;
    if (kind == MHD_GET_ARGUMENT_KIND) req->url_len += n;
    else req->header_bytes += n + 2;
    return MHD_YES;
}

/* Queues body (taken over, freed by MHD) with code, and the header name:
 * value when name is not NULL. A NULL body is an out of memory: a fixed 500
 * goes out instead. */
static enum MHD_Result answer_with(struct MHD_Connection *conn, int code, char *body,
                                   const char *type, const char *name, const char *value) {
    struct MHD_Response *resp;
    int oom = !body;
    if (oom) {
        static const char oom_body[] = "{\"status\":\"internal_error\",\"error\":\"out of memory\"}";
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
    metrics_http(code);
    return ret;
}

/* answer_with and, when allow is not NULL, that Allow header. */
static enum MHD_Result answer(struct MHD_Connection *conn, int code, char *body,
                              const char *type, const char *allow) {
    return answer_with(conn, code, body, type, allow ? MHD_HTTP_HEADER_ALLOW : NULL, allow);
}

/* Queues one of the page's embedded files, with the page's security headers. */
static enum MHD_Result answer_asset(struct MHD_Connection *conn, const struct web_asset *a) {
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(a->len, (void *)a->data, MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, a->type);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "Content-Security-Policy", LAB_CSP);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    metrics_http(200);
    return ret;
}

static enum MHD_Result answer_error(struct MHD_Connection *conn, int code, const char *word,
                                    const char *sentence, int text) {
    return answer(conn, code, reply_error(word, sentence, text), text ? CT_TEXT : CT_JSON, NULL);
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

/* Whether the request may do what needs the admin token: always when
 * admin.token is empty. Otherwise 0, with a sentence naming the header in
 * why, when its Authorization header is missing, not Bearer, or another
 * token. what names the refused thing ("a reset"). */
static int admin_allowed(const struct http_server *s, struct MHD_Connection *conn,
                         const char *what, char *why, size_t whylen) {
    const char *want = s->cfg->admin_token;
    if (!want[0]) return 1;
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h) {
        snprintf(why, whylen, "%s needs the admin token: send the header "
                 "'Authorization: Bearer <admin.token>'", what);
        return 0;
    }
    if (strncasecmp(h, "Bearer ", 7) != 0) {
        snprintf(why, whylen, "%s needs the admin token, and the Authorization header is not "
                 "'Bearer <admin.token>'", what);
        return 0;
    }
    const char *tok = h + 7;
    while (*tok == ' ') tok++;
    size_t n = strlen(tok);
    while (n > 0 && (tok[n - 1] == ' ' || tok[n - 1] == '\t')) n--;
    if (!token_equal(tok, n, want)) {
        snprintf(why, whylen, "%s needs the admin token, and the one in the Authorization "
                 "header is not this instance's admin.token", what);
        log_limited("auth", "refused %s: the Authorization header holds a wrong admin token", what);
        return 0;
    }
    return 1;
}

/* The 401 for a request without the admin token. */
static enum MHD_Result answer_unauthorized(struct MHD_Connection *conn, const char *why,
                                           int text) {
    return answer_with(conn, 401, reply_error("unauthorized", why, text), text ? CT_TEXT : CT_JSON,
                       MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"inventoryd\"");
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

/* Reads query argument name as an int in [min, max] into *out. Returns 0 when
 * absent, 1 when read, -1 (with a sentence in why) when malformed. */
static int query_int(struct MHD_Connection *conn, const char *name, long min, long max,
                     int *out, char *why, size_t whylen) {
    const char *v = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, name);
    if (!v) return 0;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || errno || n < min || n > max) {
        snprintf(why, whylen, "%s must be a whole number from %ld to %ld, not '%.32s'",
                 name, min, max, v);
        return -1;
    }
    *out = (int)n;
    return 1;
}

/* The ?item= of a request: NULL when absent (the configured item). Returns
 * -1 with a sentence in why when it cannot name a stock key. */
static int query_item(const struct http_server *s, struct MHD_Connection *conn, const char **item,
                      char *why, size_t whylen) {
    *item = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "item");
    return *item ? item_check(*item, s->cfg->lock_name, why, whylen) : 0;
}

/* One request being answered, as the handlers see it. */
struct call {
    struct http_server *s;
    struct MHD_Connection *conn;
    const char *method;
    const struct route *rt;
    struct request *req;
    const char *item;          /* ?item=, checked; NULL: the configured one */
    int text;                  /* the demo's text instead of JSON */
};

/* Reads the fault parameters of a request into f. Returns 0, or the HTTP
 * status to refuse it with (400 malformed, 403 faults off, 401 without the
 * admin token: any fault parameter given needs it) and a sentence. */
static int read_faults(const struct call *k, struct sale_faults *f, char *why, size_t whylen) {
    struct http_server *s = k->s;
    struct MHD_Connection *conn = k->conn;
    memset(f, 0, sizeof(*f));
    if (!(route_table[k->rt->id].flags & ROUTE_F_FAULTS)) return 0;   /* none taken here */
    int maxhold = s->cfg->faults_max_hold_ms, given = 0, rc;
    if ((rc = query_int(conn, "hold_ms", 0, maxhold, &f->hold_ms, why, whylen)) < 0) return 400;
    given |= rc;
    if ((rc = query_int(conn, "release_delay_ms", 0, maxhold, &f->release_delay_ms, why, whylen)) < 0)
        return 400;
    given |= rc;
    if ((rc = query_int(conn, "nested", 0, NESTED_MAX, &f->nested, why, whylen)) < 0) return 400;
    given |= rc;
    if ((rc = query_int(conn, "crash", 0, 1, &f->crash, why, whylen)) < 0) return 400;
    given |= rc;
    if ((rc = query_int(conn, "commit_delay_ms", 0, maxhold, &f->commit_delay_ms, why, whylen)) < 0)
        return 400;
    given |= rc;
    if ((rc = query_int(conn, "wait_ms", 0, maxhold, &f->wait_ms, why, whylen)) < 0) return 400;
    f->wait_given = rc;
    given |= rc;
    if (given && !s->cfg->faults_enabled) {
        snprintf(why, whylen, "fault injection is off: start the instance with faults.enabled=true "
                 "to use hold_ms, crash, release_delay_ms, nested, commit_delay_ms or wait_ms");
        return 403;
    }
    if (given && !admin_allowed(s, conn, "a fault parameter", why, whylen)) return 401;
    return 0;
}

/* The answer for read_faults' refusal code. */
static enum MHD_Result answer_faults_refused(struct MHD_Connection *conn, int code,
                                             const char *why, int text) {
    if (code == 401) return answer_unauthorized(conn, why, text);
    return answer_error(conn, code, code == 403 ? "faults_disabled" : "bad_request", why, text);
}

typedef enum MHD_Result (*handler)(const struct call *k);

/* Sells one unit with strategy t (NULL: unknown, named by the path). */
static enum MHD_Result sell(const struct call *k, const struct strategy *t) {
    struct http_server *s = k->s;
    struct MHD_Connection *conn = k->conn;
    int text = k->text;
    if (!t) return answer(conn, 404, reply_unknown_strategy(k->rt->arg, text),
                          text ? CT_TEXT : CT_JSON, NULL);
    if (strcmp(k->method, "HEAD") == 0)   /* a HEAD changes nothing; its body is dropped */
        return answer_error(conn, 200, "not_sold", "HEAD never sells: GET or POST does", text);

    struct sale_faults f;
    char why[192];
    int code = read_faults(k, &f, why, sizeof(why));
    if (code) return answer_faults_refused(conn, code, why, text);

    struct sale_result r;
    inventory_sell(s->inv, t, k->item, &f, &r);
    metrics_sale(t, &r);
    if (r.status == INV_BACKEND)
        log_limited("backend", "a sale by %s answered 503 backend_unavailable: %s", t->name, r.errstr);
    return answer(conn, reply_sale_http_status(r.status), reply_sale(&r, t->name, s->cfg->port, text),
                  text ? CT_TEXT : CT_JSON, NULL);
}

/* A sale with the strategy the path names, or the default one. */
static enum MHD_Result api_sale(const struct call *k) {
    return sell(k, k->rt->arg[0] ? strategy_find(k->rt->arg) : k->s->default_strategy);
}

/* The demo's later endpoints, each tied to its strategy. */
static enum MHD_Result api_sale_by_redisson(const struct call *k) {
    return sell(k, strategy_find("redisson"));
}

static enum MHD_Result api_sale_by_redlock(const struct call *k) {
    return sell(k, strategy_find("redlock"));
}

/* GET /inventory/history?item=&since=&limit= */
static enum MHD_Result api_history(const struct call *k) {
    struct http_server *s = k->s;
    struct MHD_Connection *conn = k->conn;
    const char *item = k->item;
    int text = k->text;
    char why[192];
    int limit = 100;
    if (query_int(conn, "limit", 1, HISTORY_LIMIT_MAX, &limit, why, sizeof(why)) < 0)
        return answer_error(conn, 400, "bad_request", why, text);
    const char *since = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "since");
    if (since && (strlen(since) > 40 || strspn(since, "0123456789-") != strlen(since)))
        return answer_error(conn, 400, "bad_request",
                            "since must be an event id such as 1700000000000-0, or 0", text);
    struct history_event *ev = calloc((size_t)limit, sizeof(*ev));
    if (!ev) return answer(conn, 500, NULL, CT_JSON, NULL);
    int n = 0, rc = inventory_history(s->inv, item, since, limit, ev, &n, why, sizeof(why));
    enum MHD_Result ret = rc ? answer_error(conn, 503, "backend_unavailable", why, text)
                             : answer(conn, 200, reply_history(ev, n, text), text ? CT_TEXT : CT_JSON,
                                      NULL);
    free(ev);
    return ret;
}

static enum MHD_Result api_reset(const struct call *k) {
    struct http_server *s = k->s;
    struct MHD_Connection *conn = k->conn;
    struct request *req = k->req;
    int text = k->text;
    static const char usage[] = "send a JSON body such as {\"stock\": 200}";
    char why[256];
    cJSON *doc = req->len ? cJSON_ParseWithLength(req->body, req->len) : NULL;
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(doc, "stock");
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(doc, "item");
    double v = cJSON_IsNumber(st) ? st->valuedouble : NAN;
    char item[INVENTORY_ITEM_MAX + 1] = "", item_why[192] = "\"item\" must be a string";
    int item_bad = it && !(cJSON_IsString(it) && item_check(it->valuestring,
                           s->cfg->lock_name, item_why, sizeof(item_why)) == 0);
    if (it && !item_bad) snprintf(item, sizeof(item), "%s", it->valuestring);
    cJSON_Delete(doc);
    if (!req->len) {
        snprintf(why, sizeof(why), "the reset has no body: %s", usage);
    } else if (!doc) {
        snprintf(why, sizeof(why), "the body is not JSON: %s", usage);
    } else if (!st) {
        snprintf(why, sizeof(why), "the body has no \"stock\": %s", usage);
    } else if (isnan(v) || v != floor(v) || v < 0 || v > 1e9) {
        snprintf(why, sizeof(why), "\"stock\" must be a whole number from 0 to 1000000000");
    } else if (item_bad) {
        snprintf(why, sizeof(why), "%s", item_why);
    } else {
        char err[192];
        if (inventory_reset(s->inv, item[0] ? item : NULL, (long long)v, err, sizeof(err)) != 0)
            return answer_error(conn, 503, "backend_unavailable", err, text);
        metrics_reset();
        return answer(conn, 200, reply_stock((long long)v, s->cfg->port, text),
                      text ? CT_TEXT : CT_JSON, NULL);
    }
    return answer_error(conn, 400, "bad_request", why, text);
}

/* Maps a failed inventory read to its answer. */
static enum MHD_Result answer_inventory_error(struct MHD_Connection *conn, int rc,
                                              const char *err, int text) {
    if (rc == INV_BAD_DATA) return answer_error(conn, 409, "bad_stock", err, text);
    if (rc == INV_LOCK_TIMEOUT) return answer_error(conn, 503, "lock_timeout", err, text);
    return answer_error(conn, 503, "backend_unavailable", err, text);
}

static enum MHD_Result api_inventory(const struct call *k) {
    struct sale_faults f;
    char err[192];
    long long stock;
    int code = read_faults(k, &f, err, sizeof(err));
    if (code) return answer_faults_refused(k->conn, code, err, k->text);
    int rc = inventory_stock(k->s->inv, k->item, f.hold_ms, &stock, err, sizeof(err));
    if (rc != 0) return answer_inventory_error(k->conn, rc, err, k->text);
    return answer(k->conn, 200, reply_stock(stock, k->s->cfg->port, k->text),
                  k->text ? CT_TEXT : CT_JSON, NULL);
}

static enum MHD_Result api_audit(const struct call *k) {
    struct audit a;
    char err[192];
    int rc = inventory_audit(k->s->inv, k->item, &a, err, sizeof(err));
    if (rc != 0) return answer_inventory_error(k->conn, rc, err, k->text);
    return answer(k->conn, 200, reply_audit(&a, k->text), k->text ? CT_TEXT : CT_JSON, NULL);
}

static enum MHD_Result api_strategies(const struct call *k) {
    return answer(k->conn, 200, reply_strategies(k->s->default_strategy->name, k->text),
                  k->text ? CT_TEXT : CT_JSON, NULL);
}

static enum MHD_Result api_healthz(const struct call *k) {
    char err[192];
    if (inventory_ping(k->s->inv, err, sizeof(err)) != 0)
        return answer_error(k->conn, 503, "backend_unavailable", err, k->text);
    return answer_error(k->conn, 200, "ok", "ok: Redis answers", k->text);
}

/* GET /readyz: 200 once a sale can succeed with any strategy, 503 with the
 * reason until then (inventory_ready). /healthz stays a liveness check. */
static enum MHD_Result api_readyz(const struct call *k) {
    char why[512];
    int ready = inventory_ready(k->s->inv, why, sizeof(why)) == 0;
    return answer(k->conn, ready ? 200 : 503, reply_ready(ready ? NULL : why, k->s->cfg->port, k->text),
                  k->text ? CT_TEXT : CT_JSON, NULL);
}

static enum MHD_Result api_metrics(const struct call *k) {
    return answer(k->conn, 200, metrics_render(), CT_PROM, NULL);
}

/* ---- the lab ---------------------------------------------------------------- */

/* GET /: the page; GET /lab/<asset>: its script, style and icon. */
static enum MHD_Result api_lab_page(const struct call *k) {
    const struct web_asset *a = web_asset_find(k->rt->id == ROUTE_LAB_PAGE ? "index.html" : k->rt->arg);
    if (!a) return answer_error(k->conn, 404, "not_found", "this file is not part of the page", 0);
    return answer_asset(k->conn, a);
}

/* Reads JSON member key of doc as a whole number in [min, max] into *out
 * (def when absent or null). 0, or -1 with a sentence in why. */
static int json_whole(const cJSON *doc, const char *key, long long def, long long min,
                      long long max, long long *out, char *why, size_t whylen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return 0;
    }
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (isnan(d) || d != floor(d) || d < (double)min || d > (double)max) {
        snprintf(why, whylen, "\"%s\" must be a whole number from %lld to %lld", key, min, max);
        return -1;
    }
    *out = (long long)d;
    return 0;
}

/* Reads JSON member key of doc as a string of at most len-1 bytes into out
 * ("" when absent or null). 0, or -1 with a sentence in why. */
static int json_name(const cJSON *doc, const char *key, char *out, size_t len, char *why,
                     size_t whylen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, key);
    out[0] = '\0';
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= len) {
        snprintf(why, whylen, "\"%s\" must be a name of at most %zu characters", key, len - 1);
        return -1;
    }
    snprintf(out, len, "%s", v->valuestring);
    return 0;
}

/* POST /lab/runs {"strategy":..., "clients":..., "requests":..., "stock":..., "scenario":...} */
static enum MHD_Result start_lab_run(const struct call *k) {
    static const char usage[] = "send a JSON body such as {\"strategy\":\"owner-lua\", "
                                "\"clients\":200, \"requests\":3000, \"stock\":200} or "
                                "{\"strategy\":\"expiring\", \"scenario\":\"slow-holder\"}";
    char why[512];
    struct lab_request r;
    memset(&r, 0, sizeof(r));
    cJSON *doc = k->req->len ? cJSON_ParseWithLength(k->req->body, k->req->len) : NULL;
    long long clients = 0, requests = 0, stock = 0;
    int bad = 1;
    if (!cJSON_IsObject(doc)) {
        snprintf(why, sizeof(why), "the body is not a JSON object: %s", usage);
    } else if (json_name(doc, "strategy", r.strategy, sizeof(r.strategy), why, sizeof(why)) < 0 ||
               json_name(doc, "scenario", r.scenario, sizeof(r.scenario), why, sizeof(why)) < 0 ||
               json_whole(doc, "clients", 200, 1, LAB_CLIENTS_MAX, &clients, why, sizeof(why)) < 0 ||
               json_whole(doc, "requests", 3000, 1, LAB_REQUESTS_MAX, &requests, why, sizeof(why)) < 0 ||
               json_whole(doc, "stock", 200, 0, LAB_STOCK_MAX, &stock, why, sizeof(why)) < 0) {
        /* why says which */
    } else if (!r.strategy[0]) {
        snprintf(why, sizeof(why), "the body has no \"strategy\": %s", usage);
    } else {
        bad = 0;
    }
    cJSON_Delete(doc);
    if (bad) return answer_error(k->conn, 400, "bad_request", why, 0);
    r.clients = (int)clients;
    r.requests = (int)requests;
    r.stock = stock;
    int id = 0, rc = lab_start(k->s->lab, &r, &id, why, sizeof(why));
    if (rc == LAB_BAD) return answer_error(k->conn, 400, "bad_request", why, 0);
    if (rc == LAB_BUSY) return answer_error(k->conn, 409, "run_in_progress", why, 0);
    if (rc != LAB_OK) return answer_error(k->conn, 500, "internal_error", why, 0);
    struct lab_run_view *v = malloc(sizeof(*v));
    if (!v || lab_run(k->s->lab, id, v) != LAB_OK) {
        free(v);
        return answer(k->conn, 500, NULL, CT_JSON, NULL);
    }
    enum MHD_Result ret = answer(k->conn, 202, reply_lab_run(v), CT_JSON, NULL);
    free(v);
    return ret;
}

/* GET /lab/runs: the settings and the kept runs; POST: start one. */
static enum MHD_Result api_lab_runs(const struct call *k) {
    if (strcmp(k->method, "POST") == 0) return start_lab_run(k);
    struct lab_info info;
    lab_get_info(k->s->lab, &info);
    struct lab_run_view *v = malloc(sizeof(*v) * LAB_RUNS_KEPT);
    if (!v) return answer(k->conn, 500, NULL, CT_JSON, NULL);
    int n = lab_runs(k->s->lab, v, LAB_RUNS_KEPT);
    enum MHD_Result ret = answer(k->conn, 200, reply_lab_runs(v, n, info.running), CT_JSON, NULL);
    free(v);
    return ret;
}

/* GET /lab/runs/{id} */
static enum MHD_Result api_lab_run(const struct call *k) {
    int id = atoi(k->rt->arg);
    struct lab_run_view *v = malloc(sizeof(*v));
    if (!v) return answer(k->conn, 500, NULL, CT_JSON, NULL);
    enum MHD_Result ret;
    if (lab_run(k->s->lab, id, v) == LAB_OK) {
        ret = answer(k->conn, 200, reply_lab_run(v), CT_JSON, NULL);
    } else {
        char why[192];
        snprintf(why, sizeof(why), "no run %d on this instance (it keeps its last %d runs; "
                 "behind nginx, /lab/ must reach one instance)", id, LAB_RUNS_KEPT);
        ret = answer_error(k->conn, 404, "not_found", why, 0);
    }
    free(v);
    return ret;
}

/* GET /lab: there whether runs are on or off, so the page can tell which
 * without a 404. */
static enum MHD_Result api_lab_status(const struct call *k) {
    struct lab_info info;
    if (k->s->lab) lab_get_info(k->s->lab, &info);
    return answer(k->conn, 200, reply_lab_status(k->s->lab ? &info : NULL), CT_JSON, NULL);
}

static enum MHD_Result api_lab_scenarios(const struct call *k) {
    struct lab_info info;
    lab_get_info(k->s->lab, &info);
    return answer(k->conn, 200, reply_lab_scenarios(&info), CT_JSON, NULL);
}

/* GET /lab/results/<name>: demo.csv, matrix.csv, campaign.csv (CSV) and
 * campaign-counterexample.json (JSON) */
static enum MHD_Result api_lab_result(const struct call *k) {
    char *body, why[512];
    size_t len;
    int rc = lab_result_file(k->s->lab, k->rt->arg, &body, &len, why, sizeof(why));
    if (rc == LAB_NOT_FOUND) return answer_error(k->conn, 404, "not_found", why, 0);
    if (rc != LAB_OK) return answer_error(k->conn, 500, "internal_error", why, 0);
    (void)len;
    size_t n = strlen(k->rt->arg);
    int is_json = n > 5 && strcmp(k->rt->arg + n - 5, ".json") == 0;
    return answer(k->conn, 200, body, is_json ? CT_JSON : CT_CSV, NULL);
}

/* The handler of each route (routes.def). */
static const handler handlers[ROUTE_COUNT] = {
#define ROUTE(id, methods, pattern, fn, flags, doc) [ROUTE_##id] = fn,
#include "routes.def"
#undef ROUTE
};

/* Answers what is refused before any route runs: oversized URL or headers,
 * no route, a method the route does not take, an oversized body. Returns 1
 * with *ret set when it answered. */
static int refuse(struct http_server *s, struct MHD_Connection *conn, const char *url,
                  const char *method, const struct request *req, const struct route *rt, int text,
                  enum MHD_Result *ret) {
    char why[256];
    if (req->line_cut) {
        *ret = answer_error(conn, 400, "bad_request", "the request line holds a NUL byte", text);
    } else if (req->url_len > URL_MAX) {
        snprintf(why, sizeof(why), "the URL is %zu bytes; at most %d are accepted", req->url_len, URL_MAX);
        *ret = answer_error(conn, 414, "uri_too_long", why, text);
    } else if (req->header_bytes > HEADERS_MAX) {
        snprintf(why, sizeof(why), "the headers are %zu bytes; at most %d are accepted",
                 req->header_bytes, HEADERS_MAX);
        *ret = answer_error(conn, 431, "headers_too_large", why, text);
    } else if (rt->id == ROUTE_NOT_FOUND) {
        snprintf(why, sizeof(why), "no route for %.16s %.160s; GET /strategies lists the sale endpoints",
                 method, url);
        *ret = answer_error(conn, 404, "not_found", why, text);
    } else if (!rt->method_allowed) {
        snprintf(why, sizeof(why), "%.16s is not allowed here; use %s", method, rt->allow);
        *ret = answer(conn, 405, reply_error("method_not_allowed", why, text),
                      text ? CT_TEXT : CT_JSON, rt->allow);
    } else if (req->too_large) {
        snprintf(why, sizeof(why), "the body is larger than server.max-body-bytes (%d bytes)",
                 s->cfg->max_body_bytes);
        *ret = answer_error(conn, 413, "payload_too_large", why, text);
    } else {
        return 0;
    }
    return 1;
}

static enum MHD_Result dispatch(struct http_server *s, struct MHD_Connection *conn,
                                const char *url, const char *method, struct request *req) {
    int text = wants_text(conn);
    struct route rt;
    route_match(method, url, s->cfg->context_path, &rt);
    if ((route_table[rt.id].flags & ROUTE_F_LAB) && !s->lab)   /* lab.enabled=false: no such path */
        route_match(method, "", s->cfg->context_path, &rt);
    enum MHD_Result ret;
    if (refuse(s, conn, url, method, req, &rt, text, &ret)) return ret;
    const struct route_row *row = &route_table[rt.id];
    struct call k = {s, conn, method, &rt, req, NULL, text};
    char err[192];
    if ((row->flags & ROUTE_F_ADMIN_POST) && strcmp(method, "POST") == 0 &&
        !admin_allowed(s, conn, rt.id == ROUTE_RESET ? "a reset" : "a lab run", err, sizeof(err)))
        return answer_unauthorized(conn, err, text);
    if ((row->flags & ROUTE_F_ITEM) && query_item(s, conn, &k.item, err, sizeof(err)) < 0)
        return answer_error(conn, 400, "bad_request", err, text);
    return handlers[rt.id](&k);
}

/* Moves conn's watch to phase, from now. */
static void watch_phase(struct http_server *s, struct MHD_Connection *conn, enum watch_phase phase) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
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
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct watch *w = ci ? calloc(1, sizeof(*w)) : NULL;
        if (!w) return;   /* unwatched: the idle timeout still applies */
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
        if (w->prev) w->prev->next = w->next;
        else s->watched = w->next;
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
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
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
                w->since_us = INT64_MAX / 2;   /* once */
            }
        }
        mclock_cond_wait_until(&s->reaper_cond, &s->watch_mu, now + 250000);
    }
    pthread_mutex_unlock(&s->watch_mu);
    return NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **req_cls) {
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
        watch_phase(s, conn, WATCH_BODY);   /* the headers are in; a body may follow */
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
                                       "--set server.port=N)" : "");
        close(fd);
        return -1;
    }
    return fd;
}

struct http_server *http_start(const struct config *cfg, struct inventory *inv,
                               struct lab *lab, char *errstr, size_t errlen) {
    const struct strategy *def = strategy_find(cfg->strategy);
    if (!def) {
        snprintf(errstr, errlen, "lock.strategy: unknown strategy '%s'", cfg->strategy);
        return NULL;
    }
    struct http_server *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(errstr, errlen, "out of memory");
        return NULL;
    }
    s->cfg = cfg;
    s->inv = inv;
    s->lab = lab;
    s->default_strategy = def;
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
        0, NULL, NULL, on_request, s,
        MHD_OPTION_LISTEN_SOCKET, s->listen_fd,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->connection_timeout_s,
        MHD_OPTION_THREAD_STACK_SIZE, (size_t)(256 * 1024),
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
        MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
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
    MHD_stop_daemon(s->d);   /* frees every watch through on_connection */
    pthread_cond_destroy(&s->reaper_cond);
    pthread_mutex_destroy(&s->watch_mu);
    free(s);
}
