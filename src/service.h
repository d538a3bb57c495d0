/* service.h -- the service's parts made from its settings, in one place:
 * the Redis pool, the lock core and the inventory. The daemon, lockbench
 * and the tests all start and stop them with these two calls, so that
 * nothing is set up or torn down differently between them. */
#ifndef INVENTORYD_SERVICE_H
#define INVENTORYD_SERVICE_H

#include <stddef.h>

struct config;
struct rpool;
struct lock_core;
struct inventory;

struct service {
    struct rpool *pool;
    struct lock_core *core;
    struct inventory *inv;
};

/* Makes the pool (no connection yet), the lock core and the inventory from
 * cfg, which must outlive them. Returns 0, or -1 with errstr set and
 * nothing left made. */
int service_open(struct service *s, const struct config *cfg, char *errstr, size_t errlen);

/* Frees the inventory, then the lock core, then the pool: one call each.
 * No request may be running. Accepts a service that failed to open. */
void service_close(struct service *s);

#endif
