/* lock_rwlock.c -- Redisson's RReadWriteLock, in its key layout: a hash at
 * the lock key with field mode = read|write and one field per holder (the
 * writer's field is "<owner>:write"), plus one key per read hold,
 * {<lock key>}:<owner>:rwlock_timeout:<n>, carrying that read's lease.
 * Readers share; a writer excludes readers and other writers. Waiters sleep
 * on redisson_rwlock:{<lock key>} like the redisson strategy.
 *
 * These two types are not sale strategies (not in lock_types[]): with
 * lock.read-lock=true, GET /inventory takes the read lock and sales by the
 * redisson strategy take the write lock of the same name. The write lock is
 * renewed by the watchdog; a read hold lives for one lease (lock.ttl-ms). */
#include <stdio.h>
#include <string.h>
#include "lock.h"
#include "lock_hash.h"
#include "watchdog.h"

static void rw_channel(const struct lock *l, char *buf, size_t len) {
    snprintf(buf, len, "redisson_rwlock:{%s}", l->key);
}

/* {<key>}:<owner>:rwlock_timeout, Redisson's getReadWriteTimeoutNamePrefix. */
static void rw_timeout_prefix(const struct lock *l, char *buf, size_t len) {
    snprintf(buf, len, "{%s}:%s:rwlock_timeout", l->key, l->owner);
}

static int read_try(struct lock *l, int64_t *pttl_ms) {
    char prefix[320], lease[24], writer[80];
    rw_timeout_prefix(l, prefix, sizeof(prefix));
    snprintf(lease, sizeof(lease), "%d", l->env->ttl_ms);
    snprintf(writer, sizeof(writer), "%s:write", l->owner);
    const char *argv[] = {l->key, prefix, lease, l->owner, writer};
    return lock_hash_script_try(l, "rw-read-lock", 2, 5, argv, pttl_ms);
}

static int read_acquire(struct lock *l) {
    char channel[256];
    rw_channel(l, channel, sizeof(channel));
    return lock_hash_wait(l, read_try, channel);
}

/* nil: not ours; 0 or 1: released. */
static int rw_release_reply(struct lock *l, redisReply *r, const char *script) {
    if (!r) return LOCK_ERR;
    int rc = r->type == REDIS_REPLY_NIL ? LOCK_LOST
             : r->type == REDIS_REPLY_INTEGER ? LOCK_OK : lock_fail(l, r, script);
    freeReplyObject(r);
    return rc;
}

static int read_release(struct lock *l) {
    char channel[256], prefix[320], keyprefix[200];
    rw_channel(l, channel, sizeof(channel));
    rw_timeout_prefix(l, prefix, sizeof(prefix));
    snprintf(keyprefix, sizeof(keyprefix), "{%s}", l->key);
    const char *argv[] = {l->key, channel, prefix, keyprefix, "0", l->owner};
    return rw_release_reply(l, lock_script(l, "rw-read-unlock", 4, 6, argv), "rw-read-unlock");
}

static int write_try(struct lock *l, int64_t *pttl_ms) {
    char lease[24];
    snprintf(lease, sizeof(lease), "%d", l->env->ttl_ms);
    const char *argv[] = {l->key, lease, l->owner};
    return lock_hash_script_try(l, "rw-write-lock", 1, 3, argv, pttl_ms);
}

static int write_acquire(struct lock *l) {
    /* The writer's field is Redisson's getLockName for a write lock; the
     * watchdog's renewal script then finds it under l->owner. */
    size_t n = strlen(l->owner);
    if (n < 6 || strcmp(l->owner + n - 6, ":write") != 0)
        snprintf(l->owner + n, sizeof(l->owner) - n, ":write");
    char channel[256];
    rw_channel(l, channel, sizeof(channel));
    int rc = lock_hash_wait(l, write_try, channel);
    if (rc == LOCK_OK && l->holds == 0) watchdog_watch(l);
    return rc;
}

static int write_release(struct lock *l) {
    if (l->holds == 0) watchdog_unwatch(l);
    char channel[256], lease[24];
    rw_channel(l, channel, sizeof(channel));
    snprintf(lease, sizeof(lease), "%d", l->env->ttl_ms);
    const char *argv[] = {l->key, channel, "0", lease, l->owner};
    return rw_release_reply(l, lock_script(l, "rw-write-unlock", 2, 5, argv), "rw-write-unlock");
}

const struct lock_type lock_type_rw_read = {
    .name = "rw-read",
    .description = "the read lock of a Redisson RReadWriteLock",
    .flaw = "a read hold is not renewed: it lasts one lease",
    .flags = LOCK_F_REDIS,
    .acquire = read_acquire,
    .release = read_release,
    .renew = NULL,
};

const struct lock_type lock_type_rw_write = {
    .name = "rw-write",
    .description = "the write lock of a Redisson RReadWriteLock, renewed by the watchdog",
    .flaw = "one Redis master, as redisson",
    .flags = LOCK_F_REDIS,
    .acquire = write_acquire,
    .release = write_release,
    .renew = NULL,
};
