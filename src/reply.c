/* reply.c -- JSON and text bodies (see reply.h). JSON is built with cJSON;
 * every function frees its cJSON tree before returning. */
#include <cjson/cJSON.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hold.h"
#include "lab.h"
#include "lock.h"
#include "reply.h"
#include "scenario.h"
#include "strategy.h"
#include "text.h"

int reply_sale_http_status(int s) {
    switch (s) {
    case INV_SOLD:
    case INV_SOLD_OUT:
        return 200;
    case INV_STALE_TOKEN:
    case INV_LOCK_LOST:
    case INV_STOCK_CHANGED:
        return 409;
    case INV_BAD_DATA:
        return 409;
    case INV_NOT_ALLOWED:
        return 403;
    default:
        return 503;
    }
}

const char *reply_sale_status_word(int s) {
    switch (s) {
    case INV_SOLD:
        return "sold";
    case INV_SOLD_OUT:
        return "sold_out";
    case INV_LOCK_TIMEOUT:
        return "lock_timeout";
    case INV_STALE_TOKEN:
        return "stale_token";
    case INV_LOCK_LOST:
        return "lock_lost";
    case INV_BAD_DATA:
        return "bad_stock";
    case INV_NOT_ALLOWED:
        return "strategy_not_allowed";
    case INV_STOCK_CHANGED:
        return "stock_changed";
    default:
        return "backend_unavailable";
    }
}

/* Prints obj unformatted and frees it. */
static char *render(cJSON *obj) {
    char *s = obj ? cJSON_PrintUnformatted(obj) : NULL;
    cJSON_Delete(obj);
    return s;
}

static char *format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *format(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    return s;
}

/* ---- a sale's JSON written directly ------------------------------------------
 * Every sale answers, so its JSON is on the hot path; as a cJSON tree it
 * cost a tenth of the HTTP server's CPU (a node and a string a field, and
 * each number printed, read back and compared). The common answers (sold,
 * sold_out, with the usual lock fields) are written here, byte for byte as
 * cJSON 1.7 prints the tree: a number whose value fits an int as %d (every
 * field here is an integer; one past int goes to the tree), a string as is
 * when it holds nothing cJSON escapes. Anything else goes to the tree. */

struct jw {
    char buf[1536];
    size_t n;
    int bad; /* something the tree must write */
};

static void jw_mem(struct jw *w, const char *s, size_t len) {
    if (w->n + len >= sizeof(w->buf)) {
        w->bad = 1;
        return;
    }
    memcpy(w->buf + w->n, s, len);
    w->n += len;
}

static void jw_raw(struct jw *w, const char *s) { jw_mem(w, s, strlen(s)); }

/* "key":v, v in decimal as %lld writes it (no printf: a sale's answer has
 * six of them). */
static void jw_key_int(struct jw *w, const char *key, long long v) {
    char num[24], *end = num + sizeof(num);
    char *p = text_ull(end, v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v);
    if (v < 0) *--p = '-';
    jw_raw(w, "\"");
    jw_raw(w, key);
    jw_mem(w, "\":", 2);
    jw_mem(w, p, (size_t)(end - p));
}

/* ,"key":value as an int, or bad when it does not fit one. */
static void jw_num(struct jw *w, const char *key, long long v) {
    if (v < INT_MIN || v > INT_MAX) w->bad = 1;
    jw_key_int(w, key, v);
}

/* "key":d as cJSON 1.7's print_number writes a double: %d when it equals
 * its int, else %1.15g when that reads back as d (within DBL_EPSILON),
 * else %1.17g. */
static void jw_double(struct jw *w, const char *key, double d) {
    char num[96];
    if (isnan(d) || isinf(d)) {
        w->bad = 1;
        return;
    }
    int as_int = d >= INT_MAX ? INT_MAX : d <= (double)INT_MIN ? INT_MIN : (int)d;
    if (d == (double)as_int) {
        jw_key_int(w, key, as_int);
        return;
    }
    int n = snprintf(num, sizeof(num), "\"%s\":", key);
    snprintf(num + n, sizeof(num) - (size_t)n, "%1.15g", d);
    double back = strtod(num + n, NULL), most = fabs(back) > fabs(d) ? fabs(back) : fabs(d);
    if (fabs(back - d) > most * DBL_EPSILON)
        snprintf(num + n, sizeof(num) - (size_t)n, "%1.17g", d);
    jw_raw(w, num);
}

