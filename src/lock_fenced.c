/* lock_fenced.c -- a lock that hands out a fencing token: SET NX PX and an
 * INCR of <lock>:fence in one script (src/lua/fenced-lock.lua). The writer
 * goes through a script that refuses any token older than the newest issued
 * (src/lua/fenced-sale.lua), so a holder that was paused past its TTL while
 * another owner took the lock has its write refused, not applied. The
 * release is owner-lua's compare-and-delete. The lease is not enforced at
 * commit: the fence does that job, even for a pause after the check. */
#include <stdio.h>
#include "lock_int.h"

struct fenced_state {
    long long token;
};

static int fenced_once(struct lock *l) {
    struct fenced_state *st = l->priv;
    int rc = lock_try_conn(l);
    if (rc != LOCK_OK) return rc;
    char fence[224], ttl[24];
    snprintf(fence, sizeof(fence), "%s:fence", l->key);
    snprintf(ttl, sizeof(ttl), "%d", lock_lease_ms(l));
    const char *argv[] = {l->key, fence, l->owner, ttl};
    l->attempts++;
    lock_carry_try(l);
    redisReply *r = lock_script(l, "fenced-lock", 2, 4, argv);
    if (!r) return LOCK_ERR;
    if (r->type != REDIS_REPLY_INTEGER) {
        rc = lock_fail(l, r, "fenced-lock");
    } else if (r->integer > 0) {
        st->token = r->integer;
        rc = LOCK_OK;
    } else {
        rc = LOCK_BUSY;
    }
    lock_carry_end(l, rc == LOCK_OK);
    freeReplyObject(r);
    return rc;
}

static int fenced_acquire(struct lock *l) { return lock_poll(l, fenced_once); }

static int fenced_release(struct lock *l) {
    lock_release_pause(l);
    return lock_del_owned(l);
}

static void fenced_report(const struct lock *l, struct lock_report *r) {
    const struct fenced_state *st = l->priv;
    r->token = st->token;
}

const struct lock_type lock_type_fenced =
    LOCK_STRING_TYPE("fenced", LOCK_T_LEASED, fenced_acquire, fenced_release,
                     sizeof(struct fenced_state), fenced_report);
