/* sale.c -- the sale path: take the strategy's lock, run the demo's
 * critical section (read, check, write) with the probe around it, write,
 * release (see inventory_int.h and sale.h).
 *
 * DESIGN
 * A locked sale is one call to the lock core, lock_hold, with a plan of
 * four steps: what to read (section_read), what the read means
 * (section_inside), what to write (section_write) and what the write's
 * reply means (section_done). The core runs them in its fixed order
 * (acquire, read, flush, the faults, the commit point, write, release), so
 * this file says what a sale does, never when.
 *
 * A locked sale costs two round trips besides its acquire: the probe's entry
 * pipelined with GET stock; then the write (one all-or-nothing script that
 * also records the lock family and the history event), the probe's exit and
 * the release, in one write. Both go through the lock's handle, on the
 * holder's connection, which this file never sees: the entry (probe.c) and
 * the GET are appended (lock_append) and the core sends them together; the
 * write is appended, and goes out with the release. Their replies come
 * back by index (lock_reply), each command of the hold counting, the
 * probe's entry first. Only a one-script sale (atomic, script_sell),
 * which takes no lock, runs its script on a pooled connection of its own,
 * or pipelined with others (pipeline.c).
 *
 * The commit point. Right before the write step, the core stops the lock's
 * renewal (waiting only for a renewal of this lock in flight) and checks
 * the lease one last time (h->may_commit): a lock whose renewal failed, or
 * whose enforced lease has run out, sells nothing and answers lock_lost.
 * The write then goes out at once with the release, and it is conditional
 * in Redis too: the script looks at the lock as it applies (the guard,
 * h->guard), and for the types that enforce their lease refuses to
 * write once the lock is no longer the holder's. So a holder stalled after
 * its last check (a pause, a slow scheduler) can never land a stale write.
 * For the holds that write nothing (sold out, lock lost, bad stock), the
 * history event goes instead of the write, through a script that looks at
 * the lock the same way.
 *
 * The history dates each hold by what happened: granted_us when the
 * acquire returned, released_us when the write (or event) and the release
 * were sent, lease_us the lease deadline as the holder knew it at that
 * send, and, from the script itself, written_us (Redis's clock as it
 * applied) and owned (whether the lock was the holder's then).
 *
 * Nothing here is ever re-sent after an I/O error: a write whose reply was
 * lost may have been applied, so the sale answers backend_unavailable, and
 * the lock core gives the lock up on a fresh connection.
 *
 * Threads: any sale thread; nothing is shared but the atomic order
 * counter. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "config.h"
#include "inventory_int.h"
#include "lock.h"
#include "mclock.h"
#include "probe.h"
#include "rpool.h"
#include "sale.h"
#include "script.h"
#include "strategy.h"

#define HISTORY_ARGS 20
#define STOCK_EXACT_MAX (1LL << 53)

/* The write scripts' fixed arguments by name, as their headers list them
 * (script.h; tests/check_script.c holds the two together). */
static const struct script_sig sig_sale_write = {"sale-write",
                                                 5,
                                                 12,
                                                 {"stock", "ledger", "families", "history", "lock",
                                                  "new_stock", "family", "cap", "guard", "owner",
                                                  "enforce", "n"}};
static const struct script_sig sig_fenced_sale = {"fenced-sale",
                                                  6,
                                                  12,
                                                  {"stock", "ledger", "fence", "families",
                                                   "history", "lock", "token", "new_stock", "entry",
                                                   "family", "cap", "owner"}};
static const struct script_sig sig_handoff_sale = {"handoff-sale",
                                                   6,
                                                   13,
                                                   {"stock", "ledger", "families", "history",
                                                    "lock", "queue", "new_stock", "family", "cap",
                                                    "owner", "lease", "channel_prefix", "entry"}};
static const struct script_sig sig_history_event = {
    "history-event", 2, 6, {"history", "lock", "cap", "guard", "owner", "outcome"}};

static const struct script_sig sig_fence_raise = {"fence-raise", 1, 2, {"fence", "token"}};

