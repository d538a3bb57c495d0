/* lock_atomic.c -- beyond the demo: no lock. The caller does the whole sale
 * as one Lua script (src/lua/atomic-sale.lua), which Redis runs atomically.
 * The reference ceiling for this workload. */
#include "lock.h"

const struct lock_type lock_type_atomic = {
    .name = "atomic",
    .description = "no lock: check-and-decrement in one Lua script",
    .flaw = "none for this workload; it is the reference ceiling, but only fits work that one script can do",
    .flags = LOCK_F_ATOMIC,
    .acquire = NULL,
    .release = NULL,
    .renew = NULL,
};
