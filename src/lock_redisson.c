/* lock_redisson.c -- Redisson's RLock: the watchdog hash lock, and instead
 * of polling, a busy acquire subscribes to redisson_lock__channel:{name}
 * through the process's one subscriber connection (pubsub.c), tries again,
 * and sleeps until the unlock message wakes it or the holder's remaining
 * lease (PTTL) runs out, whichever comes first. Key layout, scripts and the
 * unlock message are Redisson's, so a Redisson client can contend. */
#include <stdio.h>
#include "lock.h"
#include "lock_hash.h"
#include "mclock.h"
#include "pubsub.h"
#include "watchdog.h"

int lock_watchdog_release(struct lock *l);

static int redisson_acquire(struct lock *l) {
    int64_t pttl = -1;
    int rc = lock_hash_try(l, &pttl);
    if (rc == LOCK_BUSY && mclock_us() < l->deadline_us) {
        char channel[256], err[128];
        struct pubsub_waiter w;
        lock_hash_channel(l, channel, sizeof(channel));
        int subscribed = pubsub_wait_begin(&w, l->env->pool, channel, l->deadline_us,
                                           err, sizeof(err)) == 0;
        /* Subscribed first, then tried again: an unlock between the first
         * try and the subscription is not missed. */
        while ((rc = lock_hash_try(l, &pttl)) == LOCK_BUSY) {
            int64_t now = mclock_us();
            if (now >= l->deadline_us) break;
            int64_t until = pttl > 0 ? now + pttl * 1000 : now + 1000;
            if (until > l->deadline_us) until = l->deadline_us;
            if (subscribed) {
                pubsub_wait(&w, until);
            } else if (lock_backoff(l) < 0) {
                break;   /* no subscriber: fall back to the spin */
            }
        }
        if (subscribed) pubsub_wait_end(&w);
    }
    if (rc == LOCK_OK && l->holds == 0) watchdog_watch(l);
    return rc;
}

const struct lock_type lock_type_redisson = {
    .name = "redisson",
    .description = "watchdog lock whose waiters sleep until an unlock message, Redisson's layout and scripts",
    .flaw = "one Redis master, as watchdog: a failover can lose the lock",
    .flags = LOCK_F_REDIS,
    .acquire = redisson_acquire,
    .release = lock_watchdog_release,
    .renew = NULL,
};
