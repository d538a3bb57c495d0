/* cluster.h -- Redis Cluster slot routing: the key's slot (CRC16 with hash
 * tags), the slot map from CLUSTER SLOTS, and the MOVED and ASK redirects,
 * as the Cluster specification describes them.
 *
 * The map knows addresses, not connections: it makes none and holds no
 * pool. Its owner passes down how to reach a node (cluster_options.dial,
 * one short connection per CLUSTER SLOTS), as the lock core passes
 * struct watchdog_ops to the watchdog. The service's owner is the root
 * pool (rpool.c): it keeps one pool per master, indexed by cluster_node,
 * routes by key (rpool_route) and follows refusals with rpool_follow, which
 * keeps the handle's own connection and pipeline (a lock's commands, the
 * atomic sale) and uses cluster_reply_kind and cluster_note from here.
 * cluster_command_argv does the same for one command on its own, on
 * connections its caller lends (struct cluster_conns; the cluster tests):
 *
 * A command goes to the master that the map names for its key's slot. An
 * error reply "MOVED <slot> <host:port>" means the slot has moved for good:
 * the map takes the new owner for that slot, is reloaded from CLUSTER SLOTS,
 * and the command is sent there. "ASK <slot> <host:port>" means the slot is
 * being migrated and this key already lives on the target: the command is
 * sent there once, after ASKING, and the map is left alone. "TRYAGAIN"
 * (keys split by a migration) sends it to the same node again after
 * CLUSTER_TRYAGAIN_MS. A command refused so did not run, so sending it
 * again is safe; at most max_redirects such hops are made. A command whose reply was lost (an
 * I/O error or a timeout) is never sent again: it may have run, and only
 * the caller can judge what it did.
 *
 * Thread safe: the map is guarded by a mutex held only to read or swap it,
 * never across network I/O (dial and the callbacks run unlocked). */
#ifndef INVENTORYD_CLUSTER_H
#define INVENTORYD_CLUSTER_H

#include <stddef.h>
#include <hiredis/hiredis.h>
#include "addr.h"

#define CLUSTER_SLOTS 16384
#define CLUSTER_NODES_MAX 64 /* masters known at once */

/* The slot of a key: CRC16 (XMODEM) of the key, or of its hash tag (the
 * bytes between the first '{' and the first '}' after it, when there is at
 * least one), modulo 16384. Pure. */
unsigned cluster_key_slot(const char *key, size_t len);

/* A parsed redirect. */
struct cluster_redirect {
    int ask; /* 1 for ASK, 0 for MOVED */
    unsigned slot;
    struct addr to;
};

/* Parses an error reply "MOVED 3999 127.0.0.1:6381" or "ASK ...". Returns 1
 * and fills *out when r is one, 0 when r is anything else (another error,
 * a malformed redirect, not an error at all). Pure. */
int cluster_redirect_parse(const redisReply *r, struct cluster_redirect *out);

/* What a node's reply says of the command it answers. The three refusals
 * mean that the command did not run, so it may be sent again: MOVED (the
 * slot has moved for good) and ASK (it is being migrated and the key lives
 * on the target), each with *out filled; TRYAGAIN (a command on several keys
 * while a migration has split them between the two nodes: the same node is
 * asked again a little later, as hiredis-cluster and Redisson do). Pure. */
#define CLUSTER_ANSWER 0 /* anything else: the command's own answer */
#define CLUSTER_MOVED 1
#define CLUSTER_ASK 2
#define CLUSTER_TRYAGAIN 3
int cluster_reply_kind(const redisReply *r, struct cluster_redirect *out);

/* How long a TRYAGAIN waits before the command is sent again. */
#define CLUSTER_TRYAGAIN_MS 20

struct cluster;

struct cluster_options {
    const char *nodes; /* seed "host:port,..." (redis.cluster.nodes) */
    int max_redirects; /* MOVED/ASK hops per cluster_command_argv (default 5) */
    /* Required. Connects to the node at a for one CLUSTER SLOTS; the map frees the
     * context after it. NULL with errstr set. The owner's connect (its
     * password and timeout; a cluster has database 0 only), called with no
     * lock held, in whichever thread loads the map. dial_arg must outlive
     * the router. */
    redisContext *(*dial)(void *arg, const struct addr *a, char *errstr, size_t errlen);
    void *dial_arg;
};

/* Creates the router and loads the slot map from the first seed that
 * answers CLUSTER SLOTS. NULL with errstr set when the seed list is bad, no
 * seed answers, or the map leaves a slot without a master ("slot 0 has no
 * master (cluster not ready?)"). The strings of opt are copied. */
struct cluster *cluster_create(const struct cluster_options *opt, char *errstr, size_t errlen);

/* Frees the router. Accepts NULL. */
void cluster_free(struct cluster *cl);

/* Reloads the slot map: CLUSTER SLOTS from the known masters, then the
 * seeds, the first that answers. 0, or -1 with errstr set; the old map
 * stays on failure. */
int cluster_refresh(struct cluster *cl, char *errstr, size_t errlen);

/* The master that the map names for slot, into *out. */
void cluster_slot_master(struct cluster *cl, unsigned slot, struct addr *out);

/* The masters that the map names for at least one slot, each once, into
 * out[] (at most max); returns how many (0 before any map). */
int cluster_masters(struct cluster *cl, struct addr *out, int max);

/* The index of the node at a among those the router knows (a master of a
 * map, or a redirect's target), added when new: from 0, below
 * CLUSTER_NODES_MAX, and the same for a for the router's life, so that an
 * owner may keep what it has per node (a pool) in an array by it. -1 when
 * CLUSTER_NODES_MAX nodes are known already. */
int cluster_node(struct cluster *cl, const struct addr *a);

/* Connections to the nodes, lent to cluster_command_argv by its caller
 * (e.g. one pool per node). */
struct cluster_conns {
    /* A connected context to the node at a, waiting at most wait_ms for
     * one; NULL with errstr set. */
    redisContext *(*get)(void *arg, const struct addr *a, int wait_ms, char *errstr, size_t errlen);
    /* Takes back c, got for a; broken when its reply was lost (c must not
     * be used again). */
    void (*put)(void *arg, const struct addr *a, redisContext *c, int broken);
    void *arg;
};

/* Runs one command whose key is key (argv[0] is the command name), on the
 * master of key's slot, following MOVED and ASK as described above, on
 * connections from via. Returns the reply (the caller frees it; an error
 * reply that is not a redirect is returned as it is), or NULL with errstr
 * set: the node's I/O error ("127.0.0.1:7001: Connection reset by peer"),
 * "too many redirects (5), last MOVED 3999 127.0.0.1:7002", or via's
 * error (no connection within wait_ms). */
redisReply *cluster_command_argv(struct cluster *cl, const struct cluster_conns *via, int wait_ms,
                                 const char *key, int argc, const char **argv,
                                 const size_t *argvlen, char *errstr, size_t errlen);

/* Takes a refusal of kind (cluster_reply_kind) into account before it is
 * followed: counts it and, for MOVED, makes the node it names the slot's
 * owner in the map at once (the caller reloads the map). */
void cluster_note(struct cluster *cl, int kind, const struct cluster_redirect *rd);

/* Refusals followed and map reloads, since the router was made. */
struct cluster_stats {
    long long moved, ask, tryagain, refreshes;
};
void cluster_stats(struct cluster *cl, struct cluster_stats *out);

#endif
