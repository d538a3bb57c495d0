/* rpool.c -- a bounded pool of hiredis connections (see rpool.h).
 *
 * idle[] is a stack of connected contexts not in use; `live` counts every
 * context alive, idle or handed out. Both are guarded by `lock`; connecting
 * happens outside it so a slow connect never blocks other threads.
 *
 * With sentinels, `master_host:master_port` is where the master is now: the
 * address the last successful dial reached, or the sentinels' answer when
 * rpool_get() asked them again (at most once a second), also guarded by
 * `lock`. A context's own address (c->tcp) is compared with it whenever the
 * context comes back to the pool or out of it: a mismatch means a failover
 * happened since it was dialed, and the context is freed.
 *
 * In cluster mode the pool is the root: it owns the slot map (a struct
 * cluster, which knows addresses only) and one pool per master, nodes[i]
 * for the map's node i (cluster_node), made on first use under `lock` and
 * freed with the root. The map reaches a node for CLUSTER SLOTS through
 * rpool_cluster_dial, given down to it, so cluster.c calls nothing here.
 * Every map load runs unlocked, behind `cluster_loading`: on the slot-map
 * reloader thread (rpool_cluster_main, every second) or on the thread that
 * routes first or after a MOVED. */
#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include "mclock.h"
#include "rpool.h"
#include "script.h"
#include "sentinel.h"
#include "addr.h"
#include "cluster.h"

struct rpool {
    struct rpool_options opt;
    char host[256];
    char unix_socket[108];
    char password[256];
    char sentinels[512];
    char master_name[128];
    pthread_mutex_t lock;
    pthread_cond_t freed; /* a slot or an idle context became available */
    redisContext **idle;
    int nidle;
    int live;
    char master_host[256]; /* sentinels only: where the master is now */
    int master_port;
    int64_t resolved_ms; /* when master_host was last learnt (monotonic) */
    int refreshing; /* a thread is asking the sentinels */
    char cluster_nodes[512]; /* cluster mode: the seeds */
    struct cluster *cluster; /* its router, once a map was loaded */
    struct rpool *nodes[CLUSTER_NODES_MAX]; /* the pool of the map's node i, once used */
    int64_t cluster_ms; /* when the map was last (re)loaded, or tried */
    int cluster_loading; /* a thread is loading it */
    int cluster_stale; /* a MOVED said the map is wrong */
    pthread_cond_t cluster_done; /* a load ended */
    pthread_t cluster_thread; /* reloads the map every second */
    int cluster_thread_up;
    int cluster_stop;
    pthread_cond_t cluster_wake; /* cluster_stop was set */
};

/* How old the sentinels' last answer may grow before rpool_get() asks again. */
#define RPOOL_SENTINEL_REFRESH_MS 1000

struct rpool *rpool_create(const struct rpool_options *opt) {
    struct rpool *p = calloc(1, sizeof(*p));
    if (!p) return NULL;
    p->opt = *opt;
    snprintf(p->host, sizeof(p->host), "%s", opt->host ? opt->host : "127.0.0.1");
    snprintf(p->password, sizeof(p->password), "%s", opt->password ? opt->password : "");
    snprintf(p->sentinels, sizeof(p->sentinels), "%s", opt->sentinels ? opt->sentinels : "");
    snprintf(p->master_name, sizeof(p->master_name), "%s",
             opt->master_name && opt->master_name[0] ? opt->master_name : "mymaster");
    snprintf(p->unix_socket, sizeof(p->unix_socket), "%s",
             opt->unix_socket ? opt->unix_socket : "");
    p->opt.host = p->host;
    p->opt.unix_socket = p->unix_socket;
    p->opt.password = p->password;
    p->opt.sentinels = p->sentinels;
    p->opt.master_name = p->master_name;
    snprintf(p->cluster_nodes, sizeof(p->cluster_nodes), "%s",
             opt->cluster_nodes ? opt->cluster_nodes : "");
    p->opt.cluster_nodes = p->cluster_nodes;
    if (p->cluster_nodes[0]) {
        /* The pool itself stands for the first seed. */
        struct addr first[1];
        char why[128];
        if (addr_parse(p->cluster_nodes, strcspn(p->cluster_nodes, ","), first, why, sizeof(why)) ==
            0) {
            snprintf(p->host, sizeof(p->host), "%s", first[0].host);
            p->opt.port = first[0].port;
        }
    }
    if (p->opt.size < 1) p->opt.size = 1;
    p->idle = calloc((size_t)p->opt.size, sizeof(*p->idle));
    if (!p->idle) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->lock, NULL);
    mclock_cond_init(&p->freed);
    mclock_cond_init(&p->cluster_done);
    mclock_cond_init(&p->cluster_wake);
    return p;
}

