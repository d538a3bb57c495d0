/* route.h -- maps a method and URL to one of the service's routes. Pure: no
 * I/O, no allocation, so it is unit-tested and fuzzed on its own. */
#ifndef INVENTORYD_ROUTE_H
#define INVENTORYD_ROUTE_H

enum route_id {
    ROUTE_NOT_FOUND = 0,
    ROUTE_SALE,          /* /inventory/sale[/{strategy}], demo paths */
    ROUTE_INVENTORY,     /* GET /inventory */
    ROUTE_RESET,         /* POST /inventory/reset */
    ROUTE_AUDIT,         /* GET /inventory/audit */
    ROUTE_STRATEGIES,    /* GET /strategies */
    ROUTE_HEALTHZ,       /* GET /healthz */
    ROUTE_METRICS,       /* GET /metrics */
    ROUTE_HISTORY,       /* GET /inventory/history */
};

struct route {
    enum route_id id;
    char strategy[33];       /* strategy named by the path; "" = default */
    int method_allowed;      /* 0: the path exists but not for this method */
    const char *allow;       /* the Allow header for this path, e.g. "GET, POST" */
};

/* Matches method and url (path only, without the query string) against the
 * routes; context_path is server.context-path (e.g. /redis/distributed/lock),
 * under which the demo's original sale path lives. A trailing '/' is
 * ignored. A strategy segment longer than 32 bytes or with characters other
 * than [a-z0-9-] is a ROUTE_NOT_FOUND. Always fills out; returns out->id. */
enum route_id route_match(const char *method, const char *url,
                          const char *context_path, struct route *out);

#endif
