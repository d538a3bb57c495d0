/* hold.h -- when a hold of the lock was inside: the one definition that
 * the safety checker (tools/checker.c), the lab's scenario judge
 * (scenario.c) and the page (through GET /inventory/history and
 * GET /lab/runs/{id}, reply.c) all read, so that a red overlap on the page,
 * an overlap the checker reports and "inside together" in a verdict are
 * the same thing.
 *
 * DESIGN
 * A hold is the times one holder recorded (the history: grant, the send of
 * its write and release, its lease deadline, Redis's clock as its write
 * applied) and two optional inputs from outside the history: when the
 * holder said it left (its answer's lock.hold_ms, which counts a stalled
 * release the history does not date) and when a reset freed the lock under
 * it. From those:
 *   - the holder left (hold_left_us) at the later of the send of its write
 *     and release and the end its answer gives: its own account of its
 *     stay, which windows of a scenario read ("A was still at work when its
 *     lease ran out");
 *   - the hold was inside (hold_inside_until) until the later of when it
 *     left and when its write (or event) applied, cut at its lease deadline
 *     when it had one (past it, the holder no longer held the lock, whatever
 *     it believed), cut at a reset that freed the lock under it, but never
 *     before its own write applied when it wrote: the write was its act;
 *   - two holds overlap (hold_overlap) when the later one was granted before
 *     the earlier one's inside ended, by more than the clock edge of that
 *     end. A hold that was inside for no time at all (its lease had run out
 *     by its grant, and it wrote nothing) overlaps nothing, and the holds of
 *     one owner are one hold (a batch that answered several sales).
 * Timestamps are compared as given: holds recorded on different hosts
 * carry their clock skew.
 *
 * Pure: no I/O, no state; any thread may call it. */
#ifndef INVENTORYD_HOLD_H
#define INVENTORYD_HOLD_H

#include <stddef.h>
#include <stdint.h>

/* The clock edge of an end that rests on a holder's answer: lock.hold_ms is
 * whole milliseconds, timed on the holder's monotonic clock until its
 * release call returned, while the history's times are wall-clock µs of
 * the send and of Redis's apply. Such an end may run up to 1 ms past a
 * grant that really followed it (the next holder can get the lock between
 * the release applying and the release call returning), so it must pass a
 * grant by more than this to count. An end read from the history alone is
 * exact to its µs: its edge is 0. */
#define HOLD_EDGE_US 1000

struct hold {
    const char *owner; /* holds of one owner are one hold (a batch); NULL or
                                    "": a hold of its own */
    int64_t granted_us; /* the acquire returned */
    int64_t released_us; /* the write (or event) and the release were sent */
    int64_t lease_us; /* the lease deadline the holder knew; 0: none */
    int64_t written_us; /* Redis's clock as the write (or event) applied; 0:
                                    not recorded (the send is its lower bound) */
    int wrote; /* the hold's write applied (outcome sold) */
    int64_t held_until_us; /* the holder's answer: granted + lock.hold_ms,
                                    its stalled release included; 0: no answer */
    int64_t freed_us; /* a reset freed the lock then; 0: none */
};

/* When the holder left, by its own account (see above). */
int64_t hold_left_us(const struct hold *h);

/* Until when h was inside (see above). Not after its grant: h held
 * nothing. */
int64_t hold_inside_until(const struct hold *h);

/* The clock edge of h's end: HOLD_EDGE_US when it rests on h's answer,
 * else 0. */
int64_t hold_edge_us(const struct hold *h);

/* Whether a and b were inside at once (see above). *lead_us (may be NULL):
 * how long before the earlier granted one's end the later one was
 * granted, when they overlap. */
int hold_overlap(const struct hold *a, const struct hold *b, int64_t *lead_us);

/* One hold of a set as hold_spans gives it: the holds of one owner merged,
 * from the earliest grant to the latest end. */
struct hold_span {
    size_t first; /* the index of its first hold in the set */
    int64_t start, end, edge;
};

/* The spans of h[0..n): one per owner (or per hold without one), those that
 * were inside for some time, sorted by start, in out (room for n); returns
 * how many, or -1 when out of memory. */
long hold_spans(const struct hold *h, size_t n, struct hold_span *out);

/* Whether span b, which starts no earlier than a, overlaps a; *lead_us as
 * hold_overlap's. */
int hold_span_overlap(const struct hold_span *a, const struct hold_span *b, int64_t *lead_us);

/* Calls found once for every pair of spans of h[0..n) that overlap, with
 * the index of the first hold of the earlier granted one (a), of the later
 * one (b), and the lead. Returns how many pairs, or -1 when out of memory
 * (found not called then). */
long hold_overlaps(const struct hold *h, size_t n,
                   void (*found)(size_t a, size_t b, int64_t lead_us, void *arg), void *arg);

#endif
