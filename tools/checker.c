/* checker.c -- the safety checker's judgement (see checker.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "checker.h"
#include "hold.h"

const char *chk_kind_word(enum chk_kind k) {
    static const char *const words[CHK_KINDS] = {"overlap",          "sold_twice",  "late_write",
                                                 "lost_sale",        "untold_sale", "stock_ledger",
                                                 "stale_token_write"};
    return (int)k >= 0 && k < CHK_KINDS ? words[k] : "?";
}

static int wrote(const struct chk_event *e) { return strcmp(e->outcome, "sold") == 0; }

/* When e's write (or event) applied: Redis's clock, or when it was sent,
 * its lower bound, in histories that lack it. */
static int64_t applied(const struct chk_event *e) {
    return e->written_us ? e->written_us : e->released_us;
}

/* e as a hold (hold.h); freed_us: when a reset freed the lock, or 0. */
static struct hold as_hold(const struct chk_event *e, int64_t freed_us) {
    return (struct hold){.owner = e->owner,
                         .granted_us = e->granted_us,
                         .released_us = e->released_us,
                         .lease_us = e->lease_us,
                         .written_us = e->written_us,
                         .wrote = wrote(e),
                         .freed_us = freed_us};
}

/* e as a hold of a run whose item was reset (in->reset_us): a hold that
 * read the inventory the reset replaced (a stock below the item's stock
 * now: after a reset the stock only falls) had its lock before the reset,
 * even when the reply of its grant came back after it. */
static struct hold reset_hold(const struct chk_event *e, const struct chk_input *in) {
    struct hold h = as_hold(e, in->reset_us);
    if (in->reset_us > 0 && e->stock_read > 0 && e->stock_read < in->stock &&
        h.granted_us >= in->reset_us)
        h.granted_us = in->reset_us - 1;
    return h;
}

struct hold chk_hold(const struct chk_event *e) {
    return as_hold(e, 0);
}

/* Until when e held the lock (see checker.h and hold.h). */
static int64_t hold_end(const struct chk_event *e) {
    struct hold h = as_hold(e, 0);
    return hold_inside_until(&h);
}

/* Whether e wrote when the lock was no longer its own (see checker.h).
 * Where Redis said so as it applied the write (owned 0), it is late, token
 * or not: a fence holds off only the holders that bump it, and a lock of
 * another kind on the same key (owner-lua, handoff, a hash lock) takes an
 * expired key without bumping it. Where Redis did not look, a write that
 * carried a fencing token is judged by the fence (find_stale_tokens). */
static int wrote_late(const struct chk_event *e, int clocks_apart) {
    if (!wrote(e)) return 0;
    if (e->owned >= 0) return e->owned == 0;
    if (e->token > 0) return 0;
    return !clocks_apart && e->lease_us > 0 && applied(e) > e->lease_us;
}

static void add(struct chk_report *r, size_t max, enum chk_kind kind, const char *a, const char *b,
                long long unit, const char *detail) {
    r->counts[kind]++;
    if (r->nfindings >= max) return;
    struct chk_finding *f = &r->findings[r->nfindings++];
    f->kind = kind;
    snprintf(f->a, sizeof(f->a), "%s", a ? a : "");
    snprintf(f->b, sizeof(f->b), "%s", b ? b : "");
    f->unit = unit;
    snprintf(f->detail, sizeof(f->detail), "%s", detail);
}

/* Holds of one lock valid at the same time (hold.h: a reset ends the holds
 * it freed that wrote nothing; a batch is one hold; a hold inside for no
 * time overlaps none): one finding for each hold granted while an earlier
 * one was inside, naming the earlier one that was inside the longest. */
static int find_overlaps(const struct chk_input *in, size_t max, struct chk_report *r) {
    if (in->nevents == 0) return 0;
    struct hold *h = malloc(in->nevents * sizeof(*h));
    struct hold_span *s = malloc(in->nevents * sizeof(*s));
    long n = h && s ? 0 : -1;
    for (size_t i = 0; n == 0 && i < in->nevents; i++) h[i] = reset_hold(&in->events[i], in);
    if (n == 0) n = hold_spans(h, in->nevents, s);
    size_t longest = 0;
    for (long i = 1; i < n; i++) {
        if (hold_span_overlap(&s[longest], &s[i], NULL)) {
            const struct chk_event *a = &in->events[s[longest].first], *b = &in->events[s[i].first];
            char d[256];
            snprintf(d, sizeof(d),
                     "%.48s (%.15s) held until %lld while %.48s (%.15s) was granted "
                     "at %lld",
                     a->owner, a->instance, (long long)s[longest].end, b->owner, b->instance,
                     (long long)s[i].start);
            add(r, max, CHK_OVERLAP, a->id, b->id, 0, d);
        }
        if (s[i].end > s[longest].end) longest = (size_t)i;
    }
    free(h);
    free(s);
    return n < 0 ? -1 : 0;
}