const struct script_sig *const sale_script_sigs[] = {&sig_sale_write,   &sig_fenced_sale,
                                                     &sig_handoff_sale, &sig_history_event,
                                                     &sig_fence_raise,  NULL};

/* One critical section, for n sales at once (n is 1 but for batched). */
struct sale_section {
    struct inventory *inv;
    const struct strategy *s;
    const struct lock_type *t; /* s's lock, or its read half */
    const struct item_keys *k;
    const struct sale_faults *f;
    sale_commit commit;
    struct lock_hold *h; /* the hold, as the lock core runs it */
    struct sale_result **rs;
    int n;
    int entry; /* reply index of the probe's entry, or -1 */
    int raised; /* reply index of the fence's raise, or -1 */
    int rc; /* the section's outcome so far: 0, or an INV_* failure */
    long long stock; /* the stock read */
    long long sold; /* units written */
    char (*entries)[128]; /* ledger entries "unit|order|port" */
    int commit_reply; /* index of the write's reply in the pipeline, or -1 */
    /* The history fields shared by the section's events. */
    const char *hist[HISTORY_ARGS];
    int nhist;
    char bufs[6][32]; /* history_fields: the numbers of hist */
};

int sale_backend(struct sale_result *r, const char *what, const char *why) {
    snprintf(r->errstr, sizeof(r->errstr), "Redis is unavailable (%.32s: %.300s)", what, why);
    return r->status = INV_BACKEND;
}

int sale_fail_all(struct sale_result **rs, int n, int status, const char *errstr) {
    for (int i = 0; i < n; i++) {
        rs[i]->status = status;
        if (rs[i] != rs[0] || errstr != rs[0]->errstr)
            snprintf(rs[i]->errstr, sizeof(rs[i]->errstr), "%s", errstr);
    }
    return status;
}

/* ---- the history event ---------------------------------------------------- */

/* Fills sec->hist with the fields its events share. */
static void history_fields(struct sale_section *sec) {
    sec->nhist = 0;
    if (sec->inv->history_max <= 0) return; /* no history: nothing to send */
    const struct lock_report *rep = &sec->h->report;
    struct sale_result *r = sec->rs[0];
    int64_t released = mclock_wall_us();
    snprintf(sec->bufs[0], sizeof(sec->bufs[0]), "%" PRId64, rep->granted_wall_us);
    snprintf(sec->bufs[1], sizeof(sec->bufs[1]), "%" PRId64, released);
    snprintf(sec->bufs[2], sizeof(sec->bufs[2]), "%" PRId64, rep->lease_wall_us);
    snprintf(sec->bufs[3], sizeof(sec->bufs[3]), "%lld", sec->stock);
    snprintf(sec->bufs[4], sizeof(sec->bufs[4]), "%lld", rep->token);
    snprintf(sec->bufs[5], sizeof(sec->bufs[5]), "%d", sec->h->late);
    snprintf(r->lock.owner, sizeof(r->lock.owner), "%s", rep->owner);
    const char *h[HISTORY_ARGS] = {
        "instance",   sec->inv->instance, "port",        sec->inv->port_text,
        "owner",      r->lock.owner,      "strategy",    sec->s->name,
        "granted_us", sec->bufs[0],       "released_us", sec->bufs[1],
        "lease_us",   sec->bufs[2],       "stock_read",  sec->bufs[3],
        "token",      sec->bufs[4],       "late",        sec->bufs[5],
    };
    memcpy(sec->hist, h, sizeof(h));
    sec->nhist = HISTORY_ARGS;
}

