/* checker.h -- the safety checker's judgement, apart from any I/O: given the
 * recorded history of one item's lock holds, its ledger, its stock, and
 * what the clients were told, it finds what went wrong, naming the events
 * and orders involved. Pure: no I/O, no allocation but the report's; the
 * tests feed it histories that it must flag and histories it must pass.
 *
 * The judgement (one kind of finding each):
 *   overlap       two holds of the lock were valid at once: each hold runs
 *                 from granted_us to released_us, cut short at its lease
 *                 deadline when it had one (a holder past its lease no
 *                 longer held it, whatever it believed)
 *   sold_twice    one unit went to two orders (ledger and answers together)
 *   late_write    a hold wrote (outcome sold) after its lease deadline
 *   lost_sale     a client was told "sold" but the ledger has no entry for
 *                 its order
 *   untold_sale   the ledger has an entry no client was told was sold (a
 *                 write whose answer was lost, or a sale nobody recorded)
 *   stock_ledger  the stock does not agree with the ledger: initial - stock
 *                 differs from the number of entries
 * All but untold_sale are safety failures; an untold sale is reported but
 * is the honest outcome of a lost reply. Timestamps are compared as given:
 * events of different hosts carry their clock skew. */
#ifndef INVENTORYD_TOOLS_CHECKER_H
#define INVENTORYD_TOOLS_CHECKER_H

#include <stddef.h>
#include <stdint.h>

struct chk_event {
    char id[32];                 /* the history stream entry id */
    char instance[16];
    int port;
    char owner[64];
    char order[48];
    char outcome[24];            /* sold, sold_out, lock_lost, stale_token, bad_stock */
    int64_t granted_us, released_us, lease_us;   /* lease_us 0: none */
    long long unit;
    int late;
};

struct chk_entry {               /* one ledger entry "unit|order|port" */
    long long unit;
    char order[48];
    int port;
};

struct chk_told {                /* what one client was told */
    int64_t answered_us;
    char status[24];             /* sold, sold_out, lock_timeout, ... */
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
    int skip_overlaps;           /* the events' clocks cannot be compared (a
                                    drifting host): do not judge overlaps */
};

#define CHK_KINDS 6
enum chk_kind { CHK_OVERLAP, CHK_SOLD_TWICE, CHK_LATE_WRITE, CHK_LOST_SALE, CHK_UNTOLD_SALE,
                CHK_STOCK_LEDGER };

struct chk_finding {
    enum chk_kind kind;
    char a[48], b[48];           /* the events (ids) or orders involved; "" if none */
    long long unit;              /* the unit, where there is one */
    char detail[256];
};

struct chk_report {
    long long counts[CHK_KINDS];
    long long oversold_units;    /* entries - (initial - stock), at least 0 */
    int safe;                    /* no safety failure (untold sales aside) */
    struct chk_finding *findings;   /* the first max_findings, malloc'd */
    size_t nfindings;
};

/* The word of a kind: "overlap", "sold_twice", ... */
const char *chk_kind_word(enum chk_kind k);

/* Judges in and fills r, keeping at most max_findings findings (every one is
 * counted). Returns 0, or -1 when out of memory. Free with chk_report_free. */
int chk_run(const struct chk_input *in, size_t max_findings, struct chk_report *r);

void chk_report_free(struct chk_report *r);

/* Parses a ledger entry "unit|order|port"; 0, or -1 when malformed. */
int chk_parse_entry(const char *s, struct chk_entry *e);

/* Parses a line of inventory-load --record; 0, or -1 when malformed. */
int chk_parse_told(const char *line, struct chk_told *t);

#endif