/* "key":"value", or bad when value holds a byte cJSON would escape. */
static void jw_str(struct jw *w, const char *key, const char *v) {
    for (const unsigned char *p = (const unsigned char *)v; *p; p++)
        if (*p < 0x20 || *p == '"' || *p == '\\') w->bad = 1;
    jw_raw(w, "\"");
    jw_raw(w, key);
    jw_raw(w, "\":\"");
    jw_raw(w, v);
    jw_raw(w, "\"");
}

/* A Redlock's quorum and each master's vote. */
static void jw_votes(struct jw *w, const struct lock_report *lr) {
    jw_raw(w, ",");
    jw_num(w, "quorum", lr->quorum);
    jw_raw(w, ",\"votes\":[");
    for (int i = 0; i < lr->nvotes; i++) {
        jw_raw(w, i ? ",{" : "{");
        jw_str(w, "node", lr->votes[i].node);
        jw_raw(w, ",");
        jw_str(w, "vote", lock_vote_word(lr->votes[i].outcome));
        jw_raw(w, ",");
        jw_double(w, "ms", lr->votes[i].us / 1000.0);
        jw_raw(w, "}");
    }
    jw_raw(w, "]");
}

/* The lock's fields of a sold or sold_out answer. */
static void jw_lock(struct jw *w, const struct sale_result *r) {
    const struct lock_report *lr = &r->lock;
    jw_raw(w, ",\"lock\":{");
    jw_num(w, "attempts", lr->attempts);
    jw_raw(w, ",");
    jw_num(w, "wait_ms", r->wait_ms);
    jw_raw(w, ",");
    jw_num(w, "hold_ms", r->hold_ms);
    const struct {
        const char *key;
        long long v;
    } opt[] = {{"depth", lr->depth}, {"batch", r->batch > 1 ? r->batch : 0}, {"token", lr->token}};
    for (size_t i = 0; i < sizeof(opt) / sizeof(opt[0]); i++) {
        if (!opt[i].v) continue;
        jw_raw(w, ",");
        jw_num(w, opt[i].key, opt[i].v);
    }
    if (lr->granted_by) {
        jw_raw(w, ",");
        jw_str(w, "granted_by", lock_grant_word(lr->granted_by));
    }
    if (lr->renewals) {
        jw_raw(w, ",");
        jw_num(w, "renewals", lr->renewals);
    }
    if (r->late) jw_raw(w, ",\"late\":true");
    if (lr->replicas_wanted > 0) {
        jw_raw(w, ",\"replicas\":{");
        jw_num(w, "wanted", lr->replicas_wanted);
        jw_raw(w, ",");
        jw_num(w, "acked", lr->replicas_acked);
        jw_raw(w, "}");
    }
    if (lr->quorum) jw_votes(w, lr);
    jw_raw(w, "}");
}

char *reply_sale_direct(const struct sale_result *r, const char *strategy, int port) {
    if ((r->status != INV_SOLD && r->status != INV_SOLD_OUT) || r->session_ended) return NULL;
    struct jw w = {.n = 0, .bad = 0};
    jw_raw(&w, "{");
    jw_str(&w, "status", reply_sale_status_word(r->status));
    jw_raw(&w, ",");
    jw_num(&w, "remaining", r->remaining);
    if (r->status == INV_SOLD) {
        jw_raw(&w, ",");
        jw_num(&w, "unit", r->unit);
        jw_raw(&w, ",");
        jw_str(&w, "order", r->order);
    }
    jw_raw(&w, ",");
    jw_str(&w, "strategy", strategy);
    jw_raw(&w, ",");
    jw_num(&w, "port", port);
    jw_lock(&w, r);
    jw_raw(&w, "}");
    if (w.bad) return NULL;
    char *s = malloc(w.n + 1);
    if (!s) return NULL;
    memcpy(s, w.buf, w.n);
    s[w.n] = '\0';
    return s;
}

char *reply_sale(const struct sale_result *r, const char *strategy, int port, int text) {
    if (text) {
        if (r->status == INV_SOLD)
            return format("成功卖出一个商品,库存剩余: %lld\t服务端口号:%d", r->remaining, port);
        if (r->status == INV_SOLD_OUT) return format("商品卖完了");
        return format("%s", r->errstr);
    }
    char *s = reply_sale_direct(r, strategy, port);
    return s ? s : reply_sale_tree(r, strategy, port);
}