const struct rpool_options *rpool_options(const struct rpool *p) { return &p->opt; }

void rpool_free(struct rpool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    int up = p->cluster_thread_up;
    p->cluster_stop = 1;
    pthread_cond_broadcast(&p->cluster_wake);
    pthread_mutex_unlock(&p->lock);
    if (up) pthread_join(p->cluster_thread, NULL);
    cluster_free(p->cluster);
    for (int i = 0; i < CLUSTER_NODES_MAX; i++) rpool_free(p->nodes[i]);
    for (int i = 0; i < p->nidle; i++) redisFree(p->idle[i]);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->freed);
    pthread_cond_destroy(&p->cluster_done);
    pthread_cond_destroy(&p->cluster_wake);
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

/* A sentinel may still name a master that was demoted (it came back as a
 * replica) or not yet promoted: only a master may be used. 0 when c's ROLE
 * is master; else -1 with errstr naming at. */
static int rpool_check_master(redisContext *c, const char *at, char *errstr, size_t errlen) {
    redisReply *r = redisCommand(c, "ROLE");
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
             r->element[0]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, "master") == 0;
    if (!ok) {
        if (!r)
            snprintf(errstr, errlen, "ROLE on %s: %s", at, c->errstr);
        else if (r->type == REDIS_REPLY_ERROR)
            snprintf(errstr, errlen, "ROLE on %s: %.80s", at, r->str);
        else if (r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                 r->element[0]->type == REDIS_REPLY_STRING)
            snprintf(errstr, errlen, "%s is a %.20s, not a master", at, r->element[0]->str);
        else
            snprintf(errstr, errlen, "ROLE on %s: unexpected reply", at);
    }
    freeReplyObject(r);
    return ok ? 0 : -1;
}

/* Dials host:port (or, when path is not NULL, the Unix socket at path,
 * named host in messages) with opt's timeouts, AUTH, SELECT and, when
 * want_master, a ROLE check, then runs opt's on_connect hook. */
