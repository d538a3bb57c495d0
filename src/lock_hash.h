/* lock_hash.h -- Redisson's hash lock, shared by the reentrant, watchdog and
 * redisson types (and the renewal of the read-write lock's writer): a hash
 * at the lock key whose field is the owner id and whose value is the hold
 * count, with a PEXPIRE lease in ms. Private to the lock core. */
#ifndef INVENTORYD_LOCK_HASH_H
#define INVENTORYD_LOCK_HASH_H

#include <stdint.h>
#include "lock_int.h"

/* One try of hash-lock.lua. Counts an attempt. Returns LOCK_OK (first hold
 * or re-entry), LOCK_BUSY with the holder's remaining lease in *pttl_ms
 * (-1 when it has none), or LOCK_ERR. */
int lock_hash_try(struct lock *l, int64_t *pttl_ms);

/* One try of any script with hash-lock.lua's contract (nil: acquired; an
 * integer: busy, the holder's PTTL). Counts an attempt. */
int lock_hash_script_try(struct lock *l, const char *script, int numkeys, int argc,
                         const char **argv, int64_t *pttl_ms);

/* lock_hash_try in a loop with lock.spin-sleep-ms sleeps (reentrant, watchdog). */
int lock_hash_poll(struct lock *l);

/* One release through hash-unlock.lua, which publishes the unlock message
 * when the last hold goes. LOCK_OK, LOCK_LOST (not held by us) or LOCK_ERR. */
int lock_hash_unlock(struct lock *l);

/* hash-renew.lua on the link: LOCK_OK, LOCK_LOST (gone), LOCK_ERR. */
int lock_hash_renew(struct lock *l, struct lock_link *k);

/* hash-abandon.lua on the link: the owner's field gone, the key deleted and
 * the unlock message published when it was ours. LOCK_OK or LOCK_ERR. */
int lock_hash_abandon(struct lock *l, struct lock_link *k);

/* Redisson's waiting: try; when busy, subscribe to channel through the
 * core's subscriber for the core's Redis, try again, then sleep (holding no
 * connection) until an unlock message or the holder's remaining lease
 * (PTTL, at most max_sleep_ms when that is above 0), whichever comes first,
 * and repeat until l->deadline_us. Falls back on lock.spin-sleep-ms polling
 * if the subscription cannot be made. */
int lock_hash_wait(struct lock *l, int (*try_once)(struct lock *, int64_t *), const char *channel,
                   int max_sleep_ms);

/* Redisson's names of objects beside a lock (RedissonObject.prefixName and
 * suffixName): "prefix:{key}" and "{key}:suffix", or, when key already holds
 * a hash tag ('{'), "prefix:key" and "key:suffix", so that in a cluster they
 * share the key's slot. */
void lock_redisson_prefixed(const char *prefix, const char *key, char *buf, size_t len);
void lock_redisson_suffixed(const char *key, const char *suffix, char *buf, size_t len);

/* The unlock channel of a lock key: redisson_lock__channel:{key}. */
void lock_hash_channel(const char *key, char *buf, size_t len);

/* The table of a type whose lock is Redisson's hash (reentrant, watchdog,
 * redisson): leased, released by hash-unlock.lua, abandoned and guarded by
 * the owner's field. A step names its flags beyond those, its acquire, and
 * its renew (lock_hash_renew with LOCK_T_WATCHED, else NULL). */
#define LOCK_HASH_TYPE(name_, flags_, acquire_, renew_)                                            \
    {                                                                                              \
        .name = (name_), .family = "redis", .flags = LOCK_T_REDIS | LOCK_T_LEASED | (flags_),      \
        .acquire = (acquire_), .release = lock_hash_unlock, .renew = (renew_),                     \
        .abandon = lock_hash_abandon, .guard = lock_hash_guard,                                    \
    }

#endif
