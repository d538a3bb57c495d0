/* route.c -- method and path to route (see route.h), by routes.def.
 *
 * DESIGN
 * Each row's pattern is read as it is matched: an optional {context-path}
 * prefix, literal text, then an optional parameter that runs to the end of
 * the path. The rows never overlap (no path matches two), so their order
 * does not matter and the first match is the only one. Pure: no I/O, no
 * allocation, no state; any thread. */
#include <stdio.h>
#include <string.h>
#include "route.h"

const struct route_row route_table[ROUTE_COUNT] = {
    [ROUTE_NOT_FOUND] = {"", "", 0, "no such route"},
#define ROUTE(id, methods, pattern, handler, flags, doc)                                           \
    [ROUTE_##id] = {methods, pattern, flags, doc},
#include "routes.def"
#undef ROUTE
};

#define CONTEXT_PATH "{context-path}"

/* The files under /lab/ (the page's assets) and /lab/results/: these names
 * only, never a path from the client. */
static const char *const lab_assets[] = {"app.js", "app.css", "icon.svg", NULL};
static const char *const lab_results[] = {"demo.csv", "matrix.csv", "campaign.csv",
                                          "campaign-counterexample.json", NULL};

static int method_in(const char *method, const char *allow) {
    size_t n = strlen(method);
    if (n == 0 || strpbrk(method, ", ")) return 0; /* one token, never a list */
    for (const char *p = allow; (p = strstr(p, method)) != NULL; p += n)
        if ((p == allow || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0')) return 1;
    return 0;
}

/* Whether the n bytes at s are one of the NULL-ended names. */
static int one_of(const char *s, size_t n, const char *const *names) {
    for (; *names; names++)
        if (strlen(*names) == n && strncmp(*names, s, n) == 0) return 1;
    return 0;
}

/* Whether the n bytes at s are between min and max bytes, all of them in
 * the ranges of set (pairs of bytes: "az09--"). */
static int all_in(const char *s, size_t n, size_t min, size_t max, const char *set) {
    if (n < min || n > max) return 0;
    for (size_t i = 0; i < n; i++) {
        const char *r = set;
        while (*r && !(s[i] >= r[0] && s[i] <= r[1])) r += 2;
        if (!*r) return 0;
    }
    return 1;
}

/* Whether the n bytes at s are a valid value of the parameter named by
 * name (its "{...}", braces included, nlen bytes). */
static int param_ok(const char *name, size_t nlen, const char *s, size_t n) {
#define IS(word) (nlen == sizeof(word) - 1 && strncmp(name, word, nlen) == 0)
    if (IS("{strategy}")) return all_in(s, n, 1, 32, "az09--");
    if (IS("{id}")) return all_in(s, n, 1, 9, "09");
    if (IS("{asset}")) return one_of(s, n, lab_assets);
    if (IS("{file}")) return one_of(s, n, lab_results);
#undef IS
    return 0;
}

/* Length of s without trailing slashes (but "/" stays "/"). */
static size_t trimmed_len(const char *s) {
    size_t n = strlen(s);
    while (n > 1 && s[n - 1] == '/') n--;
    return n;
}

/* Whether the n bytes of url match pattern p; the parameter's value, if
 * any, is then at *arg (*alen bytes). */
static int row_match(const char *p, const char *url, size_t n, const char *context, size_t clen,
                     const char **arg, size_t *alen) {
    size_t cl = sizeof(CONTEXT_PATH) - 1;
    if (strncmp(p, CONTEXT_PATH, cl) == 0) {
        if (clen == 0 || n < clen || strncmp(url, context, clen) != 0) return 0;
        p += cl;
        url += clen;
        n -= clen;
    }
    const char *brace = strchr(p, '{');
    size_t lit = brace ? (size_t)(brace - p) : strlen(p);
    if (!brace) return n == lit && strncmp(url, p, n) == 0;
    if (n <= lit || strncmp(url, p, lit) != 0 ||
        !param_ok(brace, strlen(brace), url + lit, n - lit))
        return 0;
    *arg = url + lit;
    *alen = n - lit;
    return 1;
}

enum route_id route_match(const char *method, const char *url, const char *context_path,
                          struct route *out) {
    memset(out, 0, sizeof(*out));
    out->allow = "";
    size_t n = trimmed_len(url);
    size_t clen = trimmed_len(context_path);
    if (clen == 1 && context_path[0] == '/') clen = 0; /* "/" adds nothing */
    for (int id = ROUTE_NOT_FOUND + 1; id < ROUTE_COUNT; id++) {
        const struct route_row *row = &route_table[id];
        const char *arg = "";
        size_t alen = 0;
        if (!row_match(row->pattern, url, n, context_path, clen, &arg, &alen)) continue;
        out->id = (enum route_id)id;
        out->allow = row->methods;
        out->method_allowed = method_in(method, row->methods) ||
                              (strcmp(method, "HEAD") == 0 && method_in("GET", row->methods));
        memcpy(out->arg, arg, alen);
        out->arg[alen] = '\0';
        break;
    }
    return out->id;
}

char *route_flags_text(int flags, char *buf, size_t len) {
    static const struct {
        int flag;
        const char *word;
    } words[] = {{ROUTE_F_ITEM, "item"},
                 {ROUTE_F_ADMIN_POST, "admin-post"},
                 {ROUTE_F_LAB, "lab"},
                 {ROUTE_F_FAULTS, "faults"},
                 {ROUTE_F_LOOP, "loop"}};
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if ((flags & words[i].flag) && used < len)
            used +=
                (size_t)snprintf(buf + used, len - used, "%s%s", used ? "," : "", words[i].word);
    if (!buf[0]) snprintf(buf, len, "-");
    return buf;
}