static redisContext *rpool_dial(const struct rpool_options *opt, const char *host, int port,
                                const char *path, int want_master, char *errstr, size_t errlen) {
    struct timeval tv = {opt->timeout_ms / 1000, (opt->timeout_ms % 1000) * 1000};
    char at[300]; /* host:port, or unix:path */
    if (path)
        snprintf(at, sizeof(at), "unix:%s", path);
    else
        snprintf(at, sizeof(at), "%s:%d", host, port);
    redisContext *c =
        path ? redisConnectUnixWithTimeout(path, tv) : redisConnectWithTimeout(host, port, tv);
    if (!c) {
        snprintf(errstr, errlen, "connect %s: out of memory", at);
        return NULL;
    }
    if (c->err) {
        snprintf(errstr, errlen, "connect %s: %s", at, c->errstr);
        redisFree(c);
        return NULL;
    }
    if (redisSetTimeout(c, tv) != REDIS_OK) {
        snprintf(errstr, errlen, "connect %s: cannot set timeout", at);
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
    if (want_master && rpool_check_master(c, at, errstr, errlen) < 0) {
        redisFree(c);
        return NULL;
    }
    if (opt->load_scripts && script_load_all(c, errstr, errlen) < 0) {
        redisFree(c);
        return NULL;
    }
    if (opt->on_connect) {
        opt->on_connect(c, opt->on_connect_arg);
        if (c->err) {
            snprintf(errstr, errlen, "connect %s: %s", at, c->errstr);
            redisFree(c);
            return NULL;
        }
    }
    return c;
}

/* The master through the sentinels: ask them in order; dial the first
 * answer; on failure go on only with sentinels whose answer differs from
 * every address dialed already. */
static redisContext *rpool_dial_sentinels(const struct rpool_options *opt, char *errstr,
                                          size_t errlen) {
    struct addr s[SENTINEL_MAX];
    char why[160] = "", tried[512] = "";
    const char *master = opt->master_name && opt->master_name[0] ? opt->master_name : "mymaster";
    int n = addr_list_parse(opt->sentinels, s, SENTINEL_MAX, why, sizeof(why));
    if (n < 0) {
        snprintf(errstr, errlen, "redis.sentinel.nodes: %s", why);
        return NULL;
    }
    struct {
        char host[256];
        int port;
    } dialed[SENTINEL_MAX];
    int ndialed = 0, answered = 0;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        int w = snprintf(tried + off, sizeof(tried) - off, "%s%s:%d", i ? "," : "", s[i].host,
                         s[i].port);
        if (w > 0 && (size_t)w < sizeof(tried) - off) off += (size_t)w;
        char host[256], err[128];
        int port;
        if (sentinel_ask(&s[i], master, opt->timeout_ms, host, sizeof(host), &port, err,
                         sizeof(err)) < 0) {
            if (!answered) snprintf(why, sizeof(why), "no sentinel answered: %.120s", err);
            continue;
        }
        answered = 1;
        int seen = 0;
        for (int k = 0; k < ndialed && !seen; k++)
            seen = dialed[k].port == port && strcmp(dialed[k].host, host) == 0;
        if (seen) continue;
        snprintf(dialed[ndialed].host, sizeof(dialed[ndialed].host), "%s", host);
        dialed[ndialed++].port = port;
        redisContext *c = rpool_dial(opt, host, port, NULL, 1, why, sizeof(why));
        if (c) return c;
    }
    snprintf(errstr, errlen, "%s (master %s via sentinels %s)", why, master, tried);
    return NULL;
}

redisContext *rpool_connect(const struct rpool_options *opt, char *errstr, size_t errlen) {
    if (opt->sentinels && opt->sentinels[0]) return rpool_dial_sentinels(opt, errstr, errlen);
    if (opt->unix_socket && opt->unix_socket[0])
        return rpool_dial(opt, NULL, 0, opt->unix_socket, 0, errstr, errlen);
    return rpool_dial(opt, opt->host, opt->port, NULL, 0, errstr, errlen);
}

/* True when c was dialed to another address than the master's now known:
 * a failover happened since. Called with p->lock held. */
static int rpool_outdated(const struct rpool *p, const redisContext *c) {
    if (!p->sentinels[0] || !p->master_host[0]) return 0;
    return c->tcp.port != p->master_port || !c->tcp.host ||
           strcmp(c->tcp.host, p->master_host) != 0;
}

/* Makes host:port the master's address and, when it moved, frees every
 * idle context to the old one. Called with p->lock held. */
static void rpool_move(struct rpool *p, const char *host, int port) {
    p->resolved_ms = mclock_ms();
    if (port == p->master_port && strcmp(host, p->master_host) == 0) return;
    snprintf(p->master_host, sizeof(p->master_host), "%s", host);
    p->master_port = port;
    int kept = 0;
    for (int i = 0; i < p->nidle; i++) {
        if (rpool_outdated(p, p->idle[i])) {
            redisFree(p->idle[i]);
            p->live--;
        } else {
            p->idle[kept++] = p->idle[i];
        }
    }
    p->nidle = kept;
    pthread_cond_broadcast(&p->freed);
}

/* Asks the sentinels again where the master is once the last answer is
 * RPOOL_SENTINEL_REFRESH_MS old. A failover whose former master stays up
 * closes no connection until Sentinel demotes it, seconds later; meanwhile
 * pooled contexts would still write to it. One thread asks at a time, on
 * its way through rpool_get(); the others go on with what is known. */
