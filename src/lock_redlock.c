/* lock_redlock.c -- Redlock over the independent masters of redlock.nodes,
 * with RedissonMultiLock's semantics: Redisson's reentrant hash lock on each
 * master, a quorum of the configured masters, watchdog renewal that must
 * reach a quorum, waiters woken by unlock messages. The work is in
 * redlock.c. It still relies on bounded clock drift and process pauses
 * shorter than the lock's validity. */
#include "lock.h"
#include "redlock.h"

const struct lock_type lock_type_redlock = {
    .name = "redlock",
    .description = "Redlock: the hash lock on N independent masters, N/2+1 votes within the validity time",
    .flaw = "relies on bounded clock drift and pauses shorter than the validity time",
    .flags = LOCK_F_MULTI | LOCK_F_GATED,
    .acquire = redlock_acquire,
    .release = redlock_release,
    .renew = redlock_renew,
};
