/* lock_expiring.c -- SET key value NX PX ttl in one command, so a dead
 * holder's lock expires. The release is still a bare DEL: a holder slower
 * than the TTL deletes whatever lock is there, usually the next owner's.
 * Its lease is recorded but not enforced: that is the flaw it shows. */
#include "lock_int.h"

static int expiring_release(struct lock *l) {
    lock_release_pause(l);
    return lock_del(l);
}

const struct lock_type lock_type_expiring =
    LOCK_STRING_TYPE("expiring", LOCK_T_LEASED, lock_string_acquire, expiring_release, 0, NULL);
