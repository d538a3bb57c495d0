/* api.c -- the service's handlers: one per row of routes.def (see api.h).
 *
 * DESIGN
 * http.c hands each request to api_answer, which reads the table: it
 * matches the path (route_match), answers 404 for no row (and for a lab row
 * while lab.enabled=false), 405 with Allow for a method the row does not
 * take, 413 for an oversized body, 401 for a POST of an admin row without
 * the admin token, 400 for a bad ?item= of a row that reads it, in that
 * order, and then calls the row's handler. Handlers run in the connection's
 * thread and call the inventory service or the lab (lab.h); they turn
 * results into answers (reply.h) and know nothing of Redis commands, nor of
 * libmicrohttpd: they answer through http.h. struct api is fixed after
 * api_create, so any number of loops and workers read it at once. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "alloc.h"
#include "api.h"
#include "config.h"
#include "http.h"
#include "item.h"
#include "inventory.h"
#include "lab.h"
#include "log.h"
#include "mclock.h"
#include "metrics.h"
#include "reply.h"
#include "rpool.h"
#include "route.h"
#include "strategy.h"
#include "web.h"

#define CT_JSON HTTP_CT_JSON
#define CT_TEXT HTTP_CT_TEXT
#define CT_PROM "text/plain; version=0.0.4; charset=utf-8"
#define CT_CSV "text/csv; charset=utf-8"

#define NESTED_MAX 16
#define HISTORY_LIMIT_MAX 5000
/* The events before a page of the history that its overlaps are judged
 * against: at most this many, recorded at most this much before the
 * page's earliest grant (the clocks of the instances and of Redis may
 * differ by that much). */
#define HISTORY_LOOKBACK_MAX 1000
#define HISTORY_LOOKBACK_SKEW_MS 1000

struct api {
    const struct config *cfg;
    struct inventory *inv;
    struct lab *lab; /* NULL: lab.enabled=false */
    const struct strategy *default_strategy;
    _Atomic long long pinged_us; /* /healthz's last PING answered (mclock_us), 0: none */
};

struct api *api_create(const struct config *cfg, struct inventory *inv, struct lab *lab,
                       char *errstr, size_t errlen) {
    const struct strategy *def = strategy_find(cfg->strategy);
    if (!def) {
        snprintf(errstr, errlen, "lock.strategy: unknown strategy '%s'", cfg->strategy);
        return NULL;
    }
    struct api *a = alloc_zeroed(sizeof(*a), errstr, errlen);
    if (!a) return NULL;
    a->cfg = cfg;
    a->inv = inv;
    a->lab = lab;
    a->default_strategy = def;
    if (inventory_pipeline_start(inv, errstr, errlen) != 0) {
        free(a);
        return NULL;
    }
    return a;
}

void api_free(struct api *a) { free(a); }

/* Reads query argument name as an int in [min, max] into *out. Returns 0 when
 * absent, 1 when read, -1 (with a sentence in why) when malformed. */
static int query_int(const struct http_request *rq, const char *name, long min, long max, int *out,
                     char *why, size_t whylen) {
    const char *v = http_query(rq, name);
    if (!v) return 0;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || errno || n < min || n > max) {
        snprintf(why, whylen, "%s must be a whole number from %ld to %ld, not '%.32s'", name, min,
                 max, v);
        return -1;
    }
    *out = (int)n;
    return 1;
}

/* The ?item= of a request: NULL when absent (the configured item). Returns
 * -1 with a sentence in why when it cannot name a stock key. */
static int query_item(const struct api *s, const struct http_request *rq, const char **item,
                      char *why, size_t whylen) {
    *item = http_query(rq, "item");
    return *item ? item_check(*item, s->cfg->lock_name, why, whylen) : 0;
}

/* One request being answered, as the handlers see it. */
struct call {
    struct api *s; /* the service's parts; one per server */
    const struct http_request *rq;
    const char *method;
    const struct route *rt;
    const char *item; /* ?item=, checked; NULL: the configured one */
    int text; /* the demo's text instead of JSON */
};

/* Reads the fault parameters of a request into f. Returns 0, or the HTTP
 * status to refuse it with (400 malformed, 403 faults off, 401 without the
 * admin token: any fault parameter given needs it) and a sentence. */
