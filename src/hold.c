/* hold.c -- when a hold of the lock was inside (see hold.h). */
#include "hold.h"

#include <stdlib.h>
#include <string.h>

/* When h's write (or event) applied: Redis's clock, or when it was sent,
 * its lower bound, where the history lacks it. */
static int64_t applied(const struct hold *h) {
    return h->written_us ? h->written_us : h->released_us;
}

int64_t hold_left_us(const struct hold *h) {
    return h->held_until_us > h->released_us ? h->held_until_us : h->released_us;
}

int64_t hold_inside_until(const struct hold *h) {
    int64_t act = applied(h), end = hold_left_us(h);
    if (act > end) end = act;
    if (h->lease_us > 0 && h->lease_us < end) end = h->lease_us;
    if (!h->wrote && h->freed_us > 0 && h->granted_us < h->freed_us && end > h->freed_us)
        end = h->freed_us;
    if (h->wrote && act > end) end = act;
    return end;
}

int64_t hold_edge_us(const struct hold *h) {
    int64_t end = hold_inside_until(h);
    int on_answer =
        h->held_until_us > 0 && end == h->held_until_us && end > h->released_us && end > applied(h);
    return on_answer ? HOLD_EDGE_US : 0;
}

static struct hold_span span_of(const struct hold *h, size_t i) {
    return (struct hold_span){i, h[i].granted_us, hold_inside_until(&h[i]), hold_edge_us(&h[i])};
}

int hold_span_overlap(const struct hold_span *a, const struct hold_span *b, int64_t *lead_us) {
    if (a->end <= a->start || b->end <= b->start) return 0;
    int64_t lead = a->end - b->start;
    if (lead <= a->edge) return 0;
    if (lead_us) *lead_us = lead;
    return 1;
}

static int has_owner(const struct hold *h) { return h->owner && h->owner[0]; }

int hold_overlap(const struct hold *a, const struct hold *b, int64_t *lead_us) {
    if (has_owner(a) && has_owner(b) && strcmp(a->owner, b->owner) == 0) return 0;
    struct hold_span x = span_of(a, 0), y = span_of(b, 0);
    return x.start <= y.start ? hold_span_overlap(&x, &y, lead_us)
                              : hold_span_overlap(&y, &x, lead_us);
}

struct keyed {
    const char *owner;
    size_t i;
};

static int cmp_keyed(const void *a, const void *b) {
    const struct keyed *x = a, *y = b;
    int c = strcmp(x->owner, y->owner);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

static int cmp_span(const void *a, const void *b) {
    const struct hold_span *x = a, *y = b;
    if (x->start != y->start) return (x->start > y->start) - (x->start < y->start);
    return (x->first > y->first) - (x->first < y->first);
}

long hold_spans(const struct hold *h, size_t n, struct hold_span *out) {
    if (n == 0) return 0;
    struct keyed *k = malloc(n * sizeof(*k));
    if (!k) return -1;
    size_t nk = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        if (has_owner(&h[i]))
            k[nk++] = (struct keyed){h[i].owner, i};
        else
            out[m++] = span_of(h, i);
    }
    /* A batch is one hold that answered several sales: one owner, one hold. */
    qsort(k, nk, sizeof(*k), cmp_keyed);
    for (size_t j = 0; j < nk; j++) {
        struct hold_span s = span_of(h, k[j].i), *last = &out[m - (m > 0)];
        if (j == 0 || strcmp(k[j - 1].owner, k[j].owner) != 0) {
            out[m++] = s;
            continue;
        }
        if (s.start < last->start) last->start = s.start;
        if (s.end > last->end) last->end = s.end, last->edge = s.edge;
    }
    free(k);
    size_t kept = 0;
    for (size_t i = 0; i < m; i++)
        if (out[i].end > out[i].start) out[kept++] = out[i];
    qsort(out, kept, sizeof(*out), cmp_span);
    return (long)kept;
}

long hold_overlaps(const struct hold *h, size_t n,
                   void (*found)(size_t a, size_t b, int64_t lead_us, void *arg), void *arg) {
    if (n == 0) return 0;
    struct hold_span *s = malloc(n * sizeof(*s));
    size_t *open = malloc(n * sizeof(*open));
    long m = s && open ? hold_spans(h, n, s) : -1;
    long pairs = 0;
    size_t nopen = 0;
    for (long i = 0; i < m; i++) {
        size_t kept = 0; /* the spans still open at this one's start */
        for (size_t j = 0; j < nopen; j++)
            if (s[open[j]].end > s[i].start) open[kept++] = open[j];
        nopen = kept;
        for (size_t j = 0; j < nopen; j++) {
            int64_t lead;
            if (!hold_span_overlap(&s[open[j]], &s[i], &lead)) continue;
            found(s[open[j]].first, s[i].first, lead, arg);
            pairs++;
        }
        open[nopen++] = (size_t)i;
    }
    free(s);
    free(open);
    return m < 0 ? -1 : pairs;
}
