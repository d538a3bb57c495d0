/* sale.c -- the sale path: take the strategy's lock, run the demo's
 * critical section (read, check, write) with the probe around it, write,
 * release (see inventory_int.h and sale.h).
 *
 * DESIGN
 * A locked sale costs two round trips besides its acquire: the probe's entry
 * pipelined with GET stock; then the write (one all-or-nothing script that
 * also records the lock family and the history event), the probe's exit and
 * the release, in one write. Both go through the lock's handle, on the
 * holder's connection, which this file never sees: the entry (probe.c) and
 * the GET are appended (lock_append) and sent together (lock_flush); the
 * write is appended, and goes out with the release. Their replies come
 * back by index (lock_reply), each command of the hold counting, the
 * probe's entry first. Only atomic_sell, which takes no lock, runs its
 * script on a pooled connection of its own.
 *
 * The commit point. Right before the write is built, lock_commit_check()
 * stops the lock's renewal (waiting only for a renewal of this lock in
 * flight) and checks the lease one last time: a lock whose renewal failed,
 * or whose enforced lease has run out, sells nothing and answers lock_lost.
 * The write then goes out at once with the release, and it is conditional
 * in Redis too: the script looks at the lock as it applies (the guard,
 * lock_guard()), and for the types that enforce their lease refuses to
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
#include <errno.h>
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
    const struct item_keys *k;
    struct lock *l;
    struct sale_result **rs;
    int n;
    long long stock; /* the stock read */
    long long sold; /* units written */
    char (*entries)[128]; /* ledger entries "unit|order|port" */
    int commit_reply; /* index of the write's reply in the pipeline, or -1 */
    int late; /* the lease had passed at the send */
    struct lock_guard guard; /* how the write's script looks at the lock */
    /* The history fields shared by the section's events. */
    const char *hist[HISTORY_ARGS];
    int nhist;
    char bufs[8][32];
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
    struct lock_report rep;
    lock_report(sec->l, &rep);
    struct sale_result *r = sec->rs[0];
    int64_t released = mclock_wall_us();
    snprintf(sec->bufs[0], sizeof(sec->bufs[0]), "%d", sec->inv->port);
    snprintf(sec->bufs[1], sizeof(sec->bufs[1]), "%" PRId64, rep.granted_wall_us);
    snprintf(sec->bufs[2], sizeof(sec->bufs[2]), "%" PRId64, released);
    snprintf(sec->bufs[3], sizeof(sec->bufs[3]), "%" PRId64, rep.lease_wall_us);
    snprintf(sec->bufs[4], sizeof(sec->bufs[4]), "%lld", sec->stock);
    snprintf(sec->bufs[5], sizeof(sec->bufs[5]), "%lld", rep.token);
    snprintf(sec->bufs[6], sizeof(sec->bufs[6]), "%d", sec->late);
    snprintf(r->lock.owner, sizeof(r->lock.owner), "%s", rep.owner);
    const char *h[HISTORY_ARGS] = {
        "instance", sec->inv->instance, "port",       sec->bufs[0], "owner",       r->lock.owner,
        "strategy", sec->s->name,       "granted_us", sec->bufs[1], "released_us", sec->bufs[2],
        "lease_us", sec->bufs[3],       "stock_read", sec->bufs[4], "token",       sec->bufs[5],
        "late",     sec->bufs[6],
    };
    memcpy(sec->hist, h, sizeof(h));
    sec->nhist = HISTORY_ARGS;
}

