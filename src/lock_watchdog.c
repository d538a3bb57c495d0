/* lock_watchdog.c -- the reentrant hash lock plus Redisson's watchdog: while
 * held, the lease is renewed every TTL/3 by the core's one watchdog thread,
 * so work may outlast the TTL; a holder that dies stops renewing and its
 * lock expires. A renewal that finds the lock gone, or a lease that runs out
 * unrenewed, makes the sale refuse to commit (409 lock_lost). Still one
 * Redis master: a failover can lose the lock. */
#include "lock_hash.h"

const struct lock_type lock_type_watchdog =
    LOCK_HASH_TYPE("watchdog", LOCK_T_WATCHED | LOCK_T_CHECKED, lock_hash_poll, lock_hash_renew);
