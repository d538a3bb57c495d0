/* scenario.c -- the table of named scenarios (see scenario.h), in ladder
 * order of the flaw each one shows, each with its window and its judge;
 * then the checks of a timeline against the settings. */
#include "scenario.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define T(p)                                                                                       \
    { p, 0 } /* p thousandths of the TTL */
#define MS(m)                                                                                      \
    { 0, m } /* m milliseconds */
#define TMS(p, m)                                                                                  \
    { p, m } /* p thousandths of the TTL plus m milliseconds */
#define NONE                                                                                       \
    { 0, 0 }

/* ---- reading the evidence -------------------------------------------------- */

static int sold(const struct scenario_sale *s) {
    return s->status == 200 && strcmp(s->word, "sold") == 0;
}

struct hold scenario_hold_times(const struct scenario_hold *h, int hold_ms) {
    return (struct hold){.owner = h->owner,
                         .granted_us = h->granted_us,
                         .released_us = h->released_us,
                         .lease_us = h->lease_us,
                         .written_us = h->written_us,
                         .wrote = strcmp(h->outcome, "sold") == 0,
                         .held_until_us =
                             hold_ms >= 0 ? h->granted_us + (int64_t)hold_ms * 1000 : 0};
}

static struct hold times(const struct scenario_sale *s) {
    return scenario_hold_times(&s->hold, s->hold_ms);
}

/* When s left the critical section, by its own account (hold_left_us): its
 * recorded release, or later when its answer's hold (a stalled release
 * included) says so. The windows are judged by it: a fault reached its
 * moment while the holder was still at work, whether or not it still held
 * the lock. */
static int64_t left(const struct scenario_sale *s) {
    struct hold h = times(s);
    return hold_left_us(&h);
}

/* Whether the holds of a and b were inside at once (hold_overlap, as the
 * checker and the page judge them). *lead_us: how long before the earlier
 * one's end the later one was granted. */
static int together(const struct scenario_sale *a, const struct scenario_sale *b,
                    int64_t *lead_us) {
    if (!a->has_hold || !b->has_hold) return 0;
    struct hold x = times(a), y = times(b);
    return hold_overlap(&x, &y, lead_us);
}

/* Whether b was granted only once a was no longer inside. */
static int after(const struct scenario_sale *b, const struct scenario_sale *a) {
    if (!b->has_hold || !a->has_hold) return 0;
    struct hold x = times(a);
    return b->hold.granted_us + hold_edge_us(&x) >= hold_inside_until(&x);
}

/* Whether b was granted more than the clock edge before a left (left()):
 * *lead_us, how long before. */
static int before_left(const struct scenario_sale *b, const struct scenario_sale *a,
                       int64_t *lead_us) {
    if (!b->has_hold || !a->has_hold) return 0;
    *lead_us = left(a) - b->hold.granted_us;
    return *lead_us > HOLD_EDGE_US;
}

/* A duration in words: "250 ms", "7.6 s". */
static const char *dur(char *buf, size_t len, double ms) {
    if (ms < 1000)
        snprintf(buf, len, "%.0f ms", ms < 0 ? 0 : ms);
    else
        snprintf(buf, len, "%.1f s", ms / 1000);
    return buf;
}

/* What sale s was answered, in words: "503 lock_timeout after 5.0 s". */
static const char *answered(const struct scenario_sale *s, char *buf, size_t len) {
    char d[24];
    if (!s->sent)
        snprintf(buf, len, "was never sent (the run stopped)");
    else if (!s->status)
        snprintf(buf, len, "got no answer");
    else if (strcmp(s->word, "lock_timeout") == 0)
        snprintf(buf, len, "gave up after %s (503 lock_timeout)", dur(d, sizeof(d), s->took_ms));
    else
        snprintf(buf, len, "answered %d %s", s->status, s->word);
    return buf;
}

static void say(struct scenario_verdict *v, enum scenario_result r, int window, const char *fmt,
                ...) __attribute__((format(printf, 4, 5)));

static void say(struct scenario_verdict *v, enum scenario_result r, int window, const char *fmt,
                ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->evidence, sizeof(v->evidence), fmt, ap);
    va_end(ap);
    v->result = r;
    v->window = window;
}

/* Appends to v's evidence. */
static void add(struct scenario_verdict *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void add(struct scenario_verdict *v, const char *fmt, ...) {
    size_t n = strlen(v->evidence);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->evidence + n, sizeof(v->evidence) - n, fmt, ap);
    va_end(ap);
}

/* "; unit U sold twice" when a and b both sold the same unit. */
static void add_twice(struct scenario_verdict *v, const struct scenario_sale *a,
                      const struct scenario_sale *b) {
    if (sold(a) && sold(b) && a->unit >= 0 && a->unit == b->unit)
        add(v, "; unit %lld sold twice", a->unit);
}

static void add_audit(struct scenario_verdict *v, const struct scenario_evidence *ev) {
    if (ev->audit && ev->violations > 0)
        add(v, " (the audit counts %lld violation%s)", ev->violations,
            ev->violations == 1 ? "" : "s");
}

/* Inconclusive: s got the lock within 1 ms of prev's release. */
static void too_close(struct scenario_verdict *v, const struct scenario_sale *s,
                      const struct scenario_sale *prev) {
    char w[64];
    say(v, SCENARIO_INCONCLUSIVE, 1,
        "%c got the lock within 1 ms of %c's release, then %s: too close to tell", s->label,
        prev->label, answered(s, w, sizeof(w)));
}

