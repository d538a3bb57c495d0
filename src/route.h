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
    ROUTE_READYZ,        /* GET /readyz */
    ROUTE_METRICS,       /* GET /metrics */
    ROUTE_HISTORY,       /* GET /inventory/history */
    ROUTE_LAB_PAGE,      /* GET / : the lab's page */
    ROUTE_LAB_STATUS,    /* GET /lab : whether runs are on, and the lab's settings */
    ROUTE_LAB_ASSET,     /* GET /lab/app.js, /lab/app.css, /lab/icon.svg; arg = the file */
    ROUTE_LAB_RUNS,      /* GET /lab/runs (the kept runs), POST /lab/runs (start one) */
    ROUTE_LAB_RUN,       /* GET /lab/runs/{id}; arg = the id */
    ROUTE_LAB_SCENARIOS, /* GET /lab/scenarios */
    ROUTE_LAB_RESULT,    /* GET /lab/results/{demo,matrix,campaign}.csv,
                            campaign-counterexample.json; arg = the file */
};

/* Whether a route exists only with lab.enabled=true (else it is a 404). */
int route_needs_lab(enum route_id id);

struct route {
    enum route_id id;
    char strategy[33];       /* strategy named by the path; "" = default */
    char arg[33];            /* the lab's path argument: a run id ([0-9], 1 to 9
                                digits) or a file name; "" elsewhere */
    int method_allowed;      /* 0: the path exists but not for this method */
    const char *allow;       /* the Allow header for this path, e.g. "GET, POST" */
};

/* Matches method and url (path only, without the query string) against the
 * routes; context_path is server.context-path (e.g. /redis/distributed/lock),
 * under which the demo's original sale path lives. A trailing '/' is
 * ignored. A strategy segment longer than 32 bytes or with characters other
 * than [a-z0-9-] is a ROUTE_NOT_FOUND, and so is a run id that is not 1 to
 * 9 digits, and a file name of /lab/ or /lab/results/ not listed here.
 * Always fills out; returns out->id. */
enum route_id route_match(const char *method, const char *url,
                          const char *context_path, struct route *out);

#endif
