/* lock_redlock.c -- Redlock over the independent masters of redlock.nodes
 * (redlock.c), with RedissonMultiLock's semantics: Redisson's reentrant
 * hash lock on each master, held when a quorum of the CONFIGURED masters
 * granted it within its validity.
 *
 *   votes    >= N/2+1 of the N configured (not of the N reachable)
 *   validity  = TTL - elapsed - (0.01 * TTL + 2 ms), on the monotonic clock,
 *               so the lease deadline is the round's send time + TTL - drift
 *
 * A round that falls short gives the lock up on every master that granted
 * it or whose answer was lost (no partial win is kept; for a nested hold,
 * only where it was granted: see acquire_round), then waits for an
 * unlock message on a master that refused (where the holder holds the lock
 * and publishes on release), at most the holder's remaining lease. After a
 * round whose votes were split between racers, a random pause from a
 * per-thread generator seeded per process keeps them from colliding again in
 * lockstep. Too few masters up (refused or closed, not merely slow) or
 * allowed to vote for any quorum is an outage: it fails at once, not after
 * lock.wait-ms. The watchdog renews on every master and must reach a
 * quorum. The last release, and the compensation after a lost reply, remove
 * the owner's field on every master, whatever count it had there.
 *
 * It still relies on bounded clock drift and process pauses shorter than
 * the validity. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <uuid/uuid.h>
#include "lock_hash.h"
#include "mclock.h"
#include "pubsub.h"
#include "redlock.h"
#include "rpool.h"

struct redlock_state {
    int nvotes;
    struct {
        int outcome; /* LOCK_VOTE_* */
        int us;
    } votes[LOCK_MAX_NODES];
    int dirty; /* a failed round could not give up every master */
    int count[LOCK_MAX_NODES]; /* holds each master is known to have granted this handle */
};

/* Outcome of one acquire round, beyond its votes. */
struct round_result {
    int64_t pttl_ms; /* the longest lease seen on a master that refused */
    int split; /* some masters voted yes */
    int can_vote; /* masters neither down nor withheld */
};

/* Gives up on the masters flagged in which[]: the owner's field deleted
 * when it holds nothing else, one count taken off a nested hold. Returns
 * how many answered that it was ours; *unanswered counts those flagged that
 * did not answer. */
static int give_back(struct lock *l, const int *which, int *unanswered, struct lock_link *k) {
    struct redlock *rl = l->core->redlock;
    struct redlock_leg legs[LOCK_MAX_NODES];
    redlock_legs_open(rl, legs, which, k);
    char channel[256], lease[24];
    lock_hash_channel(l->key, channel, sizeof(channel));
    snprintf(lease, sizeof(lease), "%d", lock_lease_ms(l));
    int ours = 0;
    if (l->holds == 0) {
        const char *argv[] = {l->key, channel, l->owner, "0"};
        redlock_round_then(rl, legs, "hash-abandon", 2, 4, argv, lock_gate_pass, l);
    } else {
        const char *argv[] = {l->key, channel, "0", lease, l->owner};
        redlock_round(rl, legs, "hash-unlock", 2, 5, argv);
    }
    *unanswered = 0;
    for (int i = 0; i < redlock_nodes(rl); i++) {
        const redisReply *r = legs[i].reply;
        if (!which[i]) continue;
        if (!r)
            *unanswered += !legs[i].down; /* a master down lost it anyway */
        else if (r->type == REDIS_REPLY_INTEGER)
            ours += l->holds == 0 ? r->integer == 1 : 1;
    }
    redlock_legs_close(rl, legs, k);
    return ours;
}

/* Tallies one round's legs into the votes of l; returns the yes count and
 * flags granted and unknown masters. */
static int tally(struct lock *l, struct redlock_leg *legs, const int *want, int64_t round_us,
                 int *granted, int *unknown, struct round_result *res) {
    struct redlock *rl = l->core->redlock;
    struct redlock_state *st = l->priv;
    int yes = 0;
    res->pttl_ms = -1;
    res->can_vote = 0;
    st->nvotes = redlock_nodes(rl);
    for (int i = 0; i < st->nvotes; i++) {
        const struct redlock_leg *g = &legs[i];
        const redisReply *r = g->reply;
        int v;
        granted[i] = unknown[i] = 0;
        if (!want[i]) {
            v = LOCK_VOTE_RESTARTED;
        } else if (r && r->type == REDIS_REPLY_NIL) {
            v = LOCK_VOTE_YES;
            granted[i] = 1;
            yes++;
        } else if (r && r->type == REDIS_REPLY_INTEGER) {
            v = LOCK_VOTE_BUSY;
            if (r->integer > res->pttl_ms) res->pttl_ms = r->integer;
        } else {
            v = LOCK_VOTE_ERROR;
            unknown[i] = g->sent; /* sent, answer lost: it may hold our lock */
        }
        res->can_vote += want[i] && !g->down;
        st->votes[i].outcome = v;
        st->votes[i].us = g->got_us ? (int)(g->got_us - g->sent_us) : (int)round_us;
        redlock_count(rl, i, v);
    }
    return yes;
}