/* Inconclusive: sale s (the first) recorded no hold. */
static void no_hold(struct scenario_verdict *v, const struct scenario_sale *s, const char *so) {
    char w[64];
    if (sold(s))
        say(v, SCENARIO_INCONCLUSIVE, 0,
            "%c sold unit %lld without a hold of a lock in the "
            "history: %s",
            s->label, s->unit, so);
    else
        say(v, SCENARIO_INCONCLUSIVE, 0, "%c never held the lock (it %s): %s", s->label,
            answered(s, w, sizeof(w)), so);
}

/* ---- the judges -------------------------------------------------------------- */

/* race, two-instances: B arrives while A is inside. Flaw: they are inside
 * together. Fix: B waits for A, then sells. */
static void judge_meet(const struct scenario_evidence *ev, struct scenario_verdict *v) {
    const struct scenario_sale *a = &ev->sale[0], *b = &ev->sale[1];
    char d[24], w[64];
    int64_t us;
    if (!a->has_hold) {
        no_hold(v, a, "there was no critical section for B to race into");
    } else if (!b->sent || b->sent_us >= left(a)) {
        say(v, SCENARIO_INCONCLUSIVE, 0, "B %s after A had left: they never met",
            b->sent ? "was sent" : "was never sent, not even");
    } else if (together(a, b, &us)) {
        say(v, SCENARIO_FLAW_SHOWN, 1,
            "A and B were inside together: B got in %s before A "
            "left",
            dur(d, sizeof(d), (double)us / 1000));
        add_twice(v, a, b);
        add_audit(v, ev);
    } else if (after(b, a) && sold(b)) {
        say(v, SCENARIO_FIXED, 1, "B waited %s for A and sold unit %lld; no overlap",
            dur(d, sizeof(d), b->waited_ms), b->unit);
    } else if (!b->has_hold) {
        say(v, SCENARIO_INCONCLUSIVE, 1, "B %s while A was inside", answered(b, w, sizeof(w)));
    } else {
        too_close(v, b, a);
    }
}

/* long-hold: B keeps trying while A holds the lock for long. Flaw: B's
 * recursion depth grows. Fix: B waits in a loop, then sells. */
static void judge_long_hold(const struct scenario_evidence *ev, struct scenario_verdict *v) {
    const struct scenario_sale *a = &ev->sale[0], *b = &ev->sale[1];
    char d[24], w[64];
    if (!a->has_hold) {
        no_hold(v, a, "there was no hold for B to wait out");
    } else if (!b->sent || b->sent_us >= left(a)) {
        say(v, SCENARIO_INCONCLUSIVE, 0, "B %s after A had left: it never had to wait",
            b->sent ? "was sent" : "was never sent, not even");
    } else if (b->depth > 1) {
        say(v, SCENARIO_FLAW_SHOWN, 1,
            "B's recursion depth grew to %d, one nested call per "
            "retry, while it waited %s for A",
            b->depth, dur(d, sizeof(d), b->waited_ms));
        if (sold(b))
            add(v, "; then it sold unit %lld", b->unit);
        else
            add(v, "; then it %s", answered(b, w, sizeof(w)));
    } else if (after(b, a) && sold(b)) {
        say(v, SCENARIO_FIXED, 1,
            "B waited %s for A without recursing (depth %d) and sold unit "
            "%lld",
            dur(d, sizeof(d), b->waited_ms), b->depth, b->unit);
    } else {
        say(v, SCENARIO_INCONCLUSIVE, 1, "B %s while A held the lock, without recursing",
            answered(b, w, sizeof(w)));
    }
}

/* slow-holder: A's lease expires while A is inside (stalled before its
 * release) and B gets the lock. Flaw: A's late release frees B's lock, so
 * C gets in while B is inside. Fix: C waits for B. */
static void judge_slow_holder(const struct scenario_evidence *ev, struct scenario_verdict *v) {
    const struct scenario_sale *a = &ev->sale[0], *b = &ev->sale[1], *c = &ev->sale[2];
    char d1[24], d2[24], w[64];
    int64_t us, lease = a->hold.lease_us, a_end = a->has_hold ? left(a) : 0;
    if (!a->has_hold) {
        no_hold(v, a, "there was no lease to run out");
    } else if (!lease) {
        say(v, SCENARIO_INCONCLUSIVE, 0,
            "A's lock has no lease (%s sets no TTL on it): it "
            "cannot expire while A is inside",
            ev->strategy);
    } else if (a_end <= lease) {
        say(v, SCENARIO_INCONCLUSIVE, 0,
            "A left %s before its lease ran out: the lease never "
            "expired while A was inside",
            dur(d1, sizeof(d1), (double)(lease - a_end) / 1000));
    } else if (!b->has_hold && b->status && b->sent_us + (int64_t)(b->took_ms * 1000) < lease) {
        say(v, SCENARIO_INCONCLUSIVE, 0, "B gave up after %s, before A's lease expired",
            dur(d1, sizeof(d1), b->took_ms));
    } else if (!b->has_hold) {
        say(v, SCENARIO_INCONCLUSIVE, 0, "B never got the lock: it %s", answered(b, w, sizeof(w)));
    } else if (b->hold.granted_us + HOLD_EDGE_US >= a_end) {
        say(v, SCENARIO_INCONCLUSIVE, 0,
            "A's lease expired while A was inside, but B got the "
            "lock only after A had left");
    } else if (together(b, c, &us)) {
        say(v, SCENARIO_FLAW_SHOWN, 1,
            "A's lease ran out %s into its hold while A was inside, "
            "and B got the lock; then C got in %s before B left: B and C were inside together",
            dur(d1, sizeof(d1), (double)(lease - a->hold.granted_us) / 1000),
            dur(d2, sizeof(d2), (double)us / 1000));
        add_twice(v, b, c);
        if (b->hold.owned == 0) add(v, "; B's lock was gone when B wrote");
        add_audit(v, ev);
    } else if (!c->sent || c->sent_us >= left(b)) {
        say(v, SCENARIO_INCONCLUSIVE, 1,
            "A's lease expired while A was inside and B got the "
            "lock, but C %s after B had left: nothing showed whether A's release freed B's lock",
            c->sent ? "was sent" : "was never sent, not even");
    } else if (after(c, b) && sold(c) && sold(b)) {
        say(v, SCENARIO_FIXED, 1,
            "A's lease ran out while A was inside, and B (after waiting "
            "%s) got the lock and sold unit %lld; A's late release left B's lock alone: C waited "
            "%s for B and sold unit %lld; no overlap",
            dur(d1, sizeof(d1), b->waited_ms), b->unit, dur(d2, sizeof(d2), c->waited_ms), c->unit);
    } else if (!c->has_hold) {
        say(v, SCENARIO_INCONCLUSIVE, 1,
            "A's lease expired while A was inside and B got the "
            "lock, but C %s while B was inside",
            answered(c, w, sizeof(w)));
    } else {
        too_close(v, c, b);
    }
}

