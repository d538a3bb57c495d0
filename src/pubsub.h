/* pubsub.h -- waiting for unlock messages, Redisson's LockPubSub: ONE
 * subscriber connection per Redis server (per pool), on one thread, in a
 * struct pubsub, dispatches every message to the threads waiting on its
 * channel. No connection per waiter, no polling.
 *
 * A waiter registers with pubsub_wait_begin() (which returns once Redis has
 * confirmed the subscription, so no message published after it can be
 * missed), re-tries its lock, and sleeps in pubsub_wait() until a message
 * wakes it or its time runs out. As in Redisson, the message says how many
 * to wake: "0" (an unlock) wakes one waiter of the channel in this process,
 * any other ("1", a read-write lock's writer leaving) wakes them all.
 *
 * If the subscriber connection fails, every waiter is woken to re-try; a
 * waiter that then sleeps again first waits for the channel to be
 * subscribed anew, so an unlock published while the connection was down is
 * never slept through. Channels nobody waits on are unsubscribed and freed
 * once idle, so the set of channels stays bounded by the waiters.
 *
 * The subscriber connections are the hub's own: never a pooled one. Thread
 * safe; one mutex per struct pubsub, never held across network I/O. */
#ifndef INVENTORYD_PUBSUB_H
#define INVENTORYD_PUBSUB_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct rpool;
struct pubsub;
struct pubsub_channel;

struct pubsub_waiter {
    struct pubsub *ps;
    struct pubsub_channel *ch;
    pthread_cond_t cond;
    int signalled;             /* wake-ups not yet used */
    unsigned long epoch;       /* the channel's confirmations seen before the
                                  caller's last try */
    struct pubsub_waiter *next;
};

/* NULL when out of memory. No thread runs until the first waiter. */
struct pubsub *pubsub_create(void);

/* Stops and joins every subscriber thread, closes their connections and
 * frees everything. No waiter may be registered. Accepts NULL. */
void pubsub_free(struct pubsub *ps);

/* Registers w on channel of pool's server and waits until the subscription
 * is confirmed or deadline_us (monotonic) passes. The hub connects with the
 * pool's options on first use. Returns 0, or -1 with errstr set (then w is
 * not registered; the caller may fall back to sleeping). */
int pubsub_wait_begin(struct pubsub *ps, struct pubsub_waiter *w, struct rpool *pool,
                      const char *channel, int64_t deadline_us, char *errstr, size_t errlen);

/* False when the subscriber of pool's server has lost its connection (a
 * Redlock waiter then listens on another master). True before first use. */
int pubsub_up(struct pubsub *ps, struct rpool *pool);

/* Sleeps until a message on w's channel wakes w, or until_us. Returns 1
 * when the caller should re-try now (woken, or the channel was
 * re-subscribed after a reconnect), 0 on time-out. */
int pubsub_wait(struct pubsub_waiter *w, int64_t until_us);

/* Unregisters w. */
void pubsub_wait_end(struct pubsub_waiter *w);

/* Channels subscribed or being subscribed now, over every hub (for tests
 * of the bound). */
int pubsub_channels(struct pubsub *ps);

#endif
