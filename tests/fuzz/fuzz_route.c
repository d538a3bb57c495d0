/* fuzz_route.c -- libFuzzer target for the request helpers: route_match
 * (route.c), item_valid (item.c) and the error bodies of
 * reply.c.
 *
 * DESIGN
 * The input is split on '\n' into fields:
 *   method \n url \n context-path \n item \n word \n name \n sentence...
 * where the last field, the sentence, is everything left (newlines
 * included, up to a NUL). Missing fields are empty strings. Each field is a
 * heap string of its exact size, so ASan sees any read past its end.
 *
 * route_match is compared with a model written from route.h, and checked
 * for its own invariants: strategy is a NUL-terminated string of [a-z0-9-]
 * of at most 32 bytes, arg one of at most 32 bytes (digits for a run id)
 * set exactly for the lab's routes with an argument, id is a route_id,
 * allow is never NULL, a miss says nothing (id 0, strategy "", arg "",
 * method_allowed 0, allow ""), a trailing '/'
 * changes nothing, and method_allowed means the method is one of the Allow
 * header's (HEAD counting as GET). The last check is made only for methods
 * that are HTTP tokens without spaces or commas, the only kind a server
 * hands over (see the report for "GET, POST").
 *
 * item_valid is compared with its definition in item.h.
 *
 * reply_error, reply_unknown_strategy and reply_strategies are called with
 * the fields as words, sentences and names; their JSON must parse back with
 * cJSON into the same strings, their text must be the same bytes. Every
 * result is freed, so a leak is found too. Not thread safe. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inventory.h"
#include "item.h"
#include "lock.h"
#include "strategy.h"
#include "reply.h"
#include "route.h"

#define FUZZ_NAME "fuzz_route"
#include "fuzz_check.h"

enum { F_METHOD, F_URL, F_CONTEXT, F_ITEM, F_WORD, F_NAME, F_SENTENCE, NFIELDS };

static char *dup_n(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (p == NULL) abort();
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

/* ---- route_match --------------------------------------------------------- */

static int strategy_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

/* The model: route.h's contract, written independently of route.c. */
struct expect {
    enum route_id id;
    const char *allow;
    const char *strategy; /* with slen bytes */
    size_t slen;
    const char *arg;      /* with alen bytes: a run id or a lab file */
    size_t alen;
};

static size_t trimmed(const char *s) {
    size_t n = strlen(s);
    while (n > 1 && s[n - 1] == '/') n--;
    return n;
}

static int is(const char *u, size_t n, const char *path) {
    return strlen(path) == n && memcmp(u, path, n) == 0;
}