/* nested: A holds the lock and acquires it again. Flaw: the nested acquire
 * waits for A itself (until its wait or its own lease runs out). Fix: the
 * lock counts A's holds and A sells at once. */
static void judge_nested(const struct scenario_evidence *ev, struct scenario_verdict *v) {
    const struct scenario_sale *a = &ev->sale[0];
    char d[24], w[64];
    int acquires = 1 + a->nested;
    int limit = a->wait_ms < ev->ttl_ms ? a->wait_ms : ev->ttl_ms;
    if (a->attempts < acquires) {
        say(v, SCENARIO_INCONCLUSIVE, 0,
            "A made %d lock attempt%s, fewer than its %d acquires: "
            "the %s strategy takes no lock it could acquire again",
            a->attempts, a->attempts == 1 ? "" : "s", acquires, ev->strategy);
    } else if (ev->others > 0) {
        say(v, SCENARIO_INCONCLUSIVE, 0,
            "%d other hold%s of the lock %s recorded during the "
            "run: A may have waited for %s, not for itself",
            ev->others, ev->others == 1 ? "" : "s", ev->others == 1 ? "was" : "were",
            ev->others == 1 ? "it" : "them");
    } else if (a->waited_ms > 0 && a->waited_ms >= limit / 2 && sold(a)) {
        say(v, SCENARIO_FLAW_SHOWN, 1,
            "A's nested acquires waited %s for A's own lock, until "
            "its lease ran out, and only then A sold unit %lld (no other holder)",
            dur(d, sizeof(d), a->waited_ms), a->unit);
    } else if (a->waited_ms > 0 && a->waited_ms >= limit / 2) {
        say(v, SCENARIO_FLAW_SHOWN, 1,
            "A's nested acquire waited %s for A's own lock (no other "
            "holder), then A %s",
            dur(d, sizeof(d), a->waited_ms),
            strcmp(a->word, "lock_timeout") == 0 ? "gave up: 503 lock_timeout"
                                                 : answered(a, w, sizeof(w)));
    } else if (sold(a)) {
        say(v, SCENARIO_FIXED, 1,
            "A acquired the lock %d times in a row, waiting %s in all, and "
            "sold unit %lld",
            acquires, dur(d, sizeof(d), a->waited_ms), a->unit);
    } else {
        say(v, SCENARIO_INCONCLUSIVE, 1, "A %s", answered(a, w, sizeof(w)));
    }
}

/* overrun's flaw: B got the lock us before A left. inside: A's write
 * applied late, so A was inside until then and A and B were inside
 * together; else A's lease had run out and its late write was refused (or
 * it wrote nothing): A was still at work, but no longer inside. */
static void overrun_flaw(const struct scenario_evidence *ev, struct scenario_verdict *v, int64_t us,
                         int inside) {
    const struct scenario_sale *a = &ev->sale[0], *b = &ev->sale[1];
    char d1[24], d2[24];
    say(v, SCENARIO_FLAW_SHOWN, 1,
        "A's hold outlived its lease: B got the lock %s after A did, %s %s",
        dur(d1, sizeof(d1), (double)(b->hold.granted_us - a->hold.granted_us) / 1000),
        dur(d2, sizeof(d2), (double)us / 1000),
        inside ? "before A left, and A and B were inside together"
               : "before A was done, while A, its lease run out, worked on without the lock");
    if (strcmp(a->word, "stale_token") == 0)
        add(v, "; A's late write was refused (409 stale_token), so nothing was sold twice");
    else if (strcmp(a->word, "lock_lost") == 0)
        add(v, "; A's late write was refused (lock_lost)");
    else if (sold(a) && sold(b) && a->unit == b->unit)
        add(v, "; A's late write sold unit %lld again, after B had sold it", a->unit);
    else if (sold(a))
        add(v, "; A wrote after its lease");
    add_audit(v, ev);
}

/* overrun: A works past one TTL while B waits. Flaw: A's lease runs out
 * and B gets in while A still works. Fix: A keeps its lock and B waits. */
