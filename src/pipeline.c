/* pipeline.c -- one-script sales (atomic) sold without a thread waiting
 * for Redis (inventory.h: inventory_sell_pipelined).
 *
 * DESIGN
 * A sale whose way is one script (sale_way.script) is one command and its
 * reply. Sold by a worker, each such sale is a thread woken, a write, a
 * wait and a read, and Redis reads one command from each connection per
 * turn of its event loop. Here the callers (the HTTP event loops) queue the
 * sale and return at once. One thread sends every sale queued since its
 * last turn in one write on one connection, and reads the replies in the
 * order it sent them: each reply finishes its sale (the way's read), and
 * the caller's callback is called in this thread.
 *
 * The connection comes from a pool of one of the pipeline's own (a
 * background thread never borrows from the sale pool), dialled as the sale
 * pool dials: AUTH, SELECT, the scripts loaded, Sentinel's master. It goes
 * back to that pool once nothing is in flight and it was taken over a
 * second ago, so a failover is followed as the sale pool follows it (under
 * a load that never leaves it idle, the first READONLY refusal from a
 * demoted master drops it), and an idle connection that turns readable
 * (its server closed it) is dropped.
 *
 * Never sent twice. A sale whose command was written and whose reply did
 * not come (the connection broke, or redis.timeout-ms passed since it was
 * sent) may have been applied: it answers backend_unavailable, as the
 * pooled way does, and the connection is dropped; the next sale dials a
 * fresh one. Only a NOSCRIPT reply (the script did not run) is sent again,
 * once, as EVAL of the script's text.
 *
 * Threads: the queue (mu) is shared with the callers, who never wait: a
 * push under mu, and a write to the eventfd only when the thread sleeps.
 * The connection and the sales in flight are the thread's own. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include "config.h"
#include "inventory_int.h"
#include "mclock.h"
#include "pipeline.h"
#include "rpool.h"
#include "script.h"
#include "strategy.h"

/* How long the thread keeps an idle connection before giving it back. */
#define KEEP_US 1000000

struct job {
    struct job *next;
    const struct sale_script *script;
    struct sale_result *r;
    inventory_sold *done;
    void *arg;
    struct item_keys k;
    struct sale_args a;
    int64_t sent_us;
    int resent; /* sent again as EVAL after NOSCRIPT */
};

struct pipeline {
    struct inventory *inv;
    struct rpool *pool; /* of one connection, the thread's */
    int timeout_ms;
    pthread_t thread;
    int wake_fd;
    atomic_int sleeping; /* the thread is in (or about to be in) poll */
    pthread_mutex_t mu;
    struct job *head, *tail; /* queued, not sent yet (mu) */
    int stop; /* (mu) */
    /* the thread's own */
    redisContext *c;
    int64_t taken_us;
    struct job *fly, *fly_tail; /* sent, oldest first */
};

/* Finishes j: the caller's callback, then j is freed. */
static void finish(struct job *j) {
    j->r->lock.attempts = 1;
    j->done(j->arg);
    free(j);
}

/* Fails every sale of the list js with backend_unavailable. */
static void fail_all(struct job *js, const char *what, const char *why) {
    while (js) {
        struct job *n = js->next;
        sale_backend(js->r, what, why);
        finish(js);
        js = n;
    }
}

/* The connection broke, or a reply is overdue: every sale in flight may
 * have been applied, so each answers backend_unavailable; the connection
 * is dropped. */
static void broken(struct pipeline *p, const char *why) {
    struct job *fly = p->fly;
    p->fly = p->fly_tail = NULL;
    rpool_drop(p->pool, p->c);
    p->c = NULL;
    fail_all(fly, fly ? fly->a.script : "", why);
}

static void fly_push(struct pipeline *p, struct job *j) {
    j->next = NULL;
    if (p->fly_tail)
        p->fly_tail->next = j;
    else
        p->fly = j;
    p->fly_tail = j;
}