/* Appends the event of a hold that wrote nothing (outcome). */
static void history_nothing(struct sale_section *sec, const char *outcome) {
    if (sec->inv->history_max <= 0) return;
    char cap[16];
    snprintf(cap, sizeof(cap), "%d", sec->inv->history_max);
    const struct lock_guard *g = &sec->h->guard;
    const struct script_kv kv[] = {
        {"history", sec->k->history}, {"lock", g->key},    {"cap", cap},
        {"guard", g->kind},           {"owner", g->field}, {"outcome", outcome}};
    const struct script_sig *sig = &sig_history_event;
    const char *argv[SCRIPT_ARGS_MAX + HISTORY_ARGS];
    if (script_args(sig, argv, kv, (int)(sizeof(kv) / sizeof(kv[0]))) < 0) return;
    memcpy(argv + sig->nargs, sec->hist, sizeof(sec->hist[0]) * (size_t)sec->nhist);
    lock_append_script(sec->h->l, sig->script, sig->nkeys, sig->nargs + sec->nhist, argv, NULL);
}

/* ---- writes --------------------------------------------------------------- */

int sale_commit_plain(struct sale_section *sec) {
    int n = (int)sec->sold, argc = 0;
    const char **argv = malloc(sizeof(*argv) * (size_t)(SCRIPT_ARGS_MAX + n + HISTORY_ARGS));
    if (!argv) return -1;
    char stock[24], cap[16], count[16];
    snprintf(stock, sizeof(stock), "%lld", sec->stock - sec->sold);
    snprintf(cap, sizeof(cap), "%d", sec->inv->history_max);
    snprintf(count, sizeof(count), "%d", n);
    const struct item_keys *k = sec->k;
    const struct lock_guard *g = &sec->h->guard;
    const struct script_kv kv[] = {{"stock", k->stock},
                                   {"ledger", k->ledger},
                                   {"families", k->families},
                                   {"history", k->history},
                                   {"lock", g->key},
                                   {"new_stock", stock},
                                   {"family", lock_type_family(sec->t)},
                                   {"cap", cap},
                                   {"guard", g->kind},
                                   {"owner", g->field},
                                   {"enforce", g->enforce ? "1" : "0"},
                                   {"n", count}};
    const struct script_sig *sig = &sig_sale_write;
    if (script_args(sig, argv, kv, (int)(sizeof(kv) / sizeof(kv[0]))) < 0) {
        free(argv);
        return -1;
    }
    argc = sig->nargs;
    for (int i = 0; i < n; i++) argv[argc++] = sec->entries[i];
    for (int i = 0; i < sec->nhist; i++) argv[argc++] = sec->hist[i];
    int rc = lock_append_script(sec->h->l, sig->script, sig->nkeys, argc, argv, NULL);
    free(argv);
    return rc;
}

static int commit_fenced(struct sale_section *sec) {
    char token[24], stock[24], cap[16];
    snprintf(token, sizeof(token), "%lld", sec->h->report.token);
    snprintf(stock, sizeof(stock), "%lld", sec->stock - 1);
    snprintf(cap, sizeof(cap), "%d", sec->inv->history_max);
    const struct item_keys *k = sec->k;
    const struct script_kv kv[] = {{"stock", k->stock},
                                   {"ledger", k->ledger},
                                   {"fence", sec->h->fence},
                                   {"families", k->families},
                                   {"history", k->history},
                                   {"lock", sec->h->guard.key},
                                   {"token", token},
                                   {"new_stock", stock},
                                   {"entry", sec->entries[0]},
                                   {"family", lock_type_family(sec->t)},
                                   {"cap", cap},
                                   {"owner", sec->h->guard.field}};
    const struct script_sig *sig = &sig_fenced_sale;
    const char *argv[SCRIPT_ARGS_MAX + HISTORY_ARGS];
    if (script_args(sig, argv, kv, (int)(sizeof(kv) / sizeof(kv[0]))) < 0) return -1;
    memcpy(argv + sig->nargs, sec->hist, sizeof(sec->hist[0]) * (size_t)sec->nhist);
    return lock_append_script(sec->h->l, sig->script, sig->nkeys, sig->nargs + sec->nhist, argv,
                              NULL);
}

