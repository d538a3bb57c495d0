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
 * route_match is compared with a model written from route.h and the rules
 * of routes.def, which reads the table's patterns with a matcher of its own
 * and fails when a path matches two rows. It is also checked for its own
 * invariants: arg is a NUL-terminated string of at most 32 bytes ([a-z0-9-]
 * for a strategy, digits for a run id), set exactly for the rows whose
 * pattern ends in a parameter, id is a route_id, allow is never NULL, a
 * miss says nothing (id 0, arg "", method_allowed 0, allow ""), a trailing
 * '/' changes nothing, and method_allowed means the method is one of the Allow
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

/* The model: route.h's contract and routes.def's rules, written
 * independently of route.c. It reads the table's patterns, and counts the
 * rows a path matches: never more than one. */
struct expect {
    enum route_id id;
    const char *allow;
    const char *arg; /* with alen bytes: the pattern's parameter */
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

/* routes.def's rule for the parameter param (its name, braces included). */
static int param_valid(const char *param, const char *v, size_t n) {
    if (strcmp(param, "{strategy}") == 0) {
        if (n < 1 || n > 32) return 0;
        for (size_t i = 0; i < n; i++)
            if (!strategy_char(v[i])) return 0;
        return 1;
    }
    if (strcmp(param, "{id}") == 0) {
        if (n < 1 || n > 9) return 0;
        for (size_t i = 0; i < n; i++)
            if (v[i] < '0' || v[i] > '9') return 0;
        return 1;
    }
    if (strcmp(param, "{asset}") == 0)
        return is(v, n, "app.js") || is(v, n, "app.css") || is(v, n, "icon.svg");
    if (strcmp(param, "{file}") == 0)
        return is(v, n, "demo.csv") || is(v, n, "matrix.csv") || is(v, n, "campaign.csv") ||
               is(v, n, "campaign-counterexample.json");
    CHECK(0, "routes.def names an unknown parameter %s", param);
    return 0;
}

/* Whether the trimmed url (n bytes) is an instance of pattern, with the
 * context path ctx (cl bytes, 0 for none); the parameter's value into e. */
static int instance(const char *pattern, const char *url, size_t n, const char *ctx, size_t cl,
                    struct expect *e) {
    static const char cp[] = "{context-path}";
    size_t ul = 0; /* bytes of url matched so far: any context path, then the literal */
    const char *p = pattern;
    if (strncmp(p, cp, sizeof cp - 1) == 0) {
        if (cl == 0 || n < cl || memcmp(url, ctx, cl) != 0) return 0;
        ul = cl;
        p += sizeof cp - 1;
    }
    const char *param = strchr(p, '{');
    size_t pl = param ? (size_t)(param - p) : strlen(p);
    if (!param) return n == ul + pl && memcmp(url + ul, p, pl) == 0;
    CHECK(strchr(param + 1, '{') == NULL && param[strlen(param) - 1] == '}',
          "pattern %s: the parameter is not its last segment", pattern);
    if (n <= ul + pl || memcmp(url + ul, p, pl) != 0) return 0;
    ul += pl;
    if (!param_valid(param, url + ul, n - ul)) return 0;
    e->arg = url + ul;
    e->alen = n - ul;
    return 1;
}

static struct expect model(const char *url, const char *context) {
    struct expect e = {ROUTE_NOT_FOUND, "", "", 0}, hit;
    size_t n = trimmed(url), cl = trimmed(context);
    if (cl == 1 && context[0] == '/') cl = 0; /* "/" adds nothing to /inventory/sale */
    int hits = 0;
    for (int id = 1; id < ROUTE_COUNT; id++) {
        hit = (struct expect){(enum route_id)id, route_table[id].methods, "", 0};
        if (!instance(route_table[id].pattern, url, n, context, cl, &hit)) continue;
        CHECK(hits == 0, "url '%.200s' context '%.200s' matches rows %d and %d", url, context, e.id,
              id);
        hits++;
        e = hit;
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

static int simple_token(const char *m) { return strpbrk(m, " ,") == NULL; }

static void check_route(const char *method, const char *url, const char *context) {
    struct route r, again;
    memset(&r, 0xA5, sizeof r); /* route_match must fill every field */
    enum route_id id = route_match(method, url, context, &r);

    CHECK(id == r.id, "returned %d, out->id %d", id, r.id);
    CHECK(r.id >= ROUTE_NOT_FOUND && r.id < ROUTE_COUNT, "id %d out of range", r.id);
    CHECK(r.allow != NULL, "allow is NULL");
    CHECK(memchr(r.arg, '\0', sizeof r.arg) != NULL, "arg not terminated");
    size_t al = strlen(r.arg);
    CHECK(al <= 32, "arg of %zu bytes", al);
    if (r.id == ROUTE_LAB_RUN)
        for (size_t i = 0; i < al; i++)
            CHECK(r.arg[i] >= '0' && r.arg[i] <= '9', "run id byte 0x%02x",
                  (unsigned char)r.arg[i]);
    if (r.id == ROUTE_SALE_NAMED)
        for (size_t i = 0; i < al; i++)
            CHECK(strategy_char(r.arg[i]), "strategy byte 0x%02x", (unsigned char)r.arg[i]);
    CHECK((al > 0) == (strchr(route_table[r.id].pattern, '{') != NULL &&
                       strncmp(route_table[r.id].pattern, "{context-path}", 14) != 0),
          "route %d with arg '%s'", r.id, r.arg);
    CHECK(r.method_allowed == 0 || r.method_allowed == 1, "method_allowed %d", r.method_allowed);

    if (r.id == ROUTE_NOT_FOUND) {
        CHECK(al == 0 && r.method_allowed == 0 && strcmp(r.allow, "") == 0,
              "a miss says arg '%s', method_allowed %d, allow '%s'", r.arg, r.method_allowed,
              r.allow);
    } else {
        CHECK(r.allow[0] != '\0', "route %d without an Allow header", r.id);
    }

    struct expect e = model(url, context);
    CHECK(r.id == e.id, "url '%.200s' context '%.200s': id %d, model says %d", url, context, r.id,
          e.id);
    CHECK(strcmp(r.allow, e.allow) == 0, "allow '%s', model says '%s'", r.allow, e.allow);
    CHECK(al == e.alen && memcmp(r.arg, e.arg, al) == 0, "arg '%s', model says '%.*s'", r.arg,
          (int)e.alen, e.arg);

    if (simple_token(method)) {
        int want =
            allowed(method, r.allow) || (strcmp(method, "HEAD") == 0 && allowed("GET", r.allow));
        CHECK(r.method_allowed == want, "method '%.100s' on '%s': method_allowed %d, want %d",
              method, r.allow, r.method_allowed, want);
    }

    /* Pure: the same answer twice; a trailing '/' changes nothing. */
    memset(&again, 0x5A, sizeof again);
    route_match(method, url, context, &again);
    CHECK(again.id == r.id && again.method_allowed == r.method_allowed && again.allow == r.allow &&
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
                  strcmp(again.allow, r.allow) == 0 && strcmp(again.arg, r.arg) == 0,
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
    const char *unavailable[128] = {0};
    char *body = reply_strategies(def, unavailable, 0);
    cJSON *o = parse_object(body, "reply_strategies");
    const char *d = json_string(o, "default");
    CHECK(d != NULL && strcmp(d, def) == 0, "default is not '%.100s'", def);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "strategies");
    CHECK(cJSON_IsArray(list) && cJSON_GetArraySize(list) == strategy_count(),
          "strategies is not an array of %d", strategy_count());
    cJSON_Delete(o);
    free(body);

    body = reply_strategies(def, unavailable, 1);
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
