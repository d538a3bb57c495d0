/* batch.c -- the batched strategy's way of selling: one hold of the lock
 * for every sale queued in this process (see sale.h).
 *
 * DESIGN
 * Sales queue per "<lock key>|<stock key>" in a keyed FIFO wait queue
 * (waitq.h): one batch sells one item, under one lock (with
 * lock.scope=global, items share the lock but not a batch). The first sale
 * to find no owner leads: it takes every sale queued behind it (at most
 * BATCH_MAX in all, its own first), takes the lock once, sells for all of
 * them in one critical section (one GET, one write of k units), answers
 * each, and leaves, which hands the lead to the oldest sale still queued.
 * Only the leader contends in Redis, so a process sends one acquire per
 * batch, however many requests wait; every sale still gets its own unit,
 * order and answer. A queued sale holds no connection, and gives up with
 * lock_timeout once lock.wait-ms has passed while it was still in line.
 * A queue exists only while sales are in it.
 *
 * A queued sale's request lives on its own stack; the leader touches it
 * only between taking it and marking it done, while its owner waits for
 * exactly that. */
#include <stdio.h>
#include <string.h>
#include "config.h"
#include "inventory_int.h"
#include "mclock.h"
#include "sale.h"
#include "waitq.h"

#define BATCH_MAX 256

struct batch_request {
    struct sale_result *r;
    int64_t queued_us;
};

/* Leads one batch: the leader's sale and everything queued behind it. */
static void lead(struct inventory *inv, const struct strategy *s, const struct item_keys *k,
                 const struct sale_faults *f, struct waitq_node *me, struct batch_request *mine) {
    struct waitq_node *taken[BATCH_MAX];
    struct sale_result *rs[BATCH_MAX];
    struct batch_request *reqs[BATCH_MAX];
    int n = 1 + waitq_take(inv->batches, me, taken, BATCH_MAX - 1);
    reqs[0] = mine;
    for (int i = 1; i < n; i++) reqs[i] = taken[i - 1]->data;
    for (int i = 0; i < n; i++) rs[i] = reqs[i]->r;

    int64_t start = mclock_us();
    sale_locked(inv, s, k, f, rs, n, sale_commit_plain);
    /* Each sale waited in the queue, then for the lock. */
    int64_t acquired = start + rs[0]->lock.wait_us;
    for (int i = 0; i < n; i++) rs[i]->wait_ms = (acquired - reqs[i]->queued_us) / 1000;
    for (int i = 1; i < n; i++) waitq_done(inv->batches, taken[i - 1]);
    waitq_leave(inv->batches, me);
}

static void batched_sell(struct inventory *inv, const struct strategy *s, const struct item_keys *k,
                         const struct sale_faults *f, struct sale_result *r) {
    char key[sizeof(k->lock) + sizeof(k->stock) + 2];
    snprintf(key, sizeof(key), "%s|%s", k->lock, k->stock);
    struct batch_request req = {r, mclock_us()};
    struct waitq_node me;
    int wait_ms = f->wait_given ? f->wait_ms : inv->cfg->lock_wait_ms;
    int64_t deadline = req.queued_us + (int64_t)wait_ms * 1000;
    switch (waitq_enter(inv->batches, key, &me, &req, deadline)) {
    case WAITQ_OWNER:
        lead(inv, s, k, f, &me, &req);
        break;
    case WAITQ_DONE:
        break; /* a leader sold for it */
    case WAITQ_TIMEOUT:
        snprintf(r->errstr, sizeof(r->errstr),
                 "lock %.80s still busy after waiting %d ms "
                 "(queued in this process behind a batch)",
                 k->lock, wait_ms);
        r->status = INV_LOCK_TIMEOUT;
        r->wait_ms = wait_ms;
        break;
    default:
        sale_backend(r, "batch", "out of memory");
        break;
    }
}

const struct sale_way sale_batched = {"batched", batched_sell, NULL, 0, NULL};