/* A fence whose tokens come from another store (a czxid, a counter value)
 * is seen by Redis only as each holder writes, so a holder that has read
 * and holds on has not shown its token yet, and a stale holder's write
 * landing meanwhile would pass the fence inside its hold. Its read
 * therefore raises the fence to its token first (fence-raise.lua, in the
 * read's pipeline): from then on an older token's write is refused. The
 * index of its reply; -1 when the way shows no token (sale_store_fenced
 * does: Redis's own fence is bumped by the grant itself); -2 when it could
 * not be appended. */
static int raise_fence(struct sale_section *sec) {
    if (!sec->s->way->shows_token) return -1;
    char token[24];
    snprintf(token, sizeof(token), "%lld", sec->h->report.token);
    const struct script_kv kv[] = {{"fence", sec->h->fence}, {"token", token}};
    const char *argv[2];
    if (script_args(&sig_fence_raise, argv, kv, 2) < 0) return -2;
    int i = lock_append_script(sec->h->l, sig_fence_raise.script, 1, 2, argv, NULL);
    return i < 0 ? -2 : i;
}

/* The errors handoff-sale.lua answers itself, the lock handed on all the
 * same: any other error means it did not run (or stopped partway), and
 * the release follows. */
static const char *const handoff_sale_errors[] = {"LOST", "BADKEY", "CHANGED", NULL};

/* The handoff write: one script checks the lease, writes, and hands the
 * lock on with the new stock (handoff-sale.lua); it ends the hold, so the
 * release sends nothing more. */
static int commit_handoff(struct sale_section *sec) {
    if (!sec->h->hands_on) return -1;
    const struct lock_handover *h = &sec->h->handover;
    char stock[24], cap[16];
    snprintf(stock, sizeof(stock), "%lld", sec->stock - 1);
    snprintf(cap, sizeof(cap), "%d", sec->inv->history_max);
    const struct item_keys *k = sec->k;
    const struct script_kv kv[] = {{"stock", k->stock},
                                   {"ledger", k->ledger},
                                   {"families", k->families},
                                   {"history", k->history},
                                   {"lock", h->key},
                                   {"queue", h->queue},
                                   {"new_stock", stock},
                                   {"family", lock_type_family(sec->t)},
                                   {"cap", cap},
                                   {"owner", h->owner},
                                   {"lease", h->lease_ms},
                                   {"channel_prefix", h->channel_prefix},
                                   {"entry", sec->entries[0]}};
    const struct script_sig *sig = &sig_handoff_sale;
    const char *argv[SCRIPT_ARGS_MAX + HISTORY_ARGS];
    if (script_args(sig, argv, kv, (int)(sizeof(kv) / sizeof(kv[0]))) < 0) return -1;
    memcpy(argv + sig->nargs, sec->hist, sizeof(sec->hist[0]) * (size_t)sec->nhist);
    return lock_append_release(sec->h->l, sig->script, handoff_sale_errors, sig->nkeys,
                               sig->nargs + sec->nhist, argv, NULL);
}

/* ---- the critical section ------------------------------------------------- */

/* Fails every sale of the section with status (rs[0] says why); -1, so
 * that the hold reads and writes nothing more. */
static int section_fail(struct sale_section *sec, int status) {
    sec->rc = status;
    sale_fail_all(sec->rs, sec->n, status, sec->rs[0]->errstr);
    return -1;
}

/* The read, appended to the lock's pipeline: the probe's entry and the
 * fence's raise. The core sends them in one write with the GET of the
 * stock, which a lock that carries the stock with its grant spares. 0, or
 * -1 when the hold goes no further. */
static int section_read(struct lock_hold *h, void *arg) {
    struct sale_section *sec = arg;
    struct sale_result *r = sec->rs[0];
    for (int i = 0; i < sec->n; i++) sec->rs[i]->status = INV_SOLD;
    sec->entry = sec->inv->probe ? probe_enter(sec->inv->probe, h->l, sec->k, r->order) : -1;
    sec->raised = raise_fence(sec);
    if (sec->raised == -2) return section_fail(sec, sale_backend(r, "fence", lock_errstr(h->l)));
    return 0;
}