static int read_faults(const struct call *k, struct sale_faults *f, char *why, size_t whylen) {
    struct api *s = k->s;
    const struct http_request *rq = k->rq;
    memset(f, 0, sizeof(*f));
    if (!(route_table[k->rt->id].flags & ROUTE_F_FAULTS)) return 0; /* none taken here */
    int maxhold = s->cfg->faults_max_hold_ms, given = 0, rc;
    if ((rc = query_int(rq, "hold_ms", 0, maxhold, &f->hold_ms, why, whylen)) < 0) return 400;
    given |= rc;
    if ((rc = query_int(rq, "release_delay_ms", 0, maxhold, &f->release_delay_ms, why, whylen)) < 0)
        return 400;
    given |= rc;
    if ((rc = query_int(rq, "nested", 0, NESTED_MAX, &f->nested, why, whylen)) < 0) return 400;
    given |= rc;
    if ((rc = query_int(rq, "crash", 0, 1, &f->crash, why, whylen)) < 0) return 400;
    given |= rc;
    if ((rc = query_int(rq, "commit_delay_ms", 0, maxhold, &f->commit_delay_ms, why, whylen)) < 0)
        return 400;
    given |= rc;
    if ((rc = query_int(rq, "wait_ms", 0, maxhold, &f->wait_ms, why, whylen)) < 0) return 400;
    f->wait_given = rc;
    given |= rc;
    if ((rc = query_int(rq, "end_session", 0, 1, &f->end_session, why, whylen)) < 0) return 400;
    given |= rc;
    if (given && !s->cfg->faults_enabled) {
        snprintf(why, whylen,
                 "fault injection is off: start the instance with faults.enabled=true to use "
                 "hold_ms, crash, release_delay_ms, nested, commit_delay_ms, wait_ms or "
                 "end_session");
        return 403;
    }
    if (given && !http_admin_allowed(rq, "a fault parameter", why, whylen)) return 401;
    return 0;
}

/* The answer for read_faults' refusal code. */
static int answer_faults_refused(const struct http_request *rq, int code, const char *why,
                                 int text) {
    if (code == 401) return http_answer_unauthorized(rq, why, text);
    return http_answer_error(rq, code, code == 403 ? "faults_disabled" : "bad_request", why, text);
}

/* Answers rq with the sale r by t, and counts it. */
static int answer_sale(const struct http_request *rq, const struct strategy *t,
                       const struct sale_result *r, int port) {
    metrics_sale(t, r);
    if (r->status == INV_BACKEND)
        log_limited("backend", "a sale by %s answered 503 backend_unavailable: %s", t->name,
                    r->errstr);
    return http_answer(rq, reply_sale_http_status(r->status),
                       reply_sale(r, t->name, port, rq->text), rq->text ? CT_TEXT : CT_JSON, NULL);
}

/* A sale sent pipelined while its request waits, deferred (http_defer). */
struct pipelined {
    struct sale_result r;
    const struct http_request *rq;
    const struct strategy *t;
    int port;
};

/* inventory_sold: answers the deferred request, in the pipeline's thread. */
static void pipelined_sold(void *arg) {
    struct pipelined *d = arg;
    http_complete(d->rq, answer_sale(d->rq, d->t, &d->r, d->port));
    free(d);
}

/* Sells with t pipelined, on the loop, which never waits: the connection
 * is deferred and pipelined_sold answers it. When it cannot go so (out of
 * memory, or the server or the pipeline stopping), the sale is made here,
 * as a worker makes it. */
static int sell_pipelined(const struct call *k, const struct strategy *t) {
    struct api *s = k->s;
    const struct http_request *rq = k->rq;
    struct pipelined *d = malloc(sizeof(*d));
    int deferred = d && http_defer(rq);
    if (deferred) {
        *d = (struct pipelined){.rq = rq, .t = t, .port = s->cfg->port};
        if (inventory_sell_pipelined(s->inv, t, k->item, &d->r, pipelined_sold, d) == 0)
            return 1; /* the loop goes on; pipelined_sold completes it */
    }
    free(d);
    struct sale_result r;
    inventory_sell(s->inv, t, k->item, NULL, &r);
    int keep = answer_sale(rq, t, &r, s->cfg->port);
    if (deferred) http_complete(rq, keep);
    return keep;
}

