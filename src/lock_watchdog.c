/* lock_watchdog.c -- the reentrant hash lock plus Redisson's watchdog: while
 * held, the lease is renewed every TTL/3 by the process's one watchdog
 * thread (watchdog.c), so work may outlast the TTL; a holder that dies stops
 * renewing and its lock expires. Renewal stops before the release is sent.
 * A renewal that fails marks the lock lost and the sale refuses to commit.
 * Still one Redis master: a failover can lose the lock. */
#include <stdio.h>
#include "lock.h"
#include "lock_hash.h"
#include "watchdog.h"

static int watchdog_acquire(struct lock *l) {
    int rc = lock_hash_poll(l);
    if (rc == LOCK_OK && l->holds == 0) watchdog_watch(l);
    return rc;
}

/* Shared with the redisson strategy. */
int lock_watchdog_release(struct lock *l) {
    if (l->holds == 0) watchdog_unwatch(l);   /* the last hold: stop renewing first */
    return lock_hash_unlock(l);
}

static int watchdog_renew(struct lock *l) {
    char lease[24];
    snprintf(lease, sizeof(lease), "%d", l->env->ttl_ms);
    const char *argv[] = {l->key, lease, l->owner};
    redisReply *r = lock_script(l, "hash-renew", 1, 3, argv);
    if (!r) return LOCK_ERR;
    int rc = r->type != REDIS_REPLY_INTEGER ? lock_fail(l, r, "hash-renew")
             : r->integer == 1 ? LOCK_OK : LOCK_LOST;
    freeReplyObject(r);
    return rc;
}

const struct lock_type lock_type_watchdog = {
    .name = "watchdog",
    .description = "reentrant hash lock renewed every TTL/3 while held, by one watchdog thread",
    .flaw = "one Redis master: a failover before replication can hand the lock to two owners",
    .flags = LOCK_F_REDIS,
    .acquire = watchdog_acquire,
    .release = lock_watchdog_release,
    .renew = watchdog_renew,
};