static void judge_overrun(const struct scenario_evidence *ev, struct scenario_verdict *v) {
    const struct scenario_sale *a = &ev->sale[0], *b = &ev->sale[1];
    char d1[24], d2[24], d3[24], w[64];
    int64_t us, a_end = a->has_hold ? left(a) : 0;
    int64_t first = a->hold.granted_us + (int64_t)ev->ttl_ms * 1000;
    if (!a->has_hold) {
        no_hold(v, a, "there was no lease to outlive");
    } else if (a_end < first) {
        say(v, SCENARIO_INCONCLUSIVE, 0,
            "A was inside %s, less than one TTL (%s): its lease "
            "never had to outlive it",
            dur(d1, sizeof(d1), (double)(a_end - a->hold.granted_us) / 1000),
            dur(d2, sizeof(d2), ev->ttl_ms));
    } else if (!b->sent || b->sent_us >= first) {
        say(v, SCENARIO_INCONCLUSIVE, 0, "B %s after A's first TTL had run out",
            b->sent ? "was sent" : "was never sent, not even");
    } else if (!b->has_hold && b->status && b->sent_us + (int64_t)(b->took_ms * 1000) < first) {
        say(v, SCENARIO_INCONCLUSIVE, 0, "B gave up after %s, before A's first TTL ran out",
            dur(d1, sizeof(d1), b->took_ms));
    } else if (together(a, b, &us)) {
        overrun_flaw(ev, v, us, 1);
    } else if (before_left(b, a, &us)) {
        overrun_flaw(ev, v, us, 0);
    } else if (after(b, a) && sold(b)) {
        say(v, SCENARIO_FIXED, 1, "A was inside %s, longer than its %s TTL, and kept the lock",
            dur(d1, sizeof(d1), (double)(a_end - a->hold.granted_us) / 1000),
            dur(d2, sizeof(d2), ev->ttl_ms));
        if (a->renewals > 0) add(v, " (%d renewal%s)", a->renewals, a->renewals == 1 ? "" : "s");
        add(v, "; B waited %s for it and sold unit %lld; no overlap",
            dur(d3, sizeof(d3), b->waited_ms), b->unit);
    } else if (!b->has_hold) {
        say(v, SCENARIO_INCONCLUSIVE, 1, "A worked past one TTL, but B %s while A held the lock",
            answered(b, w, sizeof(w)));
    } else {
        too_close(v, b, a);
    }
}

/* The waiters of herd, sorted by grant time into by_grant (*n of them).
 * 0, or -1 with the verdict said: one came too late or never sold (the
 * window was missed), or two were inside together (the flaw). */
static int herd_waiters(const struct scenario_evidence *ev, struct scenario_verdict *v,
                        const struct scenario_sale **by_grant, int *n) {
    const struct scenario_sale *a = &ev->sale[0];
    char w[64];
    *n = 0;
    for (int i = 1; i < ev->nsales; i++) {
        const struct scenario_sale *x = &ev->sale[i];
        int64_t us;
        if (!x->sent || x->sent_us >= left(a)) {
            say(v, SCENARIO_INCONCLUSIVE, 0,
                "%c %s after A had left: nobody waited for it to "
                "go",
                x->label, x->sent ? "was sent" : "was never sent, not even");
            return -1;
        }
        if (!x->has_hold || !sold(x)) {
            say(v, SCENARIO_INCONCLUSIVE, 1, "%c %s while A held the lock", x->label,
                answered(x, w, sizeof(w)));
            return -1;
        }
        for (int j = 0; j < i; j++) {
            if (together(&ev->sale[j], x, &us)) {
                say(v, SCENARIO_FLAW_SHOWN, 1, "%c and %c were inside together", ev->sale[j].label,
                    x->label);
                add_audit(v, ev);
                return -1;
            }
        }
        int k = (*n)++; /* insertion by grant time */
        while (k > 0 && by_grant[k - 1]->hold.granted_us > x->hold.granted_us) {
            by_grant[k] = by_grant[k - 1];
            k--;
        }
        by_grant[k] = x;
    }
    return 0;
}

/* The verdict of herd from the most attempts any waiter m made. */
static void herd_attempts(const struct scenario_evidence *ev, struct scenario_verdict *v,
                          const struct scenario_sale *m, int most) {
    if (most > 3) {
        say(v, SCENARIO_FLAW_SHOWN, 1,
            "A's unlock woke the waiters and they raced: %c lost and "
            "tried again (%d attempts)",
            m->label, most);
    } else if (most == 3) {
        say(v, SCENARIO_FLAW_SHOWN, 1,
            "A's unlock only woke the waiters: %c, woken, had to "
            "try for the lock once more (%d attempts: try, subscribe and try, then the "
            "wake-up's), a round trip a handed lock does not pay",
            m->label, most);
    } else if (most <= 1) {
        say(v, SCENARIO_FIXED, 1,
            "B, C and D were handed the lock in the order they came, one "
            "attempt each: units %lld, %lld, %lld",
            ev->sale[1].unit, ev->sale[2].unit, ev->sale[3].unit);
    } else {
        say(v, SCENARIO_INCONCLUSIVE, 1,
            "the waiters were served in the order they came, with "
            "at most %d attempts each: no race showed this time",
            most);
    }
}

