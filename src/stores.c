/* stores.c -- the stores a lock can live in beside the core's Redis (see
 * struct lock_store in lock_int.h). One row per store; its lock types point
 * at its table. Fixed at build time. */
#include <stddef.h>
#include "lock_int.h"

const struct lock_store *const lock_stores[] = {
    &lock_store_zookeeper,
    &lock_store_mysql,
    NULL,
};