char *reply_sale_tree(const struct sale_result *r, const char *strategy, int port) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", reply_sale_status_word(r->status));
    if (r->status == INV_SOLD) {
        cJSON_AddNumberToObject(o, "remaining", (double)r->remaining);
        cJSON_AddNumberToObject(o, "unit", (double)r->unit);
        cJSON_AddStringToObject(o, "order", r->order);
    } else if (r->status == INV_SOLD_OUT) {
        cJSON_AddNumberToObject(o, "remaining", (double)r->remaining);
    } else {
        cJSON_AddStringToObject(o, "error", r->errstr);
    }
    cJSON_AddStringToObject(o, "strategy", strategy);
    cJSON_AddNumberToObject(o, "port", port);
    if (r->session_ended) { /* the end_session fault: whether it reached its window */
        cJSON_AddBoolToObject(o, "session_ended", r->session_ended > 0);
        cJSON_AddNumberToObject(o, "session_end_us", (double)r->session_end_us);
        if (r->session_ended > 0)
            cJSON_AddNumberToObject(o, "session_gone_us", (double)r->session_gone_us);
        else
            cJSON_AddStringToObject(o, "session_error", r->session_error);
    }
    const struct lock_report *lr = &r->lock;
    cJSON *lk = cJSON_AddObjectToObject(o, "lock");
    cJSON_AddNumberToObject(lk, "attempts", lr->attempts);
    cJSON_AddNumberToObject(lk, "wait_ms", (double)r->wait_ms);
    if (r->status == INV_SOLD || r->status == INV_SOLD_OUT)
        cJSON_AddNumberToObject(lk, "hold_ms", (double)r->hold_ms);
    if (lr->depth) cJSON_AddNumberToObject(lk, "depth", lr->depth);
    if (r->batch > 1) cJSON_AddNumberToObject(lk, "batch", r->batch);
    if (lr->token) cJSON_AddNumberToObject(lk, "token", (double)lr->token);
    if (lr->granted_by) cJSON_AddStringToObject(lk, "granted_by", lock_grant_word(lr->granted_by));
    if (lr->renewals) cJSON_AddNumberToObject(lk, "renewals", lr->renewals);
    if (r->late) cJSON_AddTrueToObject(lk, "late");
    if (lr->replicas_wanted > 0) {
        cJSON *rep = cJSON_AddObjectToObject(lk, "replicas");
        cJSON_AddNumberToObject(rep, "wanted", lr->replicas_wanted);
        cJSON_AddNumberToObject(rep, "acked", lr->replicas_acked);
    }
    if (lr->quorum) {
        cJSON_AddNumberToObject(lk, "quorum", lr->quorum);
        cJSON *votes = cJSON_AddArrayToObject(lk, "votes");
        for (int i = 0; i < lr->nvotes; i++) {
            cJSON *v = cJSON_CreateObject();
            cJSON_AddStringToObject(v, "node", lr->votes[i].node);
            cJSON_AddStringToObject(v, "vote", lock_vote_word(lr->votes[i].outcome));
            cJSON_AddNumberToObject(v, "ms", lr->votes[i].us / 1000.0);
            cJSON_AddItemToArray(votes, v);
        }
    }
    return render(o);
}

char *reply_error(const char *word, const char *sentence, int text) {
    if (text) return format("%s", sentence);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", word);
    cJSON_AddStringToObject(o, "error", sentence);
    return render(o);
}

char *reply_ready(const char *reason, int port, int text) {
    if (text) return format("%s", reason ? reason : "ready: a sale can succeed");
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", reason ? "not_ready" : "ready");
    cJSON_AddBoolToObject(o, "ready", !reason);
    if (reason) cJSON_AddStringToObject(o, "reason", reason);
    cJSON_AddNumberToObject(o, "port", port);
    return render(o);
}

char *reply_unknown_strategy(const char *name, int text) {
    char names[1024];
    strategy_names(names, sizeof(names));
    if (text) return format("unknown strategy '%s'; known strategies: %s", name, names);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", "unknown_strategy");
    char *sentence = format("unknown strategy '%s'; known strategies: %s", name, names);
    cJSON_AddStringToObject(o, "error", sentence ? sentence : "unknown strategy");
    free(sentence);
    cJSON *list = cJSON_AddArrayToObject(o, "strategies");
    for (int i = 0; strategies[i].name; i++)
        cJSON_AddItemToArray(list, cJSON_CreateString(strategies[i].name));
    return render(o);
}

