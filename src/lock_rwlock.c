/* lock_rwlock.c -- Redisson's RReadWriteLock, in its key layout: a hash at
 * the lock key with field mode = read|write and one field per holder (the
 * writer's field is "<owner>:write"), plus one key per read hold,
 * {<lock key>}:<owner>:rwlock_timeout:<n>, carrying that read's lease.
 * Readers share; a writer excludes readers and other writers; a lock of
 * another kind on the key counts as a writer. Waiters sleep on
 * redisson_rwlock:{<lock key>} like the redisson type; the writer's unlock
 * publishes Redisson's "1", which wakes every waiting reader.
 *
 * With lock.read-lock=true, GET /inventory takes the read lock and sales
 * of the strategies whose table names it take the write lock of the same
 * name. The write lock is renewed by the watchdog; a read hold lives for
 * one lease. */
#include <stdio.h>
#include <string.h>
#include "lock_hash.h"

/* Holders of other kinds of lock publish nothing here: poll them this often. */
#define RW_POLL_MS 100

static void rw_channel(const struct lock *l, char *buf, size_t len) {
    lock_redisson_prefixed("redisson_rwlock", l->key, buf, len);
}

/* {<key>}:<owner>:rwlock_timeout, Redisson's getReadWriteTimeoutNamePrefix. */
static void rw_timeout_prefix(const struct lock *l, char *buf, size_t len) {
    char suffix[160];
    snprintf(suffix, sizeof(suffix), "%s:rwlock_timeout", l->owner);
    lock_redisson_suffixed(l->key, suffix, buf, len);
}

static int read_try(struct lock *l, int64_t *pttl_ms) {
    char prefix[320], lease[24], writer[80];
    rw_timeout_prefix(l, prefix, sizeof(prefix));
    snprintf(lease, sizeof(lease), "%d", lock_lease_ms(l));
    snprintf(writer, sizeof(writer), "%s:write", l->owner);
    const char *argv[] = {l->key, prefix, lease, l->owner, writer};
    return lock_hash_script_try(l, "rw-lock", 2, 5, argv, pttl_ms);
}

static int read_acquire(struct lock *l) {
    char channel[256];
    rw_channel(l, channel, sizeof(channel));
    return lock_hash_wait(l, read_try, channel, RW_POLL_MS);
}

/* nil: not ours; 0 or 1: released. */
static int rw_release_reply(struct lock *l, redisReply *r, const char *script) {
    if (!r) return LOCK_ERR;
    int rc = r->type == REDIS_REPLY_NIL       ? LOCK_LOST
             : r->type == REDIS_REPLY_INTEGER ? LOCK_OK
                                              : lock_fail(l, r, script);
    freeReplyObject(r);
    return rc;
}

static int read_release(struct lock *l) {
    char channel[256], prefix[320], keyprefix[200];
    rw_channel(l, channel, sizeof(channel));
    rw_timeout_prefix(l, prefix, sizeof(prefix));
    snprintf(keyprefix, sizeof(keyprefix), strchr(l->key, '{') ? "%s" : "{%s}", l->key);
    const char *argv[] = {l->key, channel, prefix, keyprefix, "0", l->owner};
    lock_release_pause(l);
    return rw_release_reply(l, lock_script(l, "rw-read-unlock", 4, 6, argv), "rw-read-unlock");
}

static int read_abandon(struct lock *l, struct lock_link *k) {
    char channel[256], prefix[320];
    rw_channel(l, channel, sizeof(channel));
    rw_timeout_prefix(l, prefix, sizeof(prefix));
    const char *argv[] = {l->key, channel, prefix, l->owner, "0"};
    return lock_link_abandon(l, k, "rw-abandon", 3, 5, argv);
}

static int write_try(struct lock *l, int64_t *pttl_ms) {
    char lease[24];
    snprintf(lease, sizeof(lease), "%d", lock_lease_ms(l));
    const char *argv[] = {l->key, lease, l->owner, l->owner}; /* l->owner ends in ":write" */
    return lock_hash_script_try(l, "rw-lock", 1, 4, argv, pttl_ms);
}

static int write_acquire(struct lock *l) {
    /* The writer's field is Redisson's getLockName for a write lock; the
     * watchdog's renewal script then finds it under l->owner. */
    size_t n = strlen(l->owner);
    if (n < 6 || strcmp(l->owner + n - 6, ":write") != 0)
        snprintf(l->owner + n, sizeof(l->owner) - n, ":write");
    char channel[256];
    rw_channel(l, channel, sizeof(channel));
    return lock_hash_wait(l, write_try, channel, RW_POLL_MS);
}

static int write_release(struct lock *l) {
    char channel[256], lease[24];
    rw_channel(l, channel, sizeof(channel));
    snprintf(lease, sizeof(lease), "%d", lock_lease_ms(l));
    const char *argv[] = {l->key, channel, "1", lease, l->owner};
    lock_release_pause(l);
    return rw_release_reply(l, lock_script(l, "rw-write-unlock", 2, 5, argv), "rw-write-unlock");
}

static int write_abandon(struct lock *l, struct lock_link *k) {
    char channel[256];
    rw_channel(l, channel, sizeof(channel));
    const char *argv[] = {l->key, channel, l->owner, "1"};
    return lock_link_abandon(l, k, "rw-abandon", 2, 4, argv);
}

const struct lock_type lock_type_rw_read = {
    .name = "rw-read",
    .family = "redis",
    .flags = LOCK_T_REDIS | LOCK_T_LEASED,
    .acquire = read_acquire,
    .release = read_release,
    .abandon = read_abandon,
};

const struct lock_type lock_type_rw_write = {
    .name = "rw-write",
    .family = "redis",
    .flags = LOCK_T_REDIS | LOCK_T_LEASED | LOCK_T_WATCHED | LOCK_T_CHECKED | LOCK_T_GATED,
    .acquire = write_acquire,
    .release = write_release,
    .renew = lock_hash_renew,
    .abandon = write_abandon,
    .guard = lock_hash_guard,
};
