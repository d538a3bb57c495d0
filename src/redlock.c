/* redlock.c -- Redlock over independent masters, with RedissonMultiLock's
 * semantics: a reentrant hash lock (Redisson's scripts) on every master, held
 * when a quorum of the configured masters granted it within its validity.
 *
 * DESIGN
 * A round sends one EVALSHA to every master that may vote, pipelined: the
 * command is appended on every context, every context is flushed, and only
 * then are the replies read, so a round costs about one round trip, not N.
 * Each master has its own pool whose connect and command timeout is
 * redlock.node-timeout-ms, so a dead or slow master costs at most that.
 *
 *   votes    >= N/2+1 of the N configured (not of the N reachable)
 *   validity  = TTL - elapsed - (0.01 * TTL + 2 ms), on the monotonic clock
 *
 * A round that falls short releases on every master that granted it or
 * whose answer was lost, then waits for an unlock message on a master that
 * refused (where the holder holds the lock and publishes on release), at
 * most the holder's remaining lease. After a round whose votes were split
 * between racers, a random pause from a per-thread generator seeded per
 * process keeps them from colliding again in lockstep. No partial win is
 * kept between rounds. Too few masters reachable for any quorum is an
 * outage: it fails at once, not after lock.wait-ms.
 *
 * Restart awareness: every new connection to a master reads INFO server. A
 * master whose run_id changed since this process last saw it has restarted
 * and forgotten the locks it held: it is withheld from voting until it has
 * been up for the longest lease this process uses (the Redis docs' delayed
 * restart, enforced by the client). A master that restarted before this
 * process first saw it cannot be told from a fresh one and is trusted;
 * withholding every young master would block each new deployment for a TTL.
 *
 * Threads: any sale thread and the watchdog thread; node state is guarded
 * by each node's mutex, counters are atomic. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uuid/uuid.h>
#include "lock_hash.h"
#include "mclock.h"
#include "pubsub.h"
#include "redlock.h"
#include "rpool.h"
#include "script.h"
#include "watchdog.h"

struct redlock_node {
    struct redlock *rl;
    char name[64];
    char host[56];
    int port;
    struct rpool *pool;
    pthread_mutex_t mu;            /* guards run_id and voting_from_us */
    char run_id[48];
    int64_t voting_from_us;        /* no vote before this (restart rule) */
    atomic_llong yes, busy, error, restarted;
};

struct redlock {
    int n;
    int node_timeout_ms;
    int max_ttl_ms;
    struct redlock_node nodes[LOCK_MAX_NODES];
};

/* ---- set-up ------------------------------------------------------------- */

/* Reads run_id and uptime of a master on every new connection. */
static void on_node_connect(redisContext *c, void *arg) {
    struct redlock_node *node = arg;
    redisReply *r = redisCommand(c, "INFO server");
    if (!r || r->type != REDIS_REPLY_STRING) {
        freeReplyObject(r);
        return;   /* c->err tells the pool if the connection failed */
    }
    char run_id[48] = "";
    long long uptime_s = -1;
    const char *p = strstr(r->str, "run_id:");
    if (p) sscanf(p + 7, "%47[0-9a-f]", run_id);
    p = strstr(r->str, "uptime_in_seconds:");
    if (p) uptime_s = strtoll(p + 18, NULL, 10);
    freeReplyObject(r);

    int64_t now = mclock_us(), ttl_us = (int64_t)node->rl->max_ttl_ms * 1000;
    pthread_mutex_lock(&node->mu);
    int64_t from = node->voting_from_us;
    if (node->run_id[0] && run_id[0] && strcmp(node->run_id, run_id) != 0) {
        /* Seconds are coarse: up "0 s" may be 999 ms, so the uptime is
         * taken as its lower bound and the wait errs on the long side. */
        int64_t f = now + ttl_us - (uptime_s > 0 ? uptime_s * 1000000 : 0);
        if (f > from) from = f;
    }
    if (run_id[0]) snprintf(node->run_id, sizeof(node->run_id), "%s", run_id);
    node->voting_from_us = from;
    pthread_mutex_unlock(&node->mu);
}

