/* lock_none.c -- the first step of the ladder: no lock at all. Two requests
 * that read the same stock both sell the same unit, even on one instance. */
#include "lock.h"

const struct lock_type lock_type_none = {
    .name = "none",
    .description = "no lock: read, check and write the stock unguarded",
    .flaw = "oversells even on one instance: concurrent sales read the same stock",
    .flags = LOCK_F_NONE,
    .acquire = NULL,
    .release = NULL,
    .renew = NULL,
};
