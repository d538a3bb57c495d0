/* cluster.c -- Redis Cluster slot routing (see cluster.h).
 *
 * owner[slot] is an index into nodes[], the addresses of the masters seen
 * so far (in a map or a redirect). nodes[] only grows, up to
 * CLUSTER_NODES_MAX, so an index and its address stay valid for the
 * router's life (cluster_node hands the index out): only owner[] changes,
 * under `lock`, which is never held across network I/O.
 *
 * The router makes no connection of its own and holds no pool: CLUSTER
 * SLOTS goes out on a connection from its owner's dial (cluster_options),
 * and cluster_command_argv runs on connections its caller lends. So this
 * file calls nothing in rpool.c, which sits above it. */
#include "cluster.h"
#include "alloc.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mclock.h"

#define CLUSTER_SEEDS_MAX 16
#define NO_OWNER 0xff

struct cluster {
    pthread_mutex_t lock;
    uint8_t owner[CLUSTER_SLOTS]; /* index into nodes[], or NO_OWNER */
    struct addr nodes[CLUSTER_NODES_MAX];
    int nnodes;
    struct addr seeds[CLUSTER_SEEDS_MAX];
    int nseeds;
    int max_redirects;
    int refreshing; /* a thread is reloading the map */
    struct addr last_ok; /* the node whose map was loaded last */
    redisContext *(*dial)(void *arg, const struct addr *a, char *errstr, size_t errlen);
    void *dial_arg;
    struct cluster_stats stats;
};

/* CRC16-CCITT (XMODEM): polynomial 0x1021, initial 0, as the Cluster
 * specification's key hashing uses; crc16("123456789") = 0x31C3. */
