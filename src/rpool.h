/* rpool.h -- a bounded pool of hiredis connections to one Redis server, or
 * to the current master of a group watched by Redis Sentinel; in cluster
 * mode, the root of one such pool per cluster master (rpool_route).
 *
 * A redisContext belongs to one thread at a time: rpool_get() hands one out
 * and the caller gives it back with rpool_put(), or rpool_drop() when a
 * command failed on it (c->err set, or a NULL reply). A dropped context is
 * freed, never reused; the next rpool_get() dials a fresh one, so the service
 * recovers by itself once Redis is back.
 *
 * Contexts are made lazily, up to `size`. Every new context has connect and
 * command timeouts of timeout_ms, and runs AUTH and SELECT when configured,
 * then loads the embedded Lua scripts when load_scripts is set (so that a
 * pipelined EVALSHA finds them, even right after a Redis restart).
 * An idle context whose socket became readable (the server closed it, e.g.
 * on restart) is discarded at rpool_get() time, before any command is sent
 * on it, so no command is ever written to a connection known to be dead.
 *
 * With sentinels set, every new context is dialed to the address the
 * sentinels give for the master (the first one that answers, see
 * rpool_connect) and kept only if ROLE says it reached a master. When a dial
 * finds the master at a new address (a failover), or rpool_get() asks the
 * sentinels again (it does when their last answer is a second old) and
 * learns one, every context to the old address is dropped, idle ones at once
 * and handed-out ones when put back, so the pool follows the failover
 * instead of talking to a former master, even one still up. A context is
 * never retried elsewhere: what was sent on it is the caller's to judge.
 *
 * The pool itself is thread safe. */
#ifndef INVENTORYD_RPOOL_H
#define INVENTORYD_RPOOL_H

#include <stddef.h>
#include <hiredis/hiredis.h>

struct rpool;

struct rpool_options {
    const char *host; /* ignored when sentinels is set */
    int port;
    /* The path of the server's Unix socket, dialled instead of host:port;
     * NULL or "" for TCP. Not with sentinels or cluster_nodes. */
    const char *unix_socket;
    /* "host:port,host:port,..." of Redis Sentinels, or NULL or "" for none.
     * They are asked without AUTH: password is the master's. */
    const char *sentinels;
    const char *master_name; /* the master's name at the sentinels (mymaster) */
    /* "host:port,..." seed nodes of a Redis Cluster, or NULL or "" for none
     * (not with sentinels). The pool itself then stands for the first seed,
     * and rpool_route() gives each key its master's pool. */
    const char *cluster_nodes;
    /* Cluster mode: most MOVED, ASK or TRYAGAIN refusals followed for one
     * command (redis.cluster.max-redirects); 0 follows none. */
    int cluster_max_redirects;
    const char *password; /* NULL or "" for no AUTH */
    int database; /* SELECT when not 0 */
    int timeout_ms; /* connect and command timeout */
    int size; /* most contexts alive at once */
    int load_scripts; /* SCRIPT LOAD every embedded script on connect */
    /* Called on every new connection after AUTH and SELECT, in the thread
     * that made it (e.g. to read INFO server); may be NULL. Must not keep c. */
    void (*on_connect)(redisContext *c, void *arg);
    void *on_connect_arg;
};

/* Creates a pool; no connection is made yet. The strings of opt are copied.
 * NULL only when out of memory (a bad sentinel list shows at connect time;
 * check it first with sentinel_parse()). */
struct rpool *rpool_create(const struct rpool_options *opt);

/* Frees every idle context and the pool. Contexts still handed out must have
 * been put back or dropped first. Accepts NULL. */
void rpool_free(struct rpool *p);

/* What rpool_get returns. Busy is not broken: a caller waiting for a lock
 * may wait on, one facing an outage should give up. */
#define RPOOL_OK 0
#define RPOOL_BUSY 1 /* all `size` contexts stayed in use for wait_ms */
#define RPOOL_ERR -1 /* no context could be made: the server is unreachable */

/* Hands out a connected context in *out, waiting at most wait_ms for one to
 * be free when all `size` are in use. Returns RPOOL_OK, or RPOOL_BUSY or
 * RPOOL_ERR with *out NULL and errstr saying why ("all 128 Redis
 * connections busy for 2000 ms", "connect 127.0.0.1:6379: Connection
 * refused"). */
