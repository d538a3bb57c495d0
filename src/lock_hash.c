/* lock_hash.c -- Redisson's hash lock scripts, shared by the hash types
 * (see lock_hash.h). */
#include <stdio.h>
#include "lock_hash.h"
#include "mclock.h"
#include "pubsub.h"
#include <string.h>
#include "rpool.h"

int lock_hash_script_try(struct lock *l, const char *script, int numkeys, int argc,
                         const char **argv, int64_t *pttl_ms) {
    int rc = lock_try_conn(l);
    if (rc != LOCK_OK) return rc;
    l->attempts++;
    lock_carry_try(l);
    redisReply *r = lock_script(l, script, numkeys, argc, argv);
    if (!r) return LOCK_ERR;
    if (r->type == REDIS_REPLY_NIL) {
        rc = LOCK_OK;
    } else if (r->type == REDIS_REPLY_INTEGER) {
        if (pttl_ms) *pttl_ms = r->integer;
        rc = LOCK_BUSY;
    } else {
        rc = lock_fail(l, r, script);
    }
    lock_carry_end(l, rc == LOCK_OK);
    freeReplyObject(r);
    return rc;
}

int lock_hash_try(struct lock *l, int64_t *pttl_ms) {
    char lease[24];
    snprintf(lease, sizeof(lease), "%d", lock_lease_ms(l));
    const char *argv[] = {l->key, lease, l->owner};
    return lock_hash_script_try(l, "hash-lock", 1, 3, argv, pttl_ms);
}

static int hash_once(struct lock *l) { return lock_hash_try(l, NULL); }

int lock_hash_poll(struct lock *l) { return lock_poll(l, hash_once); }

void lock_redisson_prefixed(const char *prefix, const char *key, char *buf, size_t len) {
    snprintf(buf, len, strchr(key, '{') ? "%s:%s" : "%s:{%s}", prefix, key);
}

void lock_redisson_suffixed(const char *key, const char *suffix, char *buf, size_t len) {
    snprintf(buf, len, strchr(key, '{') ? "%s:%s" : "{%s}:%s", key, suffix);
}

void lock_hash_channel(const char *key, char *buf, size_t len) {
    lock_redisson_prefixed("redisson_lock__channel", key, buf, len);
}

int lock_hash_unlock(struct lock *l) {
    char channel[256], lease[24];
    lock_hash_channel(l->key, channel, sizeof(channel));
    snprintf(lease, sizeof(lease), "%d", lock_lease_ms(l));
    const char *argv[] = {l->key, channel, "0", lease, l->owner};
    lock_release_pause(l);
    redisReply *r = lock_script(l, "hash-unlock", 2, 5, argv);
    if (!r) return LOCK_ERR;
    int rc = r->type == REDIS_REPLY_NIL       ? LOCK_LOST
             : r->type == REDIS_REPLY_INTEGER ? LOCK_OK
                                              : lock_fail(l, r, "hash-unlock");
    freeReplyObject(r);
    return rc;
}

int lock_hash_renew(struct lock *l, struct lock_link *k) {
    char lease[24];
    snprintf(lease, sizeof(lease), "%d", lock_lease_ms(l));
    const char *argv[] = {l->key, lease, l->owner};
    return lock_link_owned(l, k, "hash-renew", 1, 3, argv);
}

int lock_hash_abandon(struct lock *l, struct lock_link *k) {
    char channel[256];
    lock_hash_channel(l->key, channel, sizeof(channel));
    const char *argv[] = {l->key, channel, l->owner, "0"};
    return lock_link_abandon(l, k, "hash-abandon", 2, 4, argv);
}

int lock_hash_wait(struct lock *l, int (*try_once)(struct lock *, int64_t *), const char *channel,
                   int max_sleep_ms) {
    int64_t pttl = -1;
    int rc = try_once(l, &pttl);
    if (rc != LOCK_BUSY || mclock_us() >= l->deadline_us) return rc;
    char err[128];
    struct pubsub_waiter w;
    lock_park(l);
    int subscribed = pubsub_wait_begin(l->core->pubsub, &w, l->pool, channel, l->deadline_us, err,
                                       sizeof(err)) == 0;
    /* Subscribed first, then tried again: an unlock between the first try
     * and the subscription is not missed. */
    while ((rc = try_once(l, &pttl)) == LOCK_BUSY) {
        int64_t now = mclock_us();
        if (now >= l->deadline_us) break;
        if (!subscribed) {
            if (lock_backoff(l) < 0) break;
            continue;
        }
        /* PTTL 0 is a lock expiring this very millisecond: try again at
         * once, not after a second (-1: a lock with no expiry). */
        int64_t sleep_ms = pttl >= 0 ? pttl + 1 : 1000;
        if (max_sleep_ms > 0 && sleep_ms > max_sleep_ms) sleep_ms = max_sleep_ms;
        int64_t until = now + sleep_ms * 1000;
        if (until > l->deadline_us) until = l->deadline_us;
        lock_park(l);
        pubsub_wait(&w, until);
    }
    if (subscribed) pubsub_wait_end(&w);
    return rc;
}