/* Sells one unit with strategy t (NULL: unknown, named by the path). */
static int sell(const struct call *k, const struct strategy *t) {
    struct api *s = k->s;
    const struct http_request *rq = k->rq;
    int text = k->text;
    if (!t)
        return http_answer(rq, 404, reply_unknown_strategy(k->rt->arg, text),
                           text ? CT_TEXT : CT_JSON, NULL);
    if (strcmp(k->method, "HEAD") == 0) /* a HEAD changes nothing; its body is dropped */
        return http_answer_error(rq, 200, "not_sold", "HEAD never sells: GET or POST does", text);

    struct sale_faults f;
    char why[384];
    int code = read_faults(k, &f, why, sizeof(why));
    if (code) return answer_faults_refused(rq, code, why, text);
    if (inventory_faults_check(s->inv, t, &f, why, sizeof(why)) != 0)
        return http_answer_error(rq, 400, "bad_request", why, text);
    if (rq->queued_ms > 0) { /* lock.wait-ms counts from the request's arrival */
        long wait = f.wait_given ? f.wait_ms : s->cfg->lock_wait_ms;
        f.wait_ms = wait > rq->queued_ms ? (int)(wait - rq->queued_ms) : 0;
        f.wait_given = 1;
    }

    if (rq->on_loop) /* api_on_loop found it pipelined */
        return sell_pipelined(k, t);
    struct sale_result r;
    inventory_sell(s->inv, t, k->item, &f, &r);
    return answer_sale(rq, t, &r, s->cfg->port);
}

/* A sale with the strategy the path names, or the default one. */
static int api_sale(const struct call *k) {
    return sell(k, k->rt->arg[0] ? strategy_find(k->rt->arg) : k->s->default_strategy);
}

/* The demo's later endpoints, each tied to its strategy. */
static int api_sale_by_redisson(const struct call *k) { return sell(k, strategy_find("redisson")); }

static int api_sale_by_redlock(const struct call *k) { return sell(k, strategy_find("redlock")); }

/* A stream entry id "ms-seq" as a number to compare. */
static void stream_id(const char *id, unsigned long long *ms, unsigned long long *seq) {
    char *end;
    *ms = strtoull(id, &end, 10);
    *seq = *end == '-' ? strtoull(end + 1, NULL, 10) : 0;
}

static int stream_id_after(const char *id, const char *since) {
    unsigned long long a, b, x, y;
    stream_id(id, &a, &b);
    stream_id(since, &x, &y);
    return a > x || (a == x && b > y);
}

/* Reads into out (room for HISTORY_LOOKBACK_MAX) the events recorded before
 * since that may still have been inside when the first of page[0..n) was
 * granted: a hold's event is recorded (the stream id is Redis's clock as it
 * applied) no earlier than its hold ended, so those recorded from the
 * page's earliest grant on, less the clocks' skew. Returns how many; 0 when
 * since is the start, or on any error (the page's overlaps are then judged
 * among its own events). */
static int history_lookback(struct api *s, const char *item, const char *since,
                            const struct history_event *page, int n, struct history_event *out) {
    if (!since || !since[0] || strcmp(since, "0") == 0 || n == 0) return 0;
    int64_t first = page[0].granted_us;
    for (int i = 1; i < n; i++)
        if (page[i].granted_us < first) first = page[i].granted_us;
    long long ms = (long long)(first / 1000) - HISTORY_LOOKBACK_SKEW_MS;
    char start[48], why[192];
    snprintf(start, sizeof(start), "%lld-0", ms > 0 ? ms : 0);
    int m = 0;
    if (!stream_id_after(since, start) ||
        inventory_history(s->inv, item, start, HISTORY_LOOKBACK_MAX, out, &m, why, sizeof(why)) !=
            0)
        return 0;
    int kept = 0;
    while (kept < m && !stream_id_after(out[kept].id, since)) kept++;
    return kept;
}

