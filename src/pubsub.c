/* pubsub.c -- one subscriber connection per Redis server (see pubsub.h).
 *
 * DESIGN
 * A hub stands for one pool's server: a thread that owns `sub`, a hiredis
 * context in subscribe mode, and polls it together with a self-pipe. Waiter
 * threads never touch `sub`: to subscribe they add their channel to the
 * hub's list and write a byte to the pipe, and the thread sends SUBSCRIBE.
 * Replies are parsed by the thread: "subscribe" marks the channel confirmed
 * and wakes the threads waiting for that; "message" wakes the channel's
 * oldest waiter not yet woken ("0") or all of them (anything else without
 * a space, as Redisson's READ_UNLOCK_MESSAGE "1"), or, addressed ("<tag>
 * <text>"), hands its text to the waiter of that tag and wakes it alone,
 * looking from the oldest (grants come in about the order the waiters
 * came, so the search is short); "unsubscribe" frees a channel that
 * still has no waiter, or subscribes it again for the ones that came.
 *
 * A channel whose last waiter left is unsubscribed once it has been idle
 * for IDLE_US (at once when a hub holds more than CHANNELS_MAX), so the
 * channels of a client's items do not pile up. A waiter that arrives while
 * its channel is being unsubscribed waits for it to be subscribed again.
 *
 * Everything is guarded by ps->mu, except each hub's `sub`, which only its
 * thread uses; the mutex is never held across a connect, a write or a read.
 * Threads: waiter threads and one subscriber thread per hub. */
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "alloc.h"
#include "mclock.h"
#include "pubsub.h"
#include "rpool.h"

#define IDLE_US 2000000
#define CHANNELS_MAX 1024
#define DOWN_RETRY_MS 200

struct pubsub_hub;

struct pubsub_channel {
    struct pubsub_hub *hub;
    char *name;
    int sent; /* SUBSCRIBE written on this connection */
    int confirmed; /* and acknowledged */
    int leaving; /* UNSUBSCRIBE written, not yet acknowledged */
    unsigned long epoch; /* SUBSCRIBE confirmations so far */
    int64_t idle_since_us; /* when its last waiter left */
    struct pubsub_waiter *waiters; /* oldest first */
    struct pubsub_waiter *last; /* the newest, where a waiter joins */
    struct pubsub_channel *next;
};

struct pubsub_hub {
    struct pubsub *ps;
    const struct rpool *pool; /* the pool this hub stands for */
    struct rpool_options opts; /* its strings are the pool's own */
    pthread_cond_t confirmed_cond;
    struct pubsub_channel *channels;
    int nchannels;
    int wake_pipe[2];
    pthread_t thread;
    int up; /* its connection is up (or not tried yet) */
    struct pubsub_hub *next;
};

struct pubsub {
    pthread_mutex_t mu;
    struct pubsub_hub *hubs;
    int stopping;
};

struct pubsub *pubsub_create(void) {
    struct pubsub *ps = calloc(1, sizeof(*ps));
    if (ps) pthread_mutex_init(&ps->mu, NULL);
    return ps;
}

static void poke(struct pubsub_hub *h) {
    char b = 1;
    if (write(h->wake_pipe[1], &b, 1) < 0 && errno != EAGAIN) { /* the thread polls anyway */
    }
}

static struct pubsub_channel *find_channel(struct pubsub_hub *h, const char *name, size_t len) {
    for (struct pubsub_channel *ch = h->channels; ch; ch = ch->next)
        if (strlen(ch->name) == len && memcmp(ch->name, name, len) == 0) return ch;
    return NULL;
}

static void channel_free(struct pubsub_hub *h, struct pubsub_channel *ch) {
    for (struct pubsub_channel **p = &h->channels; *p; p = &(*p)->next) {
        if (*p == ch) {
            *p = ch->next;
            break;
        }
    }
    h->nchannels--;
    free(ch->name);
    free(ch);
}

static void wake(struct pubsub_waiter *w) {
    w->signalled++;
    pthread_cond_signal(&w->cond);
}