/* One acquire round: LOCK_OK (l->sent_us is the round's send time), LOCK_BUSY,
 * or LOCK_ERR when too few masters can vote for a quorum at all. */
static int acquire_round(struct lock *l, struct round_result *res) {
    struct redlock *rl = l->core->redlock;
    struct redlock_state *st = l->priv;
    int n = redlock_nodes(rl), q = redlock_quorum(rl);
    int64_t t0 = mclock_us();
    int want[LOCK_MAX_NODES];
    for (int i = 0; i < n; i++) want[i] = 1;
    struct redlock_leg legs[LOCK_MAX_NODES];
    redlock_legs_open(rl, legs, want, NULL);
    /* Only now: a new connection is what reads a master's uptime. */
    int64_t opened = mclock_us();
    for (int i = 0; i < n; i++) legs[i].skip = !(want[i] = redlock_may_vote(rl, i, opened));
    char lease[24];
    snprintf(lease, sizeof(lease), "%d", lock_lease_ms(l));
    const char *argv[] = {l->key, lease, l->owner};
    redlock_round(rl, legs, "hash-lock", 1, 3, argv);
    int64_t t1 = mclock_us();
    l->attempts++;
    int granted[LOCK_MAX_NODES], unknown[LOCK_MAX_NODES];
    int yes = tally(l, legs, want, t1 - t0, granted, unknown, res);
    redlock_legs_close(rl, legs, NULL);

    int64_t validity_ms =
        lock_lease_ms(l) - (mclock_us() - t0) / 1000 - lock_margin_us(lock_lease_ms(l)) / 1000;
    res->split = yes > 0;
    if (yes >= q && validity_ms > 0) {
        l->sent_us = t0; /* the lease runs from the round's send */
        st->dirty = 0;
        for (int i = 0; i < n; i++) st->count[i] = (l->holds ? st->count[i] : 0) + granted[i];
        return LOCK_OK;
    }
    /* A first hold gives back every master that granted it or may have.
     * A nested one gives back only those that granted it: on a master whose
     * answer was lost the count may not have grown, and taking one off
     * there could end the outer hold on it. A count left there too many is
     * removed with the rest by the last release (hash-abandon). */
    int undo[LOCK_MAX_NODES], any = 0, unanswered = 0;
    for (int i = 0; i < n; i++) any |= (undo[i] = granted[i] || (unknown[i] && l->holds == 0));
    if (any) give_back(l, undo, &unanswered, NULL);
    st->dirty = unanswered > 0;
    if (res->can_vote < q) {
        snprintf(l->errstr, sizeof(l->errstr),
                 "only %d of %d Redlock masters can vote (up, and up for lock.ttl-ms), %d needed",
                 res->can_vote, n, q);
        return LOCK_ERR;
    }
    if (yes >= q)
        snprintf(l->errstr, sizeof(l->errstr), "quorum reached too late (validity %lld ms)",
                 (long long)validity_ms);
    else
        snprintf(l->errstr, sizeof(l->errstr), "%d of %d votes, %d needed", yes, n, q);
    return LOCK_BUSY;
}

/* ---- waiting ------------------------------------------------------------ */

static _Thread_local uint64_t rng_state;

/* xorshift64*, seeded per thread from a uuid, the thread id and the clock:
 * two processes never back off in lockstep. */
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

/* Sleeps a random 0..spin_sleep_ms, never past the deadline. */
static void jitter(const struct lock *l) {
    int span = l->core->spin_sleep_ms > 0 ? l->core->spin_sleep_ms : 1;
    int64_t ms = (int64_t)(rng_next() % (uint64_t)(span + 1));
    int64_t left = (l->deadline_us - mclock_us()) / 1000;
    if (ms > left) ms = left;
    mclock_sleep_ms((int)ms);
}

/* The master to hear the unlock on: one that refused in the last round
 * (the holder holds the lock there, and publishes there when it lets go)
 * and whose subscriber is up; else any that answered; -1 if none. */
static int listening_node(const struct lock *l) {
    const struct redlock_state *st = l->priv;
    struct redlock *rl = l->core->redlock;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < st->nvotes; i++) {
            int v = st->votes[i].outcome;
            int ok = pass == 0 ? v == LOCK_VOTE_BUSY : v >= LOCK_VOTE_BUSY;
            if (ok && pubsub_up(l->core->pubsub, redlock_pool(rl, i))) return i;
        }
    return -1;
}