static struct expect model(const char *url, const char *context) {
    static const struct {
        const char *path;
        enum route_id id;
        const char *allow;
        const char *strategy;
    } fixed[] = {
        {"/inventory/sale", ROUTE_SALE, "GET, POST", ""},
        {"/inventory/saleByRedisson", ROUTE_SALE, "GET, POST", "redisson"},
        {"/inventory/saleByRedlock", ROUTE_SALE, "GET, POST", "redlock"},
        {"/inventory", ROUTE_INVENTORY, "GET", ""},
        {"/inventory/reset", ROUTE_RESET, "POST", ""},
        {"/inventory/audit", ROUTE_AUDIT, "GET", ""},
        {"/strategies", ROUTE_STRATEGIES, "GET", ""},
        {"/healthz", ROUTE_HEALTHZ, "GET", ""},
        {"/metrics", ROUTE_METRICS, "GET", ""},
        {"/inventory/history", ROUTE_HISTORY, "GET", ""},
        {"/", ROUTE_LAB_PAGE, "GET", ""},
        {"/lab", ROUTE_LAB_STATUS, "GET", ""},
        {"/lab/runs", ROUTE_LAB_RUNS, "GET, POST", ""},
        {"/lab/scenarios", ROUTE_LAB_SCENARIOS, "GET", ""},
    };
    struct expect e = {ROUTE_NOT_FOUND, "", "", 0, "", 0};
    size_t n = trimmed(url);
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        if (is(url, n, fixed[i].path)) {
            e.id = fixed[i].id;
            e.allow = fixed[i].allow;
            e.strategy = fixed[i].strategy;
            e.slen = strlen(fixed[i].strategy);
            return e;
        }
    }
    static const char prefix[] = "/inventory/sale/";
    const size_t pl = sizeof prefix - 1;
    if (n > pl && memcmp(url, prefix, pl) == 0) {
        /* route.c decides here: a bad strategy segment is a miss, even when
         * the URL is also <context-path>/inventory/sale. */
        size_t sl = n - pl;
        if (sl > 32) return e;
        for (size_t i = 0; i < sl; i++)
            if (!strategy_char(url[pl + i])) return e;
        e.id = ROUTE_SALE;
        e.allow = "GET, POST";
        e.strategy = url + pl;
        e.slen = sl;
        return e;
    }
    /* The lab: /lab/runs/<1 to 9 digits>, /lab/results/<demo|matrix>.csv,
     * /lab/<app.js|app.css|icon.svg>; nothing else under /lab/. */
    static const char runs[] = "/lab/runs/", results[] = "/lab/results/", lab[] = "/lab/";
    const size_t rl = sizeof runs - 1, tl = sizeof results - 1, ll = sizeof lab - 1;
    if (n > rl && memcmp(url, runs, rl) == 0) {
        size_t k = n - rl;
        if (k > 9) return e;
        for (size_t i = 0; i < k; i++)
            if (url[rl + i] < '0' || url[rl + i] > '9') return e;
        e.id = ROUTE_LAB_RUN;
        e.allow = "GET";
        e.arg = url + rl;
        e.alen = k;
        return e;
    }
    if (n > tl && memcmp(url, results, tl) == 0) {
        if (is(url + tl, n - tl, "demo.csv") || is(url + tl, n - tl, "matrix.csv")) {
            e.id = ROUTE_LAB_RESULT;
            e.allow = "GET";
            e.arg = url + tl;
            e.alen = n - tl;
        }
        return e;
    }
    if (n > ll && memcmp(url, lab, ll) == 0) {
        if (is(url + ll, n - ll, "app.js") || is(url + ll, n - ll, "app.css") ||
            is(url + ll, n - ll, "icon.svg")) {
            e.id = ROUTE_LAB_ASSET;
            e.allow = "GET";
            e.arg = url + ll;
            e.alen = n - ll;
        }
        return e;
    }
    size_t cl = trimmed(context);
    if (cl == 1 && context[0] == '/') cl = 0; /* "/" adds nothing to /inventory/sale */
    static const char sale[] = "/inventory/sale";
    if (cl > 0 && n == cl + sizeof sale - 1 && memcmp(url, context, cl) == 0 &&
        memcmp(url + cl, sale, sizeof sale - 1) == 0) {
        e.id = ROUTE_SALE;
        e.allow = "GET, POST";
    }
    return e;
}

/* Is method one of the ", "-separated methods of allow? */
static int allowed(const char *method, const char *allow) {
    size_t ml = strlen(method);
    const char *p = allow;
    while (*p) {
        size_t n = strcspn(p, ",");
        if (n == ml && ml > 0 && memcmp(p, method, n) == 0) return 1;
        p += n;
        while (*p == ',' || *p == ' ') p++;
    }
    return 0;
}

static int simple_token(const char *m) {
    return strpbrk(m, " ,") == NULL;
}