/* Gives one wake-up to the oldest waiter of ch that has none pending (else
 * to the oldest), or one to every waiter. Wake-ups are counted, as
 * Redisson's semaphore counts permits: an unlock that comes while a waiter
 * still holds an older wake-up (a reconnect's) is not merged into it, so
 * the waiter re-tries once more after its re-try of the older one failed.
 * Called with mu held. */
static void wake_waiters(struct pubsub_channel *ch, int all) {
    if (all) {
        for (struct pubsub_waiter *w = ch->waiters; w; w = w->next) wake(w);
        return;
    }
    struct pubsub_waiter *idle = NULL;
    for (struct pubsub_waiter *w = ch->waiters; w && !idle; w = w->next)
        if (!w->signalled) idle = w;
    if (idle || ch->waiters) wake(idle ? idle : ch->waiters);
}

/* An addressed message: its text goes to the waiter tagged tag, which
 * alone is woken; nobody when no waiter has that tag (it left). 1 when one
 * took it. Called with mu held. */
static int deliver(struct pubsub_channel *ch, const char *tag, size_t taglen, const char *text,
                   size_t len) {
    for (struct pubsub_waiter *w = ch->waiters; w; w = w->next) {
        if (w->taglen != taglen || memcmp(w->tag, tag, taglen) != 0) continue;
        size_t n = len < sizeof(w->text) - 1 ? len : sizeof(w->text) - 1;
        memcpy(w->text, text, n);
        w->text[n] = '\0';
        w->has_text = n < len ? 2 : 1;
        wake(w);
        return 1;
    }
    return 0;
}

/* The connection is gone: every channel must be subscribed anew, those
 * without waiters are dropped, and every waiter re-tries. Called with mu
 * held. */
static void reset_channels(struct pubsub_hub *h) {
    struct pubsub_channel *ch = h->channels;
    while (ch) {
        struct pubsub_channel *next = ch->next;
        ch->sent = ch->confirmed = ch->leaving = 0;
        if (!ch->waiters)
            channel_free(h, ch);
        else
            wake_waiters(ch, 1);
        ch = next;
    }
    pthread_cond_broadcast(&h->confirmed_cond);
}

static void handle(struct pubsub_hub *h, redisReply *r) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING)
        return;
    const char *kind = r->element[0]->str;
    struct pubsub_channel *ch = find_channel(h, r->element[1]->str, r->element[1]->len);
    if (!ch) return;
    if (strcmp(kind, "subscribe") == 0) {
        if (!ch->leaving) {
            ch->confirmed = 1;
            ch->epoch++;
        }
        pthread_cond_broadcast(&h->confirmed_cond);
    } else if (strcmp(kind, "unsubscribe") == 0) {
        ch->leaving = ch->sent = ch->confirmed = 0;
        if (!ch->waiters) channel_free(h, ch); /* else subscribed again for them */
    } else if (strcmp(kind, "message") == 0) {
        const redisReply *m = r->element[2];
        const char *sp = m->type == REDIS_REPLY_STRING ? memchr(m->str, ' ', m->len) : NULL;
        if (sp) {
            deliver(ch, m->str, (size_t)(sp - m->str), sp + 1, m->len - (size_t)(sp - m->str) - 1);
            return;
        }
        int one = m->type == REDIS_REPLY_STRING && m->len == 1 && m->str[0] == '0';
        wake_waiters(ch, !one);
    }
}

/* Appends SUBSCRIBE for every channel with waiters not sent on this
 * connection and UNSUBSCRIBE for idle ones to sub's output buffer (memory
 * only: the thread writes it after dropping mu). Called with mu held. */
static void queue_changes(struct pubsub_hub *h, redisContext *sub) {
    int64_t now = mclock_us();
    for (struct pubsub_channel *ch = h->channels; ch; ch = ch->next) {
        if (ch->waiters && !ch->sent) {
            redisAppendCommand(sub, "SUBSCRIBE %s", ch->name);
            ch->sent = 1;
        } else if (!ch->waiters && ch->confirmed && !ch->leaving &&
                   (now - ch->idle_since_us >= IDLE_US || h->nchannels > CHANNELS_MAX)) {
            redisAppendCommand(sub, "UNSUBSCRIBE %s", ch->name);
            ch->leaving = 1;
            ch->confirmed = 0;
        }
    }
}

