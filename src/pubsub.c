/* pubsub.c -- one subscriber connection per process (see pubsub.h).
 *
 * DESIGN
 * The subscriber thread owns `sub`, a hiredis context in subscribe mode, and
 * polls it together with a self-pipe. Waiter threads never touch `sub`: to
 * subscribe to a new channel they add it to `channels` and write a byte to
 * the pipe; the thread sends the SUBSCRIBE. Replies are parsed by the thread:
 * a "subscribe" confirmation marks the channel confirmed and wakes the
 * threads waiting for it in pubsub_wait_begin(); a "message" sets
 * `signalled` on the oldest waiter of that channel not yet signalled.
 *
 * Channels stay subscribed once used: the service uses a handful of lock
 * names, and an UNSUBSCRIBE racing a new waiter would cost a lost wake-up.
 *
 * There is one hub (a subscriber thread and its connection) per pool: one
 * for the service's Redis, and one per Redlock master. Hubs are made on
 * first use and live until pubsub_shutdown().
 *
 * Everything is guarded by `mu`, except each hub's `sub`, which only its
 * thread uses. Threads: waiter threads and one subscriber thread per hub. */
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mclock.h"
#include "pubsub.h"
#include "rpool.h"

struct pubsub_hub;

struct pubsub_channel {
    struct pubsub_hub *hub;
    char *name;
    int sent;                         /* SUBSCRIBE written on this connection */
    int confirmed;                    /* and acknowledged */
    struct pubsub_waiter *waiters;    /* oldest first */
    struct pubsub_channel *next;
};