static void check_route(const char *method, const char *url, const char *context) {
    struct route r, again;
    memset(&r, 0xA5, sizeof r); /* route_match must fill every field */
    enum route_id id = route_match(method, url, context, &r);

    CHECK(id == r.id, "returned %d, out->id %d", id, r.id);
    CHECK(r.id >= ROUTE_NOT_FOUND && r.id <= ROUTE_LAB_RESULT, "id %d out of range", r.id);
    CHECK(r.allow != NULL, "allow is NULL");
    CHECK(memchr(r.strategy, '\0', sizeof r.strategy) != NULL, "strategy not terminated");
    CHECK(memchr(r.arg, '\0', sizeof r.arg) != NULL, "arg not terminated");
    size_t al = strlen(r.arg);
    CHECK(al <= 32, "arg of %zu bytes", al);
    if (r.id == ROUTE_LAB_RUN)
        for (size_t i = 0; i < al; i++)
            CHECK(r.arg[i] >= '0' && r.arg[i] <= '9', "run id byte 0x%02x", (unsigned char)r.arg[i]);
    CHECK((al > 0) == (r.id == ROUTE_LAB_RUN || r.id == ROUTE_LAB_ASSET || r.id == ROUTE_LAB_RESULT),
          "route %d with arg '%s'", r.id, r.arg);
    size_t sl = strlen(r.strategy);
    CHECK(sl <= 32, "strategy of %zu bytes", sl);
    for (size_t i = 0; i < sl; i++)
        CHECK(strategy_char(r.strategy[i]), "strategy byte 0x%02x", (unsigned char)r.strategy[i]);
    CHECK(r.method_allowed == 0 || r.method_allowed == 1, "method_allowed %d", r.method_allowed);

    if (r.id == ROUTE_NOT_FOUND) {
        CHECK(sl == 0 && al == 0 && r.method_allowed == 0 && strcmp(r.allow, "") == 0,
              "a miss says strategy '%s', arg '%s', method_allowed %d, allow '%s'", r.strategy,
              r.arg, r.method_allowed, r.allow);
    } else {
        CHECK(r.allow[0] != '\0', "route %d without an Allow header", r.id);
    }

    struct expect e = model(url, context);
    CHECK(r.id == e.id, "url '%.200s' context '%.200s': id %d, model says %d", url, context,
          r.id, e.id);
    CHECK(strcmp(r.allow, e.allow) == 0, "allow '%s', model says '%s'", r.allow, e.allow);
    CHECK(sl == e.slen && memcmp(r.strategy, e.strategy, sl) == 0,
          "strategy '%s', model says '%.*s'", r.strategy, (int)e.slen, e.strategy);
    CHECK(al == e.alen && memcmp(r.arg, e.arg, al) == 0, "arg '%s', model says '%.*s'", r.arg,
          (int)e.alen, e.arg);

    if (simple_token(method)) {
        int want = allowed(method, r.allow) ||
                   (strcmp(method, "HEAD") == 0 && allowed("GET", r.allow));
        CHECK(r.method_allowed == want, "method '%.100s' on '%s': method_allowed %d, want %d",
              method, r.allow, r.method_allowed, want);
    }

    /* Pure: the same answer twice; a trailing '/' changes nothing. */
    memset(&again, 0x5A, sizeof again);
    route_match(method, url, context, &again);
    CHECK(again.id == r.id && again.method_allowed == r.method_allowed &&
          again.allow == r.allow && strcmp(again.strategy, r.strategy) == 0 &&
          strcmp(again.arg, r.arg) == 0,
          "route_match is not deterministic");
    if (url[0] != '\0') {
        size_t ul = strlen(url);
        char *slash = malloc(ul + 2);
        if (slash == NULL) abort();
        memcpy(slash, url, ul);
        slash[ul] = '/';
        slash[ul + 1] = '\0';
        route_match(method, slash, context, &again);
        CHECK(again.id == r.id && again.method_allowed == r.method_allowed &&
              strcmp(again.allow, r.allow) == 0 && strcmp(again.strategy, r.strategy) == 0 &&
              strcmp(again.arg, r.arg) == 0,
              "a trailing '/' changes the route of '%.200s'", url);
        free(slash);
    }
}

/* ---- item_valid ------------------------------------------------ */

static void check_item(const char *item) {
    size_t n = strlen(item);
    int want = n >= 1 && n <= INVENTORY_ITEM_MAX;
    for (size_t i = 0; i < n && want; i++) {
        char c = item[i];
        want = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '.' || c == '-';
    }
    int got = item_valid(item);
    CHECK((got != 0) == want, "item_valid('%.100s') = %d, want %d", item, got, want);
}

/* ---- reply.c --------------------------------------------------------------- */