/* Appends the event of a hold that wrote nothing (outcome). */
static void history_nothing(struct sale_section *sec, const char *outcome) {
    if (sec->inv->history_max <= 0) return;
    char cap[16];
    snprintf(cap, sizeof(cap), "%d", sec->inv->history_max);
    const struct lock_guard *g = &sec->guard;
    const struct script_kv kv[] = {
        {"history", sec->k->history}, {"lock", g->key},    {"cap", cap},
        {"guard", g->kind},           {"owner", g->field}, {"outcome", outcome}};
    const struct script_sig *sig = &sig_history_event;
    const char *argv[SCRIPT_ARGS_MAX + HISTORY_ARGS];
    if (script_args(sig, argv, kv, (int)(sizeof(kv) / sizeof(kv[0]))) < 0) return;
    memcpy(argv + sig->nargs, sec->hist, sizeof(sec->hist[0]) * (size_t)sec->nhist);
    lock_append_script(sec->l, sig->script, sig->nkeys, sig->nargs + sec->nhist, argv, NULL);
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
    const struct lock_guard *g = &sec->guard;
    const struct script_kv kv[] = {{"stock", k->stock},
                                   {"ledger", k->ledger},
                                   {"families", k->families},
                                   {"history", k->history},
                                   {"lock", g->key},
                                   {"new_stock", stock},
                                   {"family", lock_type_family(lock_type_of(sec->l))},
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
    int rc = lock_append_script(sec->l, sig->script, sig->nkeys, argc, argv, NULL);
    free(argv);
    return rc;
}

static int commit_fenced(struct sale_section *sec) {
    struct lock_report rep;
    lock_report(sec->l, &rep);
    char fence[224], token[24], stock[24], cap[16];
    lock_fence_key(sec->l, fence, sizeof(fence));
    snprintf(token, sizeof(token), "%lld", rep.token);
    snprintf(stock, sizeof(stock), "%lld", sec->stock - 1);
    snprintf(cap, sizeof(cap), "%d", sec->inv->history_max);
    const struct item_keys *k = sec->k;
    const struct script_kv kv[] = {{"stock", k->stock},
                                   {"ledger", k->ledger},
                                   {"fence", fence},
                                   {"families", k->families},
                                   {"history", k->history},
                                   {"lock", sec->guard.key},
                                   {"token", token},
                                   {"new_stock", stock},
                                   {"entry", sec->entries[0]},
                                   {"family", lock_type_family(lock_type_of(sec->l))},
                                   {"cap", cap},
                                   {"owner", sec->guard.field}};
    const struct script_sig *sig = &sig_fenced_sale;
    const char *argv[SCRIPT_ARGS_MAX + HISTORY_ARGS];
    if (script_args(sig, argv, kv, (int)(sizeof(kv) / sizeof(kv[0]))) < 0) return -1;
    memcpy(argv + sig->nargs, sec->hist, sizeof(sec->hist[0]) * (size_t)sec->nhist);
    return lock_append_script(sec->l, sig->script, sig->nkeys, sig->nargs + sec->nhist, argv, NULL);
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
    struct lock_report rep;
    lock_report(sec->l, &rep);
    char fence[224], token[24];
    lock_fence_key(sec->l, fence, sizeof(fence));
    snprintf(token, sizeof(token), "%lld", rep.token);
    const struct script_kv kv[] = {{"fence", fence}, {"token", token}};
    const char *argv[2];
    if (script_args(&sig_fence_raise, argv, kv, 2) < 0) return -2;
    int i = lock_append_script(sec->l, sig_fence_raise.script, 1, 2, argv, NULL);
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
    struct lock_handover h;
    if (lock_handover(sec->l, &h) < 0) return -1;
    char stock[24], cap[16];
    snprintf(stock, sizeof(stock), "%lld", sec->stock - 1);
    snprintf(cap, sizeof(cap), "%d", sec->inv->history_max);
    const struct item_keys *k = sec->k;
    const struct script_kv kv[] = {{"stock", k->stock},
                                   {"ledger", k->ledger},
                                   {"families", k->families},
                                   {"history", k->history},
                                   {"lock", h.key},
                                   {"queue", h.queue},
                                   {"new_stock", stock},
                                   {"family", lock_type_family(lock_type_of(sec->l))},
                                   {"cap", cap},
                                   {"owner", h.owner},
                                   {"lease", h.lease_ms},
                                   {"channel_prefix", h.channel_prefix},
                                   {"entry", sec->entries[0]}};
    const struct script_sig *sig = &sig_handoff_sale;
    const char *argv[SCRIPT_ARGS_MAX + HISTORY_ARGS];
    if (script_args(sig, argv, kv, (int)(sizeof(kv) / sizeof(kv[0]))) < 0) return -1;
    memcpy(argv + sig->nargs, sec->hist, sizeof(sec->hist[0]) * (size_t)sec->nhist);
    return lock_append_release(sec->l, sig->script, handoff_sale_errors, sig->nkeys,
                               sig->nargs + sec->nhist, argv, NULL);
}

/* ---- the critical section ------------------------------------------------- */

/* Reads a stock value. 0 on success. */
static int parse_stock(const char *s, long long *out) {
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end != '\0') return -1;
    *out = v;
    return 0;
}

