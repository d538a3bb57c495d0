/* lock_setnx_spin.c -- SETNX without expiry in a loop with 20 ms sleeps:
 * the recursion of setnx-retry becomes a spin. Nothing ever expires the key,
 * so a holder that dies leaves the lock held forever. */
#include "lock_int.h"

static int setnx_once(struct lock *l) { return lock_set_nx(l, 0); }

static int setnx_spin_acquire(struct lock *l) { return lock_poll(l, setnx_once); }

const struct lock_type lock_type_setnx_spin =
    LOCK_STRING_TYPE("setnx-spin", 0, setnx_spin_acquire, lock_del, 0, NULL);