/* The read's replies: the probe's entry, and the stock from the core's
 * GET (h->carry_reply) or as the lock's grant carried it (h->carried, NULL
 * when the key did not exist). Returns 0, or the status of a failure set
 * in rs[0]. */
static int stock_read(struct sale_section *sec) {
    struct sale_result *r = sec->rs[0];
    const struct lock_hold *h = sec->h;
    int entry = sec->entry, got = !h->has_carried;
    if (h->flushed < 0) {
        const char *what = !h->connected ? "connection" : got ? "GET stock" : "probe";
        return sale_backend(r, what, lock_errstr(h->l));
    }
    int violation = entry >= 0 ? probe_entered(sec->inv->probe, h->l, sec->k, r->order, entry) : 0;
    if (violation < 0) return sale_backend(r, "probe", lock_errstr(h->l));
    for (int i = 0; i < sec->n; i++) sec->rs[i]->violation = violation;
    const redisReply *st = got ? h->carry_reply : NULL;
    const char *carried = h->carried;
    if (got && !st) return sale_backend(r, "GET stock", "no reply");
    if (st && st->type == REDIS_REPLY_ERROR) {
        rpool_note_error(sec->inv->pool, st->str);
        return sale_backend(r, "GET stock", st->str);
    }
    if (st ? st->type == REDIS_REPLY_NIL : !carried) {
        snprintf(r->errstr, sizeof(r->errstr),
                 "stock key %s does not exist; POST /inventory/reset first", sec->k->stock);
        return r->status = INV_BAD_DATA;
    }
    if (st ? inv_parse_ll(st, &sec->stock) < 0 : inv_parse_text(carried, &sec->stock) < 0) {
        snprintf(r->errstr, sizeof(r->errstr), "stock key %.60s holds '%.40s', not a whole number",
                 sec->k->stock, st ? st->str : carried);
        return r->status = INV_BAD_DATA;
    }
    /* The write scripts compare the stock as Lua numbers (doubles): exact
     * up to 2^53 only. */
    if (sec->stock > STOCK_EXACT_MAX || sec->stock < -STOCK_EXACT_MAX) {
        snprintf(r->errstr, sizeof(r->errstr),
                 "stock key %.60s holds %lld, beyond 2^53, which the write's script cannot "
                 "compare exactly",
                 sec->k->stock, sec->stock);
        return r->status = INV_BAD_DATA;
    }
    return 0;
}

/* Whether the fence was raised (raise_fence's reply at index i): 0, or
 * the status of a failure set in rs[0]. */
static int fence_raised(struct sale_section *sec, int i) {
    const redisReply *f = lock_reply(sec->h->l, i);
    if (f && f->type == REDIS_REPLY_INTEGER) return 0;
    if (f && f->type == REDIS_REPLY_ERROR) rpool_note_error(sec->inv->pool, f->str);
    return sale_backend(sec->rs[0], "fence-raise",
                        !f                             ? "no reply"
                        : f->type == REDIS_REPLY_ERROR ? f->str
                                                       : "unexpected reply");
}

/* Inside, the read answered: the stock and the fence. 0, or -1 when Redis
 * failed (nothing is written); a stock that is not a number goes on (1),
 * to record a hold that wrote nothing. */
static int section_inside(struct lock_hold *h, void *arg) {
    (void)h;
    struct sale_section *sec = arg;
    int rc = stock_read(sec);
    if (rc == 0 && sec->raised >= 0) rc = fence_raised(sec, sec->raised);
    if (rc == INV_BACKEND) return section_fail(sec, rc);
    sec->rc = rc;
    return rc ? 1 : 0;
}

/* Appends the write of the units sold, or the history event of a hold that
 * sells nothing (its outcome rc). Returns rc, or INV_BACKEND. */
