/* probe.c -- the mutual-exclusion probe and its heartbeat (see probe.h).
 *
 * Threads: sale threads call probe_enter and probe_entered (no shared
 * state but the alive key's name; the Redis work goes through their lock
 * handles); one heartbeat thread per probe owns its connection. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "alloc.h"
#include "inventory_int.h"
#include "lock.h"
#include "mclock.h"
#include "probe.h"
#include "rpool.h"
#include "script.h"

#define HEARTBEAT_MS 250
#define ALIVE_MS 1000

struct probe {
    char alive_key[INVENTORY_ITEM_MAX + 32];
    struct rpool_options opts; /* the heartbeat's own connection */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int stop;
};

static void *heartbeat_main(void *arg) {
    struct probe *p = arg;
    redisContext *c = NULL;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        pthread_mutex_unlock(&p->mu);
        char err[128];
        if (!c) c = rpool_connect(&p->opts, err, sizeof(err));
        if (c) {
            freeReplyObject(redisCommand(c, "SET %s 1 PX %d", p->alive_key, ALIVE_MS));
            if (c->err) {
                redisFree(c);
                c = NULL;
            }
        }
        pthread_mutex_lock(&p->mu);
        int64_t until = mclock_us() + HEARTBEAT_MS * 1000;
        while (!p->stop && mclock_cond_wait_until(&p->cond, &p->mu, until) != ETIMEDOUT) {}
    }
    pthread_mutex_unlock(&p->mu);
    if (c) {
        freeReplyObject(redisCommand(c, "DEL %s", p->alive_key)); /* gone: no holder left */
        redisFree(c);
    }
    return NULL;
}

struct probe *probe_create(struct rpool *pool, const char *alive_key, char *errstr, size_t errlen) {
    struct probe *p = alloc_zeroed(sizeof(*p), errstr, errlen);
    if (!p) return NULL;
    snprintf(p->alive_key, sizeof(p->alive_key), "%s", alive_key);
    p->opts = *rpool_options(pool);
    p->opts.on_connect = NULL;
    p->opts.load_scripts = 0;
    pthread_mutex_init(&p->mu, NULL);
    mclock_cond_init(&p->cond);
    if (pthread_create(&p->thread, NULL, heartbeat_main, p) != 0) {
        snprintf(errstr, errlen, "cannot start the probe's heartbeat thread");
        pthread_cond_destroy(&p->cond);
        pthread_mutex_destroy(&p->mu);
        free(p);
        return NULL;
    }
    return p;
}

void probe_free(struct probe *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* The entry's arguments: KEYS holders, violations; ARGV order, alive key. */
static void entry_args(const struct probe *p, const struct item_keys *k, const char *order,
                       const char *argv[4]) {
    argv[0] = k->holders;
    argv[1] = k->violations;
    argv[2] = order;
    argv[3] = p->alive_key;
}

int probe_enter(struct probe *p, struct lock *l, const struct item_keys *k, const char *order) {
    const char *exit_argv[] = {"HDEL", k->holders, order};
    if (lock_cleanup(l, 3, exit_argv, NULL) < 0) return -1;
    const char *argv[4];
    entry_args(p, k, order, argv);
    return lock_append_script(l, "probe-enter", 2, 4, argv, NULL);
}

int probe_entered(struct probe *p, struct lock *l, const struct item_keys *k, const char *order,
                  int i) {
    const redisReply *r = lock_reply(l, i);
    if (script_missing(r)) {
        const char *argv[4];
        entry_args(p, k, order, argv);
        r = lock_reply(l, lock_run_script(l, "probe-enter", 2, 4, argv, NULL));
    }
    if (!r) return -1;
    return r->type == REDIS_REPLY_INTEGER && r->integer > 1;
}
