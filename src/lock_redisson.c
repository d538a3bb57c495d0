/* lock_redisson.c -- Redisson's RLock: the watchdog hash lock, and instead
 * of polling, a busy acquire subscribes to redisson_lock__channel:{name}
 * through the process's one subscriber connection (pubsub.c), tries again,
 * and sleeps until the unlock message wakes it or the holder's remaining
 * lease (PTTL) runs out, whichever comes first. Key layout, scripts and the
 * unlock message are Redisson's, so a Redisson client can contend. */
#include "lock.h"
#include "lock_hash.h"
#include "watchdog.h"

int lock_watchdog_release(struct lock *l);

static int redisson_acquire(struct lock *l) {
    char channel[256];
    lock_hash_channel(l, channel, sizeof(channel));
    int rc = lock_hash_wait(l, lock_hash_try, channel);
    if (rc == LOCK_OK && l->holds == 0) watchdog_watch(l);
    return rc;
}

const struct lock_type lock_type_redisson = {
    .name = "redisson",
    .description = "watchdog lock whose waiters sleep until an unlock message, Redisson's layout and scripts",
    .flaw = "one Redis master, as watchdog: a failover can lose the lock",
    .flags = LOCK_F_REDIS | LOCK_F_GATED,
    .acquire = redisson_acquire,
    .release = lock_watchdog_release,
    .renew = NULL,
};