int rpool_get(struct rpool *p, int wait_ms, redisContext **out, char *errstr, size_t errlen);

/* Gives c back for reuse. If c->err is set, or (with sentinels) the master
 * has moved since c was dialed, it is dropped instead. Accepts NULL. */
void rpool_put(struct rpool *p, redisContext *c);

/* Frees c and releases its slot. Accepts NULL. */
void rpool_drop(struct rpool *p, redisContext *c);

/* When (mclock_us) a connection of any pool of this process was last found
 * broken (an idle one closed by its server, one given back or dropped with
 * an error) or could not be dialled; 0 when never. /healthz trusts a PING
 * only while no failure came after it. */
long long rpool_failed_us(void);

/* The options the pool connects with (its own copy, valid as long as p,
 * strings included). */
const struct rpool_options *rpool_options(const struct rpool *p);

/* The pool for key: p itself, or with cluster_nodes set the pool of the
 * master that owns key's slot (one pool per master, each of `size`
 * contexts). The slot map is loaded from the seeds on first use, then
 * reloaded every second by a thread of the pool's own, and at once when a
 * MOVED said it is wrong (rpool_note_error); until it loads,
 * or for a slot it lacks, p itself (the first seed) is given, and a command
 * for a slot that node does not serve is refused with MOVED. Never NULL.
 * Contexts go back to the pool they came from. */
struct rpool *rpool_route(struct rpool *p, const char *key);

/* The most masters a pool routes to (cluster mode: one pool each), so the
 * most distinct pools rpool_route() and rpool_masters() give. */
#define RPOOL_MASTERS_MAX 64

/* The pools of every master the service may write to, into out[] (at most
 * max): p itself, or in cluster mode the pool of each master that the slot
 * map names (loading the map first when there is none yet). Returns how
 * many, or -1 with errstr set when in cluster mode no map could be loaded. */
int rpool_masters(struct rpool *p, struct rpool **out, int max, char *errstr, size_t errlen);

/* Tells the pool of an error reply that a command routed by it got: a
 * "MOVED ..." marks its slot map wrong, so the next rpool_route() reloads
 * it (and routes by the new one) instead of waiting for the map to age.
 * Anything else, or a pool not in cluster mode, is ignored. */
void rpool_note_error(struct rpool *p, const char *err);

/* After a command routed by root (cluster mode) went alone on *c, a context
 * of *pool, and got the reply r: when r refuses it (MOVED, ASK or
 * TRYAGAIN, see cluster_reply_kind: it did not run) and fewer than the
 * pool's cluster_max_redirects hops were made (*hops counts them), gives *c
 * back, takes one from the pool of the node to ask next (*pool and *c
 * updated; after ASK, ASKING has been sent on it; after TRYAGAIN, the same
 * node CLUSTER_TRYAGAIN_MS later; after MOVED, the map is marked wrong) and
 * returns the kind followed, CLUSTER_MOVED, CLUSTER_ASK or CLUSTER_TRYAGAIN
 * (all > 0): the caller sends the same command again on *c. Returns 0 when
 * r is the command's answer, or a refusal past the hops allowed, or root is
 * not in cluster mode: r stands as it is. Returns -1 when no context could
 * be had for the next node (*c NULL, errstr says why). r stays the
 * caller's to free. Whoever sent more than the one command on *c must not
 * call it: the refusal of the others would be lost. */
int rpool_follow(struct rpool *root, const redisReply *r, int *hops, struct rpool **pool,
                 redisContext **c, int wait_ms, char *errstr, size_t errlen);

/* Cluster mode: the refusals followed (MOVED, ASK, TRYAGAIN) and the map
 * loads since the pool was made (struct cluster_stats, cluster.h); zeros
 * before the map is first loaded or not in cluster mode. */
struct cluster_stats;
void rpool_cluster_stats(struct rpool *p, struct cluster_stats *out);

/* Connects one context outside any pool, with the same options (for the
 * subscriber and for tools). With sentinels, asks them in the order given
 * for the master's address and dials it; if that fails or ROLE answers
 * anything but master, goes on with the next sentinel whose answer differs.
 * NULL on failure, with errstr set, naming the master and the sentinels
 * asked: "connect 127.0.0.1:6379: Connection refused (master mymaster via
 * sentinels 127.0.0.1:26379)". */
redisContext *rpool_connect(const struct rpool_options *opt, char *errstr, size_t errlen);

#endif