static const char *json_string(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static cJSON *parse_object(const char *body, const char *what) {
    CHECK(body != NULL, "%s returned NULL", what);
    cJSON *o = cJSON_Parse(body);
    CHECK(o != NULL, "%s is not JSON: %.300s", what, body);
    CHECK(cJSON_IsObject(o), "%s is not a JSON object: %.300s", what, body);
    return o;
}

static void check_reply_error(const char *word, const char *sentence) {
    char *body = reply_error(word, sentence, 0);
    cJSON *o = parse_object(body, "reply_error");
    const char *s = json_string(o, "status"), *e = json_string(o, "error");
    CHECK(s != NULL && e != NULL, "reply_error lacks status or error: %.300s", body);
    CHECK(strcmp(s, word) == 0, "status '%.100s' is not the word '%.100s'", s, word);
    CHECK(strcmp(e, sentence) == 0, "error '%.100s' is not the sentence '%.100s'", e, sentence);
    cJSON_Delete(o);
    free(body);

    body = reply_error(word, sentence, 1);
    CHECK(body != NULL && strcmp(body, sentence) == 0, "text reply_error is not the sentence");
    free(body);
}

static void check_reply_unknown_strategy(const char *name) {
    static char names[1024];
    static const char lead[] = "unknown strategy '";
    if (names[0] == '\0') strategy_names(names, sizeof names);

    char *body = reply_unknown_strategy(name, 0);
    cJSON *o = parse_object(body, "reply_unknown_strategy");
    const char *s = json_string(o, "status"), *e = json_string(o, "error");
    CHECK(s != NULL && e != NULL, "reply_unknown_strategy lacks status or error: %.300s", body);
    CHECK(strcmp(s, "unknown_strategy") == 0, "status '%.100s'", s);
    size_t nl = strlen(name);
    CHECK(strncmp(e, lead, sizeof lead - 1) == 0 && strncmp(e + sizeof lead - 1, name, nl) == 0 &&
          e[sizeof lead - 1 + nl] == '\'' && strstr(e, names) != NULL,
          "error '%.300s' does not name '%.100s' and the known ones", e, name);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "strategies");
    CHECK(cJSON_IsArray(list) && cJSON_GetArraySize(list) == strategy_count(),
          "strategies is not an array of %d names", strategy_count());
    for (int i = 0; i < strategy_count(); i++) {
        const cJSON *v = cJSON_GetArrayItem(list, i);
        CHECK(cJSON_IsString(v) && strcmp(v->valuestring, strategies[i].name) == 0,
              "strategies[%d] is not %s", i, strategies[i].name);
    }
    cJSON_Delete(o);
    free(body);

    body = reply_unknown_strategy(name, 1);
    CHECK(body != NULL && strncmp(body, lead, sizeof lead - 1) == 0 &&
          strncmp(body + sizeof lead - 1, name, nl) == 0 && body[sizeof lead - 1 + nl] == '\'',
          "text reply_unknown_strategy does not name '%.100s'", name);
    free(body);
}

static void check_reply_strategies(const char *def) {
    char *body = reply_strategies(def, 0);
    cJSON *o = parse_object(body, "reply_strategies");
    const char *d = json_string(o, "default");
    CHECK(d != NULL && strcmp(d, def) == 0, "default is not '%.100s'", def);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "strategies");
    CHECK(cJSON_IsArray(list) && cJSON_GetArraySize(list) == strategy_count(),
          "strategies is not an array of %d", strategy_count());
    cJSON_Delete(o);
    free(body);

    body = reply_strategies(def, 1);
    CHECK(body != NULL, "text reply_strategies returned NULL");
    int lines = 0, marked = 0;
    for (const char *p = body; *p; p++) lines += *p == '\n';
    for (int i = 0; strategies[i].name; i++) marked += strcmp(strategies[i].name, def) == 0;
    CHECK(lines == strategy_count(), "text reply_strategies has %d lines", lines);
    CHECK((strstr(body, " (default)") != NULL) == (marked > 0),
          "text reply_strategies marks a default wrongly for '%.100s'", def);
    free(body);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *f[NFIELDS];
    size_t start = 0, k = 0;
    /* NUL ends the input: the fields are C strings. */
    const uint8_t *nul = memchr(data, '\0', size);
    if (nul) size = (size_t)(nul - data);
    for (size_t i = 0; i <= size && k < NFIELDS; i++) {
        if (i == size || (data[i] == '\n' && k < NFIELDS - 1)) {
            f[k++] = dup_n((const char *)data + start, i - start);
            start = i + 1;
        }
    }
    while (k < NFIELDS) f[k++] = dup_n("", 0);

    check_route(f[F_METHOD], f[F_URL], f[F_CONTEXT]);
    check_item(f[F_ITEM]);
    check_item(f[F_URL]);
    check_reply_error(f[F_WORD], f[F_SENTENCE]);
    check_reply_unknown_strategy(f[F_NAME]);
    check_reply_strategies(f[F_NAME]);

    for (k = 0; k < NFIELDS; k++) free(f[k]);
    return 0;
}
