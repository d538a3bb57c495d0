/* lock_owner_check.c -- release only when GET returns my own value. The
 * check and the delete are two commands: if the lock expires between them
 * and another owner takes it, the DEL removes that owner's lock. The
 * release_delay_ms fault widens that window on demand. */
#include <string.h>
#include "lock.h"
#include "mclock.h"

static int owner_check_once(struct lock *l) {
    return lock_set_nx(l, l->env->ttl_ms);
}

static int owner_check_acquire(struct lock *l) {
    return lock_poll(l, owner_check_once);
}

static int owner_check_release(struct lock *l) {
    redisReply *r = redisCommand(l->c, "GET %s", l->key);
    if (!r || r->type == REDIS_REPLY_ERROR) {
        int rc = lock_fail(l, r, "GET");
        freeReplyObject(r);
        return rc;
    }
    int mine = r->type == REDIS_REPLY_STRING && strcmp(r->str, l->owner) == 0;
    freeReplyObject(r);
    if (!mine) return LOCK_LOST;
    mclock_sleep_ms(l->release_delay_ms);   /* the race window */
    int rc = lock_del(l);
    return rc == LOCK_LOST ? LOCK_LOST : rc;
}

const struct lock_type lock_type_owner_check = {
    .name = "owner-check",
    .description = "SET NX PX; release only if GET returns my value, then DEL",
    .flaw = "the check and the delete are two commands: a lock that expires between them is deleted from its next owner",
    .flags = LOCK_F_REDIS,
    .acquire = owner_check_acquire,
    .release = owner_check_release,
    .renew = NULL,
};