/* Writes sub's output buffer. -1 on error. */
static int flush(redisContext *sub) {
    int done = 0;
    while (!done)
        if (redisBufferWrite(sub, &done) != REDIS_OK) return -1;
    return 0;
}

/* Handles every reply sub has read. Called with mu held. -1 on error. */
static int handle_replies(struct pubsub_hub *h, redisContext *sub) {
    void *reply = NULL;
    int rc;
    while ((rc = redisGetReplyFromReader(sub, &reply)) == REDIS_OK && reply) {
        handle(h, reply);
        freeReplyObject(reply);
        reply = NULL;
    }
    return rc == REDIS_OK ? 0 : -1;
}

/* Connects the hub; called with mu held, which it drops while dialing. */
static redisContext *hub_connect(struct pubsub_hub *h) {
    struct pubsub *ps = h->ps;
    pthread_mutex_unlock(&ps->mu);
    char err[128];
    redisContext *c = rpool_connect(&h->opts, err, sizeof(err));
    pthread_mutex_lock(&ps->mu);
    if (c) {
        h->up = 1;
        for (struct pubsub_channel *ch = h->channels; ch; ch = ch->next)
            ch->sent = ch->confirmed = ch->leaving = 0;
        return c;
    }
    h->up = 0;
    reset_channels(h);
    pthread_mutex_unlock(&ps->mu);
    struct pollfd p = {.fd = h->wake_pipe[0], .events = POLLIN};
    poll(&p, 1, DOWN_RETRY_MS);
    pthread_mutex_lock(&ps->mu);
    return NULL;
}

static void *subscriber_main(void *arg) {
    struct pubsub_hub *h = arg;
    struct pubsub *ps = h->ps;
    redisContext *sub = NULL;
    pthread_mutex_lock(&ps->mu);
    while (!ps->stopping) {
        if (!sub && !(sub = hub_connect(h))) continue;
        queue_changes(h, sub);
        pthread_mutex_unlock(&ps->mu);

        /* The socket is this thread's alone: written and read unlocked. */
        int failed = flush(sub) < 0;
        struct pollfd p[2] = {{.fd = sub->fd, .events = POLLIN},
                              {.fd = h->wake_pipe[0], .events = POLLIN}};
        if (!failed) poll(p, 2, 500);
        char drain[64];
        if (p[1].revents & POLLIN)
            while (read(h->wake_pipe[0], drain, sizeof(drain)) > 0) {}
        if (!failed && (p[0].revents & (POLLIN | POLLHUP | POLLERR)))
            failed = redisBufferRead(sub) != REDIS_OK;

        pthread_mutex_lock(&ps->mu);
        if (!failed) failed = handle_replies(h, sub) < 0;
        if (failed) {
            redisFree(sub);
            sub = NULL;
            h->up = 0;
            reset_channels(h);
        }
    }
    pthread_mutex_unlock(&ps->mu);
    redisFree(sub);
    return NULL;
}

/* The hub of pool, started on first use. Called with mu held. NULL with
 * errstr set when it cannot be started. */
static struct pubsub_hub *hub_for(struct pubsub *ps, struct rpool *pool, char *errstr,
                                  size_t errlen) {
    for (struct pubsub_hub *h = ps->hubs; h; h = h->next)
        if (h->pool == pool) return h;
    struct pubsub_hub *h = alloc_zeroed(sizeof(*h), errstr, errlen);
    if (!h) return NULL;
    h->ps = ps;
    h->pool = pool;
    h->opts = *rpool_options(pool);
    h->opts.on_connect = NULL; /* the subscriber is not a pooled connection */
    h->opts.load_scripts = 0;
    if (pipe2(h->wake_pipe, O_NONBLOCK | O_CLOEXEC) < 0) {
        snprintf(errstr, errlen, "pipe: %s", strerror(errno));
        free(h);
        return NULL;
    }
    mclock_cond_init(&h->confirmed_cond);
    h->up = 1; /* until its first connect says otherwise */
    if (pthread_create(&h->thread, NULL, subscriber_main, h) != 0) {
        snprintf(errstr, errlen, "cannot start a subscriber thread");
        close(h->wake_pipe[0]);
        close(h->wake_pipe[1]);
        pthread_cond_destroy(&h->confirmed_cond);
        free(h);
        return NULL;
    }
    h->next = ps->hubs;
    ps->hubs = h;
    return h;
}

