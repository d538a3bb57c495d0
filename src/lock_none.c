/* lock_none.c -- the first step of the ladder: no lock at all. Two requests
 * that read the same stock both sell the same unit, even on one instance. */
#include "lock_int.h"

static int none_acquire(struct lock *l) {
    (void)l;
    return LOCK_OK;
}

static int none_release(struct lock *l) {
    (void)l;
    return LOCK_OK;
}

const struct lock_type lock_type_none = {
    .name = "none",
    .family = "none",
    .flags = 0,
    .acquire = none_acquire,
    .release = none_release,
};