/* Writes what is appended on the connection. 0, or -1 when it broke. */
static int flush(struct pipeline *p) {
    int done = 0;
    while (!done)
        if (redisBufferWrite(p->c, &done) == REDIS_ERR) {
            char why[160];
            snprintf(why, sizeof(why), "%s", p->c->errstr);
            broken(p, why);
            return -1;
        }
    return 0;
}

/* Sends the list js, queued since the last turn, in one write. */
static void send_jobs(struct pipeline *p, struct job *js) {
    char err[192];
    if (!p->c) {
        if (rpool_get(p->pool, p->timeout_ms, &p->c, err, sizeof(err)) != RPOOL_OK) {
            fail_all(js, "connection", err);
            return;
        }
        p->taken_us = mclock_us();
    }
    int64_t now = mclock_us();
    while (js) {
        struct job *j = js;
        js = js->next;
        if (script_append(p->c, j->a.script, j->a.nkeys, j->a.argc, j->a.argv, NULL) != REDIS_OK) {
            j->next = NULL; /* not sent: out of memory */
            fail_all(j, j->a.script, "out of memory");
            continue;
        }
        j->sent_us = now;
        fly_push(p, j);
    }
    if (p->fly) flush(p);
}

/* j was refused NOSCRIPT: it did not run. Sends it again, as EVAL. */
static void send_again(struct pipeline *p, struct job *j) {
    j->resent = 1;
    if (script_append_eval(p->c, j->a.script, j->a.nkeys, j->a.argc, j->a.argv, NULL) != REDIS_OK) {
        j->next = NULL;
        fail_all(j, j->a.script, "out of memory");
        return;
    }
    j->sent_us = mclock_us();
    fly_push(p, j);
    flush(p);
}

/* Reads what came on the connection, and finishes a sale per reply. */
static void read_replies(struct pipeline *p) {
    if (redisBufferRead(p->c) == REDIS_ERR) {
        char why[160];
        snprintf(why, sizeof(why), "%s", p->c->errstr);
        broken(p, why);
        return;
    }
    while (p->c) {
        void *rep = NULL;
        if (redisGetReplyFromReader(p->c, &rep) == REDIS_ERR) {
            broken(p, "a reply could not be read");
            return;
        }
        if (!rep) return;
        struct job *j = p->fly;
        if (!j) { /* a reply to nothing sent */
            freeReplyObject(rep);
            broken(p, "a reply to no command");
            return;
        }
        p->fly = j->next;
        if (!p->fly) p->fly_tail = NULL;
        if (script_missing(rep) && !j->resent) {
            freeReplyObject(rep);
            send_again(p, j);
            continue;
        }
        const redisReply *e = rep;
        int demoted = e->type == REDIS_REPLY_ERROR && strncmp(e->str, "READONLY", 8) == 0;
        j->script->read(p->inv, rep, j->r);
        freeReplyObject(rep);
        finish(j);
        if (demoted) { /* a failover: the sales behind it were refused too */
            broken(p, "the server is a replica now (READONLY)");
            return;
        }
    }
}

/* Takes the queue; sets *stop when the pipeline is stopping. */
static struct job *take(struct pipeline *p, int *stop) {
    pthread_mutex_lock(&p->mu);
    struct job *js = p->head;
    p->head = p->tail = NULL;
    *stop = p->stop;
    pthread_mutex_unlock(&p->mu);
    return js;
}

/* Waits for a wake-up, a reply, or the next deadline: the oldest sale in
 * flight's, or the idle connection's return to its pool. */