struct redlock *redlock_create(const char *spec, const char *password, int node_timeout_ms,
                               int max_ttl_ms, int pool_size, char *errstr, size_t errlen) {
    struct redlock *rl = calloc(1, sizeof(*rl));
    if (!rl) {
        snprintf(errstr, errlen, "out of memory");
        return NULL;
    }
    rl->node_timeout_ms = node_timeout_ms;
    rl->max_ttl_ms = max_ttl_ms;
    const char *p = spec;
    while (*p) {
        size_t len = strcspn(p, ",");
        char item[96];
        snprintf(item, sizeof(item), "%.*s", (int)(len < 95 ? len : 95), p);
        char *colon = strrchr(item, ':');
        char *end = NULL;
        long port = colon ? strtol(colon + 1, &end, 10) : 0;
        if (!colon || colon == item || !end || *end || port < 1 || port > 65535 ||
            (size_t)(colon - item) >= sizeof(rl->nodes[0].host)) {
            snprintf(errstr, errlen, "redlock.nodes: '%.60s' is not host:port", item);
            redlock_free(rl);
            return NULL;
        }
        if (rl->n == LOCK_MAX_NODES) {
            snprintf(errstr, errlen, "redlock.nodes: more than %d masters", LOCK_MAX_NODES);
            redlock_free(rl);
            return NULL;
        }
        struct redlock_node *node = &rl->nodes[rl->n];
        node->rl = rl;
        size_t hostlen = (size_t)(colon - item);   /* checked above to fit */
        memcpy(node->host, item, hostlen);
        node->host[hostlen] = '\0';
        node->port = (int)port;
        char name[sizeof(node->name)];
        snprintf(name, sizeof(name), "%.55s:%d", node->host, node->port);
        memcpy(node->name, name, sizeof(name));
        pthread_mutex_init(&node->mu, NULL);
        struct rpool_options o = {
            .host = node->host, .port = node->port, .password = password,
            .timeout_ms = node_timeout_ms, .size = pool_size,
            .on_connect = on_node_connect, .on_connect_arg = node,
        };
        node->pool = rpool_create(&o);
        rl->n++;
        if (!node->pool) {
            snprintf(errstr, errlen, "out of memory");
            redlock_free(rl);
            return NULL;
        }
        p += len;
        if (*p == ',') p++;
    }
    if (rl->n == 0) {
        snprintf(errstr, errlen, "redlock.nodes: no master given");
        redlock_free(rl);
        return NULL;
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

static int may_vote(struct redlock_node *node, int64_t now) {
    pthread_mutex_lock(&node->mu);
    int ok = now >= node->voting_from_us;
    pthread_mutex_unlock(&node->mu);
    return ok;
}

/* ---- one pipelined round -------------------------------------------------- */

/* A round's per-master state. */
struct leg {
    redisContext *c;
    int sent;
    redisReply *reply;
    int64_t sent_us, got_us;
};

/* Sends script with argv to every master in legs[] that has a context: all
 * appended, all flushed, then all replies read. A master that fails is left
 * with reply NULL and its context marked failed. */
static void round_trip(struct redlock *rl, struct leg *legs, const char *script,
                       int numkeys, int argc, const char **argv) {
    char sha[41] = "", err[128];
    for (int i = 0; i < rl->n && !sha[0]; i++)
        if (legs[i].c && script_sha(legs[i].c, script, sha, err, sizeof(err)) < 0 && legs[i].c->err)
            continue;   /* that master failed; another may load it */
    if (!sha[0]) return;

    char nk[8];
    snprintf(nk, sizeof(nk), "%d", numkeys);
    const char *av[3 + argc];
    av[0] = "EVALSHA";
    av[1] = sha;
    av[2] = nk;
    for (int j = 0; j < argc; j++) av[3 + j] = argv[j];

    for (int i = 0; i < rl->n; i++) {
        struct leg *g = &legs[i];
        if (!g->c || g->c->err) continue;
        g->sent_us = mclock_us();
        if (redisAppendCommandArgv(g->c, 3 + argc, av, NULL) == REDIS_OK) g->sent = 1;
    }
    for (int i = 0; i < rl->n; i++) {
        struct leg *g = &legs[i];
        int done = 0;
        while (g->sent && !done)
            if (redisBufferWrite(g->c, &done) != REDIS_OK) break;
    }
    for (int i = 0; i < rl->n; i++) {
        struct leg *g = &legs[i];
        if (!g->sent || g->c->err) continue;
        void *v = NULL;
        if (redisGetReply(g->c, &v) != REDIS_OK) continue;
        g->reply = v;
        g->got_us = mclock_us();
        /* NOSCRIPT: it did not run there, so running it there now is safe. */
        if (g->reply->type == REDIS_REPLY_ERROR && strncmp(g->reply->str, "NOSCRIPT", 8) == 0) {
            freeReplyObject(g->reply);
            g->reply = script_run(g->c, script, numkeys, argc, argv, NULL, err, sizeof(err));
            g->got_us = mclock_us();
        }
    }
}

static void legs_open(struct redlock *rl, struct leg *legs, const int *want) {
    char err[128];
    memset(legs, 0, sizeof(*legs) * (size_t)rl->n);
    for (int i = 0; i < rl->n; i++)
        if (want[i]) legs[i].c = rpool_get(rl->nodes[i].pool, 0, err, sizeof(err));
}

static void legs_close(struct redlock *rl, struct leg *legs) {
    for (int i = 0; i < rl->n; i++) {
        freeReplyObject(legs[i].reply);
        legs[i].reply = NULL;
        if (legs[i].c) rpool_put(rl->nodes[i].pool, legs[i].c);   /* drops a failed one */
        legs[i].c = NULL;
    }
}

/* Unlocks on the masters flagged in which[] (hash-unlock: a reentrant hold
 * only loses one count). Returns how many answered that it was ours. */
static int release_on(struct lock *l, const int *which) {
    struct redlock *rl = l->env->redlock;
    struct leg legs[LOCK_MAX_NODES];
    legs_open(rl, legs, which);
    char channel[256], lease[24];
    lock_hash_channel_of(l->key, channel, sizeof(channel));
    snprintf(lease, sizeof(lease), "%d", l->env->ttl_ms);
    const char *argv[] = {l->key, channel, "0", lease, l->owner};
    round_trip(rl, legs, "hash-unlock", 2, 5, argv);
    int ours = 0;
    for (int i = 0; i < rl->n; i++)
        if (legs[i].reply && legs[i].reply->type == REDIS_REPLY_INTEGER) ours++;
    legs_close(rl, legs);
    return ours;
}

/* One acquire round. Returns LOCK_OK; LOCK_BUSY with *pttl_ms the longest
 * lease seen on a master that refused and *split set when some masters voted
 * yes; or LOCK_ERR when too few masters answered for a quorum to be
 * possible at all (that is an outage, not contention). */
static int acquire_round(struct lock *l, int64_t *pttl_ms, int *split) {
    struct redlock *rl = l->env->redlock;
    int64_t t0 = mclock_us();
    int want[LOCK_MAX_NODES];
    for (int i = 0; i < rl->n; i++) want[i] = 1;
    struct leg legs[LOCK_MAX_NODES];
    legs_open(rl, legs, want);
    /* Only now: a new connection is what discovers a restart (INFO). */
    for (int i = 0; i < rl->n; i++) {
        want[i] = may_vote(&rl->nodes[i], t0);
        if (!want[i] && legs[i].c) {
            rpool_put(rl->nodes[i].pool, legs[i].c);
            legs[i].c = NULL;
        }
    }
    char lease[24];
    snprintf(lease, sizeof(lease), "%d", l->env->ttl_ms);
    const char *argv[] = {l->key, lease, l->owner};
    round_trip(rl, legs, "hash-lock", 1, 3, argv);
    int64_t t1 = mclock_us();
    l->attempts++;

    int yes = 0, unknown[LOCK_MAX_NODES] = {0}, granted[LOCK_MAX_NODES] = {0};
    *pttl_ms = -1;
    l->nvotes = rl->n;
    for (int i = 0; i < rl->n; i++) {
        struct leg *g = &legs[i];
        struct redlock_node *node = &rl->nodes[i];
        struct lock_vote *v = &l->votes[i];
        v->node = i;
        v->us = g->got_us ? (int)(g->got_us - g->sent_us) : (int)(t1 - t0);
        if (!want[i]) {
            v->outcome = LOCK_VOTE_RESTARTED;
            atomic_fetch_add(&node->restarted, 1);
        } else if (g->reply && g->reply->type == REDIS_REPLY_NIL) {
            v->outcome = LOCK_VOTE_YES;
            granted[i] = 1;
            yes++;
            atomic_fetch_add(&node->yes, 1);
        } else if (g->reply && g->reply->type == REDIS_REPLY_INTEGER) {
            v->outcome = LOCK_VOTE_BUSY;
            if (g->reply->integer > *pttl_ms) *pttl_ms = g->reply->integer;
            atomic_fetch_add(&node->busy, 1);
        } else {
            v->outcome = LOCK_VOTE_ERROR;
            unknown[i] = g->sent;   /* sent, answer lost: it may hold our lock */
            atomic_fetch_add(&node->error, 1);
        }
    }
    legs_close(rl, legs);

    int64_t elapsed_ms = (mclock_us() - t0) / 1000;
    int64_t drift_ms = l->env->ttl_ms / 100 + 2;
    int64_t validity_ms = l->env->ttl_ms - elapsed_ms - drift_ms;
    *split = yes > 0;
    if (yes >= redlock_quorum(rl) && validity_ms > 0) return LOCK_OK;

    int undo[LOCK_MAX_NODES];
    int any = 0, answered = 0;
    for (int i = 0; i < rl->n; i++) {
        any |= (undo[i] = granted[i] || unknown[i]);
        answered += l->votes[i].outcome >= LOCK_VOTE_BUSY;
    }
    if (any) release_on(l, undo);
    if (answered < redlock_quorum(rl)) {
        snprintf(l->errstr, sizeof(l->errstr),
                 "only %d of %d Redlock masters can vote, %d needed", answered, rl->n,
                 redlock_quorum(rl));
        return LOCK_ERR;
    }
    if (yes >= redlock_quorum(rl))
        snprintf(l->errstr, sizeof(l->errstr), "quorum reached too late (validity %lld ms)",
                 (long long)validity_ms);
    else
        snprintf(l->errstr, sizeof(l->errstr), "%d of %d votes, %d needed", yes, rl->n,
                 redlock_quorum(rl));
    return LOCK_BUSY;
}

/* ---- waiting ------------------------------------------------------------ */

static _Thread_local uint64_t rng_state;

/* xorshift64*, seeded per thread from a per-process uuid, the thread id and
 * the clock: two processes never back off in lockstep. */
static uint64_t rng_next(void) {
    if (!rng_state) {
        uuid_t u;
        uuid_generate(u);
        uint64_t seed;
        memcpy(&seed, u, sizeof(seed));
        rng_state = seed ^ ((uint64_t)gettid() << 32) ^ (uint64_t)mclock_us();
        if (!rng_state) rng_state = 0x9e3779b97f4a7c15ULL;
    }
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}

/* The master to hear the unlock on: one that refused in the last round
 * (the holder holds the lock there, and publishes there when it lets go)
 * and whose subscriber is up; else any reachable one; -1 if none. */
static int listening_node(struct redlock *rl, const struct lock *l) {
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < l->nvotes; i++) {
            const struct lock_vote *v = &l->votes[i];
            int ok = pass == 0 ? v->outcome == LOCK_VOTE_BUSY : v->outcome >= LOCK_VOTE_BUSY;
            if (ok && pubsub_up(rl->nodes[v->node].pool)) return v->node;
        }
    return -1;
}

/* Sleeps a random 0..spin_sleep_ms, never past the deadline. */
static void jitter(const struct lock *l) {
    int span = l->env->spin_sleep_ms > 0 ? l->env->spin_sleep_ms : 1;
    int64_t ms = (int64_t)(rng_next() % (uint64_t)(span + 1));
    int64_t left = (l->deadline_us - mclock_us()) / 1000;
    if (ms > left) ms = left;
    mclock_sleep_ms((int)ms);
}

int redlock_acquire(struct lock *l) {
    struct redlock *rl = l->env->redlock;
    if (!rl) {
        snprintf(l->errstr, sizeof(l->errstr), "redlock.nodes is not configured");
        return LOCK_ERR;
    }
    int64_t pttl;
    int split;
    int rc = acquire_round(l, &pttl, &split);
    if (rc != LOCK_BUSY || mclock_us() >= l->deadline_us) goto done;

    char channel[256], err[128];
    lock_hash_channel_of(l->key, channel, sizeof(channel));
    struct pubsub_waiter w;
    int node = listening_node(rl, l);
    int subscribed = node >= 0 &&
        pubsub_wait_begin(&w, rl->nodes[node].pool, channel, l->deadline_us, err, sizeof(err)) == 0;
    /* Subscribed first, then tried again, as in the redisson strategy. */
    while ((rc = acquire_round(l, &pttl, &split)) == LOCK_BUSY) {
        int64_t now = mclock_us();
        if (now >= l->deadline_us) break;
        if (!subscribed) {
            jitter(l);   /* nobody can tell us of an unlock: back off a random while */
            continue;
        }
        int64_t until = now + (pttl > 0 ? pttl * 1000 : 1000000);
        if (until > l->deadline_us) until = l->deadline_us;
        pubsub_wait(&w, until);
        /* Racers that split the votes all released and were woken together:
         * a random pause keeps them from colliding again in lockstep. */
        if (split) jitter(l);
    }
    if (subscribed) pubsub_wait_end(&w);
done:
    if (rc == LOCK_OK) {
        l->errstr[0] = '\0';
        if (l->holds == 0) watchdog_watch(l);
    }
    return rc;
}

int redlock_release(struct lock *l) {
    struct redlock *rl = l->env->redlock;
    if (l->holds == 0) watchdog_unwatch(l);
    int all[LOCK_MAX_NODES];
    for (int i = 0; i < rl->n; i++) all[i] = 1;   /* every master, even those that failed */
    int ours = release_on(l, all);
    return ours >= redlock_quorum(rl) ? LOCK_OK : LOCK_LOST;
}

int redlock_renew(struct lock *l) {
    struct redlock *rl = l->env->redlock;
    int all[LOCK_MAX_NODES];
    for (int i = 0; i < rl->n; i++) all[i] = 1;
    struct leg legs[LOCK_MAX_NODES];
    legs_open(rl, legs, all);
    int64_t now = mclock_us();
    for (int i = 0; i < rl->n; i++) {
        if (legs[i].c && !may_vote(&rl->nodes[i], now)) {
            rpool_put(rl->nodes[i].pool, legs[i].c);   /* its renewal would not count */
            legs[i].c = NULL;
        }
    }
    char lease[24];
    snprintf(lease, sizeof(lease), "%d", l->env->ttl_ms);
    const char *argv[] = {l->key, lease, l->owner};
    round_trip(rl, legs, "hash-renew", 1, 3, argv);
    int renewed = 0;
    for (int i = 0; i < rl->n; i++)
        if (legs[i].reply && legs[i].reply->type == REDIS_REPLY_INTEGER && legs[i].reply->integer == 1)
            renewed++;
    legs_close(rl, legs);
    return renewed >= redlock_quorum(rl) ? LOCK_OK : LOCK_LOST;
}