char *reply_stock(long long stock, int port, int text) {
    if (text) return format("库存: %lld\t服务端口号:%d", stock, port);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "stock", (double)stock);
    cJSON_AddNumberToObject(o, "port", port);
    return render(o);
}

/* The audit's warning when units left the stock with no sale in the
 * ledger, into buf; "" when none did. */
static void audit_lost_warning(const struct audit *a, char *buf, size_t len) {
    buf[0] = '\0';
    if (a->stock_lost <= 0) return;
    snprintf(buf, len,
             "%lld units left the stock with no sale in the ledger (initial %lld, stock %lld, "
             "sold %lld): a write overwrote a newer stock, such as a reset during a sale",
             a->stock_lost, a->initial, a->stock, a->sold);
}

/* The audit's warning when the stock was sold under more than one lock
 * family since its reset, into buf; "" when there is none. */
static void audit_warning(const struct audit *a, char *buf, size_t len) {
    buf[0] = '\0';
    if (a->nfamilies < 2) return;
    size_t off = (size_t)snprintf(buf, len,
                                  "this stock was sold under %d lock families since its "
                                  "reset (",
                                  a->nfamilies);
    for (int i = 0; i < a->nfamilies && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? ", " : "", a->families[i]);
    if (off < len)
        snprintf(buf + off, len - off,
                 "): they do not exclude each other, so the audit cannot "
                 "vouch for any of them; set lock.allowed to rule mixing out");
}

char *reply_audit(const struct audit *a, int text) {
    char warning[512], lost[256];
    audit_warning(a, warning, sizeof(warning));
    audit_lost_warning(a, lost, sizeof(lost));
    if (text)
        return format("stock: %lld\ninitial: %lld\nsold: %lld\nsold_twice: %lld\n"
                      "oversold_units: %lld\noversold: %s\nstock_lost: %lld\nviolations: "
                      "%lld\n%s%s%s%s%s%s",
                      a->stock, a->initial, a->sold, a->sold_twice, a->oversold_units,
                      a->oversold ? "yes" : "no", a->stock_lost, a->violations,
                      lost[0] ? "warning: " : "", lost, lost[0] ? "\n" : "",
                      warning[0] ? "warning: " : "", warning, warning[0] ? "\n" : "");
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "stock", (double)a->stock);
    cJSON_AddNumberToObject(o, "initial", (double)a->initial);
    cJSON_AddNumberToObject(o, "sold", (double)a->sold);
    cJSON_AddNumberToObject(o, "sold_twice", (double)a->sold_twice);
    cJSON_AddNumberToObject(o, "oversold_units", (double)a->oversold_units);
    cJSON_AddBoolToObject(o, "oversold", a->oversold);
    cJSON_AddNumberToObject(o, "stock_lost", (double)a->stock_lost);
    cJSON_AddNumberToObject(o, "violations", (double)a->violations);
    cJSON *fam = cJSON_AddArrayToObject(o, "families");
    for (int i = 0; i < a->nfamilies; i++)
        cJSON_AddItemToArray(fam, cJSON_CreateString(a->families[i]));
    cJSON *w = cJSON_AddArrayToObject(o, "warnings");
    if (lost[0]) cJSON_AddItemToArray(w, cJSON_CreateString(lost));
    if (warning[0]) cJSON_AddItemToArray(w, cJSON_CreateString(warning));
    return render(o);
}

/* A hold's times and whether it was owned, as the history and a lab step
 * give them (a lease, a write time and owned appear only when known). */
static void add_hold_times(cJSON *x, int64_t granted_us, int64_t released_us, int64_t lease_us,
                           int64_t written_us, int owned) {
    cJSON_AddNumberToObject(x, "granted_us", (double)granted_us);
    cJSON_AddNumberToObject(x, "released_us", (double)released_us);
    if (lease_us) cJSON_AddNumberToObject(x, "lease_us", (double)lease_us);
    if (written_us) cJSON_AddNumberToObject(x, "written_us", (double)written_us);
    if (owned >= 0) cJSON_AddBoolToObject(x, "owned", owned);
}

/* A recorded hold as hold.h reads it: from the history alone. */
static struct hold history_hold(const struct history_event *e) {
    return (struct hold){.owner = e->owner,
                         .granted_us = e->granted_us,
                         .released_us = e->released_us,
                         .lease_us = e->lease_us,
                         .written_us = e->written_us,
                         .wrote = strcmp(e->outcome, "sold") == 0};
}