static int section_append(struct sale_section *sec, int rc) {
    struct sale_result *r = sec->rs[0];
    if (sec->sold > 0 && !(sec->entries = malloc((size_t)sec->sold * sizeof(*sec->entries)))) {
        sec->sold = 0;
        return sale_backend(r, "write", "out of memory");
    }
    for (long long i = 0; i < sec->sold; i++)
        snprintf(sec->entries[i], sizeof(sec->entries[i]), "%lld|%s|%d", sec->stock - i,
                 sec->rs[i]->order, sec->inv->port);
    if (sec->sold > 0) {
        sec->commit_reply = sec->commit(sec);
        return sec->commit_reply < 0 ? sale_backend(r, "write", "cannot build the write") : rc;
    }
    history_nothing(sec, rc == INV_LOCK_LOST  ? "lock_lost"
                         : rc == INV_BAD_DATA ? "bad_stock"
                                              : "sold_out");
    return rc;
}

/* The demo's write, at the commit point (the core has stopped the lock's
 * renewal and checked its lease one last time: h->may_commit): units
 * stock, stock-1, ... go to the first min(n, stock) sales in one write;
 * the others are sold out. The write is only appended: it goes out with
 * the release. */
static void section_write(struct lock_hold *h, void *arg) {
    struct sale_section *sec = arg;
    struct sale_result *r = sec->rs[0];
    int rc = sec->rc;
    sec->sold = rc || sec->stock <= 0 ? 0 : (sec->stock < sec->n ? sec->stock : sec->n);
    if (!h->may_commit && sec->sold > 0) {
        snprintf(r->errstr, sizeof(r->errstr),
                 "the lock %.100s was lost before the write (%.80s); "
                 "nothing was sold",
                 sec->k->lock,
                 lock_errstr(h->l)[0] ? lock_errstr(h->l) : "a renewal found it gone");
        rc = r->status = INV_LOCK_LOST;
        sec->sold = 0;
    }
    history_fields(sec);
    rc = section_append(sec, rc);
    if (rc) sale_fail_all(sec->rs, sec->n, rc, r->errstr);
}

/* Reads the write's reply, once released, and fills the results. */
static void section_finish(struct sale_section *sec) {
    struct sale_result *r = sec->rs[0];
    if (sec->commit_reply < 0) {
        for (int i = 0; i < sec->n; i++) { /* nothing to sell: stock <= 0 */
            sec->rs[i]->status = INV_SOLD_OUT;
            sec->rs[i]->remaining = sec->stock;
        }
        return;
    }
    const redisReply *w = lock_reply(sec->h->l, sec->commit_reply);
    int rc = INV_SOLD;
    if (!w) {
        rc = sale_backend(r, "write",
                          "its reply was lost; it may have been applied, and is "
                          "never sent twice");
    } else if (w->type == REDIS_REPLY_ERROR && strncmp(w->str, "STALE", 5) == 0) {
        snprintf(r->errstr, sizeof(r->errstr),
                 "write refused: fencing %.200s; this holder lost the lock", w->str + 6);
        rc = r->status = INV_STALE_TOKEN;
    } else if (w->type == REDIS_REPLY_ERROR && strncmp(w->str, "BADKEY", 6) == 0) {
        snprintf(r->errstr, sizeof(r->errstr), "nothing was written: %.200s", w->str + 7);
        rc = r->status = INV_BAD_DATA;
    } else if (w->type == REDIS_REPLY_ERROR && strncmp(w->str, "CHANGED", 7) == 0) {
        snprintf(r->errstr, sizeof(r->errstr),
                 "write refused by Redis: %.200s (a reset, or a sale under another lock or "
                 "none, came in between); nothing was sold",
                 w->str + 8);
        rc = r->status = INV_STOCK_CHANGED;
    } else if (w->type == REDIS_REPLY_ERROR && strncmp(w->str, "LOST", 4) == 0) {
        snprintf(r->errstr, sizeof(r->errstr), "write refused by Redis: %.200s; nothing was sold",
                 w->str + 5);
        rc = r->status = INV_LOCK_LOST;
    } else if (w->type != REDIS_REPLY_INTEGER && w->type != REDIS_REPLY_STRING) {
        /* (A string: written, and the lock handed to a thread of this
         * process, handoff-sale.lua's answer.) */
        if (w->type == REDIS_REPLY_ERROR) rpool_note_error(sec->inv->pool, w->str);
        rc = sale_backend(r, "write", w->type == REDIS_REPLY_ERROR ? w->str : "unexpected reply");
    }
    if (rc != INV_SOLD) {
        sale_fail_all(sec->rs, sec->n, rc, r->errstr);
        return;
    }
    for (int i = 0; i < sec->n; i++) {
        struct sale_result *x = sec->rs[i];
        if (i < sec->sold) {
            x->status = INV_SOLD;
            x->unit = sec->stock - i;
            x->remaining = sec->stock - i - 1;
        } else {
            x->status = INV_SOLD_OUT;
            x->remaining = sec->stock - sec->sold;
        }
    }
}