int pubsub_up(struct pubsub *ps, struct rpool *pool) {
    pthread_mutex_lock(&ps->mu);
    int up = 1;
    for (struct pubsub_hub *h = ps->hubs; h; h = h->next)
        if (h->pool == pool) up = h->up;
    pthread_mutex_unlock(&ps->mu);
    return up;
}

static void unlink_waiter(struct pubsub_waiter *w) {
    struct pubsub_waiter *prev = NULL;
    for (struct pubsub_waiter **p = &w->ch->waiters; *p; prev = *p, p = &(*p)->next) {
        if (*p == w) {
            *p = w->next;
            if (w->ch->last == w) w->ch->last = prev;
            break;
        }
    }
    if (!w->ch->waiters) w->ch->idle_since_us = mclock_us();
}

/* The channel called name on h, made when missing. Called with mu held. */
static struct pubsub_channel *channel_get(struct pubsub_hub *h, const char *name) {
    struct pubsub_channel *ch = find_channel(h, name, strlen(name));
    if (ch) return ch;
    ch = calloc(1, sizeof(*ch));
    if (!ch || !(ch->name = strdup(name))) {
        free(ch);
        return NULL;
    }
    ch->hub = h;
    ch->next = h->channels;
    h->channels = ch;
    h->nchannels++;
    return ch;
}

int pubsub_wait_begin(struct pubsub *ps, struct pubsub_waiter *w, struct rpool *pool,
                      const char *channel, int64_t deadline_us, char *errstr, size_t errlen) {
    return pubsub_wait_begin_tagged(ps, w, pool, channel, "", deadline_us, errstr, errlen);
}

int pubsub_wait_begin_tagged(struct pubsub *ps, struct pubsub_waiter *w, struct rpool *pool,
                             const char *channel, const char *tag, int64_t deadline_us,
                             char *errstr, size_t errlen) {
    memset(w, 0, sizeof(*w));
    w->ps = ps;
    w->taglen = strlen(tag);
    if (w->taglen >= sizeof(w->tag)) {
        snprintf(errstr, errlen, "tag too long");
        return -1;
    }
    memcpy(w->tag, tag, w->taglen + 1);
    pthread_mutex_lock(&ps->mu);
    struct pubsub_hub *h = ps->stopping ? NULL : hub_for(ps, pool, errstr, errlen);
    struct pubsub_channel *ch = h ? channel_get(h, channel) : NULL;
    if (!ch) {
        if (ps->stopping)
            snprintf(errstr, errlen, "shutting down");
        else if (h)
            snprintf(errstr, errlen, "out of memory");
        pthread_mutex_unlock(&ps->mu);
        return -1;
    }
    mclock_cond_init(&w->cond);
    w->ch = ch;
    if (ch->last)
        ch->last->next = w;
    else
        ch->waiters = w;
    ch->last = w;
    if (!ch->sent || ch->leaving) poke(h);
    /* A failed connect broadcasts with h->up cleared: no confirmation can
     * come then, and the caller falls back on polling at once. */
    while (!ch->confirmed && !ps->stopping && h->up)
        if (mclock_cond_wait_until(&h->confirmed_cond, &ps->mu, deadline_us) == ETIMEDOUT) break;
    if (!ch->confirmed) {
        unlink_waiter(w);
        pthread_mutex_unlock(&ps->mu);
        pthread_cond_destroy(&w->cond);
        snprintf(errstr, errlen,
                 h->up ? "SUBSCRIBE %.100s not confirmed in time"
                       : "SUBSCRIBE %.100s: the subscriber cannot connect",
                 channel);
        return -1;
    }
    /* A wake-up already set (an unlock just after the confirmation) only
     * costs the caller one more try. */
    w->epoch = ch->epoch;
    pthread_mutex_unlock(&ps->mu);
    return 0;
}

