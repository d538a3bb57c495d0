/* lock_batched.c -- beyond the demo: the redisson lock (watchdog, pub/sub
 * wake-ups, Redisson's layout), flagged LOCK_F_BATCH so that the caller may
 * serve every sale queued in its process under a single hold. The queueing
 * and the batched critical section belong to the caller (inventory.c); to
 * the lock core this is the redisson lock. */
#include "lock.h"

extern const struct lock_type lock_type_redisson;

static int batched_acquire(struct lock *l) {
    return lock_type_redisson.acquire(l);
}

static int batched_release(struct lock *l) {
    return lock_type_redisson.release(l);
}

const struct lock_type lock_type_batched = {
    .name = "batched",
    .description = "the redisson lock, but one hold sells for every request queued in the process",
    .flaw = "none known: it keeps every guarantee of redisson, with one acquire per batch",
    .flags = LOCK_F_REDIS | LOCK_F_BATCH,
    .acquire = batched_acquire,
    .release = batched_release,
    .renew = NULL,
};