static void wait_io(struct pipeline *p) {
    int64_t now = mclock_us(), until = -1;
    if (p->fly)
        until = p->fly->sent_us + (int64_t)p->timeout_ms * 1000;
    else if (p->c)
        until = p->taken_us + KEEP_US;
    int ms = until < 0 ? -1 : until <= now ? 0 : (int)((until - now + 999) / 1000);
    atomic_store(&p->sleeping, 1);
    pthread_mutex_lock(&p->mu);
    int queued = p->head || p->stop;
    pthread_mutex_unlock(&p->mu);
    struct pollfd fds[2] = {{p->wake_fd, POLLIN, 0}, {p->c ? p->c->fd : -1, POLLIN, 0}};
    int n = queued ? 0 : poll(fds, p->c ? 2 : 1, ms);
    atomic_store(&p->sleeping, 0);
    if (n > 0 && (fds[0].revents & POLLIN)) {
        uint64_t v;
        if (read(p->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN) { /* nothing to undo */
        }
    }
    if (n > 0 && p->c && fds[1].revents) {
        if (p->fly)
            read_replies(p);
        else
            broken(p, "the server closed the connection");
    }
    now = mclock_us();
    if (p->fly && now - p->fly->sent_us > (int64_t)p->timeout_ms * 1000) {
        char why[96];
        snprintf(why, sizeof(why), "no reply in %d ms (redis.timeout-ms)", p->timeout_ms);
        broken(p, why);
    } else if (!p->fly && p->c && now - p->taken_us >= KEEP_US) {
        rpool_put(p->pool, p->c);
        p->c = NULL;
    }
}

static void *pipeline_main(void *arg) {
    struct pipeline *p = arg;
    for (;;) {
        int stop;
        struct job *js = take(p, &stop);
        if (js)
            send_jobs(p, js);
        else if (stop && !p->fly)
            break;
        wait_io(p);
    }
    if (p->c) rpool_put(p->pool, p->c);
    p->c = NULL;
    return NULL;
}

struct pipeline *pipeline_create(struct inventory *inv, char *errstr, size_t errlen) {
    struct pipeline *p = calloc(1, sizeof(*p));
    if (!p) {
        snprintf(errstr, errlen, "out of memory");
        return NULL;
    }
    struct rpool_options o = *rpool_options(inv->pool);
    o.size = 1;
    o.load_scripts = 1;
    p->inv = inv;
    p->timeout_ms = o.timeout_ms > 0 ? o.timeout_ms : 1000;
    p->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (p->wake_fd < 0 || !(p->pool = rpool_create(&o))) {
        snprintf(errstr, errlen, "the sale pipeline: %s",
                 p->wake_fd < 0 ? strerror(errno) : "out of memory");
        if (p->wake_fd >= 0) close(p->wake_fd);
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    int rc = pthread_create(&p->thread, NULL, pipeline_main, p);
    if (rc != 0) {
        snprintf(errstr, errlen, "the sale pipeline: %s", strerror(rc));
        pthread_mutex_destroy(&p->mu);
        rpool_free(p->pool);
        close(p->wake_fd);
        free(p);
        return NULL;
    }
    return p;
}

void pipeline_free(struct pipeline *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_mutex_unlock(&p->mu);
    uint64_t one = 1;
    if (write(p->wake_fd, &one, sizeof(one)) < 0) { /* the eventfd is full: it is awake */
    }
    pthread_join(p->thread, NULL);
    pthread_mutex_destroy(&p->mu);
    rpool_free(p->pool);
    close(p->wake_fd);
    free(p);
}

int pipeline_submit(struct pipeline *p, const struct strategy *s, struct sale_result *r,
                    const struct item_keys *k, inventory_sold *done, void *arg) {
    struct job *j = malloc(sizeof(*j));
    if (!j) return -1;
    *j = (struct job){.script = s->way->script, .r = r, .done = done, .arg = arg, .k = *k};
    j->script->args(p->inv, s, &j->k, r, &j->a);
    pthread_mutex_lock(&p->mu);
    if (p->stop) {
        pthread_mutex_unlock(&p->mu);
        free(j);
        return -1;
    }
    if (p->tail)
        p->tail->next = j;
    else
        p->head = j;
    p->tail = j;
    pthread_mutex_unlock(&p->mu);
    uint64_t one = 1;
    if (atomic_exchange(&p->sleeping, 0) && write(p->wake_fd, &one, sizeof(one)) < 0) {
        /* EAGAIN: the counter is full, so the thread is awake anyway */
    }
    return 0;
}