/* The overlapping pairs being listed: names[i] names hold i; a pair is
 * kept when one of its holds is at least from. */
struct pairs {
    cJSON *list;
    const char *const *names;
    size_t from;
    long found;
};

static void pair_found(size_t a, size_t b, int64_t lead_us, void *arg) {
    struct pairs *p = arg;
    if (a < p->from && b < p->from) return;
    if (p->found++ >= REPLY_OVERLAPS_MAX) return;
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "a", p->names[a]);
    cJSON_AddStringToObject(x, "b", p->names[b]);
    cJSON_AddNumberToObject(x, "lead_us", (double)lead_us);
    cJSON_AddItemToArray(p->list, x);
}

/* Adds to o "overlaps" (the pairs of h[0..n) inside at once with one of
 * them at least from, names[] naming them) and "overlaps_found". 0, or -1
 * when out of memory. */
static int add_overlaps(cJSON *o, const struct hold *h, const char *const *names, size_t n,
                        size_t from) {
    struct pairs p = {cJSON_AddArrayToObject(o, "overlaps"), names, from, 0};
    if (!p.list || hold_overlaps(h, n, pair_found, &p) < 0) return -1;
    cJSON_AddNumberToObject(o, "overlaps_found", (double)p.found);
    return 0;
}

static char *history_text(const struct history_event *ev, int n) {
    size_t cap = 256 + (size_t)n * 256, off = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    s[0] = '\0';
    for (int i = 0; i < n && off < cap; i++) {
        const struct history_event *e = &ev[i];
        off += (size_t)snprintf(s + off, cap - off,
                                "%s %s:%d %s %s unit=%lld granted_us=%lld "
                                "released_us=%lld written_us=%lld owned=%d late=%d\n",
                                e->id, e->instance, e->port, e->strategy, e->outcome, e->unit,
                                (long long)e->granted_us, (long long)e->released_us,
                                (long long)e->written_us, e->owned, e->late);
    }
    return s;
}

static cJSON *history_object(const struct history_event *e) {
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "id", e->id);
    cJSON_AddStringToObject(x, "instance", e->instance);
    cJSON_AddNumberToObject(x, "port", e->port);
    cJSON_AddStringToObject(x, "owner", e->owner);
    cJSON_AddStringToObject(x, "strategy", e->strategy);
    cJSON_AddStringToObject(x, "outcome", e->outcome);
    cJSON_AddStringToObject(x, "order", e->order);
    add_hold_times(x, e->granted_us, e->released_us, e->lease_us, e->written_us, e->owned);
    struct hold h = history_hold(e);
    cJSON_AddNumberToObject(x, "inside_until_us", (double)hold_inside_until(&h));
    if (e->unit) cJSON_AddNumberToObject(x, "unit", (double)e->unit);
    cJSON_AddNumberToObject(x, "stock_read", (double)e->stock_read);
    if (e->token) cJSON_AddNumberToObject(x, "token", (double)e->token);
    cJSON_AddBoolToObject(x, "late", e->late);
    return x;
}

char *reply_history(const struct history_event *ev, int before, int n, int text) {
    if (text) return history_text(ev + before, n - before);
    cJSON *o = cJSON_CreateObject();
    cJSON *list = cJSON_AddArrayToObject(o, "events");
    for (int i = before; i < n; i++) cJSON_AddItemToArray(list, history_object(&ev[i]));
    cJSON_AddStringToObject(o, "next", n > before ? ev[n - 1].id : "");
    struct hold *h = malloc(((size_t)n + 1) * sizeof(*h));
    const char **names = malloc(((size_t)n + 1) * sizeof(*names));
    for (int i = 0; h && names && i < n; i++) {
        h[i] = history_hold(&ev[i]);
        names[i] = ev[i].id;
    }
    int rc = h && names ? add_overlaps(o, h, names, (size_t)n, (size_t)before) : -1;
    free(h);
    free(names);
    if (rc < 0) {
        cJSON_Delete(o);
        return NULL;
    }
    return render(o);
}

