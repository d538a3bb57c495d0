/* checker.h -- the safety checker's judgement, apart from any I/O: given the
 * recorded history of one item's lock holds, its ledger, its stock, and
 * what the clients were told, it finds what went wrong, naming the events
 * and orders involved. Pure: no I/O, no allocation but the report's; the
 * tests feed it histories that it must flag and histories it must pass.
 *
 * The judgement (one kind of finding each):
 *   overlap       two holds of the lock were valid at once (src/hold.h, the
 *                 one definition the lab's judge and page read too; the
 *                 reset below is its freed_us). A hold runs from
 *                 granted_us until its write and release were sent
 *                 (released_us) or Redis applied its event (written_us),
 *                 whichever is later, cut short at its lease deadline when
 *                 it had one (a holder past its lease no longer held it,
 *                 whatever it believed) -- but a hold that wrote lasts at
 *                 least until its write applied: the write was its act.
 *                 A hold whose lease had run out before it was granted
 *                 (and that wrote nothing) held nothing, and overlaps none
 *   sold_twice    one unit went to two orders (ledger and answers together)
 *   late_write    a hold wrote (outcome sold) when the lock was no longer
 *                 its own: Redis saw so as the write applied (owned 0), or,
 *                 where Redis could not look (owned unknown), the write
 *                 applied after the lease deadline (written_us, else
 *                 released_us, past lease_us). The holder's own "late" flag
 *                 is not evidence and is not read. Where Redis saw owned 0
 *                 the write is late whatever its token: a lock of another
 *                 kind on the key takes it without bumping the fence. A
 *                 write with a token where Redis did not look is judged
 *                 by its token (below)
 *   lost_sale     a client was told "sold" but the ledger has no entry for
 *                 its order
 *   untold_sale   the ledger has an entry no client was told was sold (a
 *                 write whose answer was lost, or a sale nobody recorded)
 *   stock_ledger  the stock does not agree with the ledger: initial - stock
 *                 differs from the number of entries
 *   stale_token_write  a write that carried a fencing token (token > 0) was
 *                 applied after a write with a newer token, or after another
 *                 owner's write with the same token: the fence let a stale
 *                 holder through. Judged in the order Redis applied the
 *                 events (the order of the history stream, as given), so no
 *                 clock is read
 * All but untold_sale are safety failures; an untold sale is reported but
 * is the honest outcome of a lost reply. Timestamps are compared as given:
 * events of different hosts carry their clock skew.
 *
 * Completeness. A history that lost events (the stream is capped at
 * history.max-events and was trimmed, or it has events but fewer sold
 * events than ledger entries) cannot clear a run: the report says
 * incomplete, and safe is never set then, whatever was found. A history
 * with no event at all is that of sales that took no lock (atomic) or of
 * history.enabled=false: only the ledger and the answers are judged.
 *
 * Coverage. A fault is evidence only when it reached its window: a holder
 * inside when it struck, a lease that ran out while its holder was inside,
 * a reply really lost. Whoever injects a fault records what it saw as a
 * coverage event in the same history stream (outcome "coverage", event
 * NAME, source WHO, at_us, detail), and the checker counts them by name,
 * with one it derives from the holds themselves:
 *   lease_expired_inside  a hold whose lease ran out while it was inside:
 *                         Redis saw its write after the lock had gone
 *                         (owned 0), its commit found the lease gone
 *                         (lock_lost, stale_token), or (clocks comparable)
 *                         its write applied past its lease deadline
 * A run given needs (the events its fault must show) that lacks one is not
 * covered, and is never safe: nothing unsafe found then is "inconclusive". */
#ifndef INVENTORYD_TOOLS_CHECKER_H
#define INVENTORYD_TOOLS_CHECKER_H

#include <stddef.h>
#include <stdint.h>
#include "hold.h"

struct chk_event {
    char id[32]; /* the history stream entry id */
    char instance[16];
    int port;
    char owner[64];
    char order[48];
    char outcome[24]; /* sold, sold_out, lock_lost, stale_token, stock_changed, bad_stock */
    int64_t granted_us, released_us, lease_us; /* lease_us 0: none */
    int64_t written_us; /* Redis's clock as the event applied; 0: not recorded */
    int owned; /* the lock was the holder's as it applied: 1, 0; -1 unknown */
    long long unit;
    long long token; /* the fencing token the hold wrote with; 0: none */
    long long stock_read; /* the stock the hold read; 0: none, or not recorded */
};