/* GET /inventory/history?item=&since=&limit= */
static int api_history(const struct call *k) {
    struct api *s = k->s;
    const struct http_request *rq = k->rq;
    const char *item = k->item;
    int text = k->text;
    char why[192];
    int limit = 100;
    if (query_int(rq, "limit", 1, HISTORY_LIMIT_MAX, &limit, why, sizeof(why)) < 0)
        return http_answer_error(rq, 400, "bad_request", why, text);
    const char *since = http_query(rq, "since");
    if (since && (strlen(since) > 40 || strspn(since, "0123456789-") != strlen(since)))
        return http_answer_error(rq, 400, "bad_request",
                                 "since must be an event id such as 1700000000000-0, or 0", text);
    /* ev: the look-back (read second, moved to the front), then the page. */
    struct history_event *ev = calloc((size_t)limit + HISTORY_LOOKBACK_MAX, sizeof(*ev));
    if (!ev) return http_answer(rq, 500, NULL, CT_JSON, NULL);
    struct history_event *page = ev + HISTORY_LOOKBACK_MAX;
    int n = 0, rc = inventory_history(s->inv, item, since, limit, page, &n, why, sizeof(why));
    int before = rc || text ? 0 : history_lookback(s, item, since, page, n, ev);
    if (before > 0) memmove(ev + before, page, (size_t)n * sizeof(*ev));
    const struct history_event *all = before > 0 ? ev : page;
    int ret = rc ? http_answer_error(rq, 503, "backend_unavailable", why, text)
                 : http_answer(rq, 200, reply_history(all, before, before + n, text),
                               text ? CT_TEXT : CT_JSON, NULL);
    free(ev);
    return ret;
}

/* Whether the n bytes of a JSON body hold a NUL: a raw zero byte, or a
 * \u0000 escape inside a string. cJSON ends a string at its NUL, so
 * "inventory001\u0000:sold" would read as a name the checks accept. */
static int json_holds_nul(const char *body, size_t n) {
    if (memchr(body, '\0', n)) return 1;
    int in_string = 0;
    for (size_t i = 0; i < n; i++) {
        if (body[i] == '"') {
            in_string = !in_string;
        } else if (in_string && body[i] == '\\' && i + 1 < n) {
            if (body[i + 1] == 'u' && i + 5 < n && memcmp(body + i + 2, "0000", 4) == 0) return 1;
            i++; /* the escaped character, a '"' or a '\\' included */
        }
    }
    return 0;
}

/* The request's body as JSON: NULL when there is none, when it is not JSON,
 * or (with *nul set) when it holds a NUL. The caller frees it. */
static cJSON *body_json(const struct http_request *rq, int *nul) {
    *nul = rq->len && json_holds_nul(rq->body, rq->len);
    return rq->len && !*nul ? cJSON_ParseWithLength(rq->body, rq->len) : NULL;
}

static int api_reset(const struct call *k) {
    struct api *s = k->s;
    const struct http_request *rq = k->rq;
    const struct http_request *req = k->rq;
    int text = k->text;
    static const char usage[] = "send a JSON body such as {\"stock\": 200}";
    char why[256];
    int nul;
    cJSON *doc = body_json(req, &nul);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(doc, "stock");
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(doc, "item");
    double v = cJSON_IsNumber(st) ? st->valuedouble : NAN;
    char item[INVENTORY_ITEM_MAX + 1] = "", item_why[192] = "\"item\" must be a string";
    int item_bad = it && !(cJSON_IsString(it) && item_check(it->valuestring, s->cfg->lock_name,
                                                            item_why, sizeof(item_why)) == 0);
    if (it && !item_bad) snprintf(item, sizeof(item), "%s", it->valuestring);
    cJSON_Delete(doc);
    if (!req->len) {
        snprintf(why, sizeof(why), "the reset has no body: %s", usage);
    } else if (nul) {
        snprintf(why, sizeof(why),
                 "the body holds a NUL character (\\u0000), which no item "
                 "may contain: %s",
                 usage);
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
            return http_answer_error(rq, 503, "backend_unavailable", err, text);
        metrics_reset();
        return http_answer(rq, 200, reply_stock((long long)v, s->cfg->port, text),
                           text ? CT_TEXT : CT_JSON, NULL);
    }
    return http_answer_error(rq, 400, "bad_request", why, text);
}

/* Maps a failed inventory read to its answer. */
static int answer_inventory_error(const struct http_request *rq, int rc, const char *err,
                                  int text) {
    if (rc == INV_BAD_DATA) return http_answer_error(rq, 409, "bad_stock", err, text);
    if (rc == INV_LOCK_TIMEOUT) return http_answer_error(rq, 503, "lock_timeout", err, text);
    return http_answer_error(rq, 503, "backend_unavailable", err, text);
}