static uint16_t crc16(const char *buf, size_t len) {
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((unsigned char)buf[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

unsigned cluster_key_slot(const char *key, size_t len) {
    size_t s, e;
    for (s = 0; s < len && key[s] != '{'; s++)
        ;
    if (s < len) {
        for (e = s + 1; e < len && key[e] != '}'; e++)
            ;
        if (e < len && e > s + 1) return crc16(key + s + 1, e - s - 1) & (CLUSTER_SLOTS - 1);
    }
    return crc16(key, len) & (CLUSTER_SLOTS - 1);
}

int cluster_redirect_parse(const redisReply *r, struct cluster_redirect *out) {
    if (r == NULL || r->type != REDIS_REPLY_ERROR || r->str == NULL) return 0;
    const char *s = r->str;
    int ask;
    if (strncmp(s, "MOVED ", 6) == 0) {
        ask = 0;
        s += 6;
    } else if (strncmp(s, "ASK ", 4) == 0) {
        ask = 1;
        s += 4;
    } else {
        return 0;
    }
    if (*s < '0' || *s > '9') return 0;
    char *end;
    unsigned long slot = strtoul(s, &end, 10);
    if (end == s || *end != ' ' || slot >= CLUSTER_SLOTS) return 0;
    const char *a = end + 1;
    char why[64];
    if (addr_parse(a, strlen(a), &out->to, why, sizeof(why)) != 0) return 0;
    out->ask = ask;
    out->slot = (unsigned)slot;
    return 1;
}

int cluster_reply_kind(const redisReply *r, struct cluster_redirect *out) {
    if (cluster_redirect_parse(r, out)) return out->ask ? CLUSTER_ASK : CLUSTER_MOVED;
    if (r && r->type == REDIS_REPLY_ERROR && r->str && strncmp(r->str, "TRYAGAIN", 8) == 0)
        return CLUSTER_TRYAGAIN;
    return CLUSTER_ANSWER;
}

/* The index of the node at a, added when new; -1 when nodes[] is full.
 * Called with the lock held. */
static int node_index_locked(struct cluster *cl, const struct addr *a) {
    for (int i = 0; i < cl->nnodes; i++)
        if (cl->nodes[i].port == a->port && strcmp(cl->nodes[i].host, a->host) == 0) return i;
    if (cl->nnodes == CLUSTER_NODES_MAX) return -1;
    cl->nodes[cl->nnodes] = *a;
    return cl->nnodes++;
}

int cluster_node(struct cluster *cl, const struct addr *a) {
    pthread_mutex_lock(&cl->lock);
    int i = node_index_locked(cl, a);
    pthread_mutex_unlock(&cl->lock);
    return i;
}

void cluster_slot_master(struct cluster *cl, unsigned slot, struct addr *out) {
    pthread_mutex_lock(&cl->lock);
    uint8_t i = cl->owner[slot & (CLUSTER_SLOTS - 1)];
    if (i == NO_OWNER)
        memset(out, 0, sizeof(*out));
    else
        *out = cl->nodes[i];
    pthread_mutex_unlock(&cl->lock);
}

int cluster_masters(struct cluster *cl, struct addr *out, int max) {
    uint8_t seen[CLUSTER_NODES_MAX] = {0};
    int n = 0;
    pthread_mutex_lock(&cl->lock);
    for (int s = 0; s < CLUSTER_SLOTS; s++) {
        uint8_t i = cl->owner[s];
        if (i == NO_OWNER || seen[i]) continue;
        seen[i] = 1;
        if (n < max) out[n++] = cl->nodes[i];
    }
    pthread_mutex_unlock(&cl->lock);
    return n;
}

/* One CLUSTER SLOTS entry: [start, end, [host, port, ...], replicas...].
 * An empty host means "the node you asked". Returns 0, 1 to skip the entry
 * (an unknown endpoint, "?"), or -1 when malformed. */
static int parse_slots_entry(const redisReply *e, const struct addr *asked, long long *start,
                             long long *end, struct addr *master) {
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
        e->element[0]->type != REDIS_REPLY_INTEGER || e->element[1]->type != REDIS_REPLY_INTEGER)
        return -1;
    const redisReply *m = e->element[2];
    if (m->type != REDIS_REPLY_ARRAY || m->elements < 2 ||
        m->element[0]->type != REDIS_REPLY_STRING || m->element[1]->type != REDIS_REPLY_INTEGER)
        return -1;
    *start = e->element[0]->integer;
    *end = e->element[1]->integer;
    if (*start < 0 || *end >= CLUSTER_SLOTS || *start > *end) return -1;
    const char *host = m->element[0]->str;
    if (strcmp(host, "?") == 0) return 1;
    if (host[0] == '\0') host = asked->host;
    if (strlen(host) >= ADDR_HOST_MAX || m->element[1]->integer < 1 ||
        m->element[1]->integer > 65535)
        return -1;
    snprintf(master->host, sizeof(master->host), "%s", host);
    master->port = (int)m->element[1]->integer;
    return 0;
}

/* owner[] (CLUSTER_SLOTS entries) from a CLUSTER SLOTS reply r of the node
 * at a; every slot must have a master. */
static int parse_slots(const redisReply *r, const struct addr *a, struct addr *owner, char *errstr,
                       size_t errlen) {
    memset(owner, 0, sizeof(*owner) * CLUSTER_SLOTS);
    for (size_t i = 0; i < r->elements; i++) {
        long long start, end;
        struct addr m;
        int got = parse_slots_entry(r->element[i], a, &start, &end, &m);
        if (got < 0) {
            snprintf(errstr, errlen, "CLUSTER SLOTS at %.200s:%d: entry %zu is malformed", a->host,
                     a->port, i);
            return -1;
        }
        for (long long s = start; got == 0 && s <= end; s++) owner[s] = m;
    }
    for (int s = 0; s < CLUSTER_SLOTS; s++)
        if (owner[s].port == 0) {
            snprintf(errstr, errlen,
                     "CLUSTER SLOTS at %.200s:%d: slot %d has no master (cluster not ready?)",
                     a->host, a->port, s);
            return -1;
        }
    return 0;
}

/* Makes owner[] (addresses) the map, whole or not at all: the indices of
 * every slot's master are found first, and the map changes only when all
 * of them fit in nodes[]. */
static int install_map(struct cluster *cl, const struct addr *owner, char *errstr, size_t errlen) {
    uint8_t *idx = malloc(CLUSTER_SLOTS);
    if (idx == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    int rc = 0;
    pthread_mutex_lock(&cl->lock);
    for (int s = 0; s < CLUSTER_SLOTS && rc == 0; s++) {
        /* Runs of one owner are the rule: look the address up once per run. */
        int same = s > 0 && owner[s].port == owner[s - 1].port &&
                   strcmp(owner[s].host, owner[s - 1].host) == 0;
        int i = same ? idx[s - 1] : node_index_locked(cl, &owner[s]);
        if (i < 0) {
            snprintf(errstr, errlen, "more than %d masters", CLUSTER_NODES_MAX);
            rc = -1;
        } else {
            idx[s] = (uint8_t)i;
        }
    }
    if (rc == 0) {
        memcpy(cl->owner, idx, CLUSTER_SLOTS);
        cl->stats.refreshes++;
    }
    pthread_mutex_unlock(&cl->lock);
    free(idx);
    return rc;
}

/* Asks the node at a for CLUSTER SLOTS, on a connection of the owner's
 * dial, and installs the map it gives. */
static int refresh_from(struct cluster *cl, const struct addr *a, char *errstr, size_t errlen) {
    redisContext *c = cl->dial(cl->dial_arg, a, errstr, errlen);
    if (c == NULL) return -1;
    redisReply *r = redisCommand(c, "CLUSTER SLOTS");
    if (r == NULL) {
        snprintf(errstr, errlen, "CLUSTER SLOTS at %.200s:%d: %s", a->host, a->port, c->errstr);
        redisFree(c);
        return -1;
    }
    redisFree(c);
    if (r->type != REDIS_REPLY_ARRAY) {
        snprintf(errstr, errlen, "CLUSTER SLOTS at %.200s:%d: %.200s", a->host, a->port,
                 r->type == REDIS_REPLY_ERROR ? r->str : "not an array");
        freeReplyObject(r);
        return -1;
    }
    struct addr *owner = malloc(sizeof(struct addr) * CLUSTER_SLOTS);
    int rc = -1;
    if (owner == NULL)
        snprintf(errstr, errlen, "out of memory");
    else if (parse_slots(r, a, owner, errstr, errlen) == 0)
        rc = install_map(cl, owner, errstr, errlen);
    freeReplyObject(r);
    free(owner);
    return rc;
}

static int addr_same(const struct addr *a, const struct addr *b) {
    return a->port == b->port && strcmp(a->host, b->host) == 0;
}

/* Adds a to cand[] (n entries) unless it is there already. */
static void cand_add(struct addr *cand, int *n, const struct addr *a) {
    for (int i = 0; i < *n; i++)
        if (addr_same(&cand[i], a)) return;
    cand[(*n)++] = *a;
}

int cluster_refresh(struct cluster *cl, char *errstr, size_t errlen) {
    struct addr cand[CLUSTER_NODES_MAX + CLUSTER_SEEDS_MAX + 1];
    int n = 0;
    /* The node that answered last first (a dead one asked first would cost
     * every reload its timeout), then the masters known, then the seeds. */
    pthread_mutex_lock(&cl->lock);
    if (cl->last_ok.port) cand_add(cand, &n, &cl->last_ok);
    for (int i = 0; i < cl->nnodes; i++) cand_add(cand, &n, &cl->nodes[i]);
    for (int i = 0; i < cl->nseeds; i++) cand_add(cand, &n, &cl->seeds[i]);
    pthread_mutex_unlock(&cl->lock);
    char why[512] = "no node to ask";
    for (int i = 0; i < n; i++)
        if (refresh_from(cl, &cand[i], why, sizeof(why)) == 0) {
            pthread_mutex_lock(&cl->lock);
            cl->last_ok = cand[i];
            pthread_mutex_unlock(&cl->lock);
            return 0;
        }
    snprintf(errstr, errlen, "%s", why);
    return -1;
}

/* Reloads the map after a MOVED unless another thread is at it. */
static void refresh_after_moved(struct cluster *cl) {
    pthread_mutex_lock(&cl->lock);
    int busy = cl->refreshing;
    cl->refreshing = 1;
    pthread_mutex_unlock(&cl->lock);
    if (busy) return;
    char why[512];
    (void)cluster_refresh(cl, why, sizeof(why)); /* the redirect itself is followed anyway */
    pthread_mutex_lock(&cl->lock);
    cl->refreshing = 0;
    pthread_mutex_unlock(&cl->lock);
}

struct cluster *cluster_create(const struct cluster_options *opt, char *errstr, size_t errlen) {
    if (!opt->dial) {
        snprintf(errstr, errlen, "cluster: no dial given");
        return NULL;
    }
    struct cluster *cl = alloc_zeroed(sizeof(*cl), errstr, errlen);
    if (!cl) return NULL;
    char why[128];
    cl->nseeds = addr_list_parse(opt->nodes, cl->seeds, CLUSTER_SEEDS_MAX, why, sizeof(why));
    if (cl->nseeds < 0) {
        snprintf(errstr, errlen, "redis.cluster.nodes: %s", why);
        free(cl);
        return NULL;
    }
    pthread_mutex_init(&cl->lock, NULL);
    memset(cl->owner, NO_OWNER, sizeof(cl->owner));
    cl->max_redirects = opt->max_redirects;
    cl->dial = opt->dial;
    cl->dial_arg = opt->dial_arg;
    if (cluster_refresh(cl, errstr, errlen) != 0) {
        cluster_free(cl);
        return NULL;
    }
    return cl;
}

void cluster_free(struct cluster *cl) {
    if (cl == NULL) return;
    pthread_mutex_destroy(&cl->lock);
    free(cl);
}

/* Sends the command on c, after ASKING when asking; NULL when a reply was
 * lost. An ASKING that fails is not an I/O error: the command's own reply
 * (most likely a MOVED) says what happened. */
static redisReply *send_on(redisContext *c, int asking, int argc, const char **argv,
                           const size_t *argvlen) {
    if (!asking) return redisCommandArgv(c, argc, argv, argvlen);
    redisReply *ok = NULL, *r = NULL;
    if (redisAppendCommand(c, "ASKING") != REDIS_OK ||
        redisAppendCommandArgv(c, argc, argv, argvlen) != REDIS_OK ||
        redisGetReply(c, (void **)&ok) != REDIS_OK)
        return NULL;
    freeReplyObject(ok);
    if (redisGetReply(c, (void **)&r) != REDIS_OK) return NULL;
    return r;
}

void cluster_note(struct cluster *cl, int kind, const struct cluster_redirect *rd) {
    pthread_mutex_lock(&cl->lock);
    if (kind == CLUSTER_ASK) {
        cl->stats.ask++;
    } else if (kind == CLUSTER_TRYAGAIN) {
        cl->stats.tryagain++;
    } else if (kind == CLUSTER_MOVED) {
        cl->stats.moved++;
        int i = node_index_locked(cl, &rd->to);
        if (i >= 0) cl->owner[rd->slot] = (uint8_t)i;
    }
    pthread_mutex_unlock(&cl->lock);
}

redisReply *cluster_command_argv(struct cluster *cl, const struct cluster_conns *via, int wait_ms,
                                 const char *key, int argc, const char **argv,
                                 const size_t *argvlen, char *errstr, size_t errlen) {
    struct addr target;
    unsigned slot = cluster_key_slot(key, strlen(key));
    cluster_slot_master(cl, slot, &target);
    if (target.port == 0) {
        snprintf(errstr, errlen, "slot %u has no master in the map", slot);
        return NULL;
    }
    int asking = 0;
    for (int hops = 0;; hops++) {
        if (cluster_node(cl, &target) < 0) {
            snprintf(errstr, errlen, "%.200s:%d: more than %d masters", target.host, target.port,
                     CLUSTER_NODES_MAX);
            return NULL;
        }
        redisContext *c = via->get(via->arg, &target, wait_ms, errstr, errlen);
        if (c == NULL) return NULL;
        redisReply *r = send_on(c, asking, argc, argv, argvlen);
        if (r == NULL) {
            /* It may have run: never sent again. */
            snprintf(errstr, errlen, "%.200s:%d: %s", target.host, target.port,
                     c->errstr[0] ? c->errstr : "no reply");
            via->put(via->arg, &target, c, 1);
            return NULL;
        }
        via->put(via->arg, &target, c, 0);
        struct cluster_redirect rd;
        int kind = cluster_reply_kind(r, &rd);
        if (kind == CLUSTER_ANSWER) return r;
        if (hops == cl->max_redirects) {
            snprintf(errstr, errlen, "too many redirects (%d), last %s", hops, r->str);
            freeReplyObject(r);
            return NULL;
        }
        freeReplyObject(r);
        cluster_note(cl, kind, &rd);
        if (kind == CLUSTER_TRYAGAIN) {
            mclock_sleep_ms(CLUSTER_TRYAGAIN_MS); /* same node, same ASKING */
            continue;
        }
        if (kind == CLUSTER_MOVED) refresh_after_moved(cl);
        asking = kind == CLUSTER_ASK;
        target = rd.to;
    }
}

void cluster_stats(struct cluster *cl, struct cluster_stats *out) {
    pthread_mutex_lock(&cl->lock);
    *out = cl->stats;
    pthread_mutex_unlock(&cl->lock);
}