int pubsub_wait(struct pubsub_waiter *w, int64_t until_us) {
    struct pubsub *ps = w->ps;
    struct pubsub_hub *h = w->ch->hub;
    pthread_mutex_lock(&ps->mu);
    int retry = 0;
    if (w->ch->confirmed && w->ch->epoch != w->epoch) {
        /* Subscribed anew since the caller's last try began (that try was
         * the reconnect's wake-up, sent before the new SUBSCRIBE): an
         * unlock between the two reached no one, so try once more. */
        retry = 1;
    } else if (!w->ch->confirmed) {
        /* Subscribed anew after a reconnect: sleeping before that could
         * miss an unlock, so wait for it, then have the caller re-try. */
        if (!w->ch->sent) poke(h);
        int64_t until = until_us;
        if (!h->up && mclock_us() + DOWN_RETRY_MS * 1000 < until)
            until = mclock_us() + DOWN_RETRY_MS * 1000;
        while (!w->ch->confirmed && !ps->stopping)
            if (mclock_cond_wait_until(&h->confirmed_cond, &ps->mu, until) == ETIMEDOUT) break;
        retry = w->ch->confirmed || until < until_us;
    } else {
        while (!w->signalled)
            if (mclock_cond_wait_until(&w->cond, &ps->mu, until_us) == ETIMEDOUT) break;
        retry = w->signalled > 0;
        if (retry) w->signalled--; /* one wake-up, one re-try */
    }
    w->epoch = w->ch->epoch; /* the caller's next try starts after these */
    pthread_mutex_unlock(&ps->mu);
    return retry;
}

void pubsub_wait_end(struct pubsub_waiter *w) {
    struct pubsub *ps = w->ps;
    pthread_mutex_lock(&ps->mu);
    unlink_waiter(w);
    /* A wake-up this waiter did not use goes to the next one, unless it
     * was addressed to this one alone. */
    if (w->signalled && !w->taglen) wake_waiters(w->ch, 0);
    pthread_mutex_unlock(&ps->mu);
    pthread_cond_destroy(&w->cond);
}

int pubsub_deliver(struct pubsub *ps, struct rpool *pool, const char *channel, const char *msg,
                   size_t len) {
    const char *sp = memchr(msg, ' ', len);
    if (!sp) return 0;
    int taken = 0;
    pthread_mutex_lock(&ps->mu);
    for (struct pubsub_hub *h = ps->hubs; h && !taken; h = h->next) {
        if (h->pool != pool) continue;
        struct pubsub_channel *ch = find_channel(h, channel, strlen(channel));
        if (ch) taken = deliver(ch, msg, (size_t)(sp - msg), sp + 1, len - (size_t)(sp - msg) - 1);
    }
    pthread_mutex_unlock(&ps->mu);
    return taken;
}

void pubsub_poke(struct pubsub_waiter *w) {
    pthread_mutex_lock(&w->ps->mu);
    wake(w);
    pthread_mutex_unlock(&w->ps->mu);
}

int pubsub_take_text(struct pubsub_waiter *w, char *buf, size_t len) {
    struct pubsub *ps = w->ps;
    pthread_mutex_lock(&ps->mu);
    int got = w->has_text;
    if (got && len) snprintf(buf, len, "%s", w->text);
    w->has_text = 0;
    pthread_mutex_unlock(&ps->mu);
    return got;
}

int pubsub_channels(struct pubsub *ps) {
    pthread_mutex_lock(&ps->mu);
    int n = 0;
    for (struct pubsub_hub *h = ps->hubs; h; h = h->next) n += h->nchannels;
    pthread_mutex_unlock(&ps->mu);
    return n;
}

void pubsub_free(struct pubsub *ps) {
    if (!ps) return;
    pthread_mutex_lock(&ps->mu);
    ps->stopping = 1;
    for (struct pubsub_hub *h = ps->hubs; h; h = h->next) poke(h);
    struct pubsub_hub *list = ps->hubs;
    ps->hubs = NULL;
    pthread_mutex_unlock(&ps->mu);
    while (list) {
        struct pubsub_hub *h = list;
        list = h->next;
        pthread_join(h->thread, NULL);
        while (h->channels) channel_free(h, h->channels);
        close(h->wake_pipe[0]);
        close(h->wake_pipe[1]);
        pthread_cond_destroy(&h->confirmed_cond);
        free(h);
    }
    pthread_mutex_destroy(&ps->mu);
    free(ps);
}
