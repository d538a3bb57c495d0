/* lock_none.c -- the first step of the ladder: no lock at all. Two requests
 * that read the same stock both sell the same unit, even on one instance. */
#include "lock_int.h"

/* Taking it and giving it back both do nothing, and always succeed. */
static int none_nothing(struct lock *l) {
    (void)l;
    return LOCK_OK;
}

const struct lock_type lock_type_none = {
    .name = "none",
    .family = "none",
    .acquire = none_nothing,
    .release = none_nothing,
};
