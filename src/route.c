/* route.c -- method and path to route (see route.h). */
#include <stdio.h>
#include <string.h>
#include "route.h"

struct fixed_route {
    const char *path;
    enum route_id id;
    const char *allow;
};

static const struct fixed_route fixed_routes[] = {
    {"/inventory/sale", ROUTE_SALE, "GET, POST"},
    {"/inventory", ROUTE_INVENTORY, "GET"},
    {"/inventory/reset", ROUTE_RESET, "POST"},
    {"/inventory/audit", ROUTE_AUDIT, "GET"},
    {"/strategies", ROUTE_STRATEGIES, "GET"},
    {"/healthz", ROUTE_HEALTHZ, "GET"},
    {"/readyz", ROUTE_READYZ, "GET"},
    {"/metrics", ROUTE_METRICS, "GET"},
    {"/inventory/history", ROUTE_HISTORY, "GET"},
    {"/inventory/saleByRedisson", ROUTE_SALE, "GET, POST"},
    {"/inventory/saleByRedlock", ROUTE_SALE, "GET, POST"},
    {"/", ROUTE_LAB_PAGE, "GET"},
    {"/lab", ROUTE_LAB_STATUS, "GET"},
    {"/lab/runs", ROUTE_LAB_RUNS, "GET, POST"},
    {"/lab/scenarios", ROUTE_LAB_SCENARIOS, "GET"},
};

/* The files under /lab/ (the page's assets) and /lab/results/: these names
 * only, never a path from the client. */
static const char *const lab_assets[] = {"app.js", "app.css", "icon.svg"};
static const char *const lab_results[] = {"demo.csv", "matrix.csv", "campaign.csv",
                                          "campaign-counterexample.json"};

int route_needs_lab(enum route_id id) {
    return id == ROUTE_LAB_RUNS || id == ROUTE_LAB_RUN || id == ROUTE_LAB_SCENARIOS ||
           id == ROUTE_LAB_RESULT;
}

/* The strategy the demo's later endpoints stand for. */
static const char *fixed_strategy(const char *path) {
    if (strcmp(path, "/inventory/saleByRedisson") == 0) return "redisson";
    if (strcmp(path, "/inventory/saleByRedlock") == 0) return "redlock";
    return "";
}

static int method_in(const char *method, const char *allow) {
    size_t n = strlen(method);
    if (n == 0 || strpbrk(method, ", ")) return 0;   /* one token, never a list */
    for (const char *p = allow; (p = strstr(p, method)) != NULL; p += n)
        if ((p == allow || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0')) return 1;
    return 0;
}

static int valid_strategy(const char *s, size_t n) {
    if (n == 0 || n > 32) return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-')) return 0;
    }
    return 1;
}

/* Length of url without trailing slashes (but "/" stays "/"). */
static size_t trimmed_len(const char *url) {
    size_t n = strlen(url);
    while (n > 1 && url[n - 1] == '/') n--;
    return n;
}

static enum route_id found(struct route *out, enum route_id id, const char *allow,
                           const char *method, const char *strategy, size_t slen) {
    out->id = id;
    out->allow = allow;
    out->method_allowed = method_in(method, allow) ||
                          (strcmp(method, "HEAD") == 0 && method_in("GET", allow));
    memcpy(out->strategy, strategy, slen);
    out->strategy[slen] = '\0';
    return id;
}

/* A route whose path ends in an argument (a run id or a file name). */
static enum route_id found_arg(struct route *out, enum route_id id, const char *method,
                               const char *arg, size_t alen) {
    found(out, id, "GET", method, "", 0);
    memcpy(out->arg, arg, alen);
    out->arg[alen] = '\0';
    return id;
}

/* Whether the n bytes at s are one of the names. */
static int one_of(const char *s, size_t n, const char *const *names, size_t count) {
    for (size_t i = 0; i < count; i++)
        if (strlen(names[i]) == n && strncmp(names[i], s, n) == 0) return 1;
    return 0;
}

/* Whether the n bytes at s are a run id: 1 to 9 digits. */
static int run_id(const char *s, size_t n) {
    if (n == 0 || n > 9) return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}

/* The lab's paths with an argument: /lab/<asset>, /lab/runs/<id>,
 * /lab/results/<file>. */
static enum route_id match_lab(const char *method, const char *url, size_t n,
                               struct route *out) {
    static const char lab[] = "/lab/", runs[] = "/lab/runs/", results[] = "/lab/results/";
    size_t ll = sizeof(lab) - 1, rl = sizeof(runs) - 1, sl = sizeof(results) - 1;
    if (n > rl && strncmp(url, runs, rl) == 0)
        return run_id(url + rl, n - rl) ? found_arg(out, ROUTE_LAB_RUN, method, url + rl, n - rl)
                                        : ROUTE_NOT_FOUND;
    if (n > sl && strncmp(url, results, sl) == 0)
        return one_of(url + sl, n - sl, lab_results, sizeof(lab_results) / sizeof(lab_results[0]))
                   ? found_arg(out, ROUTE_LAB_RESULT, method, url + sl, n - sl)
                   : ROUTE_NOT_FOUND;
    if (n > ll && strncmp(url, lab, ll) == 0 &&
        one_of(url + ll, n - ll, lab_assets, sizeof(lab_assets) / sizeof(lab_assets[0])))
        return found_arg(out, ROUTE_LAB_ASSET, method, url + ll, n - ll);
    return ROUTE_NOT_FOUND;
}

enum route_id route_match(const char *method, const char *url,
                          const char *context_path, struct route *out) {
    memset(out, 0, sizeof(*out));
    out->allow = "";
    size_t n = trimmed_len(url);

    for (size_t i = 0; i < sizeof(fixed_routes) / sizeof(fixed_routes[0]); i++) {
        const struct fixed_route *f = &fixed_routes[i];
        if (strlen(f->path) == n && strncmp(f->path, url, n) == 0) {
            const char *s = fixed_strategy(f->path);
            return found(out, f->id, f->allow, method, s, strlen(s));
        }
    }

    /* The demo's original path, <context-path>/inventory/sale, first: a
     * context path may itself start with /inventory/sale/. */
    size_t clen = trimmed_len(context_path);
    if (clen == 1 && context_path[0] == '/') clen = 0;
    if (n > clen && strncmp(url, context_path, clen) == 0 && clen > 0 &&
        n - clen == strlen("/inventory/sale") &&
        strncmp(url + clen, "/inventory/sale", n - clen) == 0)
        return found(out, ROUTE_SALE, "GET, POST", method, "", 0);

    static const char sale_prefix[] = "/inventory/sale/";
    size_t plen = sizeof(sale_prefix) - 1;
    if (n > plen && strncmp(url, sale_prefix, plen) == 0) {
        if (!valid_strategy(url + plen, n - plen)) return ROUTE_NOT_FOUND;
        return found(out, ROUTE_SALE, "GET, POST", method, url + plen, n - plen);
    }
    return match_lab(method, url, n, out);
}
