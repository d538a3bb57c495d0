/* redlock.c -- the independent masters of the redlock type (see redlock.h):
 * their pools, when each may vote, their counters, and the pipelined round
 * that lock_redlock.c runs over them.
 *
 * DESIGN
 * Each master has its own pool whose connect and command timeout is
 * redlock.node-timeout-ms, so a dead or slow master costs at most that.
 *
 * The restart rule: a master that restarts empty has forgotten the locks it
 * granted, so it must not vote until every lease it could have held has run
 * out (the Redis docs' delayed restart, enforced here by the client). Every
 * new connection to a master reads its uptime (INFO server), and a master
 * up for less than the TTL gets no vote until it has been up that long,
 * whether or not this process saw it before: a process that first meets a
 * master just after its restart cannot tell it from a fresh one, and trusting
 * it would let a second owner win there. A fresh deployment therefore waits
 * one TTL before Redlock can sell.
 *
 * Threads: any sale thread and the watchdog thread; node state is guarded
 * by each node's mutex, counters are atomic. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "addr.h"
#include "alloc.h"
#include "lock_int.h"
#include "mclock.h"
#include "redlock.h"
#include "rpool.h"
#include "script.h"

struct redlock_node {
    struct redlock *rl;
    char name[64];
    struct addr addr;
    struct rpool *pool;
    pthread_mutex_t mu; /* guards voting_from_us */
    int64_t voting_from_us; /* no vote before this (restart rule) */
    atomic_llong yes, busy, error, restarted;
};

struct redlock {
    int n;
    int node_timeout_ms;
    int max_ttl_ms;
    struct redlock_node nodes[LOCK_MAX_NODES];
};

/* Reads the uptime of a master on every new connection (restart rule). */
static void on_node_connect(redisContext *c, void *arg) {
    struct redlock_node *node = arg;
    redisReply *r = redisCommand(c, "INFO server");
    if (!r || r->type != REDIS_REPLY_STRING) {
        freeReplyObject(r);
        return; /* c->err tells the pool if the connection failed */
    }
    long long uptime_s = -1;
    const char *p = strstr(r->str, "uptime_in_seconds:");
    if (p) uptime_s = strtoll(p + 18, NULL, 10);
    freeReplyObject(r);
    if (uptime_s < 0) return;
    /* Seconds are coarse: "up 0 s" may be 999 ms, so the uptime is taken
     * as its lower bound and the wait errs on the long side. */
    int64_t ttl_us = (int64_t)node->rl->max_ttl_ms * 1000;
    int64_t from = mclock_us() + ttl_us - uptime_s * 1000000;
    pthread_mutex_lock(&node->mu);
    if (from > node->voting_from_us) node->voting_from_us = from;
    pthread_mutex_unlock(&node->mu);
}

struct redlock *redlock_create(const char *spec, const char *password, int node_timeout_ms,
                               int max_ttl_ms, int pool_size, char *errstr, size_t errlen) {
    struct redlock *rl = alloc_zeroed(sizeof(*rl), errstr, errlen);
    if (!rl) return NULL;
    rl->node_timeout_ms = node_timeout_ms;
    rl->max_ttl_ms = max_ttl_ms;
    struct addr a[LOCK_MAX_NODES];
    char why[128];
    int n = addr_list_parse(spec, a, LOCK_MAX_NODES, why, sizeof(why));
    if (n < 0) {
        snprintf(errstr, errlen, "redlock.nodes: %s", why);
        free(rl);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        struct redlock_node *node = &rl->nodes[i];
        node->rl = rl;
        node->addr = a[i];
        char name[sizeof(node->name)];
        snprintf(name, sizeof(name), "%.55s:%d", a[i].host, a[i].port);
        memcpy(node->name, name, sizeof(name));
        pthread_mutex_init(&node->mu, NULL);
        struct rpool_options o = {
            .host = node->addr.host,
            .port = node->addr.port,
            .password = password,
            .timeout_ms = node_timeout_ms,
            .size = pool_size,
            .load_scripts = 1,
            .on_connect = on_node_connect,
            .on_connect_arg = node,
        };
        node->pool = rpool_create(&o);
        rl->n++;
        if (!node->pool) {
            snprintf(errstr, errlen, "out of memory");
            redlock_free(rl);
            return NULL;
        }
    }
    return rl;
}

void redlock_free(struct redlock *rl) {
    if (!rl) return;
    for (int i = 0; i < rl->n; i++) {
        rpool_free(rl->nodes[i].pool);
        pthread_mutex_destroy(&rl->nodes[i].mu);
    }
    free(rl);
}

int redlock_nodes(const struct redlock *rl) { return rl->n; }
int redlock_quorum(const struct redlock *rl) { return rl->n / 2 + 1; }
const char *redlock_node_name(const struct redlock *rl, int i) { return rl->nodes[i].name; }

void redlock_node_counts(const struct redlock *rl, int i, long long *yes, long long *busy,
                         long long *error, long long *restarted) {
    const struct redlock_node *n = &rl->nodes[i];
    *yes = atomic_load(&n->yes);
    *busy = atomic_load(&n->busy);
    *error = atomic_load(&n->error);
    *restarted = atomic_load(&n->restarted);
}

struct rpool *redlock_pool(struct redlock *rl, int i) {
    return rl->nodes[i].pool;
}

int redlock_may_vote(struct redlock *rl, int i, int64_t now) {
    struct redlock_node *node = &rl->nodes[i];
    pthread_mutex_lock(&node->mu);
    int ok = now >= node->voting_from_us;
    pthread_mutex_unlock(&node->mu);
    return ok;
}