/* herd: B, C and D arrive while A holds the lock. Flaw: A's unlock only
 * woke them, so a woken waiter had to try again (a third attempt after the
 * try, subscribe and try of a Redisson waiter; a fourth when it lost the
 * race), or the lock went out of the order they came in. Fix: each was
 * handed the lock in order, with one attempt. */
static void judge_herd(const struct scenario_evidence *ev, struct scenario_verdict *v) {
    const struct scenario_sale *a = &ev->sale[0];
    if (!a->has_hold) {
        no_hold(v, a, "there was no hold for the others to wait behind");
        return;
    }
    const struct scenario_sale *by_grant[SCENARIO_STEPS_MAX - 1];
    int n;
    if (herd_waiters(ev, v, by_grant, &n) < 0) return;
    for (int i = 0; i < n; i++) {
        if (by_grant[i] != &ev->sale[i + 1]) {
            say(v, SCENARIO_FLAW_SHOWN, 1,
                "A's unlock woke the waiters and they raced: %c got "
                "the lock before %c, who came first",
                by_grant[i]->label, ev->sale[i + 1].label);
            return;
        }
    }
    int most = 0;
    const struct scenario_sale *m = NULL;
    for (int i = 0; i < n; i++)
        if (by_grant[i]->attempts > most) most = by_grant[i]->attempts, m = by_grant[i];
    herd_attempts(ev, v, m, most);
}

/* Whether s's write was refused by the store's check (fenced: an older
 * token; or the lock or the stock found changed). */
static int refused(const struct scenario_sale *s) {
    return s->status == 409 &&
           (strcmp(s->word, "stale_token") == 0 || strcmp(s->word, "lock_lost") == 0 ||
            strcmp(s->word, "stock_changed") == 0);
}

/* session-lost's flaw or fix, once the window was reached: A's session
 * was ended ended_ms into its hold, and B was granted us before A left. */
static void session_lost_outcome(const struct scenario_evidence *ev, struct scenario_verdict *v,
                                 int64_t us) {
    const struct scenario_sale *a = &ev->sale[0], *b = &ev->sale[1];
    char d1[24], d2[24], w1[64], w2[64];
    double ended_ms = (double)(a->session_end_us - a->hold.granted_us) / 1000;
    double gone_ms = (double)(a->session_gone_us - a->session_end_us) / 1000;
    if (sold(a)) {
        say(v, SCENARIO_FLAW_SHOWN, 1,
            "A's store session was ended %s into its hold (seen gone %s later) and B got the "
            "lock %s before A left; A, never told, still wrote the stock it read",
            dur(d1, sizeof(d1), ended_ms), dur(d2, sizeof(d2), gone_ms),
            dur(w1, sizeof(w1), (double)us / 1000));
        add_twice(v, a, b);
        add_audit(v, ev);
    } else if (refused(a) && sold(b)) {
        say(v, SCENARIO_FIXED, 1,
            "A's store session was ended %s into its hold, and B got the lock %s before A left "
            "and sold unit %lld; A's late write was refused (409 %s), so nothing was sold twice",
            dur(d1, sizeof(d1), ended_ms), dur(d2, sizeof(d2), (double)us / 1000), b->unit,
            a->word);
    } else {
        say(v, SCENARIO_INCONCLUSIVE, 1,
            "A's store session was ended while A was inside and B got the lock, but A %s and "
            "B %s",
            answered(a, w1, sizeof(w1)), answered(b, w2, sizeof(w2)));
    }
}

/* session-lost: A's store session is ended from outside while A is inside
 * (end_session), and B gets the lock. Flaw: A, not told, still writes
 * what it read. Fix: A's late write is refused. The window needs the
 * fault's own word (A's answer: the session was seen gone) and B granted
 * after the end began and before A left. */
static void judge_session_lost(const struct scenario_evidence *ev, struct scenario_verdict *v) {
    const struct scenario_sale *a = &ev->sale[0], *b = &ev->sale[1];
    char w[64];
    int64_t us = 0;
    if (!a->has_hold) {
        no_hold(v, a, "there was no session of a hold to end");
    } else if (a->session_ended <= 0) {
        say(v, SCENARIO_INCONCLUSIVE, 0,
            "A's store session was not seen ended while A was inside (A %s)",
            answered(a, w, sizeof(w)));
    } else if (!b->sent || b->sent_us >= left(a)) {
        say(v, SCENARIO_INCONCLUSIVE, 0, "B %s after A had left: nobody could take its lock",
            b->sent ? "was sent" : "was never sent, not even");
    } else if (!b->has_hold) {
        say(v, SCENARIO_INCONCLUSIVE, 0,
            "A's store session was ended while A was inside, but B never got the lock: it %s",
            answered(b, w, sizeof(w)));
    } else if (b->hold.granted_us + HOLD_EDGE_US < a->session_end_us) {
        say(v, SCENARIO_INCONCLUSIVE, 0,
            "B got the lock before A's store session was ended: not through the end of it");
    } else if (!before_left(b, a, &us)) {
        say(v, SCENARIO_INCONCLUSIVE, 0,
            "A's store session was ended while A was inside, but B got the lock only after A "
            "had left");
    } else {
        session_lost_outcome(ev, v, us);
    }
}

/* ---- the table ----------------------------------------------------------------- */

