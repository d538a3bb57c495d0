/* lock_redisson.c -- Redisson's RLock: the watchdog hash lock, and instead
 * of polling, a busy acquire subscribes to redisson_lock__channel:{name}
 * through the core's one subscriber connection (pubsub.c), tries again, and
 * sleeps until the unlock message wakes it or the holder's remaining lease
 * (PTTL) runs out, whichever comes first. Threads of one process queue in
 * the core's FIFO gate, so only one of them contends in Redis. Key layout,
 * scripts and the unlock message are Redisson's, so a Redisson client can
 * contend. */
#include "lock_hash.h"

static int redisson_acquire(struct lock *l) {
    char channel[256];
    lock_hash_channel(l->key, channel, sizeof(channel));
    return lock_hash_wait(l, lock_hash_try, channel, 0);
}

const struct lock_type lock_type_redisson = LOCK_HASH_TYPE(
    "redisson", LOCK_T_WATCHED | LOCK_T_CHECKED | LOCK_T_GATED, redisson_acquire, lock_hash_renew);
