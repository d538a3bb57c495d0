/* lock_zookeeper.c -- the demo factory's ZOOKEEPER step: Curator's
 * InterProcessMutex recipe on ZooKeeper (zk.c), and the same lock fenced by
 * its node's czxid.
 *
 * A holder creates an EPHEMERAL|SEQUENCE node /locks/<lock key>/<owner>-lock-
 * (the parents are made persistent when missing), lists the children, and
 * holds the lock when its node has the lowest sequence number. Otherwise it
 * watches only the node just before its own (no herd: one deletion wakes
 * one waiter) and lists again when that one goes, until its acquire's
 * deadline; then it deletes its node and is busy. The release deletes the
 * node.
 *
 * The lease a hold records is the session's: one negotiated session timeout
 * from the send of the last look that found the node (the granting list,
 * then the watchdog's looks while it is held). Its holder never looks at
 * it (LOCK_T_UNHEEDED, as a Curator user does not), so the lease changes
 * no sale: it tells the checker when the server may have ended the hold.
 *
 * All the handles of a process share one session (zk.c), so ownership is
 * the node, not the session. The session is the lease: a holder paused past
 * the session timeout (a stop, a long GC) has its session expired by the
 * server, which removes its node, and the next holder enters while the
 * first one still writes. That is zookeeper's flaw. zookeeper-fenced passes
 * the node's czxid (the zxid of the create, which only grows) as the
 * fencing token that the stock write checks (fenced-sale.lua, against
 * <lock>:fence:zookeeper), so the paused holder's late write is refused.
 *
 * A lost reply to the create (connection loss, time-out) is an unknown
 * outcome: the node may exist. As Curator's protection mode puts a GUID in
 * the name, the node's name starts with the handle's owner id, and the
 * abandon finds the handle's nodes by that prefix and deletes them. Once the
 * session that made them has expired there is nothing left to delete.
 *
 * Threads: a handle's acquire and release run on its thread; the abandon may
 * run on the watchdog's. The session is zk.c's, shared. */
#include <stdio.h>
#include <string.h>
#include "lock_int.h"
#include "mclock.h"
#include "zk.h"

struct zk_hold {
    struct zk_session *s; /* from a granted acquire to its release */
    unsigned gen; /* the session its node was created in (0: none was) */
    char node[320]; /* its node's path; "" when it has none */
    long long czxid; /* the node's creation zxid: the fencing token */
};

#define SEQ_DIGITS 10 /* ZooKeeper's sequence suffix: %010d */

/* /locks/<key>, with any '/' of the key made '_': one node per lock. */
static void lock_dir(const struct lock *l, char *buf, size_t len) {
    snprintf(buf, len, "/locks/%s", l->key);
    for (char *p = buf + strlen("/locks/"); *p; p++)
        if (*p == '/') *p = '_';
}

static int reply_lost(int zrc) { return zrc == ZCONNECTIONLOSS || zrc == ZOPERATIONTIMEOUT; }

/* The session ended: its ephemeral nodes are gone with it. */
static int session_gone(int zrc) { return zrc == ZSESSIONEXPIRED || zrc == ZINVALIDSTATE; }

/* A child's sequence number, or -1 for a child that is no lock node. */
static long long child_seq(const char *name) {
    size_t n = strlen(name);
    if (n < SEQ_DIGITS + 5 || strncmp(name + n - SEQ_DIGITS - 5, "lock-", 5) != 0) return -1;
    long long seq = 0;
    for (const char *p = name + n - SEQ_DIGITS; *p; p++) {
        if (*p < '0' || *p > '9') return -1;
        seq = seq * 10 + (*p - '0');
    }
    return seq;
}

/* Where own stands among the children: 0 first (it holds), 1 behind pred
 * (the child just before it), -1 absent. */
