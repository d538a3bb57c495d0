/* lock_reentrant.c -- Redisson's hash lock without its watchdog: the owner
 * id is a field whose value counts nested holds (HINCRBY), so the same owner
 * can acquire again, and the lease is a PEXPIRE. When busy the script
 * answers the holder's PTTL. Nothing renews the lease, and the lease is not
 * enforced at commit: work longer than the TTL loses the lock while the
 * holder still runs, and still writes. */
#include "lock_hash.h"

const struct lock_type lock_type_reentrant = LOCK_HASH_TYPE("reentrant", 0, lock_hash_poll, NULL);