/* The demo's text of reply_strategies: one line per strategy. */
static char *strategies_text(const char *default_strategy, const char *const *unavailable) {
    size_t cap = 4096, off = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    s[0] = '\0';
    for (int i = 0; strategies[i].name; i++) {
        const struct strategy *t = &strategies[i];
        const char *why = unavailable[i];
        int n;
        while ((n = snprintf(s + off, cap - off, "%s%s\t%s\tflaw: %s%s%s%s\n", t->name,
                             strcmp(t->name, default_strategy) == 0 ? " (default)" : "",
                             t->description, t->flaw, why ? "\t(unavailable: " : "", why ? why : "",
                             why ? ")" : "")) >= (int)(cap - off)) {
            char *bigger = realloc(s, cap *= 2);
            if (!bigger) {
                free(s);
                return NULL;
            }
            s = bigger;
        }
        off += (size_t)n;
    }
    return s;
}

char *reply_strategies(const char *default_strategy, const char *const *unavailable, int text) {
    if (text) return strategies_text(default_strategy, unavailable);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "default", default_strategy);
    cJSON *list = cJSON_AddArrayToObject(o, "strategies");
    for (int i = 0; strategies[i].name; i++) {
        const struct strategy *t = &strategies[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", t->name);
        cJSON_AddStringToObject(e, "description", t->description);
        cJSON_AddStringToObject(e, "flaw", t->flaw);
        cJSON_AddStringToObject(e, "lock", lock_type_name(t->lock));
        cJSON_AddStringToObject(e, "family", lock_type_family(t->lock));
        char path[64];
        snprintf(path, sizeof(path), "/inventory/sale/%s", t->name);
        cJSON_AddStringToObject(e, "path", path);
        cJSON_AddBoolToObject(e, "available", !unavailable[i]);
        if (unavailable[i]) cJSON_AddStringToObject(e, "unavailable", unavailable[i]);
        cJSON_AddItemToArray(list, e);
    }
    return render(o);
}

/* ---- the lab ----------------------------------------------------------------- */

/* body as parsed JSON when it is JSON, else as a string. */
static cJSON *json_or_string(const char *body) {
    cJSON *j = body[0] ? cJSON_Parse(body) : NULL;
    return j ? j : cJSON_CreateString(body);
}

/* Adds to o the overlaps of the recorded holds of v's sales, named by
 * their labels, as the scenario judge reads them (with their answers'
 * lock.hold_ms). */
static void add_step_overlaps(cJSON *o, const struct lab_run_view *v) {
    struct hold h[SCENARIO_STEPS_MAX];
    char labels[SCENARIO_STEPS_MAX][2];
    const char *names[SCENARIO_STEPS_MAX];
    size_t n = 0;
    for (int i = 0; i < v->nsteps && i < SCENARIO_STEPS_MAX; i++) {
        if (!v->steps[i].has_hold) continue;
        h[n] = scenario_hold_times(&v->steps[i].hold, v->steps[i].hold_ms);
        labels[n][0] = v->steps[i].label;
        labels[n][1] = '\0';
        names[n] = labels[n];
        n++;
    }
    add_overlaps(o, h, names, n, 0);
}