static int find_predecessor(const struct String_vector *v, const char *own, char *pred,
                            size_t len) {
    long long mine = child_seq(own), best = -1;
    int present = 0;
    for (int i = 0; i < v->count; i++) {
        long long seq = child_seq(v->data[i]);
        if (strcmp(v->data[i], own) == 0) present = 1;
        if (seq >= 0 && seq < mine && seq > best) {
            best = seq;
            snprintf(pred, len, "%s", v->data[i]);
        }
    }
    if (!present) return -1;
    return best < 0 ? 0 : 1;
}

/* The persistent parents /locks and /locks/<key>, made if missing. */
static void make_parents(zhandle_t *zh, const char *dir) {
    zoo_create(zh, "/locks", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    zoo_create(zh, dir, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
}

/* Creates the handle's node. LOCK_OK, or LOCK_ERR (l->unknown set when the
 * reply was lost: the node may exist). */
static int create_node(struct lock *l, struct zk *z, struct zk_session *s, const char *dir) {
    struct zk_hold *h = l->priv;
    char prefix[sizeof(h->node)];
    if (snprintf(prefix, sizeof(prefix), "%s/%s-lock-", dir, l->owner) >= (int)sizeof(prefix)) {
        snprintf(l->errstr, sizeof(l->errstr), "zookeeper: the lock's path is too long");
        return LOCK_ERR;
    }
    struct Stat st;
    l->attempts++;
    h->gen = zk_generation(s);
    l->lease_ms = zoo_recv_timeout(zk_handle(s)); /* the negotiated session timeout */
    l->sent_us = mclock_us();
    int zrc = zoo_create2(zk_handle(s), prefix, NULL, -1, &ZOO_OPEN_ACL_UNSAFE,
                          ZOO_EPHEMERAL_SEQUENTIAL, h->node, sizeof(h->node), &st);
    if (zrc == ZNONODE) {
        make_parents(zk_handle(s), dir);
        l->sent_us = mclock_us();
        zrc = zoo_create2(zk_handle(s), prefix, NULL, -1, &ZOO_OPEN_ACL_UNSAFE,
                          ZOO_EPHEMERAL_SEQUENTIAL, h->node, sizeof(h->node), &st);
    }
    if (zrc == ZOK) {
        h->czxid = st.czxid;
        return LOCK_OK;
    }
    h->node[0] = '\0';
    l->unknown = reply_lost(zrc);
    zk_error(z, l->errstr, sizeof(l->errstr), "create", zrc);
    return LOCK_ERR;
}

/* Deletes the handle's node. LOCK_OK; LOCK_LOST when it was gone already
 * (its session expired); LOCK_ERR (l->unknown set when the reply was
 * lost). */
static int delete_node(struct lock *l, struct zk *z, struct zk_session *s) {
    struct zk_hold *h = l->priv;
    int zrc = zoo_delete(zk_handle(s), h->node, -1);
    if (zrc == ZOK || zrc == ZNONODE || session_gone(zrc)) {
        if (zrc != ZOK)
            snprintf(l->errstr, sizeof(l->errstr),
                     "zookeeper %.60s: the lock node %.100s was gone (%.20s): its session expired",
                     zk_connect_string(z), h->node, zerror(zrc));
        h->node[0] = '\0';
        return zrc == ZOK ? LOCK_OK : LOCK_LOST;
    }
    l->unknown = reply_lost(zrc);
    zk_error(z, l->errstr, sizeof(l->errstr), "delete", zrc);
    return LOCK_ERR;
}

/* The acquire gives up with its node still there: deletes it, and answers
 * rc when that worked, LOCK_ERR (l->unknown set: the abandon deletes it)
 * when not. */
static int withdraw(struct lock *l, struct zk *z, struct zk_session *s, int rc) {
    char why[sizeof(l->errstr)];
    snprintf(why, sizeof(why), "%s", l->errstr);
    int del = delete_node(l, z, s);
    if (del == LOCK_ERR) {
        l->unknown = 1;
        return LOCK_ERR;
    }
    snprintf(l->errstr, sizeof(l->errstr), "%s", why);
    return rc;
}

/* Waits until the handle's node is the first: LOCK_OK, LOCK_BUSY (the
 * deadline came first; the node is deleted), LOCK_ERR. */
static int wait_turn(struct lock *l, struct zk *z, struct zk_session *s, const char *dir) {
    struct zk_hold *h = l->priv;
    const char *own = h->node + strlen(dir) + 1;
    for (;;) {
        struct String_vector v = {0, NULL};
        l->sent_us = mclock_us(); /* the granting look dates the lease */
        int zrc = zoo_get_children(zk_handle(s), dir, 0, &v);
        if (zrc != ZOK) {
            zk_error(z, l->errstr, sizeof(l->errstr), "get children", zrc);
            return session_gone(zrc) ? LOCK_ERR : withdraw(l, z, s, LOCK_ERR);
        }
        char pred[256] = "";
        int at = find_predecessor(&v, own, pred, sizeof(pred));
        deallocate_String_vector(&v);
        if (at < 0) {
            snprintf(l->errstr, sizeof(l->errstr),
                     "zookeeper %.80s: the lock node %.100s is gone: its session expired",
                     zk_connect_string(z), h->node);
            h->node[0] = '\0';
            return LOCK_ERR;
        }
        if (at == 0) return LOCK_OK;
        char path[320];
        snprintf(path, sizeof(path), "%s/%s", dir, pred);
        int w = zk_wait_gone(s, path, l->deadline_us, &zrc);
        if (w == ZK_WAIT_TIMEOUT) {
            snprintf(l->errstr, sizeof(l->errstr), "held by %.200s", pred);
            return withdraw(l, z, s, LOCK_BUSY);
        }
        if (w == ZK_WAIT_ERROR) {
            zk_error(z, l->errstr, sizeof(l->errstr), "watch", zrc);
            return session_gone(zrc) ? LOCK_ERR : withdraw(l, z, s, LOCK_ERR);
        }
    }
}

static int zookeeper_acquire(struct lock *l) {
    struct zk_hold *h = l->priv;
    if (l->holds > 0) return LOCK_OK; /* re-entry, through the handle */
    struct zk *z = lock_store_state(l);
    struct zk_session *s = zk_session_get(z, l->deadline_us, l->errstr, sizeof(l->errstr));
    if (!s) return LOCK_ERR;
    char dir[256];
    lock_dir(l, dir, sizeof(dir));
    int rc = create_node(l, z, s, dir);
    if (rc == LOCK_OK) rc = wait_turn(l, z, s, dir);
    if (rc == LOCK_OK) {
        h->s = s;
        return LOCK_OK;
    }
    zk_session_put(s);
    return rc;
}

static int zookeeper_release(struct lock *l) {
    struct zk_hold *h = l->priv;
    if (l->holds > 0) return LOCK_OK; /* an inner hold */
    lock_release_pause(l);
    struct zk_session *s = h->s;
    h->s = NULL;
    if (!s) return LOCK_LOST;
    int rc = delete_node(l, lock_store_state(l), s);
    zk_session_put(s);
    return rc;
}

/* The watchdog's look at a held lock: its node is still there. The look's
 * send dates the lease, as the granting one did: the server heard from the
 * session then, and expires it no sooner than one session timeout later.
 * The binding's own pings keep the session; this only dates it. */
static int zookeeper_renew(struct lock *l, struct lock_link *k) {
    struct zk_hold *h = l->priv;
    if (!h->s || !h->node[0]) return LOCK_LOST;
    struct Stat st;
    int zrc = zoo_exists(zk_handle(h->s), h->node, 0, &st);
    if (zrc == ZOK) return LOCK_OK;
    if (zrc == ZNONODE || session_gone(zrc)) return LOCK_LOST;
    zk_error(lock_store_state(l), k->errstr, sizeof(k->errstr), "exists", zrc);
    return LOCK_ERR;
}

/* Deletes every node of the handle's owner, found by its name, in the
 * session that made them; once that session has ended they are gone. */
static int zookeeper_abandon(struct lock *l, struct lock_link *k) {
    struct zk_hold *h = l->priv;
    struct zk *z = lock_store_state(l);
    if (!h->gen || zk_current_generation(z) != h->gen) return LOCK_OK;
    struct zk_session *s = zk_session_get(z, INT64_MAX, k->errstr, sizeof(k->errstr));
    if (!s) return LOCK_ERR;
    int rc = LOCK_OK;
    char dir[256], mine[80];
    lock_dir(l, dir, sizeof(dir));
    snprintf(mine, sizeof(mine), "%s-lock-", l->owner);
    struct String_vector v = {0, NULL};
    int zrc = zk_generation(s) == h->gen ? zoo_get_children(zk_handle(s), dir, 0, &v) : ZNONODE;
    for (int i = 0; zrc == ZOK && i < v.count; i++) {
        if (strncmp(v.data[i], mine, strlen(mine)) != 0) continue;
        char path[320];
        snprintf(path, sizeof(path), "%s/%s", dir, v.data[i]);
        int d = zoo_delete(zk_handle(s), path, -1);
        if (d != ZOK && d != ZNONODE) zrc = d;
    }
    deallocate_String_vector(&v);
    if (zrc != ZOK && zrc != ZNONODE && !session_gone(zrc)) {
        zk_error(z, k->errstr, sizeof(k->errstr), "abandon", zrc);
        rc = LOCK_ERR;
    } else {
        h->node[0] = '\0';
    }
    zk_session_put(s);
    return rc;
}

static void zookeeper_report(const struct lock *l, struct lock_report *r) {
    const struct zk_hold *h = l->priv;
    r->token = h->czxid;
}

/* The end_session fault: the hold's session is expired from outside
 * (zk_session_end), its node with it, while the holder goes on. The
 * session is the process's: every hold of the process ends with it. */
static int zookeeper_end_session(struct lock *l, char *why, size_t whylen) {
    struct zk_hold *h = l->priv;
    if (!h->s) {
        snprintf(why, whylen, "zookeeper: the hold has no session");
        return LOCK_ERR;
    }
    return zk_session_end(h->s, why, whylen) == 0 ? LOCK_OK : LOCK_ERR;
}

const struct lock_type lock_type_zookeeper = {
    .name = "zookeeper",
    .family = "zookeeper",
    .flags = LOCK_T_WATCHED | LOCK_T_LEASED | LOCK_T_UNHEEDED,
    .store = &lock_store_zookeeper,
    .priv_size = sizeof(struct zk_hold),
    .acquire = zookeeper_acquire,
    .release = zookeeper_release,
    .renew = zookeeper_renew,
    .abandon = zookeeper_abandon,
    .end_session = zookeeper_end_session,
};

const struct lock_type lock_type_zookeeper_fenced = {
    .name = "zookeeper-fenced",
    .family = "zookeeper",
    .flags = LOCK_T_WATCHED | LOCK_T_LEASED | LOCK_T_UNHEEDED,
    .store = &lock_store_zookeeper,
    .priv_size = sizeof(struct zk_hold),
    .acquire = zookeeper_acquire,
    .release = zookeeper_release,
    .renew = zookeeper_renew,
    .abandon = zookeeper_abandon,
    .report = zookeeper_report,
    .end_session = zookeeper_end_session,
};

/* ---- the store ------------------------------------------------------------------ */

static int store_configured(const struct lock_core_options *o) {
    return o->zookeeper_connect && o->zookeeper_connect[0];
}

static void *store_open(const struct lock_core_options *o, char *errstr, size_t errlen) {
    return zk_open(o->zookeeper_connect, o->zookeeper_session_timeout_ms, errstr, errlen);
}

static int store_ready(void *state, char *why, size_t whylen) {
    return zk_ready(state, why, whylen);
}

static void store_close(void *state) { zk_close(state); }

const struct lock_store lock_store_zookeeper = {
    .name = "zookeeper",
    .setting = "zookeeper.connect",
    .configured = store_configured,
    .open = store_open,
    .ready = store_ready,
    .close = store_close,
};
