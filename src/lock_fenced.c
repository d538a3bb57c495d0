/* lock_fenced.c -- a lock that hands out a fencing token: SET NX PX and an
 * INCR of <lock>:fence in one script (src/lua/fenced-lock.lua). The caller
 * writes through a script that refuses any token older than the newest
 * issued (src/lua/fenced-sale.lua), so a holder that was paused past its TTL
 * while another owner took the lock has its write refused, not applied. */
#include <stdio.h>
#include "lock.h"

/* The release is owner-lua's compare-and-delete. */
int lock_owner_lua_release(struct lock *l);

static int fenced_once(struct lock *l) {
    char fence[224], ttl[24];
    snprintf(fence, sizeof(fence), "%s:fence", l->key);
    snprintf(ttl, sizeof(ttl), "%d", l->env->ttl_ms);
    const char *argv[] = {l->key, fence, l->owner, ttl};
    l->attempts++;
    redisReply *r = lock_script(l, "fenced-lock", 2, 4, argv);
    if (!r) return LOCK_ERR;
    int rc;
    if (r->type != REDIS_REPLY_INTEGER) {
        rc = lock_fail(l, r, "fenced-lock");
    } else if (r->integer > 0) {
        l->token = r->integer;
        rc = LOCK_OK;
    } else {
        rc = LOCK_BUSY;
    }
    freeReplyObject(r);
    return rc;
}

static int fenced_acquire(struct lock *l) {
    return lock_poll(l, fenced_once);
}

const struct lock_type lock_type_fenced = {
    .name = "fenced",
    .description = "SET NX PX plus a fencing token from INCR; the stock write refuses older tokens",
    .flaw = "none for correctness: a stale holder's write is refused (409 stale_token), not applied",
    .flags = LOCK_F_REDIS | LOCK_F_FENCED,
    .acquire = fenced_acquire,
    .release = lock_owner_lua_release,
    .renew = NULL,
};