static void rpool_refresh(struct rpool *p) {
    pthread_mutex_lock(&p->lock);
    int due = !p->refreshing && p->master_host[0] &&
              mclock_ms() - p->resolved_ms >= RPOOL_SENTINEL_REFRESH_MS;
    if (due) p->refreshing = 1;
    pthread_mutex_unlock(&p->lock);
    if (!due) return;

    struct addr s[SENTINEL_MAX];
    char host[256], err[128];
    int port = 0, found = 0;
    int n = addr_list_parse(p->sentinels, s, SENTINEL_MAX, err, sizeof(err));
    for (int i = 0; i < n && !found; i++)
        found = sentinel_ask(&s[i], p->master_name, p->opt.timeout_ms, host, sizeof(host), &port,
                             err, sizeof(err)) == 0;
    pthread_mutex_lock(&p->lock);
    p->refreshing = 0;
    if (found)
        rpool_move(p, host, port);
    else
        p->resolved_ms = mclock_ms(); /* no answer: dials will tell */
    pthread_mutex_unlock(&p->lock);
}

/* rpool_failed_us: the last failure of any pool. */
static _Atomic monotime_us failed_us;

static void note_failure(void) { atomic_store(&failed_us, mclock_us()); }

long long rpool_failed_us(void) { return (long long)atomic_load(&failed_us); }

/* True when an idle connection has something to read: the server closed it
 * (EOF) or sent something unasked. Either way it must not be reused. */
static int rpool_stale(redisContext *c) {
    struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
    return c->err || poll(&pfd, 1, 0) != 0;
}

int rpool_get(struct rpool *p, int wait_ms, redisContext **out, char *errstr, size_t errlen) {
    *out = NULL;
    monotime_us deadline = mclock_us() + (monotime_us)(wait_ms > 0 ? wait_ms : 0) * 1000;
    if (p->sentinels[0]) rpool_refresh(p);
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (p->nidle > 0) {
            redisContext *c = p->idle[--p->nidle];
            if (!rpool_stale(c) && !rpool_outdated(p, c)) {
                pthread_mutex_unlock(&p->lock);
                *out = c;
                return RPOOL_OK;
            }
            p->live--;
            redisFree(c);
            note_failure();
        }
        if (p->live < p->opt.size) break;
        if (mclock_cond_wait_until(&p->freed, &p->lock, deadline) == ETIMEDOUT && p->nidle == 0 &&
            p->live >= p->opt.size) {
            pthread_mutex_unlock(&p->lock);
            snprintf(errstr, errlen, "all %d Redis connections busy for %d ms", p->opt.size,
                     wait_ms);
            return RPOOL_BUSY;
        }
    }
    p->live++; /* reserve the slot, then connect without the lock */
    pthread_mutex_unlock(&p->lock);

    redisContext *c = rpool_connect(&p->opt, errstr, errlen);
    pthread_mutex_lock(&p->lock);
    if (c) {
        if (p->sentinels[0] && c->tcp.host) rpool_move(p, c->tcp.host, c->tcp.port);
    } else {
        p->live--;
        pthread_cond_signal(&p->freed);
        note_failure();
    }
    pthread_mutex_unlock(&p->lock);
    *out = c;
    return c ? RPOOL_OK : RPOOL_ERR;
}

_Static_assert(RPOOL_MASTERS_MAX == CLUSTER_NODES_MAX, "one pool per master the map can name");

/* How old the cluster's slot map may grow before rpool_route() reloads it. */
#define RPOOL_CLUSTER_REFRESH_MS 1000

/* What a cluster node's connections use: the root's options (password,
 * timeout, size, scripts, on_connect) at a, with no seeds, no sentinels and
 * database 0 (a cluster has no other). Its host is a's. */
static struct rpool_options rpool_node_options(const struct rpool *p, const struct addr *a) {
    struct rpool_options o = p->opt;
    o.host = a->host;
    o.port = a->port;
    o.unix_socket = NULL;
    o.cluster_nodes = NULL;
    o.sentinels = NULL;
    o.database = 0;
    return o;
}

/* The map's dial (cluster_options): one connection to the node at a for a
 * CLUSTER SLOTS, without scripts or on_connect. Takes no lock. */
static redisContext *rpool_cluster_dial(void *arg, const struct addr *a, char *errstr,
                                        size_t errlen) {
    struct rpool_options o = rpool_node_options(arg, a);
    o.load_scripts = 0;
    o.on_connect = NULL;
    return rpool_connect(&o, errstr, errlen);
}

/* The pool of the cluster node at a (made on first use), or NULL when the
 * map knows CLUSTER_NODES_MAX nodes already or out of memory. */
