/* route.h -- maps a method and URL to one of the service's routes, the rows
 * of routes.def. Pure: no I/O, no allocation, so it is unit-tested and
 * fuzzed on its own. */
#ifndef INVENTORYD_ROUTE_H
#define INVENTORYD_ROUTE_H

#include <stddef.h>

enum route_id {
    ROUTE_NOT_FOUND = 0,
#define ROUTE(id, methods, pattern, handler, flags, doc) ROUTE_##id,
#include "routes.def"
#undef ROUTE
    ROUTE_COUNT
};

/* struct route_row.flags (see routes.def) */
#define ROUTE_F_ITEM 1 /* reads ?item= */
#define ROUTE_F_ADMIN_POST 2 /* a POST needs the admin token */
#define ROUTE_F_LAB 4 /* exists only with lab.enabled=true */
#define ROUTE_F_FAULTS 8 /* takes the fault parameters */
#define ROUTE_F_LOOP 16 /* never waits on a store or a lock: answered on the event loop */

/* One row of routes.def, without its handler. */
struct route_row {
    const char *methods; /* the Allow header, e.g. "GET, POST" */
    const char *pattern; /* e.g. "/inventory/sale/{strategy}" */
    int flags; /* ROUTE_F_* */
    const char *doc;
};

/* The table, indexed by route id; route_table[ROUTE_NOT_FOUND] has empty
 * methods and pattern. */
extern const struct route_row route_table[ROUTE_COUNT];

struct route {
    enum route_id id;
    char arg[33]; /* the value of the pattern's parameter: a strategy, a run
                                  id, a file name; "" for a pattern without one */
    int method_allowed; /* 0: the path exists but not for this method */
    const char *allow; /* the Allow header for this path, e.g. "GET, POST" */
};

/* Matches method and url (path only, without the query string) against the
 * table; context_path is server.context-path (e.g. /redis/distributed/lock),
 * under which the demo's original sale path lives. A trailing '/' is
 * ignored. A parameter that breaks its rule (routes.def) is a
 * ROUTE_NOT_FOUND: a strategy longer than 32 bytes or with characters other
 * than [a-z0-9-], a run id that is not 1 to 9 digits, a file name not listed
 * in route.c. Always fills out; returns out->id. */
enum route_id route_match(const char *method, const char *url, const char *context_path,
                          struct route *out);

/* The flags as words, comma-separated ("item,faults"; "-" for none), into
 * buf. Returns buf. */
char *route_flags_text(int flags, char *buf, size_t len);

#endif