/* Every hold released (or none granted): the answers. */
static void section_done(struct lock_hold *h, void *arg) {
    struct sale_section *sec = arg;
    struct sale_result *r = sec->rs[0];
    if (h->acquired == LOCK_BUSY) {
        const struct sale_faults *f = sec->f;
        snprintf(r->errstr, sizeof(r->errstr),
                 "lock %.80s still busy after waiting %d ms "
                 "(%d attempts%s%.120s)",
                 sec->k->lock, f->wait_given ? f->wait_ms : sec->inv->cfg->lock_wait_ms,
                 h->report.attempts, h->errstr[0] ? "; " : "", h->errstr);
        sale_fail_all(sec->rs, sec->n, INV_LOCK_TIMEOUT, r->errstr);
    } else if (h->acquired != LOCK_OK) { /* "Redis is unavailable", or the lock's store */
        snprintf(r->errstr, sizeof(r->errstr), "%s is unavailable (lock: %.300s)",
                 lock_type_store(sec->t), h->errstr);
        sale_fail_all(sec->rs, sec->n, r->status = INV_BACKEND, r->errstr);
    } else if (r->status == INV_SOLD) {
        section_finish(sec);
    }
    r->session_ended = h->session_ended;
    r->session_end_us = h->session_end_us;
    r->session_gone_us = h->session_gone_us;
    snprintf(r->session_error, sizeof(r->session_error), "%s", h->session_error);
    for (int i = 0; i < sec->n; i++) {
        struct sale_result *x = sec->rs[i];
        x->lock = h->report;
        x->lost = h->lost;
        x->late = h->late;
        x->batch = sec->n;
        x->wait_ms = h->report.wait_us / 1000;
        x->hold_ms = h->acquired == LOCK_OK ? h->report.hold_us / 1000 : 0;
    }
}

void sale_locked(struct inventory *inv, const struct strategy *s, const struct item_keys *k,
                 const struct sale_faults *f, struct sale_result **rs, int n, sale_commit commit) {
    struct lock_hold h;
    struct sale_section sec = {.inv = inv,
                               .s = s,
                               .t = inv->read_lock && s->rw_lock ? s->rw_lock : s->lock,
                               .k = k,
                               .f = f,
                               .commit = commit,
                               .h = &h,
                               .rs = rs,
                               .n = n,
                               .entry = -1,
                               .raised = -1,
                               .commit_reply = -1};
    const struct lock_hold_plan plan = {.type = sec.t,
                                        .key = k->lock,
                                        .carry = k->stock,
                                        .wait_given = f->wait_given,
                                        .wait_ms = f->wait_ms,
                                        .nested = f->nested,
                                        .release_delay_ms = f->release_delay_ms,
                                        .crash = f->crash,
                                        .hold_ms = f->hold_ms,
                                        .end_session = f->end_session,
                                        .commit_delay_ms = f->commit_delay_ms,
                                        .read = section_read,
                                        .inside = section_inside,
                                        .write = section_write,
                                        .done = section_done,
                                        .arg = &sec};
    if (lock_hold(inv->core, &plan, &h) == LOCK_HOLD_NOMEM) {
        sale_backend(rs[0], "lock", "out of memory");
        sale_fail_all(rs, n, INV_BACKEND, rs[0]->errstr);
    }
    free(sec.entries);
}

