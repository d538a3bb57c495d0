/* lock_setnx_retry.c -- the demo's first Redis lock: SETNX without expiry,
 * and on failure sleep 20 ms and call itself again. In Java each retry is a
 * stack frame; under contention the depth grows until StackOverflowError.
 * Here the recursion is real too, but bounded twice: by
 * lock.retry-max-depth, and by the thread's stack, which is checked at every
 * level, so that no accepted setting can overflow it: the acquire then fails
 * cleanly as busy, as the demo's would with its StackOverflowError, and the
 * deepest depth reached is reported in the sale answer (lock.depth). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include "lock_int.h"

/* Stack kept free below the deepest frame, for what the try itself calls
 * (hiredis, the pool, snprintf, a sanitizer's redzones). */
#define STACK_RESERVE (64 * 1024)

struct retry_state {
    int depth; /* deepest level reached */
    uintptr_t stack_low; /* lowest usable address of this thread's stack */
};

/* The lowest address this thread's stack may grow to, or 0 if unknown. */
static uintptr_t stack_floor(void) {
    pthread_attr_t a;
    void *addr = NULL;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &a) != 0) return 0;
    pthread_attr_getstack(&a, &addr, &size);
    pthread_attr_destroy(&a);
    return (uintptr_t)addr + STACK_RESERVE;
}

static int retry_at(struct lock *l, int depth) {
    struct retry_state *st = l->priv;
    if (depth > st->depth) st->depth = depth;
    int rc = lock_set_nx(l, 0);
    if (rc != LOCK_BUSY) return rc;
    if (depth >= l->core->retry_depth) {
        snprintf(l->errstr, sizeof(l->errstr), "recursion depth cap %d reached",
                 l->core->retry_depth);
        return LOCK_BUSY;
    }
    char here;
    if (st->stack_low && (uintptr_t)&here < st->stack_low) {
        snprintf(l->errstr, sizeof(l->errstr),
                 "recursion stopped at depth %d: the thread's stack is nearly exhausted", depth);
        return LOCK_BUSY;
    }
    if (lock_backoff(l) < 0) return LOCK_BUSY;
    return retry_at(l, depth + 1);
}

static int setnx_retry_acquire(struct lock *l) {
    struct retry_state *st = l->priv;
    if (!st->stack_low) st->stack_low = stack_floor();
    return retry_at(l, 1);
}

static void setnx_retry_report(const struct lock *l, struct lock_report *r) {
    const struct retry_state *st = l->priv;
    r->depth = st->depth;
}

const struct lock_type lock_type_setnx_retry =
    LOCK_STRING_TYPE("setnx-retry", 0, setnx_retry_acquire, lock_del, sizeof(struct retry_state),
                     setnx_retry_report);