static int api_inventory(const struct call *k) {
    struct sale_faults f;
    char err[384];
    long long stock;
    int code = read_faults(k, &f, err, sizeof(err));
    if (code) return answer_faults_refused(k->rq, code, err, k->text);
    if (inventory_faults_check(k->s->inv, NULL, &f, err, sizeof(err)) != 0)
        return http_answer_error(k->rq, 400, "bad_request", err, k->text);
    int rc = inventory_stock(k->s->inv, k->item, f.hold_ms, &stock, err, sizeof(err));
    if (rc != 0) return answer_inventory_error(k->rq, rc, err, k->text);
    return http_answer(k->rq, 200, reply_stock(stock, k->s->cfg->port, k->text),
                       k->text ? CT_TEXT : CT_JSON, NULL);
}

static int api_audit(const struct call *k) {
    struct audit a;
    char err[192];
    int rc = inventory_audit(k->s->inv, k->item, &a, err, sizeof(err));
    if (rc != 0) return answer_inventory_error(k->rq, rc, err, k->text);
    return http_answer(k->rq, 200, reply_audit(&a, k->text), k->text ? CT_TEXT : CT_JSON, NULL);
}

static int api_strategies(const struct call *k) {
    enum { MAX = 64 };
    char why[MAX][96];
    const char *unavailable[MAX] = {0};
    for (int i = 0; strategies[i].name && i < MAX; i++)
        if (!inventory_strategy_configured(k->s->inv, &strategies[i], why[i], sizeof(why[i])))
            unavailable[i] = why[i];
    return http_answer(k->rq, 200,
                       reply_strategies(k->s->default_strategy->name, unavailable, k->text),
                       k->text ? CT_TEXT : CT_JSON, NULL);
}

/* How long a PING that /healthz made stands for Redis: within it, and with
 * no connection to Redis found broken since (rpool_failed_us), /healthz is
 * answered on the loop from that PING; after it, a worker PINGs again. */
#define HEALTHZ_FRESH_US 1000000

/* The age in us of /healthz's last PING while it still stands, else -1. */
static long long healthz_age_us(const struct api *s) {
    long long at = atomic_load(&s->pinged_us), age = mclock_us() - at;
    return at > 0 && at > rpool_failed_us() && age < HEALTHZ_FRESH_US ? age : -1;
}

static int api_healthz(const struct call *k) {
    char err[192];
    if (k->rq->on_loop) { /* api_on_loop found its last PING standing */
        long long age = healthz_age_us(k->s);
        snprintf(err, sizeof(err), "ok: Redis answered a PING %lld ms ago",
                 (age > 0 ? age : 0) / 1000);
        return http_answer_error(k->rq, 200, "ok", err, k->text);
    }
    long long sent = mclock_us();
    if (inventory_ping(k->s->inv, err, sizeof(err)) != 0)
        return http_answer_error(k->rq, 503, "backend_unavailable", err, k->text);
    atomic_store(&k->s->pinged_us, sent);
    return http_answer_error(k->rq, 200, "ok", "ok: Redis answers", k->text);
}

/* GET /readyz: 200 once a sale can succeed with any strategy, 503 with the
 * reason until then (inventory_ready). /healthz stays a liveness check. */
static int api_readyz(const struct call *k) {
    char why[512];
    int ready = inventory_ready(k->s->inv, why, sizeof(why)) == 0;
    return http_answer(k->rq, ready ? 200 : 503,
                       reply_ready(ready ? NULL : why, k->s->cfg->port, k->text),
                       k->text ? CT_TEXT : CT_JSON, NULL);
}

static int api_metrics(const struct call *k) {
    return http_answer(k->rq, 200, metrics_render(), CT_PROM, NULL);
}

/* ---- the lab ---------------------------------------------------------------- */