struct chk_entry { /* one ledger entry "unit|order|port" */
    long long unit;
    char order[48];
    int port;
};

struct chk_told { /* what one client was told */
    int64_t answered_us;
    char status[24]; /* sold, sold_out, lock_timeout, ... */
    char order[48];
    long long unit;
};

struct chk_input {
    const struct chk_event *events;
    size_t nevents;
    const struct chk_entry *ledger;
    size_t nledger;
    const struct chk_told *told;
    size_t ntold;
    long long stock, initial;
    int skip_overlaps; /* the events' clocks cannot be compared (a
                                    drifting host): judge neither overlaps nor a
                                    write's time against its lease */
    int64_t reset_us; /* when the item was reset (wall clock), or 0: the
                                    reset freed its lock, so a hold granted before
                                    it that wrote nothing held until then at most.
                                    A hold that read a stock below the item's stock
                                    now read the inventory the reset replaced (the
                                    stock only falls after it), so it was granted
                                    before the reset even when its grant's reply
                                    came back after it */
    long long trimmed; /* events the stream's cap dropped (XINFO STREAM
                                    entries-added - length); 0 when none */
    const char *const *coverage; /* the names of the coverage events recorded */
    size_t ncoverage;
    const char *const *needs; /* the coverage a verdict of safe needs; NULL: none */
    size_t nneeds;
};

#define CHK_KINDS 7
#define CHK_COVER_MAX 16
#define CHK_LEASE_EXPIRED_INSIDE "lease_expired_inside"
enum chk_kind {
    CHK_OVERLAP,
    CHK_SOLD_TWICE,
    CHK_LATE_WRITE,
    CHK_LOST_SALE,
    CHK_UNTOLD_SALE,
    CHK_STOCK_LEDGER,
    CHK_STALE_TOKEN
};

struct chk_finding {
    enum chk_kind kind;
    char a[48], b[48]; /* the events (ids) or orders involved; "" if none */
    long long unit; /* the unit, where there is one */
    char detail[256];
};

struct chk_report {
    long long counts[CHK_KINDS];
    long long oversold_units; /* entries - (initial - stock), at least 0 */
    int complete; /* the history has every hold's event */
    long long missing; /* ledger entries without a sold event */
    int covered; /* every need was seen */
    int safe; /* complete, covered, and no safety failure (untold
                                    sales aside) */
    struct {
        char name[32];
        long long count;
    } cover[CHK_COVER_MAX]; /* coverage seen, by name, recorded and derived */
    int ncover;
    struct chk_finding *findings; /* the first max_findings, malloc'd */
    size_t nfindings;
};

/* e as a hold (hold.h), the reset aside: hold_inside_until of it is until
 * when e held the lock. */
struct hold chk_hold(const struct chk_event *e);

/* The word of a kind: "overlap", "sold_twice", ... */
const char *chk_kind_word(enum chk_kind k);

/* How many coverage events named name r saw (0 when none). */
long long chk_coverage(const struct chk_report *r, const char *name);

/* "safe", "unsafe", "incomplete" (nothing unsafe, but the history lost
 * events) or "inconclusive" (nothing unsafe, but a need was not seen). */
const char *chk_verdict(const struct chk_report *r);

/* Judges in and fills r, keeping at most max_findings findings (every one is
 * counted). Returns 0, or -1 when out of memory. Free with chk_report_free. */
int chk_run(const struct chk_input *in, size_t max_findings, struct chk_report *r);

void chk_report_free(struct chk_report *r);

/* The counterexample of r: the few events that show its first safety
 * finding (the first unit sold twice, else a stale-token write, a late
 * write, an overlap), that is the holds named by the finding, and the
 * holds valid at some time between the earliest grant and the latest end
 * of those, so that a reader sees who held the lock meanwhile. Fills idx
 * with at most max indexes into in->events, in the order of their grant,
 * and *finding with the index of the finding in r->findings (-1 when r
 * lists no safety finding). Returns how many indexes it wrote: 0 when the
 * finding names no recorded hold (a unit sold twice by sales that took no
 * lock, as atomic's). */
size_t chk_counterexample(const struct chk_input *in, const struct chk_report *r, size_t *idx,
                          size_t max, long *finding);

/* Parses a ledger entry "unit|order|port"; 0, or -1 when malformed. */
int chk_parse_entry(const char *s, struct chk_entry *e);

/* Parses a line of inventory-load --record; 0, or -1 when malformed. */
int chk_parse_told(const char *line, struct chk_told *t);

#endif
