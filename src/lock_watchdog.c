/* lock_watchdog.c -- the reentrant hash lock plus Redisson's watchdog: while
 * held, the lease is renewed every TTL/3 by the core's one watchdog thread,
 * so work may outlast the TTL; a holder that dies stops renewing and its
 * lock expires. A renewal that finds the lock gone, or a lease that runs out
 * unrenewed, makes the sale refuse to commit (409 lock_lost). Still one
 * Redis master: a failover can lose the lock. */
#include "lock_hash.h"

const struct lock_type lock_type_watchdog = {
    .name = "watchdog",
    .family = "redis",
    .flags = LOCK_T_REDIS | LOCK_T_LEASED | LOCK_T_WATCHED | LOCK_T_CHECKED,
    .acquire = lock_hash_poll,
    .release = lock_hash_unlock,
    .renew = lock_hash_renew,
    .abandon = lock_hash_abandon,
    .guard = lock_hash_guard,
};