/* A (unit, order) pair from the ledger or from an answer. */
struct sale {
    long long unit;
    const char *order;
};

static int cmp_sale(const void *a, const void *b) {
    const struct sale *x = a, *y = b;
    if (x->unit != y->unit) return (x->unit > y->unit) - (x->unit < y->unit);
    return strcmp(x->order, y->order);
}

static int find_sold_twice(const struct chk_input *in, size_t max, struct chk_report *r) {
    size_t cap = in->nledger + in->ntold, n = 0;
    if (cap == 0) return 0;
    struct sale *s = malloc(cap * sizeof(*s));
    if (!s) return -1;
    for (size_t i = 0; i < in->nledger; i++)
        s[n++] = (struct sale){in->ledger[i].unit, in->ledger[i].order};
    for (size_t i = 0; i < in->ntold; i++)
        if (strcmp(in->told[i].status, "sold") == 0 && in->told[i].unit > 0)
            s[n++] = (struct sale){in->told[i].unit, in->told[i].order};
    qsort(s, n, sizeof(*s), cmp_sale);
    size_t first = 0; /* the first distinct order of the current unit */
    for (size_t i = 1; i < n; i++) {
        if (s[i].unit != s[first].unit) {
            first = i;
        } else if (strcmp(s[i].order, s[i - 1].order) != 0) {
            char d[256];
            snprintf(d, sizeof(d), "unit %lld went to orders %s and %s", s[i].unit, s[first].order,
                     s[i].order);
            add(r, max, CHK_SOLD_TWICE, s[first].order, s[i].order, s[i].unit, d);
        }
    }
    free(s);
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int has(const char **sorted, size_t n, const char *order) {
    return n && bsearch(&order, sorted, n, sizeof(*sorted), cmp_str) != NULL;
}

/* Told "sold" without a ledger entry, and entries nobody was told of. */
static int find_lost_and_untold(const struct chk_input *in, size_t max, struct chk_report *r) {
    const char **led = malloc((in->nledger + 1) * sizeof(*led));
    const char **sold = malloc((in->ntold + 1) * sizeof(*sold));
    if (!led || !sold) {
        free(led);
        free(sold);
        return -1;
    }
    size_t ns = 0;
    for (size_t i = 0; i < in->nledger; i++) led[i] = in->ledger[i].order;
    for (size_t i = 0; i < in->ntold; i++)
        if (strcmp(in->told[i].status, "sold") == 0) sold[ns++] = in->told[i].order;
    qsort(led, in->nledger, sizeof(*led), cmp_str);
    qsort(sold, ns, sizeof(*sold), cmp_str);
    for (size_t i = 0; i < ns; i++) {
        if (has(led, in->nledger, sold[i])) continue;
        char d[256];
        snprintf(d, sizeof(d), "order %s was answered sold, but the ledger has no entry for it",
                 sold[i]);
        add(r, max, CHK_LOST_SALE, sold[i], NULL, 0, d);
    }
    for (size_t i = 0; in->ntold > 0 && i < in->nledger; i++) {
        const struct chk_entry *e = &in->ledger[i];
        if (has(sold, ns, e->order)) continue;
        char d[256];
        snprintf(d, sizeof(d),
                 "unit %lld went to order %s (port %d), which no client was told "
                 "was sold",
                 e->unit, e->order, e->port);
        add(r, max, CHK_UNTOLD_SALE, e->order, NULL, e->unit, d);
    }
    free(led);
    free(sold);
    return 0;
}

/* Writes that carried a fencing token, in the order Redis applied them:
 * each must carry a newer token than every write before it (the same
 * token again is the same hold only when its owner is the same: a batch). */
static void find_stale_tokens(const struct chk_input *in, size_t max, struct chk_report *r) {
    const struct chk_event *newest = NULL;
    for (size_t i = 0; i < in->nevents; i++) {
        const struct chk_event *e = &in->events[i];
        if (!wrote(e) || e->token <= 0) continue;
        if (newest && (e->token < newest->token ||
                       (e->token == newest->token && strcmp(e->owner, newest->owner) != 0))) {
            char d[256];
            snprintf(d, sizeof(d),
                     "order %s wrote unit %lld with token %lld after order %s had "
                     "written with token %lld",
                     e->order, e->unit, e->token, newest->order, newest->token);
            add(r, max, CHK_STALE_TOKEN, newest->id, e->id, e->unit, d);
            continue;
        }
        newest = e;
    }
}

/* Counts one coverage event named name (names past CHK_COVER_MAX distinct
 * ones are dropped: a run records a handful). */
static void cover(struct chk_report *r, const char *name) {
    for (int i = 0; i < r->ncover; i++) {
        if (strcmp(r->cover[i].name, name) == 0) {
            r->cover[i].count++;
            return;
        }
    }
    if (r->ncover == CHK_COVER_MAX) return;
    snprintf(r->cover[r->ncover].name, sizeof(r->cover[0].name), "%s", name);
    r->cover[r->ncover++].count = 1;
}

long long chk_coverage(const struct chk_report *r, const char *name) {
    for (int i = 0; i < r->ncover; i++)
        if (strcmp(r->cover[i].name, name) == 0) return r->cover[i].count;
    return 0;
}

/* Whether e's lease ran out while its holder was inside (see checker.h). */
static int expired_inside(const struct chk_event *e, int clocks_apart) {
    if (e->owned == 0) return 1;
    if (!strcmp(e->outcome, "lock_lost") || !strcmp(e->outcome, "stale_token")) return 1;
    return !clocks_apart && e->lease_us > 0 && applied(e) > e->lease_us;
}

/* Coverage: the recorded events, the derived one, and whether every need
 * was seen. */
static void find_coverage(const struct chk_input *in, struct chk_report *r) {
    for (size_t i = 0; i < in->ncoverage; i++) cover(r, in->coverage[i]);
    for (size_t i = 0; i < in->nevents; i++)
        if (expired_inside(&in->events[i], in->skip_overlaps)) cover(r, CHK_LEASE_EXPIRED_INSIDE);
    r->covered = 1;
    for (size_t i = 0; i < in->nneeds; i++)
        if (chk_coverage(r, in->needs[i]) == 0) r->covered = 0;
}

const char *chk_verdict(const struct chk_report *r) {
    if (r->safe) return "safe";
    for (int k = 0; k < CHK_KINDS; k++)
        if (k != CHK_UNTOLD_SALE && r->counts[k] > 0) return "unsafe";
    return r->complete ? "inconclusive" : "incomplete";
}

int chk_run(const struct chk_input *in, size_t max_findings, struct chk_report *r) {
    memset(r, 0, sizeof(*r));
    r->findings = calloc(max_findings ? max_findings : 1, sizeof(*r->findings));
    if (!r->findings) return -1;
    if ((!in->skip_overlaps && find_overlaps(in, max_findings, r) < 0) ||
        find_sold_twice(in, max_findings, r) < 0 || find_lost_and_untold(in, max_findings, r) < 0) {
        chk_report_free(r);
        return -1;
    }
    find_stale_tokens(in, max_findings, r);
    size_t nsold = 0;
    for (size_t i = 0; i < in->nevents; i++) {
        const struct chk_event *e = &in->events[i];
        nsold += wrote(e);
        if (!wrote_late(e, in->skip_overlaps)) continue;
        char d[256];
        if (e->owned == 0)
            snprintf(d, sizeof(d),
                     "order %s wrote unit %lld at %lld, when Redis saw the lock was "
                     "no longer its own (lease deadline %lld)",
                     e->order, e->unit, (long long)e->written_us, (long long)e->lease_us);
        else
            snprintf(d, sizeof(d),
                     "order %s wrote unit %lld at %lld, after its lease deadline "
                     "%lld",
                     e->order, e->unit, (long long)(e->written_us ? e->written_us : e->released_us),
                     (long long)e->lease_us);
        add(r, max_findings, CHK_LATE_WRITE, e->id, e->order, e->unit, d);
    }
    /* With no event at all the history was off, or the sales took no lock
     * (atomic): there are no holds to miss. */
    r->missing = in->nevents > 0 && in->nledger > nsold ? (long long)(in->nledger - nsold) : 0;
    r->complete = in->trimmed == 0 && r->missing == 0;
    long long given = in->initial - in->stock;
    if (given != (long long)in->nledger) {
        char d[256];
        snprintf(d, sizeof(d),
                 "initial %lld - stock %lld = %lld units given, but the ledger has "
                 "%zu entries",
                 in->initial, in->stock, given, in->nledger);
        add(r, max_findings, CHK_STOCK_LEDGER, NULL, NULL, 0, d);
    }
    r->oversold_units = (long long)in->nledger > given ? (long long)in->nledger - given : 0;
    find_coverage(in, r);
    r->safe = r->complete && r->covered;
    for (int k = 0; k < CHK_KINDS; k++)
        if (k != CHK_UNTOLD_SALE && r->counts[k] > 0) r->safe = 0;
    return 0;
}

/* Whether event e is named by finding f (its id, or its order). */
static int named(const struct chk_event *e, const struct chk_finding *f) {
    return (f->a[0] && (!strcmp(e->id, f->a) || !strcmp(e->order, f->a))) ||
           (f->b[0] && (!strcmp(e->id, f->b) || !strcmp(e->order, f->b)));
}

/* The index in r->findings of its first safety finding, by the order
 * chk_counterexample gives; -1 when it lists none. */
static long first_finding(const struct chk_report *r) {
    static const enum chk_kind order[] = {CHK_SOLD_TWICE, CHK_STALE_TOKEN, CHK_LATE_WRITE,
                                          CHK_OVERLAP};
    for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++)
        for (size_t i = 0; i < r->nfindings; i++)
            if (r->findings[i].kind == order[k]) return (long)i;
    return -1;
}