struct pubsub_hub {
    const struct rpool *pool;         /* the pool this hub stands for */
    struct rpool_options opts;
    char host[256], password[256];
    pthread_cond_t confirmed_cond;
    struct pubsub_channel *channels;
    int wake_pipe[2];
    pthread_t thread;
    int up;                           /* its connection is subscribed-capable */
    struct pubsub_hub *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct pubsub_hub *hubs;
static int stopping;
static atomic_llong messages_total;

static struct timespec to_timespec(int64_t us) {
    return (struct timespec){us / 1000000, (long)(us % 1000000) * 1000};
}

static void poke(struct pubsub_hub *h) {
    char b = 1;
    if (write(h->wake_pipe[1], &b, 1) < 0 && errno != EAGAIN) { /* the thread polls anyway */ }
}

static struct pubsub_channel *find_channel(struct pubsub_hub *h, const char *name, size_t len) {
    for (struct pubsub_channel *ch = h->channels; ch; ch = ch->next)
        if (strlen(ch->name) == len && memcmp(ch->name, name, len) == 0) return ch;
    return NULL;
}

/* Signals the oldest waiter of ch not signalled yet. Called with mu held. */
static void wake_one(struct pubsub_channel *ch) {
    for (struct pubsub_waiter *w = ch->waiters; w; w = w->next) {
        if (!w->signalled) {
            w->signalled = 1;
            pthread_cond_signal(&w->cond);
            return;
        }
    }
}

/* Connection lost: every waiter re-tries. Called with mu held. */
static void wake_all_and_reset(struct pubsub_hub *h) {
    for (struct pubsub_channel *ch = h->channels; ch; ch = ch->next) {
        ch->sent = ch->confirmed = 0;
        for (struct pubsub_waiter *w = ch->waiters; w; w = w->next) {
            w->signalled = 1;
            pthread_cond_signal(&w->cond);
        }
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
        ch->confirmed = 1;
        pthread_cond_broadcast(&h->confirmed_cond);
    } else if (strcmp(kind, "message") == 0) {
        atomic_fetch_add(&messages_total, 1);
        wake_one(ch);
    }
}

/* Sends SUBSCRIBE for every channel with waiters not sent on this
 * connection. Called with mu held. Returns -1 on a write error. */
static int send_subscribes(struct pubsub_hub *h, redisContext *sub) {
    int any = 0;
    for (struct pubsub_channel *ch = h->channels; ch; ch = ch->next) {
        if (!ch->sent && ch->waiters) {
            redisAppendCommand(sub, "SUBSCRIBE %s", ch->name);
            ch->sent = 1;
            any = 1;
        }
    }
    int done = !any;
    while (!done)
        if (redisBufferWrite(sub, &done) != REDIS_OK) return -1;
    return 0;
}

static void *subscriber_main(void *arg) {
    struct pubsub_hub *h = arg;
    redisContext *sub = NULL;
    pthread_mutex_lock(&mu);
    while (!stopping) {
        if (!sub) {
            pthread_mutex_unlock(&mu);
            char err[128];
            redisContext *c = rpool_connect(&h->opts, err, sizeof(err));
            pthread_mutex_lock(&mu);
            if (!c) {
                h->up = 0;
                wake_all_and_reset(h);
                pthread_mutex_unlock(&mu);
                struct pollfd p = {.fd = h->wake_pipe[0], .events = POLLIN};
                poll(&p, 1, 200);
                pthread_mutex_lock(&mu);
                continue;
            }
            sub = c;
            h->up = 1;
            for (struct pubsub_channel *ch = h->channels; ch; ch = ch->next) ch->sent = ch->confirmed = 0;
        }
        int failed = send_subscribes(h, sub) < 0;
        pthread_mutex_unlock(&mu);

        struct pollfd p[2] = {{.fd = sub->fd, .events = POLLIN}, {.fd = h->wake_pipe[0], .events = POLLIN}};
        if (!failed) poll(p, 2, 1000);
        char drain[64];
        if (p[1].revents & POLLIN)
            while (read(h->wake_pipe[0], drain, sizeof(drain)) > 0) {}

        pthread_mutex_lock(&mu);
        if (!failed && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            if (redisBufferRead(sub) != REDIS_OK) {
                failed = 1;
            } else {
                void *reply = NULL;
                int rc;
                while ((rc = redisGetReplyFromReader(sub, &reply)) == REDIS_OK && reply) {
                    handle(h, reply);
                    freeReplyObject(reply);
                    reply = NULL;
                }
                if (rc != REDIS_OK) failed = 1;
            }
        }
        if (failed) {
            redisFree(sub);
            sub = NULL;
            h->up = 0;
            wake_all_and_reset(h);
        }
    }
    pthread_mutex_unlock(&mu);
    redisFree(sub);
    return NULL;
}

/* The hub of pool, started on first use. Called with mu held. NULL with
 * errstr set when it cannot be started. */
static struct pubsub_hub *hub_for(struct rpool *pool, char *errstr, size_t errlen) {
    for (struct pubsub_hub *h = hubs; h; h = h->next)
        if (h->pool == pool) return h;
    struct pubsub_hub *h = calloc(1, sizeof(*h));
    if (!h) {
        snprintf(errstr, errlen, "out of memory");
        return NULL;
    }
    const struct rpool_options *o = rpool_options(pool);
    h->pool = pool;
    h->opts = *o;
    h->opts.on_connect = NULL;   /* the subscriber is not a pooled connection */
    snprintf(h->host, sizeof(h->host), "%s", o->host);
    snprintf(h->password, sizeof(h->password), "%s", o->password ? o->password : "");
    h->opts.host = h->host;
    h->opts.password = h->password;
    if (pipe2(h->wake_pipe, O_NONBLOCK | O_CLOEXEC) < 0) {
        snprintf(errstr, errlen, "pipe: %s", strerror(errno));
        free(h);
        return NULL;
    }
    mclock_cond_init(&h->confirmed_cond);
    h->up = 1;   /* until its first connect says otherwise */
    if (pthread_create(&h->thread, NULL, subscriber_main, h) != 0) {
        snprintf(errstr, errlen, "cannot start a subscriber thread");
        close(h->wake_pipe[0]);
        close(h->wake_pipe[1]);
        pthread_cond_destroy(&h->confirmed_cond);
        free(h);
        return NULL;
    }
    h->next = hubs;
    hubs = h;
    return h;
}

int pubsub_up(struct rpool *pool) {
    pthread_mutex_lock(&mu);
    int up = 1;
    for (struct pubsub_hub *h = hubs; h; h = h->next)
        if (h->pool == pool) up = h->up;
    pthread_mutex_unlock(&mu);
    return up;
}

static void unlink_waiter(struct pubsub_waiter *w) {
    for (struct pubsub_waiter **p = &w->ch->waiters; *p; p = &(*p)->next) {
        if (*p == w) {
            *p = w->next;
            break;
        }
    }
}

int pubsub_wait_begin(struct pubsub_waiter *w, struct rpool *pool, const char *channel,
                      int64_t deadline_us, char *errstr, size_t errlen) {
    memset(w, 0, sizeof(*w));
    pthread_mutex_lock(&mu);
    struct pubsub_hub *h = stopping ? NULL : hub_for(pool, errstr, errlen);
    if (!h) {
        if (stopping) snprintf(errstr, errlen, "shutting down");
        pthread_mutex_unlock(&mu);
        return -1;
    }
    struct pubsub_channel *ch = find_channel(h, channel, strlen(channel));
    if (!ch) {
        ch = calloc(1, sizeof(*ch));
        if (!ch || !(ch->name = strdup(channel))) {
            free(ch);
            pthread_mutex_unlock(&mu);
            snprintf(errstr, errlen, "out of memory");
            return -1;
        }
        ch->hub = h;
        ch->next = h->channels;
        h->channels = ch;
    }
    mclock_cond_init(&w->cond);
    w->ch = ch;
    struct pubsub_waiter **tail = &ch->waiters;
    while (*tail) tail = &(*tail)->next;
    *tail = w;
    if (!ch->sent) poke(h);
    struct timespec ts = to_timespec(deadline_us);
    /* A failed connect broadcasts with h->up cleared: no confirmation can
     * come then, and the caller falls back on polling at once. */
    while (!ch->confirmed && !stopping && h->up)
        if (pthread_cond_timedwait(&h->confirmed_cond, &mu, &ts) == ETIMEDOUT) break;
    if (!ch->confirmed) {
        unlink_waiter(w);
        pthread_mutex_unlock(&mu);
        pthread_cond_destroy(&w->cond);
        snprintf(errstr, errlen, h->up ? "SUBSCRIBE %.100s not confirmed in time"
                                       : "SUBSCRIBE %.100s: the subscriber cannot connect", channel);
        return -1;
    }
    /* A wake-up already set (a reconnect, or an unlock just after the
     * confirmation) only costs the caller one more try. */
    pthread_mutex_unlock(&mu);
    return 0;
}

int pubsub_wait(struct pubsub_waiter *w, int64_t until_us) {
    struct timespec ts = to_timespec(until_us);
    pthread_mutex_lock(&mu);
    while (!w->signalled)
        if (pthread_cond_timedwait(&w->cond, &mu, &ts) == ETIMEDOUT) break;
    int woken = w->signalled;
    w->signalled = 0;
    pthread_mutex_unlock(&mu);
    return woken;
}

void pubsub_wait_end(struct pubsub_waiter *w) {
    pthread_mutex_lock(&mu);
    unlink_waiter(w);
    /* A wake-up this waiter did not use goes to the next one. */
    if (w->signalled) wake_one(w->ch);
    pthread_mutex_unlock(&mu);
    pthread_cond_destroy(&w->cond);
}

long long pubsub_messages(void) {
    return atomic_load(&messages_total);
}

void pubsub_shutdown(void) {
    pthread_mutex_lock(&mu);
    stopping = 1;
    for (struct pubsub_hub *h = hubs; h; h = h->next) poke(h);
    struct pubsub_hub *list = hubs;
    hubs = NULL;
    pthread_mutex_unlock(&mu);
    while (list) {
        struct pubsub_hub *h = list;
        list = h->next;
        pthread_join(h->thread, NULL);
        while (h->channels) {
            struct pubsub_channel *next = h->channels->next;
            free(h->channels->name);
            free(h->channels);
            h->channels = next;
        }
        close(h->wake_pipe[0]);
        close(h->wake_pipe[1]);
        pthread_cond_destroy(&h->confirmed_cond);
        free(h);
    }
    pthread_mutex_lock(&mu);
    stopping = 0;
    pthread_mutex_unlock(&mu);
}