/* ---- the ways ------------------------------------------------------------- */

/* One sale alone under s's lock, written by its way's commit. */
static void locked_sell(struct inventory *inv, const struct strategy *s, const struct item_keys *k,
                        const struct sale_faults *f, struct sale_result *r) {
    struct sale_result *rs[1] = {r};
    sale_locked(inv, s, k, f, rs, 1, s->way->commit);
}

/* The lock-free sale: atomic-sale.lua, no critical section, no probe. */
static void atomic_args(const struct inventory *inv, const struct strategy *s,
                        const struct item_keys *k, const struct sale_result *r,
                        struct sale_args *a) {
    *a = (struct sale_args){
        "atomic-sale",
        3,
        6,
        {k->stock, k->ledger, k->families, r->order, inv->port_text, lock_type_family(s->lock)}};
}

static void atomic_read(struct inventory *inv, const redisReply *rep, struct sale_result *r) {
    if (rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "BADSTOCK", 8) == 0) {
        snprintf(r->errstr, sizeof(r->errstr), "%s", rep->str + 9);
        r->status = INV_BAD_DATA;
    } else if (rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "BADKEY", 6) == 0) {
        snprintf(r->errstr, sizeof(r->errstr), "nothing was written: %.200s", rep->str + 7);
        r->status = INV_BAD_DATA;
    } else if (rep->type == REDIS_REPLY_ARRAY && rep->elements >= 2 &&
               rep->element[0]->type == REDIS_REPLY_INTEGER) {
        r->remaining = rep->element[1]->integer;
        r->status = rep->element[0]->integer == 1 && rep->elements == 3 ? INV_SOLD : INV_SOLD_OUT;
        if (r->status == INV_SOLD) r->unit = rep->element[2]->integer;
    } else {
        if (rep->type == REDIS_REPLY_ERROR) rpool_note_error(inv->pool, rep->str);
        sale_backend(r, "atomic-sale",
                     rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
    }
}

static const struct sale_script atomic_script = {atomic_args, atomic_read};

/* Runs a one-script sale (way->script) on a pooled connection. */
static void script_sell(struct inventory *inv, const struct strategy *s, const struct item_keys *k,
                        const struct sale_faults *f, struct sale_result *r) {
    (void)f;
    const struct sale_script *sc = s->way->script;
    redisContext *c = NULL;
    char err[160];
    r->lock.attempts = 1;
    struct rpool *pool = rpool_route(inv->pool, k->stock);
    if (rpool_get(pool, inv->pool_wait_ms, &c, err, sizeof(err)) != RPOOL_OK) {
        sale_backend(r, "connection", err);
        return;
    }
    struct sale_args a;
    sc->args(inv, s, k, r, &a);
    redisReply *rep;
    int hops = 0, again;
    do { /* a refusal in cluster mode (it did not run) is followed */
        rep = script_run(c, a.script, a.nkeys, a.argc, a.argv, NULL, err, sizeof(err));
        again = rep ? rpool_follow(inv->pool, rep, &hops, &pool, &c, inv->pool_wait_ms, err,
                                   sizeof(err))
                    : 0;
        if (again != 0) freeReplyObject(rep);
        if (again < 0) rep = NULL;
    } while (again > 0);
    rpool_put(pool, c); /* dropped if it failed */
    if (!rep) {
        sale_backend(r, a.script, err);
        return;
    }
    sc->read(inv, rep, r);
    freeReplyObject(rep);
}

const struct sale_way sale_plain = {"plain", locked_sell, sale_commit_plain, 0, NULL};
const struct sale_way sale_fenced = {"fenced", locked_sell, commit_fenced, 0, NULL};
const struct sale_way sale_store_fenced = {"store-fenced", locked_sell, commit_fenced, 1, NULL};
const struct sale_way sale_handoff = {"handoff", locked_sell, commit_handoff, 0, NULL};
const struct sale_way sale_atomic = {"atomic", script_sell, NULL, 0, &atomic_script};