/* Adds to idx (n used, at most max) the holds valid at some time in
 * [lo, hi) that the first named of them are not; returns the new n. */
static size_t add_meanwhile(const struct chk_input *in, size_t *idx, size_t n, size_t named_n,
                            size_t max, int64_t lo, int64_t hi) {
    for (size_t i = 0; i < in->nevents && n < max; i++) {
        const struct chk_event *e = &in->events[i];
        if (e->granted_us >= hi || hold_end(e) <= lo) continue;
        int dup = 0;
        for (size_t j = 0; j < named_n && !dup; j++) dup = idx[j] == i;
        if (!dup) idx[n++] = i;
    }
    return n;
}

/* Sorts idx[0..n) by grant, then by stream order: an insertion sort, n is
 * small. */
static void sort_by_grant(const struct chk_input *in, size_t *idx, size_t n) {
    for (size_t i = 1; i < n; i++) {
        size_t v = idx[i], j = i;
        while (j > 0 && (in->events[idx[j - 1]].granted_us > in->events[v].granted_us ||
                         (in->events[idx[j - 1]].granted_us == in->events[v].granted_us &&
                          idx[j - 1] > v))) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = v;
    }
}

size_t chk_counterexample(const struct chk_input *in, const struct chk_report *r, size_t *idx,
                          size_t max, long *finding) {
    *finding = first_finding(r);
    if (*finding < 0 || max == 0) return 0;
    const struct chk_finding *f = &r->findings[*finding];
    size_t n = 0;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (size_t i = 0; i < in->nevents && n < max; i++) {
        const struct chk_event *e = &in->events[i];
        if (!named(e, f)) continue;
        idx[n++] = i;
        if (e->granted_us < lo) lo = e->granted_us;
        if (hold_end(e) > hi) hi = hold_end(e);
    }
    if (n == 0) return 0;
    n = add_meanwhile(in, idx, n, n, max, lo, hi);
    sort_by_grant(in, idx, n);
    return n;
}

void chk_report_free(struct chk_report *r) {
    free(r->findings);
    r->findings = NULL;
    r->nfindings = 0;
}

int chk_parse_entry(const char *s, struct chk_entry *e) {
    memset(e, 0, sizeof(*e));
    char *end;
    e->unit = strtoll(s, &end, 10);
    if (end == s || *end != '|') return -1;
    const char *order = end + 1, *bar = strchr(order, '|');
    if (!bar || bar == order || (size_t)(bar - order) >= sizeof(e->order)) return -1;
    memcpy(e->order, order, (size_t)(bar - order));
    e->port = atoi(bar + 1);
    return 0;
}

int chk_parse_told(const char *line, struct chk_told *t) {
    memset(t, 0, sizeof(*t));
    long long answered;
    int http;
    char status[24], order[48];
    long long unit;
    if (sscanf(line, "%lld %d %23s %47s %lld", &answered, &http, status, order, &unit) != 5)
        return -1;
    t->answered_us = answered;
    snprintf(t->status, sizeof(t->status), "%s", status);
    snprintf(t->order, sizeof(t->order), "%s", order);
    t->unit = unit;
    return 0;
}