void redlock_count(struct redlock *rl, int i, int outcome) {
    struct redlock_node *node = &rl->nodes[i];
    switch (outcome) {
    case LOCK_VOTE_YES:
        atomic_fetch_add(&node->yes, 1);
        break;
    case LOCK_VOTE_BUSY:
        atomic_fetch_add(&node->busy, 1);
        break;
    case LOCK_VOTE_ERROR:
        atomic_fetch_add(&node->error, 1);
        break;
    default:
        atomic_fetch_add(&node->restarted, 1);
        break;
    }
}

int redlock_ready(struct redlock *rl, char *why, size_t whylen) {
    char notes[512] = "";
    size_t off = 0;
    int can = 0;
    for (int i = 0; i < rl->n; i++) {
        struct redlock_node *node = &rl->nodes[i];
        redisContext *c = NULL;
        char err[128] = "";
        int up = 0;
        if (rpool_get(node->pool, rl->node_timeout_ms, &c, err, sizeof(err)) == RPOOL_OK) {
            redisReply *r = redisCommand(c, "PING");
            up = r && r->type == REDIS_REPLY_STATUS;
            if (!up) snprintf(err, sizeof(err), "%s", r ? "PING not answered PONG" : c->errstr);
            freeReplyObject(r);
            rpool_put(node->pool, c); /* dropped when it failed */
        }
        int64_t now = mclock_us();
        pthread_mutex_lock(&node->mu);
        int64_t from = node->voting_from_us;
        pthread_mutex_unlock(&node->mu);
        if (up && now >= from) {
            can++;
            continue;
        }
        int w = 0;
        if (!up)
            w = snprintf(notes + off, sizeof(notes) - off, "; %s: %s", node->name, err);
        else
            w = snprintf(notes + off, sizeof(notes) - off,
                         "; %s votes in %.1f s (up for less "
                         "than the lease)",
                         node->name, (double)(from - now) / 1e6);
        if (w > 0) off += (size_t)w < sizeof(notes) - off ? (size_t)w : sizeof(notes) - off - 1;
    }
    if (can >= redlock_quorum(rl)) return 0;
    snprintf(why, whylen, "only %d of %d Redlock masters can vote, %d needed%s", can, rl->n,
             redlock_quorum(rl), notes);
    return -1;
}

/* True when c failed because the master is gone (refused, reset, closed),
 * not merely slow (a time-out). */
static int gone(const redisContext *c, const char *errstr) {
    if (c && c->err == REDIS_ERR_EOF) return 1;
    const char *e = c ? c->errstr : errstr;
    return strstr(e, "refused") || strstr(e, "reset") || strstr(e, "Broken pipe") ||
           strstr(e, "closed");
}

void redlock_legs_open(struct redlock *rl, struct redlock_leg *legs, const int *want,
                       struct lock_link *k) {
    memset(legs, 0, sizeof(*legs) * (size_t)rl->n);
    for (int i = 0; i < rl->n; i++) {
        if (!want[i]) continue;
        char err[128];
        struct rpool *pool = rl->nodes[i].pool;
        if (k) {
            legs[i].c = k->get(k, pool);
            legs[i].down = !legs[i].c && gone(NULL, k->errstr);
        } else if (rpool_get(pool, rl->node_timeout_ms, &legs[i].c, err, sizeof(err)) ==
                   RPOOL_ERR) {
            legs[i].down = gone(NULL, err);
        }
    }
}

void redlock_legs_close(struct redlock *rl, struct redlock_leg *legs, struct lock_link *k) {
    for (int i = 0; i < rl->n; i++) {
        freeReplyObject(legs[i].reply);
        legs[i].reply = NULL;
        if (!legs[i].c) continue;
        if (k)
            k->put(k, rl->nodes[i].pool, legs[i].c);
        else
            rpool_put(rl->nodes[i].pool, legs[i].c); /* drops a failed one */
        legs[i].c = NULL;
    }
}

void redlock_round(struct redlock *rl, struct redlock_leg *legs, const char *script, int numkeys,
                   int argc, const char **argv) {
    redlock_round_then(rl, legs, script, numkeys, argc, argv, NULL, NULL);
}

void redlock_round_then(struct redlock *rl, struct redlock_leg *legs, const char *script,
                        int numkeys, int argc, const char **argv, void (*sent)(void *), void *arg) {
    for (int i = 0; i < rl->n; i++) {
        struct redlock_leg *g = &legs[i];
        if (!g->c || g->c->err || g->skip) continue;
        g->sent_us = mclock_us();
        g->sent = script_append(g->c, script, numkeys, argc, argv, NULL) == REDIS_OK;
    }
    for (int i = 0; i < rl->n; i++) {
        struct redlock_leg *g = &legs[i];
        int done = 0;
        while (g->sent && !done)
            if (redisBufferWrite(g->c, &done) != REDIS_OK) break;
    }
    if (sent) sent(arg);
    for (int i = 0; i < rl->n; i++) {
        struct redlock_leg *g = &legs[i];
        if (!g->sent || g->c->err) {
            g->down = g->down || (g->c && g->c->err && gone(g->c, NULL));
            continue;
        }
        void *v = NULL;
        if (redisGetReply(g->c, &v) != REDIS_OK) {
            g->down = gone(g->c, NULL);
            continue;
        }
        g->reply = v;
        g->got_us = mclock_us();
        if (script_missing(g->reply)) {
            char err[128];
            freeReplyObject(g->reply);
            g->reply = script_run(g->c, script, numkeys, argc, argv, NULL, err, sizeof(err));
            g->got_us = mclock_us();
        }
    }
}
