/* lock_reentrant.c -- Redisson's hash lock without its watchdog: the owner
 * id is a field whose value counts nested holds (HINCRBY), so the same owner
 * can acquire again, and the lease is a PEXPIRE. When busy the script
 * answers the holder's PTTL. Nothing renews the lease: work longer than the
 * TTL loses the lock while the holder still runs. */
#include "lock.h"
#include "lock_hash.h"

const struct lock_type lock_type_reentrant = {
    .name = "reentrant",
    .description = "Redisson's hash lock: HINCRBY hold count per owner, PEXPIRE lease, PTTL when busy",
    .flaw = "no renewal: work longer than the TTL loses the lock to the next owner",
    .flags = LOCK_F_REDIS,
    .acquire = lock_hash_poll,
    .release = lock_hash_unlock,
    .renew = NULL,
};