/* GET /: the page; GET /lab/<asset>: its script, style and icon. */
static int api_lab_page(const struct call *k) {
    const struct web_asset *a =
        web_asset_find(k->rt->id == ROUTE_LAB_PAGE ? "index.html" : k->rt->arg);
    if (!a)
        return http_answer_error(k->rq, 404, "not_found", "this file is not part of the page", 0);
    return http_answer_asset(k->rq, a);
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
static int start_lab_run(const struct call *k) {
    static const char usage[] = "send a JSON body such as {\"strategy\":\"owner-lua\", "
                                "\"clients\":200, \"requests\":3000, \"stock\":200} or "
                                "{\"strategy\":\"expiring\", \"scenario\":\"slow-holder\"}";
    char why[512];
    struct lab_request r;
    memset(&r, 0, sizeof(r));
    int nul;
    cJSON *doc = body_json(k->rq, &nul);
    long long clients = 0, requests = 0, stock = 0;
    int bad = 1;
    if (nul) {
        snprintf(why, sizeof(why),
                 "the body holds a NUL character (\\u0000), which no name "
                 "may contain: %s",
                 usage);
    } else if (!cJSON_IsObject(doc)) {
        snprintf(why, sizeof(why), "the body is not a JSON object: %s", usage);
    } else if (json_name(doc, "strategy", r.strategy, sizeof(r.strategy), why, sizeof(why)) < 0 ||
               json_name(doc, "scenario", r.scenario, sizeof(r.scenario), why, sizeof(why)) < 0 ||
               json_whole(doc, "clients", 200, 1, LAB_CLIENTS_MAX, &clients, why, sizeof(why)) <
                   0 ||
               json_whole(doc, "requests", 3000, 1, LAB_REQUESTS_MAX, &requests, why, sizeof(why)) <
                   0 ||
               json_whole(doc, "stock", 200, 0, LAB_STOCK_MAX, &stock, why, sizeof(why)) < 0) {
        /* why says which */
    } else if (!r.strategy[0]) {
        snprintf(why, sizeof(why), "the body has no \"strategy\": %s", usage);
    } else {
        bad = 0;
    }
    cJSON_Delete(doc);
    if (bad) return http_answer_error(k->rq, 400, "bad_request", why, 0);
    r.clients = (int)clients;
    r.requests = (int)requests;
    r.stock = stock;
    int id = 0, rc = lab_start(k->s->lab, &r, &id, why, sizeof(why));
    if (rc == LAB_BAD) return http_answer_error(k->rq, 400, "bad_request", why, 0);
    if (rc == LAB_BUSY) return http_answer_error(k->rq, 409, "run_in_progress", why, 0);
    if (rc != LAB_OK) return http_answer_error(k->rq, 500, "internal_error", why, 0);
    struct lab_run_view *v = malloc(sizeof(*v));
    if (!v || lab_run(k->s->lab, id, v) != LAB_OK) {
        free(v);
        return http_answer(k->rq, 500, NULL, CT_JSON, NULL);
    }
    int ret = http_answer(k->rq, 202, reply_lab_run(v), CT_JSON, NULL);
    free(v);
    return ret;
}

/* GET /lab/runs: the settings and the kept runs; POST: start one. */
static int api_lab_runs(const struct call *k) {
    if (strcmp(k->method, "POST") == 0) return start_lab_run(k);
    struct lab_info info;
    lab_get_info(k->s->lab, &info);
    struct lab_run_view *v = malloc(sizeof(*v) * LAB_RUNS_KEPT);
    if (!v) return http_answer(k->rq, 500, NULL, CT_JSON, NULL);
    int n = lab_runs(k->s->lab, v, LAB_RUNS_KEPT);
    int ret = http_answer(k->rq, 200, reply_lab_runs(v, n, info.running), CT_JSON, NULL);
    free(v);
    return ret;
}

/* GET /lab/runs/{id} */
static int api_lab_run(const struct call *k) {
    int id = atoi(k->rt->arg);
    struct lab_run_view *v = malloc(sizeof(*v));
    if (!v) return http_answer(k->rq, 500, NULL, CT_JSON, NULL);
    int ret;
    if (lab_run(k->s->lab, id, v) == LAB_OK) {
        ret = http_answer(k->rq, 200, reply_lab_run(v), CT_JSON, NULL);
    } else {
        char why[192];
        snprintf(why, sizeof(why),
                 "no run %d on this instance (it keeps its last %d runs; "
                 "behind nginx, /lab/ must reach one instance)",
                 id, LAB_RUNS_KEPT);
        ret = http_answer_error(k->rq, 404, "not_found", why, 0);
    }
    free(v);
    return ret;
}

/* GET /lab: there whether runs are on or off, so the page can tell which
 * without a 404. */
static int api_lab_status(const struct call *k) {
    struct lab_info info;
    if (k->s->lab) lab_get_info(k->s->lab, &info);
    return http_answer(k->rq, 200, reply_lab_status(k->s->lab ? &info : NULL), CT_JSON, NULL);
}

static int api_lab_scenarios(const struct call *k) {
    struct lab_info info;
    lab_get_info(k->s->lab, &info);
    return http_answer(k->rq, 200, reply_lab_scenarios(&info), CT_JSON, NULL);
}

/* GET /lab/results/<name>: demo.csv, matrix.csv, campaign.csv (CSV) and
 * campaign-counterexample.json (JSON) */
static int api_lab_result(const struct call *k) {
    char *body, why[512];
    size_t len;
    int rc = lab_result_file(k->s->lab, k->rt->arg, &body, &len, why, sizeof(why));
    if (rc == LAB_NOT_FOUND) return http_answer_error(k->rq, 404, "not_found", why, 0);
    if (rc != LAB_OK) return http_answer_error(k->rq, 500, "internal_error", why, 0);
    (void)len;
    size_t n = strlen(k->rt->arg);
    int is_json = n > 5 && strcmp(k->rt->arg + n - 5, ".json") == 0;
    return http_answer(k->rq, 200, body, is_json ? CT_JSON : CT_CSV, NULL);
}
typedef int (*handler)(const struct call *k);

/* The handler of each route (routes.def). */
static const handler handlers[ROUTE_COUNT] = {
#define ROUTE(id, methods, pattern, fn, flags, doc) [ROUTE_##id] = fn,
#include "routes.def"
#undef ROUTE
};

/* What a POST to a ROUTE_F_ADMIN_POST row is, for the 401's sentence. */
static const char *admin_what(enum route_id id) {
    return id == ROUTE_RESET ? "a reset" : "a lab run";
}

/* Answers what the table refuses: no route, a method the route does not
 * take, an oversized body. Returns 1 with *ret set when it answered. */
static int refuse(const struct api *s, const struct http_request *rq, const struct route *rt,
                  int *ret) {
    char why[256];
    int text = rq->text;
    if (rt->id == ROUTE_NOT_FOUND) {
        snprintf(why, sizeof(why),
                 "no route for %.16s %.160s; GET /strategies lists the sale endpoints", rq->method,
                 rq->url);
        *ret = http_answer_error(rq, 404, "not_found", why, text);
    } else if (!rt->method_allowed) {
        snprintf(why, sizeof(why), "%.16s is not allowed here; use %s", rq->method, rt->allow);
        *ret = http_answer(rq, 405, reply_error("method_not_allowed", why, text),
                           text ? CT_TEXT : CT_JSON, rt->allow);
    } else if (rq->too_large) {
        snprintf(why, sizeof(why), "the body is larger than server.max-body-bytes (%d bytes)",
                 s->cfg->max_body_bytes);
        *ret = http_answer_error(rq, 413, "payload_too_large", why, text);
    } else {
        return 0;
    }
    return 1;
}

/* Whether rt is a sale whose strategy goes pipelined now (its handler
 * then defers it, and the loop never waits). */
static int sale_pipelined(const struct api *s, const struct route *rt) {
    if (handlers[rt->id] != api_sale) return 0;
    const struct strategy *t = rt->arg[0] ? strategy_find(rt->arg) : s->default_strategy;
    return t && inventory_pipelined(s->inv, t);
}

int api_on_loop(void *cls, const char *method, const char *url) {
    const struct api *s = cls;
    struct route rt;
    route_match(method, url, s->cfg->context_path, &rt);
    return rt.id == ROUTE_NOT_FOUND || !rt.method_allowed ||
           (route_table[rt.id].flags & ROUTE_F_LOOP) ||
           (rt.id == ROUTE_HEALTHZ && healthz_age_us(s) >= 0) || sale_pipelined(s, &rt);
}

int api_answer(void *cls, const struct http_request *rq) {
    struct api *s = cls;
    int text = rq->text;
    struct route rt;
    route_match(rq->method, rq->url, s->cfg->context_path, &rt);
    if ((route_table[rt.id].flags & ROUTE_F_LAB) && !s->lab) /* lab.enabled=false: no such path */
        route_match(rq->method, "", s->cfg->context_path, &rt);
    int ret;
    if (refuse(s, rq, &rt, &ret)) return ret;
    const struct route_row *row = &route_table[rt.id];
    struct call k = {s, rq, rq->method, &rt, NULL, text};
    char err[192];
    if ((row->flags & ROUTE_F_ADMIN_POST) && strcmp(rq->method, "POST") == 0 &&
        !http_admin_allowed(rq, admin_what(rt.id), err, sizeof(err)))
        return http_answer_unauthorized(rq, err, text);
    if ((row->flags & ROUTE_F_ITEM) && query_item(s, rq, &k.item, err, sizeof(err)) < 0)
        return http_answer_error(rq, 400, "bad_request", err, text);
    return handlers[rt.id](&k);
}