const struct scenario scenarios[] = {
    {"race",
     "two sales at once on one instance",
     "A sells on instance A and works 300 ms inside the critical section; B sells on the same "
     "instance 100 ms later.",
     "none: the two holds overlap (red) and both sell the unit they read, so one unit is sold "
     "twice. local: the in-process mutex makes B wait until A is done; the bars follow each "
     "other.",
     "none",
     "local",
     "B arrived while A was inside",
     "A and B were inside together (a unit sold twice when both sold the one they read)",
     "B waited for A, then sold the next unit; no overlap",
     MS(100),
     NONE,
     judge_meet,
     2,
     {{'A', 0, NONE, MS(300), NONE, 0, MS(1000), 0},
      {'B', 0, MS(100), NONE, NONE, 0, MS(1200), 0}}},
    {"two-instances",
     "two sales at once on two instances",
     "A sells on instance A and works 300 ms inside the critical section; B sells on instance "
     "B 100 ms later.",
     "local: each instance has its own mutex, so A and B are inside together: their bars, in "
     "two lanes, overlap (red) and one unit is sold twice. setnx-spin and every Redis lock "
     "after it: B waits for A.",
     "local",
     "setnx-spin",
     "B arrived, on the other instance, while A was inside",
     "A and B were inside together (a unit sold twice when both sold the one they read)",
     "B waited for A, then sold the next unit; no overlap",
     MS(100),
     NONE,
     judge_meet,
     2,
     {{'A', 0, NONE, MS(300), NONE, 0, MS(1000), 0},
      {'B', 1, MS(100), NONE, NONE, 0, MS(1200), 0}}},
    {"long-hold",
     "a long hold and a retrying waiter",
     "A sells on instance A and works 2000 ms inside the critical section; B sells on instance "
     "B 100 ms later and waits.",
     "setnx-retry: B's answer reports lock.depth, one recursive call per 20 ms of waiting "
     "(about 95 here), capped by lock.retry-max-depth. setnx-spin waits in a loop: depth 0.",
     "setnx-retry",
     "setnx-spin",
     "B kept trying while A held the lock",
     "B's recursion depth grew with every retry",
     "B waited in a loop, without recursing, then sold",
     MS(100),
     NONE,
     judge_long_hold,
     2,
     {{'A', 0, NONE, MS(2000), NONE, 0, MS(1000), 0},
      {'B', 1, MS(100), NONE, NONE, 0, MS(2900), 0}}},
    {"slow-holder",
     "a holder slower than the TTL",
     "A sells on instance A within 0.1 x TTL, then stalls 1.2 x TTL before releasing (a GC "
     "pause, a slow network): its lock expires at 1 x TTL and B, waiting on instance B since "
     "0.2 x TTL, takes it and holds it 0.8 x TTL. A's late release arrives at 1.3 x TTL, "
     "while B holds the lock. C sells on instance A at 1.55 x TTL.",
     "expiring and owner-check: A's late DEL deletes B's lock, so C walks in while B is still "
     "inside: B and C overlap (red) and the audit counts a violation. owner-lua: A's release "
     "deletes only its own lock, so C waits for B: no overlap.",
     "expiring,owner-check",
     "owner-lua",
     "A's lease expired while A was inside, and B got the lock",
     "C got in while B was inside (A's late release had freed B's lock): B and C inside together",
     "C waited for B, then sold; no overlap",
     T(200),
     T(250),
     judge_slow_holder,
     3,
     {{'A', 0, NONE, T(100), T(1200), 0, MS(1000), 0},
      {'B', 1, T(200), T(800), NONE, 0, TMS(1000, 1000), 0},
      {'C', 0, T(1550), NONE, NONE, 0, TMS(500, 1000), 0}}},
    {"nested",
     "a nested acquire by the same owner",
     "A sells on instance A and, inside the critical section, acquires the same lock twice "
     "more (nested=2), each acquire waiting up to 1.5 s.",
     "owner-lua: the lock is a plain string, so A's nested acquire waits for A itself: A "
     "answers 503 lock_timeout when its 1.5 s wait runs out first, or, when the TTL is the "
     "shorter, gets in only once its own lock has expired (its lock wait shows how long it "
     "waited for itself). reentrant: the hash lock counts the holds (3) and A sells at once.",
     "owner-lua",
     "reentrant",
     "A held the lock and acquired it again",
     "A's nested acquire waited for A itself",
     "A acquired its own lock again at once and sold",
     NONE,
     NONE,
     judge_nested,
     1,
     {{'A', 0, NONE, NONE, NONE, 2, MS(1500), 0}}},
    {"overrun",
     "work longer than the TTL",
     "A sells on instance A and works 1.5 x TTL inside the critical section; B sells on "
     "instance B at 0.25 x TTL and works 0.3 x TTL.",
     "reentrant (and owner-lua, expiring): nothing renews A's lease, so at 1 x TTL B takes the "
     "lock while A still works: the holds overlap (red), A's write comes after its lease "
     "(marked late) and sells the unit B sold. watchdog: renewals keep A's lock and B waits. "
     "fenced: B gets in while A still works too, but A's late write carries an older token and "
     "is refused (409 stale_token): A's hold ends where its lease ran out, no overlap, and "
     "nothing is sold twice. zookeeper and mysql keep their lock: the session is kept while A "
     "works (ZooKeeper's client pings it; the watchdog looks at the MariaDB session every "
     "third of its wait_timeout), as a watchdog renews; their flaw needs the session itself to "
     "end under A (session-lost).",
     "reentrant,fenced",
     "watchdog",
     "A worked past one TTL while B waited for the lock",
     "A's hold outlived its lease while B was inside",
     "A kept its lock past the TTL; B waited for A, then sold; no overlap",
     T(200),
     T(250),
     judge_overrun,
     2,
     {{'A', 0, NONE, T(1500), NONE, 0, MS(1000), 0},
      {'B', 1, T(250), T(300), NONE, 0, TMS(1500, 1000), 0}}},
    {"herd",
     "three waiters when the lock is freed",
     "A sells on instance A and works 600 ms inside the critical section; B sells on instance "
     "B at 100 ms, C on instance A at 250 ms, D on instance B at 400 ms, each working 150 ms.",
     "redisson: each waiter tries, subscribes and tries again (two attempts) before it "
     "sleeps; A's unlock then wakes one waiter per instance (B, and C, next in A's own queue), "
     "and they race: the loser tries again (three attempts or more), and C, who came after B, "
     "may be served first. handoff: A's write grants the lock straight to B, B's to C, C's to "
     "D, in the order they came across both instances: units 199, 198, 197, one attempt "
     "each, every answer saying granted_by handed.",
     "redisson",
     "handoff",
     "B, C and D all arrived while A held the lock",
     "A's unlock only woke the waiters, and they raced: one tried again after the wake-up, "
     "or the lock went out of the order they came in",
     "each waiter was handed the lock in the order it came, with one attempt",
     NONE,
     NONE,
     judge_herd,
     4,
     {{'A', 0, NONE, MS(600), NONE, 0, MS(1000), 0},
      {'B', 1, MS(100), MS(150), NONE, 0, MS(3000), 0},
      {'C', 0, MS(250), MS(150), NONE, 0, MS(3000), 0},
      {'D', 1, MS(400), MS(150), NONE, 0, MS(3000), 0}}},
    {"session-lost",
     "the lock's store session ended while its holder is inside",
     "A sells on instance A and, once inside (it has read the stock), has its lock's store "
     "session ended from outside (end_session: ZooKeeper's session expired through a second "
     "handle on it, as Curator's tests do; MariaDB's session killed with KILL CONNECTION), "
     "then works 1000 ms more; B sells on instance B at 200 ms and waits for the lock.",
     "zookeeper and mysql: the store frees the lock with the session, B takes it and sells "
     "while A still works, and A, never told, writes the stock it read: the holds overlap "
     "(red) and one unit is sold twice. zookeeper-fenced and mysql-fenced: B gets in the same "
     "way, but A's late write carries an older token (its node's czxid, its counter value) "
     "and is refused (409 stale_token): nothing is sold twice. It runs only with those four: "
     "the other locks keep no session of a store.",
     "zookeeper,mysql",
     "zookeeper-fenced,mysql-fenced",
     "A's store session ended while A was inside, and B got the lock",
     "A, its session gone and never told, still wrote the stock it read after B had the lock "
     "(a unit sold twice)",
     "A's late write was refused (409 stale_token); nothing was sold twice",
     MS(200),
     NONE,
     judge_session_lost,
     2,
     {{'A', 0, NONE, MS(1000), NONE, 0, MS(3000), 1},
      {'B', 1, MS(200), NONE, NONE, 0, MS(3000), 0}}},
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NONE, NONE, NULL, 0, {{0}}},
};

