/* lock_owner_check.c -- release only when GET returns my own value. The
 * check and the delete are two commands: if the lock expires between them
 * and another owner takes it, the DEL removes that owner's lock. The
 * release_delay_ms fault widens that window on demand. */
#include <string.h>
#include "lock_int.h"

static int owner_check_release(struct lock *l) {
    redisReply *r = lock_command(l, "GET %s", l->key);
    if (!r || r->type == REDIS_REPLY_ERROR) {
        int rc = lock_fail(l, r, "GET");
        freeReplyObject(r);
        return rc;
    }
    int mine = r->type == REDIS_REPLY_STRING && strcmp(r->str, l->owner) == 0;
    freeReplyObject(r);
    if (!mine) return LOCK_LOST;
    lock_release_pause(l); /* the race window */
    return lock_del(l);
}

const struct lock_type lock_type_owner_check = LOCK_STRING_TYPE(
    "owner-check", LOCK_T_LEASED, lock_string_acquire, owner_check_release, 0, NULL);
