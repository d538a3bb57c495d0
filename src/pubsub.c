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
 * Everything below is guarded by `mu`, except `sub`, which only the thread
 * uses. Threads: waiter threads and the subscriber thread. */
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

struct pubsub_channel {
    char *name;
    int sent;                         /* SUBSCRIBE written on this connection */
    int confirmed;                    /* and acknowledged */
    struct pubsub_waiter *waiters;    /* oldest first */
    struct pubsub_channel *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t confirmed_cond;
static struct pubsub_channel *channels;
static int wake_pipe[2] = {-1, -1};
static pthread_t thread;
static int running, stopping;
static struct rpool_options opts;
static char opt_host[256], opt_password[256];
static atomic_llong messages_total;

static struct timespec to_timespec(int64_t us) {
    return (struct timespec){us / 1000000, (long)(us % 1000000) * 1000};
}

static void poke(void) {
    char b = 1;
    if (write(wake_pipe[1], &b, 1) < 0 && errno != EAGAIN) { /* the thread polls anyway */ }
}

static struct pubsub_channel *find_channel(const char *name, size_t len) {
    for (struct pubsub_channel *ch = channels; ch; ch = ch->next)
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
static void wake_all_and_reset(void) {
    for (struct pubsub_channel *ch = channels; ch; ch = ch->next) {
        ch->sent = ch->confirmed = 0;
        for (struct pubsub_waiter *w = ch->waiters; w; w = w->next) {
            w->signalled = 1;
            pthread_cond_signal(&w->cond);
        }
    }
    pthread_cond_broadcast(&confirmed_cond);
}

static void handle(redisReply *r) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING)
        return;
    const char *kind = r->element[0]->str;
    struct pubsub_channel *ch = find_channel(r->element[1]->str, r->element[1]->len);
    if (!ch) return;
    if (strcmp(kind, "subscribe") == 0) {
        ch->confirmed = 1;
        pthread_cond_broadcast(&confirmed_cond);
    } else if (strcmp(kind, "message") == 0) {
        atomic_fetch_add(&messages_total, 1);
        wake_one(ch);
    }
}

/* Sends SUBSCRIBE for every channel with waiters not sent on this
 * connection. Called with mu held. Returns -1 on a write error. */
static int send_subscribes(redisContext *sub) {
    int any = 0;
    for (struct pubsub_channel *ch = channels; ch; ch = ch->next) {
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
    (void)arg;
    redisContext *sub = NULL;
    pthread_mutex_lock(&mu);
    while (!stopping) {
        if (!sub) {
            pthread_mutex_unlock(&mu);
            char err[128];
            redisContext *c = rpool_connect(&opts, err, sizeof(err));
            pthread_mutex_lock(&mu);
            if (!c) {
                wake_all_and_reset();
                pthread_mutex_unlock(&mu);
                struct pollfd p = {.fd = wake_pipe[0], .events = POLLIN};
                poll(&p, 1, 200);
                pthread_mutex_lock(&mu);
                continue;
            }
            sub = c;
            for (struct pubsub_channel *ch = channels; ch; ch = ch->next) ch->sent = ch->confirmed = 0;
        }
        int failed = send_subscribes(sub) < 0;
        pthread_mutex_unlock(&mu);

        struct pollfd p[2] = {{.fd = sub->fd, .events = POLLIN}, {.fd = wake_pipe[0], .events = POLLIN}};
        if (!failed) poll(p, 2, 1000);
        char drain[64];
        if (p[1].revents & POLLIN)
            while (read(wake_pipe[0], drain, sizeof(drain)) > 0) {}

        pthread_mutex_lock(&mu);
        if (!failed && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            if (redisBufferRead(sub) != REDIS_OK) {
                failed = 1;
            } else {
                void *reply = NULL;
                int rc;
                while ((rc = redisGetReplyFromReader(sub, &reply)) == REDIS_OK && reply) {
                    handle(reply);
                    freeReplyObject(reply);
                    reply = NULL;
                }
                if (rc != REDIS_OK) failed = 1;
            }
        }
        if (failed) {
            redisFree(sub);
            sub = NULL;
            wake_all_and_reset();
        }
    }
    pthread_mutex_unlock(&mu);
    redisFree(sub);
    return NULL;
}

/* Starts the subscriber thread on first use. Called with mu held. */
static int ensure_running(struct rpool *pool, char *errstr, size_t errlen) {
    if (running) return 0;
    const struct rpool_options *o = rpool_options(pool);
    opts = *o;
    snprintf(opt_host, sizeof(opt_host), "%s", o->host);
    snprintf(opt_password, sizeof(opt_password), "%s", o->password ? o->password : "");
    opts.host = opt_host;
    opts.password = opt_password;
    if (pipe2(wake_pipe, O_NONBLOCK | O_CLOEXEC) < 0) {
        snprintf(errstr, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&confirmed_cond, &ca);
    pthread_condattr_destroy(&ca);
    stopping = 0;
    if (pthread_create(&thread, NULL, subscriber_main, NULL) != 0) {
        snprintf(errstr, errlen, "cannot start the subscriber thread");
        close(wake_pipe[0]);
        close(wake_pipe[1]);
        pthread_cond_destroy(&confirmed_cond);
        return -1;
    }
    running = 1;
    return 0;
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
    if (ensure_running(pool, errstr, errlen) < 0) {
        pthread_mutex_unlock(&mu);
        return -1;
    }
    struct pubsub_channel *ch = find_channel(channel, strlen(channel));
    if (!ch) {
        ch = calloc(1, sizeof(*ch));
        if (!ch || !(ch->name = strdup(channel))) {
            free(ch);
            pthread_mutex_unlock(&mu);
            snprintf(errstr, errlen, "out of memory");
            return -1;
        }
        ch->next = channels;
        channels = ch;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cond, &ca);
    pthread_condattr_destroy(&ca);
    w->ch = ch;
    struct pubsub_waiter **tail = &ch->waiters;
    while (*tail) tail = &(*tail)->next;
    *tail = w;
    if (!ch->sent) poke();
    struct timespec ts = to_timespec(deadline_us);
    while (!ch->confirmed && !stopping)
        if (pthread_cond_timedwait(&confirmed_cond, &mu, &ts) == ETIMEDOUT) break;
    if (!ch->confirmed) {
        unlink_waiter(w);
        pthread_mutex_unlock(&mu);
        pthread_cond_destroy(&w->cond);
        snprintf(errstr, errlen, "SUBSCRIBE %.100s not confirmed in time", channel);
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
    if (!running) {
        pthread_mutex_unlock(&mu);
        return;
    }
    stopping = 1;
    poke();
    pthread_mutex_unlock(&mu);
    pthread_join(thread, NULL);
    pthread_mutex_lock(&mu);
    while (channels) {
        struct pubsub_channel *next = channels->next;
        free(channels->name);
        free(channels);
        channels = next;
    }
    close(wake_pipe[0]);
    close(wake_pipe[1]);
    wake_pipe[0] = wake_pipe[1] = -1;
    pthread_cond_destroy(&confirmed_cond);
    running = 0;
    pthread_mutex_unlock(&mu);
}