/* ---- the rest ------------------------------------------------------------------ */

const struct scenario *scenario_find(const char *name) {
    for (int i = 0; scenarios[i].name; i++)
        if (strcmp(scenarios[i].name, name) == 0) return &scenarios[i];
    return NULL;
}

int scenario_ms(struct scenario_time t, int ttl_ms) {
    return (int)((long long)ttl_ms * t.permille / 1000) + t.ms;
}

int scenario_wait_ms(const struct scenario_step *st, const struct scenario_settings *s) {
    return scenario_ms(st->wait, s->ttl_ms) + s->spin_sleep_ms;
}

int scenario_length_ms(const struct scenario *sc, const struct scenario_settings *s) {
    long long end = 0;
    for (int i = 0; i < sc->nsteps; i++) {
        const struct scenario_step *st = &sc->steps[i];
        long long e = (long long)scenario_ms(st->at, s->ttl_ms) +
                      (long long)scenario_wait_ms(st, s) * (1 + st->nested) +
                      scenario_ms(st->hold, s->ttl_ms) + scenario_ms(st->release_delay, s->ttl_ms);
        if (e > end) end = e;
    }
    return end > 1000000000 ? 1000000000 : (int)end;
}

/* A duration of the table in words: "1.2 x TTL", "1000 ms", "1 x TTL + 1000 ms". */
static const char *time_words(struct scenario_time t, char *buf, size_t len) {
    if (t.permille && t.ms)
        snprintf(buf, len, "%g x TTL + %d ms", t.permille / 1000.0, t.ms);
    else if (t.permille)
        snprintf(buf, len, "%g x TTL", t.permille / 1000.0);
    else
        snprintf(buf, len, "%d ms", t.ms);
    return buf;
}