static int redlock_acquire(struct lock *l) {
    struct redlock *rl = l->core->redlock;
    struct redlock_state *st = l->priv;
    if (!rl) {
        snprintf(l->errstr, sizeof(l->errstr), "redlock.nodes is not configured");
        return LOCK_ERR;
    }
    struct round_result res;
    int rc = acquire_round(l, &res);
    if (rc == LOCK_BUSY && mclock_us() < l->deadline_us) {
        char channel[256], err[128];
        lock_hash_channel(l->key, channel, sizeof(channel));
        struct pubsub_waiter w;
        int node = listening_node(l);
        int subscribed =
            node >= 0 && pubsub_wait_begin(l->core->pubsub, &w, redlock_pool(rl, node), channel,
                                           l->deadline_us, err, sizeof(err)) == 0;
        /* Subscribed first, then tried again, as in the redisson type. */
        while ((rc = acquire_round(l, &res)) == LOCK_BUSY) {
            int64_t now = mclock_us();
            if (now >= l->deadline_us) break;
            if (!subscribed) {
                jitter(l); /* nobody can tell us of an unlock: back off a random while */
                continue;
            }
            /* A lease expiring this very millisecond (PTTL 0), as at the
             * end of the holder's lease, when a racer took some masters
             * first: try again at once, not after a second. */
            int64_t until = now + (res.pttl_ms >= 0 ? (res.pttl_ms + 1) * 1000 : 1000000);
            if (until > l->deadline_us) until = l->deadline_us;
            pubsub_wait(&w, until);
            /* Racers that split the votes all gave up and were woken
             * together: a random pause keeps them from colliding again. */
            if (res.split) jitter(l);
        }
        if (subscribed) pubsub_wait_end(&w);
    }
    if (rc == LOCK_OK)
        l->errstr[0] = '\0';
    else if (st->dirty)
        l->unknown = 1; /* a master may still hold it: the core gives it up */
    return rc;
}

/* The last release removes the owner's field on every master, even those
 * that failed; an inner one takes a count off only where that nested hold
 * is known to have been granted (a master whose answer was lost may never
 * have counted it, and there the count is the outer hold's). */
static int redlock_release(struct lock *l) {
    struct redlock *rl = l->core->redlock;
    struct redlock_state *st = l->priv;
    int which[LOCK_MAX_NODES], unanswered;
    for (int i = 0; i < redlock_nodes(rl); i++) {
        which[i] = l->holds == 0 || st->count[i] > 1;
        st->count[i] = l->holds == 0 ? 0 : st->count[i] - which[i];
    }
    lock_release_pause(l);
    int ours = give_back(l, which, &unanswered, NULL);
    if (ours >= redlock_quorum(rl)) return LOCK_OK;
    if (unanswered > 0) {
        snprintf(l->errstr, sizeof(l->errstr), "%d Redlock masters did not answer the release",
                 unanswered);
        return LOCK_ERR;
    }
    return LOCK_LOST;
}

static int redlock_renew(struct lock *l, struct lock_link *k) {
    struct redlock *rl = l->core->redlock;
    int n = redlock_nodes(rl), all[LOCK_MAX_NODES];
    for (int i = 0; i < n; i++) all[i] = 1;
    struct redlock_leg legs[LOCK_MAX_NODES];
    redlock_legs_open(rl, legs, all, k);
    int64_t now = mclock_us();
    for (int i = 0; i < n; i++) legs[i].skip = !redlock_may_vote(rl, i, now); /* would not count */
    char lease[24];
    snprintf(lease, sizeof(lease), "%d", lock_lease_ms(l));
    const char *argv[] = {l->key, lease, l->owner};
    redlock_round(rl, legs, "hash-renew", 1, 3, argv);
    int renewed = 0, refused = 0;
    for (int i = 0; i < n; i++) {
        const redisReply *r = legs[i].reply;
        if (r && r->type == REDIS_REPLY_INTEGER) {
            renewed += r->integer == 1;
            refused += r->integer != 1;
        }
    }
    redlock_legs_close(rl, legs, k);
    if (renewed >= redlock_quorum(rl)) return LOCK_OK;
    return n - refused < redlock_quorum(rl) ? LOCK_LOST : LOCK_ERR;
}

static int redlock_abandon(struct lock *l, struct lock_link *k) {
    struct redlock *rl = l->core->redlock;
    int all[LOCK_MAX_NODES], unanswered;
    for (int i = 0; i < redlock_nodes(rl); i++) all[i] = 1;
    int holds = l->holds;
    l->holds = 0; /* every count of the owner's, on every master */
    give_back(l, all, &unanswered, k);
    l->holds = holds;
    if (unanswered == 0) return LOCK_OK;
    snprintf(k->errstr, sizeof(k->errstr), "%d Redlock masters did not answer", unanswered);
    return LOCK_ERR;
}

static void redlock_report(const struct lock *l, struct lock_report *r) {
    const struct redlock_state *st = l->priv;
    struct redlock *rl = l->core->redlock;
    if (!rl) return;
    r->quorum = redlock_quorum(rl);
    r->nvotes = st->nvotes;
    for (int i = 0; i < st->nvotes; i++) {
        snprintf(r->votes[i].node, sizeof(r->votes[i].node), "%s", redlock_node_name(rl, i));
        r->votes[i].outcome = st->votes[i].outcome;
        r->votes[i].us = st->votes[i].us;
    }
}

const struct lock_type lock_type_redlock = {
    .name = "redlock",
    .family = "redlock",
    .flags = LOCK_T_LEASED | LOCK_T_WATCHED | LOCK_T_CHECKED | LOCK_T_GATED | LOCK_T_QUORUM,
    .priv_size = sizeof(struct redlock_state),
    .acquire = redlock_acquire,
    .release = redlock_release,
    .renew = redlock_renew,
    .abandon = redlock_abandon,
    .report = redlock_report,
};