static struct rpool *rpool_node(struct rpool *p, struct cluster *cl, const struct addr *a) {
    int i = cluster_node(cl, a);
    if (i < 0) return NULL;
    pthread_mutex_lock(&p->lock);
    if (p->nodes[i] == NULL) {
        /* rpool_create only copies its options: no I/O under the lock. */
        struct rpool_options o = rpool_node_options(p, a);
        p->nodes[i] = rpool_create(&o);
    }
    struct rpool *np = p->nodes[i];
    pthread_mutex_unlock(&p->lock);
    return np;
}

/* Loads or reloads the slot map (the caller set cluster_loading). */
static void rpool_cluster_load(struct rpool *p) {
    pthread_mutex_lock(&p->lock);
    struct cluster *cl = p->cluster;
    int stale = p->cluster_stale;
    p->cluster_stale = 0;
    pthread_mutex_unlock(&p->lock);
    char why[512];
    int ok = 1;
    if (cl) {
        ok = cluster_refresh(cl, why, sizeof(why)) == 0; /* the old map stays on failure */
    } else {
        struct cluster_options o = {.nodes = p->cluster_nodes,
                                    .max_redirects = p->opt.cluster_max_redirects,
                                    .dial = rpool_cluster_dial,
                                    .dial_arg = p};
        cl = cluster_create(&o, why, sizeof(why));
    }
    pthread_mutex_lock(&p->lock);
    if (p->cluster == NULL) p->cluster = cl;
    if (!ok && stale) p->cluster_stale = 1; /* still known wrong: retried in 50 ms */
    p->cluster_ms = mclock_ms();
    p->cluster_loading = 0;
    pthread_cond_broadcast(&p->cluster_done);
    pthread_mutex_unlock(&p->lock);
}

/* The map's own thread: reloads it every second, as Redisson's cluster scan
 * does, so that a slot moved or a failover is known within a second even
 * when no sale has run into it. */