int scenario_check(const struct scenario *sc, const struct scenario_settings *s, char *why,
                   size_t whylen) {
    char tw[48];
    int ttl = s->ttl_ms;
    if (!s->history) {
        snprintf(why, whylen,
                 "scenario %s is judged from the holds its sales leave in the "
                 "history, and history.enabled is false: start the instances with "
                 "history.enabled=true",
                 sc->name);
        return -1;
    }
    for (int i = 0; i < sc->nsteps; i++) {
        const struct scenario_step *st = &sc->steps[i];
        const struct {
            const char *what;
            struct scenario_time t;
            int ms;
        } parts[] = {
            {"hold_ms", st->hold, scenario_ms(st->hold, ttl)},
            {"release_delay_ms", st->release_delay, scenario_ms(st->release_delay, ttl)},
            {"wait_ms", st->wait, scenario_wait_ms(st, s)},
        };
        for (size_t k = 0; k < sizeof(parts) / sizeof(parts[0]); k++) {
            if (parts[k].ms <= s->max_hold_ms) continue;
            snprintf(why, whylen,
                     "scenario %s sends sale %c with %s=%d (%s%s with lock.ttl-ms=%d), "
                     "more than faults.max-hold-ms=%d allows: raise faults.max-hold-ms to at "
                     "least %d, or lower lock.ttl-ms",
                     sc->name, st->label, parts[k].what, parts[k].ms,
                     time_words(parts[k].t, tw, sizeof(tw)), k == 2 ? " + lock.spin-sleep-ms" : "",
                     ttl, s->max_hold_ms, parts[k].ms);
            return -1;
        }
    }
    int len = scenario_length_ms(sc, s);
    if (len > s->seconds_max * 1000) {
        snprintf(why, whylen,
                 "scenario %s may take up to %d ms with lock.ttl-ms=%d, more than a "
                 "run's %d s: lower lock.ttl-ms",
                 sc->name, len, ttl, s->seconds_max);
        return -1;
    }
    if (sc->slack.permille || sc->slack.ms) {
        int m = scenario_ms(sc->slack, ttl);
        if (m < SCENARIO_SLACK_MIN_MS) {
            int need = sc->slack.permille
                           ? (int)(((long long)(SCENARIO_SLACK_MIN_MS - sc->slack.ms) * 1000 +
                                    sc->slack.permille - 1) /
                                   sc->slack.permille)
                           : ttl;
            snprintf(why, whylen,
                     "scenario %s's tightest margin, %s, is %d ms with lock.ttl-ms=%d, "
                     "less than the %d ms a sale's timing may drift: raise lock.ttl-ms to at "
                     "least %d",
                     sc->name, time_words(sc->slack, tw, sizeof(tw)), m, ttl, SCENARIO_SLACK_MIN_MS,
                     need);
            return -1;
        }
    }
    if (sc->poll_slack.permille || sc->poll_slack.ms) {
        int m = scenario_ms(sc->poll_slack, ttl);
        if (s->spin_sleep_ms > m) {
            snprintf(why, whylen,
                     "in scenario %s a waiter must get the lock within %d ms (%s with "
                     "lock.ttl-ms=%d) of its release, but it polls every lock.spin-sleep-ms=%d ms: "
                     "lower lock.spin-sleep-ms to at most %d, or raise lock.ttl-ms",
                     sc->name, m, time_words(sc->poll_slack, tw, sizeof(tw)), ttl, s->spin_sleep_ms,
                     m);
            return -1;
        }
    }
    return 0;
}

int scenario_shows(const struct scenario *sc, const char *strategy) {
    size_t n = strlen(strategy);
    for (const char *p = sc->shows; *p;) {
        size_t k = strcspn(p, ",");
        if (k == n && strncmp(p, strategy, n) == 0) return 1;
        p += k + (p[k] == ',');
    }
    return 0;
}

const char *scenario_fix_for(const struct scenario *sc, const char *strategy, char *buf,
                             size_t len) {
    buf[0] = '\0';
    if (!scenario_shows(sc, strategy)) return buf;
    size_t n = strlen(strategy);
    int at = 0; /* strategy's place in shows */
    for (const char *p = sc->shows; *p; at++) {
        size_t k = strcspn(p, ",");
        if (k == n && strncmp(p, strategy, n) == 0) break;
        p += k + (p[k] == ',');
    }
    const char *f = sc->fixed_by; /* one for all, or one each */
    for (int i = 0; i < at && strchr(f, ','); i++) f = strchr(f, ',') + 1;
    snprintf(buf, len, "%.*s", (int)strcspn(f, ","), f);
    return buf;
}

int scenario_ends_session(const struct scenario *sc) {
    for (int i = 0; i < sc->nsteps; i++)
        if (sc->steps[i].end_session) return 1;
    return 0;
}

void scenario_judge(const struct scenario *sc, const struct scenario_evidence *ev,
                    struct scenario_verdict *v) {
    memset(v, 0, sizeof(*v));
    int refused = -1;
    for (int i = 0; i < ev->nsales && refused < 0; i++)
        if (ev->sale[i].status == 403 && strcmp(ev->sale[i].word, "faults_disabled") == 0)
            refused = i;
    if (ev->nsales != sc->nsteps)
        say(v, SCENARIO_INCONCLUSIVE, 0, "%d of the scenario's %d sales were recorded", ev->nsales,
            sc->nsteps);
    else if (refused >= 0)
        say(v, SCENARIO_INCONCLUSIVE, 0,
            "sale %c was refused its fault parameters (403 "
            "faults_disabled): the scenario did not run as written",
            ev->sale[refused].label);
    else if (!ev->history)
        say(v, SCENARIO_INCONCLUSIVE, 0,
            "the history (GET /inventory/history) could not be "
            "read: no evidence of the holds");
    else
        sc->judge(ev, v);
}

const char *scenario_result_word(enum scenario_result r) {
    switch (r) {
    case SCENARIO_FLAW_SHOWN:
        return "flaw_shown";
    case SCENARIO_FIXED:
        return "fixed";
    case SCENARIO_INCONCLUSIVE:
        return "inconclusive";
    default:
        return "";
    }
}
