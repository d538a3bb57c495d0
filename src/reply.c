/* reply.c -- JSON and text bodies (see reply.h). JSON is built with cJSON;
 * every function frees its cJSON tree before returning. */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lock.h"
#include "reply.h"

int reply_sale_http_status(int s) {
    switch (s) {
    case INV_SOLD:
    case INV_SOLD_OUT: return 200;
    case INV_STALE_TOKEN:
    case INV_LOCK_LOST: return 409;
    case INV_BAD_DATA: return 409;
    default: return 503;
    }
}

const char *reply_sale_status_word(int s) {
    switch (s) {
    case INV_SOLD: return "sold";
    case INV_SOLD_OUT: return "sold_out";
    case INV_LOCK_TIMEOUT: return "lock_timeout";
    case INV_STALE_TOKEN: return "stale_token";
    case INV_LOCK_LOST: return "lock_lost";
    case INV_BAD_DATA: return "bad_stock";
    default: return "backend_unavailable";
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

char *reply_sale(const struct sale_result *r, const char *strategy, int port, int text) {
    if (text) {
        if (r->status == INV_SOLD)
            return format("成功卖出一个商品,库存剩余: %lld\t服务端口号:%d", r->remaining, port);
        if (r->status == INV_SOLD_OUT) return format("商品卖完了");
        return format("%s", r->errstr);
    }
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
    cJSON *lk = cJSON_AddObjectToObject(o, "lock");
    cJSON_AddNumberToObject(lk, "attempts", r->attempts);
    cJSON_AddNumberToObject(lk, "wait_ms", (double)r->wait_ms);
    if (r->status == INV_SOLD || r->status == INV_SOLD_OUT)
        cJSON_AddNumberToObject(lk, "hold_ms", (double)r->hold_ms);
    if (r->depth) cJSON_AddNumberToObject(lk, "depth", r->depth);
    if (r->batch > 1) cJSON_AddNumberToObject(lk, "batch", r->batch);
    if (r->token) cJSON_AddNumberToObject(lk, "token", (double)r->token);
    if (r->replicas_wanted > 0) {
        cJSON *rep = cJSON_AddObjectToObject(lk, "replicas");
        cJSON_AddNumberToObject(rep, "wanted", r->replicas_wanted);
        cJSON_AddNumberToObject(rep, "acked", r->replicas_acked);
    }
    if (r->quorum) {
        static const char *const words[] = {"restarted", "error", "busy", "yes"};
        cJSON_AddNumberToObject(lk, "quorum", r->quorum);
        cJSON *votes = cJSON_AddArrayToObject(lk, "votes");
        for (int i = 0; i < r->nvotes; i++) {
            cJSON *v = cJSON_CreateObject();
            cJSON_AddStringToObject(v, "node", r->votes[i].node);
            cJSON_AddStringToObject(v, "vote", words[r->votes[i].outcome + 2]);
            cJSON_AddNumberToObject(v, "ms", r->votes[i].us / 1000.0);
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

char *reply_unknown_strategy(const char *name, int text) {
    char names[1024];
    lock_type_names(names, sizeof(names));
    if (text) return format("unknown strategy '%s'; known strategies: %s", name, names);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", "unknown_strategy");
    char *sentence = format("unknown strategy '%s'; known strategies: %s", name, names);
    cJSON_AddStringToObject(o, "error", sentence ? sentence : "unknown strategy");
    free(sentence);
    cJSON *list = cJSON_AddArrayToObject(o, "strategies");
    for (int i = 0; lock_types[i]; i++)
        cJSON_AddItemToArray(list, cJSON_CreateString(lock_types[i]->name));
    return render(o);
}

char *reply_stock(long long stock, int port, int text) {
    if (text) return format("库存: %lld\t服务端口号:%d", stock, port);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "stock", (double)stock);
    cJSON_AddNumberToObject(o, "port", port);
    return render(o);
}

char *reply_audit(const struct audit *a, int text) {
    if (text)
        return format("stock: %lld\ninitial: %lld\nsold: %lld\nsold_twice: %lld\n"
                      "oversold_units: %lld\noversold: %s\nviolations: %lld\n",
                      a->stock, a->initial, a->sold, a->sold_twice, a->oversold_units,
                      a->oversold ? "yes" : "no", a->violations);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "stock", (double)a->stock);
    cJSON_AddNumberToObject(o, "initial", (double)a->initial);
    cJSON_AddNumberToObject(o, "sold", (double)a->sold);
    cJSON_AddNumberToObject(o, "sold_twice", (double)a->sold_twice);
    cJSON_AddNumberToObject(o, "oversold_units", (double)a->oversold_units);
    cJSON_AddBoolToObject(o, "oversold", a->oversold);
    cJSON_AddNumberToObject(o, "violations", (double)a->violations);
    return render(o);
}

char *reply_strategies(const char *default_strategy, int text) {
    if (text) {
        size_t cap = 4096, off = 0;
        char *s = malloc(cap);
        if (!s) return NULL;
        s[0] = '\0';
        for (int i = 0; lock_types[i]; i++) {
            const struct lock_type *t = lock_types[i];
            int n;
            while ((n = snprintf(s + off, cap - off, "%s%s\t%s\tflaw: %s\n", t->name,
                                 strcmp(t->name, default_strategy) == 0 ? " (default)" : "",
                                 t->description, t->flaw)) >= (int)(cap - off)) {
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
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "default", default_strategy);
    cJSON *list = cJSON_AddArrayToObject(o, "strategies");
    for (int i = 0; lock_types[i]; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", lock_types[i]->name);
        cJSON_AddStringToObject(e, "description", lock_types[i]->description);
        cJSON_AddStringToObject(e, "flaw", lock_types[i]->flaw);
        char path[64];
        snprintf(path, sizeof(path), "/inventory/sale/%s", lock_types[i]->name);
        cJSON_AddStringToObject(e, "path", path);
        cJSON_AddItemToArray(list, e);
    }
    return render(o);
}
