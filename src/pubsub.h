/* pubsub.h -- waiting for unlock messages, Redisson's LockPubSub: ONE
 * subscriber connection per Redis server (per pool) in the process, on one
 * thread, dispatches every message to the threads waiting on its channel.
 * No connection per waiter, no polling.
 *
 * A waiter registers with pubsub_wait_begin() (which returns once Redis has
 * confirmed the subscription, so no message published after it can be
 * missed), re-tries its lock, and sleeps in pubsub_wait() until an unlock
 * message wakes it or its time runs out. One message wakes one waiter of the
 * channel in this process, as Redisson's semaphore does. If the subscriber
 * connection fails, every waiter is woken so that it re-tries rather than
 * sleeping on a message that may have been lost. */
#ifndef INVENTORYD_PUBSUB_H
#define INVENTORYD_PUBSUB_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct rpool;
struct pubsub_channel;

struct pubsub_waiter {
    struct pubsub_channel *ch;
    pthread_cond_t cond;
    int signalled;
    struct pubsub_waiter *next;
};

/* Registers w on channel and waits until the subscription is confirmed or
 * deadline_us (monotonic) passes. The subscriber connects with the pool's
 * options on first use. Returns 0, or -1 with errstr set (then w is not
 * registered; the caller may fall back to sleeping). */
int pubsub_wait_begin(struct pubsub_waiter *w, struct rpool *pool, const char *channel,
                      int64_t deadline_us, char *errstr, size_t errlen);

/* False when the subscriber of pool's server has lost its connection (a
 * Redlock waiter then listens on another master). True before first use. */
int pubsub_up(struct rpool *pool);

/* Sleeps until a message on w's channel wakes w, or until_us. Returns 1 when
 * woken, 0 on time-out. */
int pubsub_wait(struct pubsub_waiter *w, int64_t until_us);

/* Unregisters w. */
void pubsub_wait_end(struct pubsub_waiter *w);

/* Messages dispatched since start (for tests). */
long long pubsub_messages(void);

/* Stops and joins every subscriber thread, and frees their channels. */
void pubsub_shutdown(void);

#endif