static cJSON *lab_run_object(const struct lab_run_view *v) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", v->id);
    cJSON_AddStringToObject(o, "strategy", v->req.strategy);
    if (v->req.scenario[0])
        cJSON_AddStringToObject(o, "scenario", v->req.scenario);
    else
        cJSON_AddNullToObject(o, "scenario");
    cJSON_AddNumberToObject(o, "clients", v->req.clients);
    cJSON_AddNumberToObject(o, "requests", v->req.requests);
    cJSON_AddNumberToObject(o, "stock", (double)v->req.stock);
    cJSON_AddStringToObject(o, "state", v->state);
    cJSON_AddStringToObject(o, "phase", v->phase);
    cJSON_AddStringToObject(o, "target", v->target);
    cJSON_AddStringToObject(o, "error", v->error);
    cJSON_AddNumberToObject(o, "started_us", (double)v->started_us);
    cJSON_AddNumberToObject(o, "finished_us", (double)v->finished_us);
    cJSON_AddNumberToObject(o, "elapsed_s", v->elapsed_s);
    cJSON_AddNumberToObject(o, "done", (double)v->done);
    for (int i = 0; i < LAB_OUTCOMES; i++)
        cJSON_AddNumberToObject(o, lab_outcome_word((enum lab_outcome)i), (double)v->counts[i]);
    cJSON_AddNumberToObject(o, "sales_per_s", v->sales_per_s);
    cJSON_AddNumberToObject(o, "p50_ms", v->p50_ms);
    cJSON_AddNumberToObject(o, "p99_ms", v->p99_ms);
    cJSON_AddNumberToObject(o, "max_ms", v->max_ms);
    cJSON_AddStringToObject(o, "first_error", v->first_error);
    cJSON_AddStringToObject(o, "first_other", v->first_other);
    cJSON_AddBoolToObject(o, "faults_refused", v->faults_refused);
    cJSON *steps = cJSON_AddArrayToObject(o, "steps");
    for (int i = 0; i < v->nsteps; i++) {
        const struct lab_step *st = &v->steps[i];
        cJSON *x = cJSON_CreateObject();
        char label[2] = {st->label, 0}, role[2] = {st->role, 0};
        cJSON_AddStringToObject(x, "label", label);
        cJSON_AddStringToObject(x, "instance", role);
        cJSON_AddStringToObject(x, "addr", st->addr);
        cJSON_AddNumberToObject(x, "at_ms", st->at_ms);
        cJSON_AddNumberToObject(x, "wait_ms", st->wait_ms);
        cJSON_AddStringToObject(x, "query", st->query);
        cJSON_AddNumberToObject(x, "sent_us", (double)st->sent_us);
        cJSON_AddNumberToObject(x, "status", st->status);
        cJSON_AddStringToObject(x, "word", st->word);
        cJSON_AddNumberToObject(x, "took_ms", st->took_ms);
        cJSON_AddItemToObject(x, "answer", json_or_string(st->body));
        if (st->has_hold) {
            const struct scenario_hold *h = &st->hold;
            cJSON *y = cJSON_AddObjectToObject(x, "hold");
            add_hold_times(y, h->granted_us, h->released_us, h->lease_us, h->written_us, h->owned);
            struct hold t = scenario_hold_times(h, st->hold_ms);
            cJSON_AddNumberToObject(y, "inside_until_us", (double)hold_inside_until(&t));
            cJSON_AddStringToObject(y, "outcome", h->outcome);
        } else {
            cJSON_AddNullToObject(x, "hold");
        }
        cJSON_AddItemToArray(steps, x);
    }
    add_step_overlaps(o, v);
    if (v->audit[0])
        cJSON_AddItemToObject(o, "audit", json_or_string(v->audit));
    else
        cJSON_AddNullToObject(o, "audit");
    const struct scenario *sc = v->req.scenario[0] ? scenario_find(v->req.scenario) : NULL;
    if (sc && v->verdict.result != SCENARIO_UNJUDGED) {
        cJSON *y = cJSON_AddObjectToObject(o, "verdict");
        cJSON_AddStringToObject(y, "result", scenario_result_word(v->verdict.result));
        cJSON_AddStringToObject(y, "window", sc->window);
        cJSON_AddBoolToObject(y, "window_reached", v->verdict.window);
        cJSON_AddStringToObject(y, "evidence", v->verdict.evidence);
        cJSON_AddNumberToObject(y, "other_holds", v->others);
    } else {
        cJSON_AddNullToObject(o, "verdict");
    }
    return o;
}

char *reply_lab_run(const struct lab_run_view *v) { return render(lab_run_object(v)); }

char *reply_lab_status(const struct lab_info *info) {
    cJSON *o = cJSON_CreateObject();
    if (!info) {
        cJSON_AddBoolToObject(o, "enabled", 0);
        cJSON_AddStringToObject(o, "error",
                                "lab runs are off on this instance: start it with "
                                "lab.enabled=true (--set lab.enabled=true) to run loads and "
                                "scenarios from the page");
        return render(o);
    }
    cJSON_AddBoolToObject(o, "enabled", 1);
    cJSON_AddStringToObject(o, "target", info->target);
    cJSON *inst = cJSON_AddArrayToObject(o, "instances");
    for (int i = 0; i < info->ninstances; i++)
        cJSON_AddItemToArray(inst, cJSON_CreateString(info->instances[i]));
    cJSON_AddNumberToObject(o, "ttl_ms", info->ttl_ms);
    cJSON_AddNumberToObject(o, "wait_ms", info->wait_ms);
    cJSON_AddBoolToObject(o, "token_required", info->token_required);
    if (info->running)
        cJSON_AddNumberToObject(o, "running", info->running);
    else
        cJSON_AddNullToObject(o, "running");
    cJSON *b = cJSON_AddObjectToObject(o, "bounds");
    cJSON_AddNumberToObject(b, "clients", LAB_CLIENTS_MAX);
    cJSON_AddNumberToObject(b, "requests", LAB_REQUESTS_MAX);
    cJSON_AddNumberToObject(b, "seconds", LAB_SECONDS_MAX);
    cJSON *files = cJSON_AddObjectToObject(o, "results");
    cJSON_AddBoolToObject(files, "demo.csv", info->has_demo);
    cJSON_AddBoolToObject(files, "matrix.csv", info->has_matrix);
    cJSON_AddBoolToObject(files, "campaign.csv", info->has_campaign);
    cJSON_AddBoolToObject(files, "campaign-counterexample.json", info->has_counterexample);
    return render(o);
}