/* Sends the section's read, appended to the lock's pipeline (lock_flush:
 * one write), and reads it back: the probe's entry (reply index entry, -1
 * when none was appended) and the stock, from the GET (reply index got),
 * or, with got -1, as the lock's grant carried it (carried is the value,
 * NULL when the key did not exist). Returns 0, or the status of a failure
 * set in rs[0]. */
static int section_read(struct sale_section *sec, int entry, int got, const char *carried) {
    struct sale_result *r = sec->rs[0];
    if (lock_flush(sec->l) < 0)
        return sale_backend(r, got >= 0 ? "GET stock" : "probe", lock_errstr(sec->l));
    int violation =
        entry >= 0 ? probe_entered(sec->inv->probe, sec->l, sec->k, r->order, entry) : 0;
    if (violation < 0) return sale_backend(r, "probe", lock_errstr(sec->l));
    for (int i = 0; i < sec->n; i++) sec->rs[i]->violation = violation;
    const redisReply *st = got >= 0 ? lock_reply(sec->l, got) : NULL;
    if (got >= 0 && !st) return sale_backend(r, "GET stock", "no reply");
    if (st && st->type == REDIS_REPLY_ERROR) {
        rpool_note_error(sec->inv->pool, st->str);
        return sale_backend(r, "GET stock", st->str);
    }
    if (st ? st->type == REDIS_REPLY_NIL : !carried) {
        snprintf(r->errstr, sizeof(r->errstr),
                 "stock key %s does not exist; POST /inventory/reset first", sec->k->stock);
        return r->status = INV_BAD_DATA;
    }
    if (st ? inv_parse_ll(st, &sec->stock) < 0 : parse_stock(carried, &sec->stock) < 0) {
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
    const redisReply *f = lock_reply(sec->l, i);
    if (f && f->type == REDIS_REPLY_INTEGER) return 0;
    if (f && f->type == REDIS_REPLY_ERROR) rpool_note_error(sec->inv->pool, f->str);
    return sale_backend(sec->rs[0], "fence-raise",
                        !f                             ? "no reply"
                        : f->type == REDIS_REPLY_ERROR ? f->str
                                                       : "unexpected reply");
}

/* Appends the write of the units sold, or the history event of a hold that
 * sells nothing (its outcome rc). Returns rc, or INV_BACKEND. */
static int section_write(struct sale_section *sec, sale_commit commit, int rc) {
    struct sale_result *r = sec->rs[0];
    if (sec->sold > 0 && !(sec->entries = malloc((size_t)sec->sold * sizeof(*sec->entries)))) {
        sec->sold = 0;
        return sale_backend(r, "write", "out of memory");
    }
    for (long long i = 0; i < sec->sold; i++)
        snprintf(sec->entries[i], sizeof(sec->entries[i]), "%lld|%s|%d", sec->stock - i,
                 sec->rs[i]->order, sec->inv->port);
    if (sec->sold > 0) {
        sec->commit_reply = commit(sec);
        return sec->commit_reply < 0 ? sale_backend(r, "write", "cannot build the write") : rc;
    }
    history_nothing(sec, rc == INV_LOCK_LOST  ? "lock_lost"
                         : rc == INV_BAD_DATA ? "bad_stock"
                                              : "sold_out");
    return rc;
}

/* The end_session fault, once the holder is inside (it has read the
 * stock): its lock's store session is ended from outside, and the sale
 * goes on, not told, once the session is seen gone, or could not be
 * ended (rs[0] says which, and when). */
static void section_end_session(struct sale_section *sec) {
    struct sale_result *r = sec->rs[0];
    r->session_end_us = mclock_wall_us();
    if (lock_end_session(sec->l, r->session_error, sizeof(r->session_error)) == LOCK_OK) {
        r->session_ended = 1;
        r->session_gone_us = mclock_wall_us();
    } else {
        r->session_ended = -1;
    }
}

/* The demo's critical section, run while the lock is held: read, check,
 * write, for n sales at once: one GET, then units stock, stock-1, ... go to
 * the first min(n, stock) sales in one write; the others are sold out. The
 * write is only appended: it goes out with the release. */
static void section_run(struct sale_section *sec, const struct sale_faults *f, sale_commit commit) {
    struct sale_result *r = sec->rs[0];
    struct inventory *inv = sec->inv;
    if (lock_connect(sec->l) < 0) {
        sale_backend(r, "connection", lock_errstr(sec->l));
        sale_fail_all(sec->rs, sec->n, r->status, r->errstr);
        return;
    }
    int entry = inv->probe ? probe_enter(inv->probe, sec->l, sec->k, r->order) : -1;
    int raised = raise_fence(sec);
    /* A lock that carries the stock with its grant spares the GET. */
    const char *carried = NULL;
    int got = -1, rc = raised == -2 ? sale_backend(r, "fence", lock_errstr(sec->l)) : 0;
    if (!lock_carried(sec->l, &carried)) {
        const char *get[] = {"GET", sec->k->stock};
        got = lock_append(sec->l, 2, get, NULL);
        if (got < 0) rc = sale_backend(r, "GET stock", lock_errstr(sec->l));
    }
    if (rc == 0) rc = section_read(sec, entry, got, carried);
    if (rc == 0 && raised >= 0) rc = fence_raised(sec, raised);
    if (rc == 0 && f->end_session) section_end_session(sec);
    mclock_sleep_ms(f->hold_ms);
    if (rc == INV_BACKEND) {
        sale_fail_all(sec->rs, sec->n, rc, r->errstr);
        return; /* nothing read: if the connection failed, the release gives the lock up */
    }
    sec->sold = rc || sec->stock <= 0 ? 0 : (sec->stock < sec->n ? sec->stock : sec->n);
    /* The commit point: no renewal from here on, and the last check of the
     * lease right before the write goes out with the release. */
    if (lock_commit_check(sec->l) != LOCK_OK && sec->sold > 0) {
        snprintf(r->errstr, sizeof(r->errstr),
                 "the lock %.100s was lost before the write (%.80s); "
                 "nothing was sold",
                 sec->k->lock,
                 lock_errstr(sec->l)[0] ? lock_errstr(sec->l) : "a renewal found it gone");
        rc = r->status = INV_LOCK_LOST;
        sec->sold = 0;
    }
    mclock_sleep_ms(f->commit_delay_ms); /* fault: a stall after the last check */
    sec->late = lock_lease_passed(sec->l);
    lock_guard(sec->l, &sec->guard);
    history_fields(sec);
    rc = section_write(sec, commit, rc);
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
    const redisReply *w = lock_reply(sec->l, sec->commit_reply);
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

void sale_locked(struct inventory *inv, const struct strategy *s, const struct item_keys *k,
                 const struct sale_faults *f, struct sale_result **rs, int n, sale_commit commit) {
    struct sale_result *r = rs[0];
    const struct lock_type *t = inv->read_lock && s->rw_lock ? s->rw_lock : s->lock;
    struct lock *l = lock_new(inv->core, t, k->lock);
    if (!l) {
        sale_backend(r, "lock", "out of memory");
        sale_fail_all(rs, n, INV_BACKEND, r->errstr);
        return;
    }
    lock_set_release_delay(l, f->release_delay_ms);
    if (f->wait_given) lock_set_wait(l, f->wait_ms);
    lock_carry(l, k->stock);
    int rc = lock_acquire(l);
    for (int i = 0; rc == LOCK_OK && i < f->nested; i++) rc = lock_acquire(l);
    struct sale_section sec = {
        .inv = inv, .s = s, .k = k, .l = l, .rs = rs, .n = n, .commit_reply = -1};
    if (rc == LOCK_OK) {
        if (f->crash) _exit(86); /* fault: die holding the lock */
        for (int i = 0; i < n; i++) rs[i]->status = INV_SOLD;
        section_run(&sec, f, commit);
    } else if (rc == LOCK_BUSY) {
        struct lock_report rep;
        lock_report(l, &rep);
        snprintf(r->errstr, sizeof(r->errstr),
                 "lock %.80s still busy after waiting %d ms "
                 "(%d attempts%s%.120s)",
                 k->lock, f->wait_given ? f->wait_ms : inv->cfg->lock_wait_ms, rep.attempts,
                 lock_errstr(l)[0] ? "; " : "", lock_errstr(l));
        sale_fail_all(rs, n, INV_LOCK_TIMEOUT, r->errstr);
    } else { /* "Redis is unavailable", or the store the lock lives in */
        snprintf(r->errstr, sizeof(r->errstr), "%s is unavailable (lock: %.300s)",
                 lock_type_store(t), lock_errstr(l));
        sale_fail_all(rs, n, r->status = INV_BACKEND, r->errstr);
    }
    int lost = 0;
    while (lock_holds(l) > 0) lost |= lock_release(l) == LOCK_LOST;
    if (rc == LOCK_OK && r->status == INV_SOLD) section_finish(&sec);
    free(sec.entries);
    struct lock_report rep;
    lock_report(l, &rep);
    for (int i = 0; i < n; i++) {
        rs[i]->lock = rep;
        rs[i]->lost = lost;
        rs[i]->late = sec.late;
        rs[i]->batch = n;
        rs[i]->wait_ms = rep.wait_us / 1000;
        rs[i]->hold_ms = rc == LOCK_OK ? rep.hold_us / 1000 : 0;
    }
    lock_free(l);
}

/* ---- the ways ------------------------------------------------------------- */

/* One sale alone under s's lock, written by its way's commit. */
static void locked_sell(struct inventory *inv, const struct strategy *s, const struct item_keys *k,
                        const struct sale_faults *f, struct sale_result *r) {
    struct sale_result *rs[1] = {r};
    sale_locked(inv, s, k, f, rs, 1, s->way->commit);
}

/* The lock-free sale: atomic-sale.lua, no critical section, no probe. */
static void atomic_sell(struct inventory *inv, const struct strategy *s, const struct item_keys *k,
                        const struct sale_faults *f, struct sale_result *r) {
    (void)f;
    redisContext *c = NULL;
    char err[160], port[16];
    r->lock.attempts = 1;
    struct rpool *pool = rpool_route(inv->pool, k->stock);
    if (rpool_get(pool, inv->pool_wait_ms, &c, err, sizeof(err)) != RPOOL_OK) {
        sale_backend(r, "connection", err);
        return;
    }
    snprintf(port, sizeof(port), "%d", inv->port);
    const char *argv[] = {k->stock, k->ledger, k->families,
                          r->order, port,      lock_type_family(s->lock)};
    redisReply *rep;
    int hops = 0, again;
    do { /* a refusal in cluster mode (it did not run) is followed */
        rep = script_run(c, "atomic-sale", 3, 6, argv, NULL, err, sizeof(err));
        again = rep ? rpool_follow(inv->pool, rep, &hops, &pool, &c, inv->pool_wait_ms, err,
                                   sizeof(err))
                    : 0;
        if (again != 0) freeReplyObject(rep);
        if (again < 0) rep = NULL;
    } while (again > 0);
    rpool_put(pool, c); /* dropped if it failed */
    if (!rep) {
        sale_backend(r, "atomic-sale", err);
    } else if (rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "BADSTOCK", 8) == 0) {
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
    freeReplyObject(rep);
}

const struct sale_way sale_plain = {"plain", locked_sell, sale_commit_plain, 0};
const struct sale_way sale_fenced = {"fenced", locked_sell, commit_fenced, 0};
const struct sale_way sale_store_fenced = {"store-fenced", locked_sell, commit_fenced, 1};
const struct sale_way sale_handoff = {"handoff", locked_sell, commit_handoff, 0};
const struct sale_way sale_atomic = {"atomic", atomic_sell, NULL, 0};
