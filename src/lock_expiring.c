/* lock_expiring.c -- SET key value NX PX ttl in one command, so a dead
 * holder's lock expires. The release is still a bare DEL: a holder slower
 * than the TTL deletes whatever lock is there, usually the next owner's. */
#include "lock.h"
#include "mclock.h"

static int expiring_once(struct lock *l) {
    return lock_set_nx(l, l->env->ttl_ms);
}

static int expiring_acquire(struct lock *l) {
    return lock_poll(l, expiring_once);
}

static int expiring_release(struct lock *l) {
    mclock_sleep_ms(l->release_delay_ms);
    return lock_del(l);
}

const struct lock_type lock_type_expiring = {
    .name = "expiring",
    .description = "SET key value NX PX ttl in one command; release by DEL",
    .flaw = "a holder slower than the TTL deletes someone else's lock",
    .flags = LOCK_F_REDIS,
    .acquire = expiring_acquire,
    .release = expiring_release,
    .renew = NULL,
};
