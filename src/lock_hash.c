/* lock_hash.c -- Redisson's hash lock scripts, shared by the hash strategies
 * (see lock_hash.h). */
#include <stdio.h>
#include "lock_hash.h"
#include "mclock.h"
#include "pubsub.h"

int lock_hash_script_try(struct lock *l, const char *script, int numkeys, int argc,
                         const char **argv, int64_t *pttl_ms) {
    l->attempts++;
    redisReply *r = lock_script(l, script, numkeys, argc, argv);
    if (!r) return LOCK_ERR;
    int rc;
    if (r->type == REDIS_REPLY_NIL) {
        rc = LOCK_OK;
    } else if (r->type == REDIS_REPLY_INTEGER) {
        if (pttl_ms) *pttl_ms = r->integer;
        rc = LOCK_BUSY;
    } else {
        rc = lock_fail(l, r, script);
    }
    freeReplyObject(r);
    return rc;
}

int lock_hash_try(struct lock *l, int64_t *pttl_ms) {
    char lease[24];
    snprintf(lease, sizeof(lease), "%d", l->env->ttl_ms);
    const char *argv[] = {l->key, lease, l->owner};
    return lock_hash_script_try(l, "hash-lock", 1, 3, argv, pttl_ms);
}

static int hash_once(struct lock *l) {
    return lock_hash_try(l, NULL);
}

int lock_hash_poll(struct lock *l) {
    return lock_poll(l, hash_once);
}

void lock_hash_channel_of(const char *key, char *buf, size_t len) {
    snprintf(buf, len, "redisson_lock__channel:{%s}", key);
}

void lock_hash_channel(const struct lock *l, char *buf, size_t len) {
    lock_hash_channel_of(l->key, buf, len);
}

int lock_hash_unlock(struct lock *l) {
    char channel[256], lease[24];
    lock_hash_channel(l, channel, sizeof(channel));
    snprintf(lease, sizeof(lease), "%d", l->env->ttl_ms);
    const char *argv[] = {l->key, channel, "0", lease, l->owner};
    mclock_sleep_ms(l->release_delay_ms);
    redisReply *r = lock_script(l, "hash-unlock", 2, 5, argv);
    if (!r) return LOCK_ERR;
    int rc = r->type == REDIS_REPLY_NIL ? LOCK_LOST
             : r->type == REDIS_REPLY_INTEGER ? LOCK_OK : lock_fail(l, r, "hash-unlock");
    freeReplyObject(r);
    return rc;
}

int lock_hash_wait(struct lock *l, int (*try_once)(struct lock *, int64_t *),
                   const char *channel) {
    int64_t pttl = -1;
    int rc = try_once(l, &pttl);
    if (rc != LOCK_BUSY || mclock_us() >= l->deadline_us) return rc;
    char err[128];
    struct pubsub_waiter w;
    int subscribed = pubsub_wait_begin(&w, l->env->pool, channel, l->deadline_us,
                                       err, sizeof(err)) == 0;
    /* Subscribed first, then tried again: an unlock between the first try
     * and the subscription is not missed. */
    while ((rc = try_once(l, &pttl)) == LOCK_BUSY) {
        int64_t now = mclock_us();
        if (now >= l->deadline_us) break;
        int64_t until = pttl > 0 ? now + pttl * 1000 : now + 1000;
        if (until > l->deadline_us) until = l->deadline_us;
        if (subscribed) pubsub_wait(&w, until);
        else if (lock_backoff(l) < 0) break;
    }
    if (subscribed) pubsub_wait_end(&w);
    return rc;
}