static void *rpool_cluster_main(void *arg) {
    struct rpool *p = arg;
    pthread_mutex_lock(&p->lock);
    while (!p->cluster_stop) {
        monotime_us until = mclock_us() + (monotime_us)RPOOL_CLUSTER_REFRESH_MS * 1000;
        while (!p->cluster_stop &&
               mclock_cond_wait_until(&p->cluster_wake, &p->lock, until) != ETIMEDOUT) {}
        if (p->cluster_stop || p->cluster_loading) continue;
        p->cluster_loading = 1;
        pthread_mutex_unlock(&p->lock);
        rpool_cluster_load(p);
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* Before routing: the first call loads the map and starts its thread; a
 * map that a MOVED said is wrong, or that is missing, is reloaded at once
 * (but not more often than every 50 ms, so that a cluster that is down is
 * not asked by every sale). While another thread loads a map known wrong,
 * callers wait for it, at most the loader's own timeout. */
static void rpool_cluster_refresh(struct rpool *p) {
    monotime_us now = mclock_us();
    pthread_mutex_lock(&p->lock);
    if (!p->cluster_thread_up && !p->cluster_stop &&
        pthread_create(&p->cluster_thread, NULL, rpool_cluster_main, p) == 0)
        p->cluster_thread_up = 1;
    int wrong = p->cluster == NULL || p->cluster_stale;
    if (!wrong) {
        pthread_mutex_unlock(&p->lock);
        return;
    }
    if (p->cluster_loading) {
        monotime_us until = now + (monotime_us)(p->opt.timeout_ms + 100) * 1000;
        while (p->cluster_loading &&
               mclock_cond_wait_until(&p->cluster_done, &p->lock, until) != ETIMEDOUT) {}
        pthread_mutex_unlock(&p->lock);
        return;
    }
    int due = (int64_t)(now / 1000) - p->cluster_ms >= 50;
    if (due) p->cluster_loading = 1;
    pthread_mutex_unlock(&p->lock);
    if (due) rpool_cluster_load(p);
}

void rpool_note_error(struct rpool *p, const char *err) {
    if (!p || !p->cluster_nodes[0] || !err || strncmp(err, "MOVED ", 6) != 0) return;
    pthread_mutex_lock(&p->lock);
    p->cluster_stale = 1;
    pthread_mutex_unlock(&p->lock);
}

/* The router, once a map was loaded; NULL before, or not in cluster mode. */
static struct cluster *rpool_cluster(struct rpool *p) {
    if (!p->cluster_nodes[0]) return NULL;
    pthread_mutex_lock(&p->lock);
    struct cluster *cl = p->cluster;
    pthread_mutex_unlock(&p->lock);
    return cl;
}

int rpool_masters(struct rpool *p, struct rpool **out, int max, char *errstr, size_t errlen) {
    if (max < 1) return 0;
    if (!p->cluster_nodes[0]) {
        out[0] = p;
        return 1;
    }
    rpool_cluster_refresh(p);
    struct cluster *cl = rpool_cluster(p);
    if (!cl) {
        snprintf(errstr, errlen,
                 "no slot map yet: no node of redis.cluster.nodes (%.200s) answered "
                 "CLUSTER SLOTS with every slot served",
                 p->cluster_nodes);
        return -1;
    }
    struct addr a[CLUSTER_NODES_MAX];
    int n = cluster_masters(cl, a, max < CLUSTER_NODES_MAX ? max : CLUSTER_NODES_MAX), got = 0;
    for (int i = 0; i < n; i++) {
        struct rpool *m = rpool_node(p, cl, &a[i]);
        if (m) out[got++] = m;
    }
    return got;
}

int rpool_follow(struct rpool *root, const redisReply *r, int *hops, struct rpool **pool,
                 redisContext **c, int wait_ms, char *errstr, size_t errlen) {
    struct cluster_redirect rd;
    int kind = cluster_reply_kind(r, &rd);
    struct cluster *cl = kind == CLUSTER_ANSWER ? NULL : rpool_cluster(root);
    if (!cl || *hops >= root->opt.cluster_max_redirects) return 0;
    struct rpool *next = kind == CLUSTER_TRYAGAIN ? *pool : rpool_node(root, cl, &rd.to);
    if (!next) return 0; /* more masters than CLUSTER_NODES_MAX: r stands */
    cluster_note(cl, kind, &rd);
    if (kind == CLUSTER_MOVED) rpool_note_error(root, r->str);
    (*hops)++;
    rpool_put(*pool, *c);
    *c = NULL;
    *pool = next;
    if (kind == CLUSTER_TRYAGAIN) mclock_sleep_ms(CLUSTER_TRYAGAIN_MS);
    if (rpool_get(next, wait_ms, c, errstr, errlen) != RPOOL_OK) return -1;
    if (kind != CLUSTER_ASK) return kind;
    redisReply *ok = redisCommand(*c, "ASKING");
    if (ok) {
        freeReplyObject(ok);
        return kind;
    }
    snprintf(errstr, errlen, "ASKING %.200s:%d: %s", rd.to.host, rd.to.port, (*c)->errstr);
    rpool_drop(next, *c);
    *c = NULL;
    return -1;
}

void rpool_cluster_stats(struct rpool *p, struct cluster_stats *out) {
    memset(out, 0, sizeof(*out));
    struct cluster *cl = rpool_cluster(p);
    if (cl) cluster_stats(cl, out);
}

struct rpool *rpool_route(struct rpool *p, const char *key) {
    if (!p->cluster_nodes[0]) return p;
    rpool_cluster_refresh(p);
    struct cluster *cl = rpool_cluster(p);
    if (!cl) return p;
    struct addr a;
    cluster_slot_master(cl, cluster_key_slot(key, strlen(key)), &a);
    struct rpool *np = a.port ? rpool_node(p, cl, &a) : NULL;
    return np ? np : p;
}

void rpool_put(struct rpool *p, redisContext *c) {
    if (!c) return;
    pthread_mutex_lock(&p->lock);
    if (c->err || rpool_outdated(p, c)) {
        pthread_mutex_unlock(&p->lock);
        rpool_drop(p, c);
        return;
    }
    p->idle[p->nidle++] = c;
    pthread_cond_signal(&p->freed);
    pthread_mutex_unlock(&p->lock);
}

void rpool_drop(struct rpool *p, redisContext *c) {
    if (!c) return;
    if (c->err) note_failure();
    redisFree(c);
    pthread_mutex_lock(&p->lock);
    p->live--;
    pthread_cond_signal(&p->freed);
    pthread_mutex_unlock(&p->lock);
}
