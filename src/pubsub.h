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
 * A waiter may also register with a tag (pubsub_wait_begin_tagged): a
 * message that holds a space is addressed, "<tag> <text>", and wakes only
 * the waiter of that tag, which reads its text (pubsub_take_text); nobody
 * else is woken by it, so a grant meant for one thread of a process costs
 * the others nothing (the handoff lock's grant messages).
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

#define PUBSUB_TEXT_MAX 192

struct pubsub_waiter {
    struct pubsub *ps;
    struct pubsub_channel *ch;
    pthread_cond_t cond;
    int signalled; /* wake-ups not yet used */
    char tag[72]; /* "": woken by unaddressed messages; else by "<tag> ..." only */
    size_t taglen;
    char text[PUBSUB_TEXT_MAX]; /* an addressed message's text (after "<tag> ") */
    int has_text; /* 1: text is whole; 2: it was cut to fit */
    unsigned long epoch; /* the channel's confirmations seen before the
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

/* As pubsub_wait_begin, for a waiter woken only by messages addressed to
 * tag ("<tag> <text>", see above); tag has no space and fits in w->tag.
 * Every waiter of a channel is tagged, or none is. */
int pubsub_wait_begin_tagged(struct pubsub *ps, struct pubsub_waiter *w, struct rpool *pool,
                             const char *channel, const char *tag, int64_t deadline_us,
                             char *errstr, size_t errlen);

/* Copies the text of the message addressed to w into buf (len bytes at
 * most, NUL-terminated) and forgets it. Returns 1 when it came whole, 2
 * when it was longer than PUBSUB_TEXT_MAX - 1 bytes (cut), 0 when none
 * came. */
int pubsub_take_text(struct pubsub_waiter *w, char *buf, size_t len);

/* Hands an addressed message ("<tag> <text>", len bytes) to the waiter of
 * that tag on channel of pool's server in this process, as if the
 * subscriber had received it: for a grant that came back in a script's
 * answer instead of being published. 1 when a waiter took it, 0 when none
 * has that tag (it left). */
int pubsub_deliver(struct pubsub *ps, struct rpool *pool, const char *channel, const char *msg,
                   size_t len);

/* Wakes w as a message would, without a text: its next pubsub_wait
 * returns at once (for a caller that signals w about state of its own). */
void pubsub_poke(struct pubsub_waiter *w);

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
