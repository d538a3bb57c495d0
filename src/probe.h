/* probe.h -- the mutual-exclusion probe: it sees overlapping holders of a
 * critical section instead of guessing them.
 *
 * On entry a sale adds itself to <item>:holders (src/lua/probe-enter.lua);
 * another holder already inside increments <item>:violations. On exit it
 * removes itself: the exit is registered as a cleanup of the sale's lock
 * (lock_cleanup), so it goes out with the release, and again ahead of any
 * compensating release after a lost reply: no entry outlives its sale on
 * any path, and the audit never counts a holder that was not there. Both
 * go through the lock's handle (lock.h), never on a connection of their
 * own: the entry is appended to the holder's pipeline, to go out in one
 * write with what the holder reads, and its answer is read back from
 * there.
 *
 * Each entry names its process's alive key (<inventory.key>:alive:<id>),
 * which a heartbeat thread renews every HEARTBEAT_MS with a lease of
 * ALIVE_MS on a connection of its own (a busy pool must not make a live
 * process look dead): a process killed inside the section stops counting
 * within a second. Thread safe. */
#ifndef INVENTORYD_PROBE_H
#define INVENTORYD_PROBE_H

#include <stddef.h>

struct lock;
struct probe;
struct rpool;
struct item_keys;

/* Starts the heartbeat for alive_key with pool's options (not its
 * connections). NULL with errstr set. */
struct probe *probe_create(struct rpool *pool, const char *alive_key, char *errstr, size_t errlen);

/* Stops the heartbeat (deleting the alive key) and frees p. Accepts NULL. */
void probe_free(struct probe *p);

/* Registers the exit of order with l (lock_cleanup), then appends the
 * entry to l's pipeline (lock_append_script) without sending it: it goes
 * with whatever the holder sends next (the section's GET, by lock_flush).
 * Returns the entry's reply index (lock_reply), or -1 when nothing was
 * appended. */
int probe_enter(struct probe *p, struct lock *l, const struct item_keys *k, const char *order);

/* Once l's pipeline has been sent: whether the entry of order (reply index
 * i, from probe_enter) found another holder inside. An entry that answered
 * NOSCRIPT did not run: it is run again first, now (lock_run_script, which
 * loads the script). 1: another holder was inside (a violation, counted in
 * Redis); 0: it was alone, or the entry answered an error; -1: its reply
 * was lost (lock_errstr(l) says why). */
int probe_entered(struct probe *p, struct lock *l, const struct item_keys *k, const char *order,
                  int i);

#endif