char *reply_lab_runs(const struct lab_run_view *v, int n, int running) {
    cJSON *o = cJSON_CreateObject();
    if (running)
        cJSON_AddNumberToObject(o, "running", running);
    else
        cJSON_AddNullToObject(o, "running");
    cJSON *runs = cJSON_AddArrayToObject(o, "runs");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(runs, lab_run_object(&v[i]));
    return render(o);
}

char *reply_lab_scenarios(const struct lab_info *info) {
    const struct scenario_settings *set = &info->scenario;
    int ttl_ms = set->ttl_ms;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "ttl_ms", ttl_ms);
    cJSON_AddNumberToObject(o, "wait_ms", info->wait_ms);
    cJSON_AddNumberToObject(o, "spin_sleep_ms", set->spin_sleep_ms);
    cJSON_AddNumberToObject(o, "max_hold_ms", set->max_hold_ms);
    cJSON *list = cJSON_AddArrayToObject(o, "scenarios");
    for (int i = 0; scenarios[i].name; i++) {
        const struct scenario *sc = &scenarios[i];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "name", sc->name);
        cJSON_AddStringToObject(x, "title", sc->title);
        cJSON_AddStringToObject(x, "what", sc->what);
        cJSON_AddStringToObject(x, "look_for", sc->look_for);
        cJSON *shows = cJSON_AddArrayToObject(x, "shows");
        for (int k = 0; strategies[k].name; k++)
            if (scenario_shows(sc, strategies[k].name))
                cJSON_AddItemToArray(shows, cJSON_CreateString(strategies[k].name));
        cJSON_AddStringToObject(x, "fixed_by", sc->fixed_by);
        cJSON *fix_of = cJSON_AddObjectToObject(x, "fix_of");
        for (int k = 0; strategies[k].name; k++) {
            char fix[64];
            if (scenario_fix_for(sc, strategies[k].name, fix, sizeof(fix))[0])
                cJSON_AddStringToObject(fix_of, strategies[k].name, fix);
        }
        cJSON_AddBoolToObject(x, "ends_session", scenario_ends_session(sc));
        cJSON_AddStringToObject(x, "window", sc->window);
        cJSON_AddStringToObject(x, "flaw", sc->flaw);
        cJSON_AddStringToObject(x, "fix", sc->fix);
        cJSON_AddNumberToObject(x, "length_ms", scenario_length_ms(sc, set));
        char why[512];
        if (scenario_check(sc, set, why, sizeof(why)) < 0)
            cJSON_AddStringToObject(x, "refused", why);
        else
            cJSON_AddNullToObject(x, "refused");
        cJSON *steps = cJSON_AddArrayToObject(x, "steps");
        for (int k = 0; k < sc->nsteps; k++) {
            const struct scenario_step *st = &sc->steps[k];
            cJSON *y = cJSON_CreateObject();
            char label[2] = {st->label, 0};
            cJSON_AddStringToObject(y, "label", label);
            cJSON_AddStringToObject(y, "instance", st->role ? "B" : "A");
            cJSON_AddNumberToObject(y, "at_ms", scenario_ms(st->at, ttl_ms));
            cJSON_AddNumberToObject(y, "hold_ms", scenario_ms(st->hold, ttl_ms));
            cJSON_AddNumberToObject(y, "release_delay_ms", scenario_ms(st->release_delay, ttl_ms));
            cJSON_AddNumberToObject(y, "nested", st->nested);
            cJSON_AddBoolToObject(y, "end_session", st->end_session);
            cJSON_AddNumberToObject(y, "wait_ms", scenario_wait_ms(st, set));
            cJSON_AddItemToArray(steps, y);
        }
        cJSON_AddItemToArray(list, x);
    }
    return render(o);
}
