/* rpool.c -- a bounded pool of hiredis connections (see rpool.h).
 *
 * idle[] is a stack of connected contexts not in use; `live` counts every
 * context alive, idle or handed out. Both are guarded by `lock`; connecting
 * happens outside it so a slow connect never blocks other threads. */
#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include "mclock.h"
#include "rpool.h"

struct rpool {
    struct rpool_options opt;
    char host[256];
    char password[256];
    pthread_mutex_t lock;
    pthread_cond_t freed;       /* a slot or an idle context became available */
    redisContext **idle;
    int nidle;
    int live;
};

struct rpool *rpool_create(const struct rpool_options *opt) {
    struct rpool *p = calloc(1, sizeof(*p));
    if (!p) return NULL;
    p->opt = *opt;
    snprintf(p->host, sizeof(p->host), "%s", opt->host ? opt->host : "127.0.0.1");
    snprintf(p->password, sizeof(p->password), "%s", opt->password ? opt->password : "");
    p->opt.host = p->host;
    p->opt.password = p->password;
    if (p->opt.size < 1) p->opt.size = 1;
    p->idle = calloc((size_t)p->opt.size, sizeof(*p->idle));
    if (!p->idle) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->freed, &ca);
    pthread_condattr_destroy(&ca);
    return p;
}

const struct rpool_options *rpool_options(const struct rpool *p) {
    return &p->opt;
}

void rpool_free(struct rpool *p) {
    if (!p) return;
    for (int i = 0; i < p->nidle; i++) redisFree(p->idle[i]);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->freed);
    free(p->idle);
    free(p);
}

/* Runs one setup command; on failure frees c, sets errstr, returns -1. */
static int rpool_setup(redisContext *c, const char *what, char *errstr, size_t errlen,
                       const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    if (!r || r->type == REDIS_REPLY_ERROR) {
        /* The password itself is never part of the message. */
        snprintf(errstr, errlen, "%s failed: %s", what, r ? r->str : c->errstr);
        freeReplyObject(r);
        return -1;
    }
    freeReplyObject(r);
    return 0;
}

redisContext *rpool_connect(const struct rpool_options *opt, char *errstr, size_t errlen) {
    struct timeval tv = {opt->timeout_ms / 1000, (opt->timeout_ms % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout(opt->host, opt->port, tv);
    if (!c) {
        snprintf(errstr, errlen, "connect %s:%d: out of memory", opt->host, opt->port);
        return NULL;
    }
    if (c->err) {
        snprintf(errstr, errlen, "connect %s:%d: %s", opt->host, opt->port, c->errstr);
        redisFree(c);
        return NULL;
    }
    if (redisSetTimeout(c, tv) != REDIS_OK) {
        snprintf(errstr, errlen, "connect %s:%d: cannot set timeout", opt->host, opt->port);
        redisFree(c);
        return NULL;
    }
    if ((opt->password && opt->password[0] &&
         rpool_setup(c, "AUTH", errstr, errlen, "AUTH %s", opt->password) < 0) ||
        (opt->database != 0 &&
         rpool_setup(c, "SELECT", errstr, errlen, "SELECT %d", opt->database) < 0)) {
        redisFree(c);
        return NULL;
    }
    if (opt->on_connect) {
        opt->on_connect(c, opt->on_connect_arg);
        if (c->err) {
            snprintf(errstr, errlen, "connect %s:%d: %s", opt->host, opt->port, c->errstr);
            redisFree(c);
            return NULL;
        }
    }
    return c;
}

/* True when an idle connection has something to read: the server closed it
 * (EOF) or sent something unasked. Either way it must not be reused. */
static int rpool_stale(redisContext *c) {
    struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
    return c->err || poll(&pfd, 1, 0) != 0;
}

redisContext *rpool_get(struct rpool *p, int wait_ms, char *errstr, size_t errlen) {
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += wait_ms / 1000;
    deadline.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }

    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (p->nidle > 0) {
            redisContext *c = p->idle[--p->nidle];
            if (!rpool_stale(c)) {
                pthread_mutex_unlock(&p->lock);
                return c;
            }
            p->live--;
            redisFree(c);
        }
        if (p->live < p->opt.size) break;
        if (pthread_cond_timedwait(&p->freed, &p->lock, &deadline) == ETIMEDOUT &&
            p->nidle == 0 && p->live >= p->opt.size) {
            pthread_mutex_unlock(&p->lock);
            snprintf(errstr, errlen, "all %d Redis connections busy for %d ms",
                     p->opt.size, wait_ms);
            return NULL;
        }
    }
    p->live++;   /* reserve the slot, then connect without the lock */
    pthread_mutex_unlock(&p->lock);

    redisContext *c = rpool_connect(&p->opt, errstr, errlen);
    if (!c) {
        pthread_mutex_lock(&p->lock);
        p->live--;
        pthread_cond_signal(&p->freed);
        pthread_mutex_unlock(&p->lock);
    }
    return c;
}

void rpool_put(struct rpool *p, redisContext *c) {
    if (!c) return;
    if (c->err) {
        rpool_drop(p, c);
        return;
    }
    pthread_mutex_lock(&p->lock);
    p->idle[p->nidle++] = c;
    pthread_cond_signal(&p->freed);
    pthread_mutex_unlock(&p->lock);
}

void rpool_drop(struct rpool *p, redisContext *c) {
    if (!c) return;
    redisFree(c);
    pthread_mutex_lock(&p->lock);
    p->live--;
    pthread_cond_signal(&p->freed);
    pthread_mutex_unlock(&p->lock);
}
