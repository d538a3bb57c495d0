/* lock_hash.h -- Redisson's hash lock, shared by the reentrant, watchdog and
 * redisson strategies: a hash at the lock key whose field is the owner id and
 * whose value is the hold count, with a PEXPIRE lease in ms. Private to the
 * lock core. */
#ifndef INVENTORYD_LOCK_HASH_H
#define INVENTORYD_LOCK_HASH_H

#include <stdint.h>
#include "lock.h"

/* One try of hash-lock.lua. Counts an attempt. Returns LOCK_OK (first hold
 * or reentry), LOCK_BUSY with the holder's remaining lease in *pttl_ms
 * (-1 when it has none), or LOCK_ERR. */
int lock_hash_try(struct lock *l, int64_t *pttl_ms);

/* One try of any script with hash-lock.lua's contract (nil: acquired; an
 * integer: busy, the holder's PTTL). Counts an attempt. */
int lock_hash_script_try(struct lock *l, const char *script, int numkeys, int argc,
                         const char **argv, int64_t *pttl_ms);

/* hash-try in a loop with lock.spin-sleep-ms sleeps (reentrant, watchdog). */
int lock_hash_poll(struct lock *l);

/* One release through hash-unlock.lua, which publishes the unlock message
 * when the last hold goes. LOCK_OK, LOCK_LOST (not held by us) or LOCK_ERR. */
int lock_hash_unlock(struct lock *l);

/* Redisson's waiting: try; when busy, subscribe to channel through the
 * process's one subscriber, try again, then sleep until an unlock message
 * or the holder's remaining lease (PTTL), whichever comes first, and repeat
 * until l->deadline_us. try_once is lock_hash_try or a script of the same
 * contract. Falls back on lock.spin-sleep-ms polling if the subscription
 * cannot be made. */
int lock_hash_wait(struct lock *l, int (*try_once)(struct lock *, int64_t *),
                   const char *channel);

/* The unlock channel of a lock key: redisson_lock__channel:{key}. */
void lock_hash_channel(const struct lock *l, char *buf, size_t len);
void lock_hash_channel_of(const char *key, char *buf, size_t len);

#endif
