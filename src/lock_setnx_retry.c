/* lock_setnx_retry.c -- the demo's first Redis lock: SETNX without expiry,
 * and on failure sleep 20 ms and call itself again. In Java each retry is a
 * stack frame; under contention the depth grows until StackOverflowError.
 * Here the recursion is real too, but bounded by lock.retry-max-depth: at the
 * cap the acquire fails cleanly as busy, and the deepest depth reached is
 * reported in the sale answer (lock.depth). */
#include <stdio.h>
#include "lock.h"

static int retry_at(struct lock *l, int depth) {
    if (depth > l->depth) l->depth = depth;
    int rc = lock_set_nx(l, 0);
    if (rc != LOCK_BUSY) return rc;
    if (depth >= l->env->retry_depth) {
        snprintf(l->errstr, sizeof(l->errstr), "recursion depth cap %d reached",
                 l->env->retry_depth);
        return LOCK_BUSY;
    }
    if (lock_backoff(l) < 0) return LOCK_BUSY;
    return retry_at(l, depth + 1);
}

static int setnx_retry_acquire(struct lock *l) {
    return retry_at(l, 1);
}

const struct lock_type lock_type_setnx_retry = {
    .name = "setnx-retry",
    .description = "SETNX without expiry; on failure sleep 20 ms and retry by recursion",
    .flaw = "recursion depth grows with contention (capped by lock.retry-max-depth, reported as lock.depth)",
    .flags = LOCK_F_REDIS,
    .acquire = setnx_retry_acquire,
    .release = lock_del,
    .renew = NULL,
};
