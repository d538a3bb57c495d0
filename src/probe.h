/* probe.h -- the mutual-exclusion probe: it sees overlapping holders of a
 * critical section instead of guessing them.
 *
 * On entry a sale adds itself to <item>:holders (src/lua/probe-enter.lua);
 * another holder already inside increments <item>:violations. On exit it
 * removes itself: the exit is registered as a cleanup of the sale's lock
 * (lock_cleanup), so it goes out with the release, and again ahead of any
 * compensating release after a lost reply: no entry outlives its sale on
 * any path, and the audit never counts a holder that was not there.
 *
 * Each entry names its process's alive key (<inventory.key>:alive:<id>),
 * which a heartbeat thread renews every HEARTBEAT_MS with a lease of
 * ALIVE_MS on a connection of its own (a busy pool must not make a live
 * process look dead): a process killed inside the section stops counting
 * within a second. Thread safe. */
#ifndef INVENTORYD_PROBE_H
#define INVENTORYD_PROBE_H

#include <stddef.h>
#include <hiredis/hiredis.h>

struct lock;
struct probe;
struct rpool;
struct item_keys;

/* Starts the heartbeat for alive_key with pool's options (not its
 * connections). NULL with errstr set. */
struct probe *probe_create(struct rpool *pool, const char *alive_key, char *errstr, size_t errlen);

/* Stops the heartbeat (deleting the alive key) and frees p. Accepts NULL. */
void probe_free(struct probe *p);

/* Registers the exit of order with l, then appends the entry to c without
 * sending it (it goes with the section's GET). Returns 0, or -1 when
 * nothing was appended. */
int probe_enter(struct probe *p, struct lock *l, redisContext *c, const struct item_keys *k,
                const char *order);

/* The entry again, by EVAL, after its pipelined EVALSHA answered NOSCRIPT
 * (it did not run). Returns the reply, or NULL on I/O error. */
redisReply *probe_enter_again(struct probe *p, redisContext *c, const struct item_keys *k,
                              const char *order);

#endif
