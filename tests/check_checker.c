/* check_checker.c -- the safety checker's judgement (tools/checker.h) on
 * histories it must flag and histories it must pass. No server. */
#include "check_main.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "checker.h"

/* An event; owned as Redis saw it when it applied (-1: it did not look),
 * written_us unset (the write applied no earlier than released). */
static struct chk_event ev(const char *id, const char *owner, int64_t granted, int64_t released,
                           int64_t lease, const char *outcome, long long unit, int owned) {
    struct chk_event e;
    memset(&e, 0, sizeof(e));
    snprintf(e.id, sizeof(e.id), "%s", id);
    snprintf(e.owner, sizeof(e.owner), "%s", owner);
    snprintf(e.order, sizeof(e.order), "o-%s", id);
    snprintf(e.outcome, sizeof(e.outcome), "%s", outcome);
    snprintf(e.instance, sizeof(e.instance), "inst");
    e.granted_us = granted;
    e.released_us = released;
    e.lease_us = lease;
    e.unit = unit;
    e.owned = owned;
    return e;
}

static struct chk_entry entry(long long unit, const char *order) {
    struct chk_entry e;
    memset(&e, 0, sizeof(e));
    e.unit = unit;
    snprintf(e.order, sizeof(e.order), "%s", order);
    e.port = 3786;
    return e;
}

static struct chk_told told(const char *status, const char *order, long long unit) {
    struct chk_told t;
    memset(&t, 0, sizeof(t));
    snprintf(t.status, sizeof(t.status), "%s", status);
    snprintf(t.order, sizeof(t.order), "%s", order);
    t.unit = unit;
    return t;
}

static struct chk_report judge(const struct chk_input *in) {
    struct chk_report r;
    ck_assert_int_eq(chk_run(in, 16, &r), 0);
    return r;
}

START_TEST(test_holds_one_after_another_with_a_matching_ledger_pass) {
    struct chk_event e[] = {ev("1-0", "a:1", 100, 200, 1000, "sold", 10, -1),
                            ev("2-0", "b:1", 200, 300, 1100, "sold", 9, -1)};
    struct chk_entry l[] = {entry(10, "o-1-0"), entry(9, "o-2-0")};
    struct chk_told t[] = {told("sold", "o-1-0", 10), told("sold", "o-2-0", 9),
                           told("lock_timeout", "-", 0)};
    struct chk_input in = {.events = e,
                           .nevents = 2,
                           .ledger = l,
                           .nledger = 2,
                           .told = t,
                           .ntold = 3,
                           .stock = 8,
                           .initial = 10};
    struct chk_report r = judge(&in);
    ck_assert(r.safe);
    for (int k = 0; k < CHK_KINDS; k++) ck_assert_int_eq(r.counts[k], 0);
    chk_report_free(&r);
}
END_TEST

START_TEST(test_two_owners_holding_at_once_are_an_overlap_naming_both_events) {
    struct chk_event e[] = {ev("1-0", "a:1", 100, 300, 0, "sold", 10, -1),
                            ev("2-0", "b:1", 200, 400, 0, "sold", 9, -1)};
    struct chk_entry l[] = {entry(10, "o-1-0"), entry(9, "o-2-0")};
    struct chk_input in = {
        .events = e, .nevents = 2, .ledger = l, .nledger = 2, .stock = 8, .initial = 10};
    struct chk_report r = judge(&in);
    ck_assert(!r.safe);
    ck_assert_int_eq(r.counts[CHK_OVERLAP], 1);
    ck_assert_str_eq(r.findings[0].a, "1-0");
    ck_assert_str_eq(r.findings[0].b, "2-0");
    chk_report_free(&r);
}
END_TEST

START_TEST(test_without_comparable_clocks_overlaps_are_not_judged_but_the_ledger_is) {
    /* A drifting host: the two holds look overlapped on the wall clock, which
     * proves nothing; the unit sold in two orders still does. */
    struct chk_event e[] = {ev("1-0", "a:1", 100, 300, 0, "sold", 10, -1),
                            ev("2-0", "b:1", 200, 400, 0, "sold", 10, -1)};
    struct chk_entry l[] = {entry(10, "o-1-0"), entry(10, "o-2-0")};
    struct chk_input in = {.events = e,
                           .nevents = 2,
                           .ledger = l,
                           .nledger = 2,
                           .stock = 8,
                           .initial = 10,
                           .skip_overlaps = 1};
    struct chk_report r = judge(&in);
    ck_assert_int_eq(r.counts[CHK_OVERLAP], 0);
    ck_assert_int_eq(r.counts[CHK_SOLD_TWICE], 1);
    ck_assert(!r.safe);
    chk_report_free(&r);
}
END_TEST

START_TEST(test_a_hold_past_its_lease_that_wrote_nothing_is_cut_at_its_deadline) {
    /* A's lease ended at 150 and it wrote nothing; B was granted at 200:
     * not two valid holds at once. */
    struct chk_event e[] = {ev("1-0", "a:1", 100, 400, 150, "sold_out", 0, -1),
                            ev("2-0", "b:1", 200, 300, 1200, "sold", 9, -1)};
    struct chk_entry l[] = {entry(9, "o-2-0")};
    struct chk_input in = {
        .events = e, .nevents = 2, .ledger = l, .nledger = 1, .stock = 9, .initial = 10};
    struct chk_report r = judge(&in);
    ck_assert_int_eq(r.counts[CHK_OVERLAP], 0);
    ck_assert_int_eq(r.counts[CHK_LATE_WRITE], 0);
    ck_assert(r.safe);
    chk_report_free(&r);
}
END_TEST

START_TEST(test_a_hold_granted_before_a_reset_whose_reply_came_after_it_ends_at_the_reset) {
    /* CI (campaign, redisson, mixed, seed 3): Redis granted A its lock and
     * A read the old inventory's stock (5) before the reset at 200, but the
     * grant's reply reached A after it (granted_us 210). The reset freed
     * the lock; B took it at 220 and sold unit 10 of the new inventory. A's
     * refused write (lock_lost, owned 0) came at 400. A's read of a stock
     * below any the new inventory held shows its grant came before the
     * reset: it held until the reset, no overlap. Without its read known,
     * or with no reset, it is judged by its grant's reply: an overlap. */
    struct chk_event e[] = {ev("1-0", "a:1", 210, 400, 1100, "lock_lost", 0, 0),
                            ev("2-0", "b:1", 220, 350, 1300, "sold", 10, 1)};
    e[0].written_us = 400;
    struct chk_entry l[] = {entry(10, "o-2-0")};
    struct chk_input in = {.events = e,
                           .nevents = 2,
                           .ledger = l,
                           .nledger = 1,
                           .stock = 9,
                           .initial = 10,
                           .reset_us = 200};
    struct chk_report r = judge(&in);
    ck_assert_int_eq(r.counts[CHK_OVERLAP], 1); /* its read not recorded */
    chk_report_free(&r);
    e[0].stock_read = 5;
    r = judge(&in);
    ck_assert_int_eq(r.counts[CHK_OVERLAP], 0);
    ck_assert(r.safe);
    chk_report_free(&r);
    e[0].stock_read = 10; /* a read of the new inventory: granted after the reset */
    r = judge(&in);
    ck_assert_int_eq(r.counts[CHK_OVERLAP], 1);
    chk_report_free(&r);
    e[0].stock_read = 5;
    in.reset_us = 0;
    r = judge(&in);
    ck_assert_int_eq(r.counts[CHK_OVERLAP], 1);
    chk_report_free(&r);
}
END_TEST

START_TEST(test_a_reset_ends_the_holds_it_freed_but_not_a_write_that_came_after_it) {
    /* A was granted at 100 with a lease to 1100; the item was reset at 200
     * (which frees its lock), B was granted at 300. A's refused write (300):
     * its hold ended at the reset, no overlap. Had A written at 400, it
     * held until then: an overlap, and no reset hides it. */
    struct chk_event e[] = {ev("1-0", "a:1", 100, 500, 1100, "stock_changed", 0, 1),
                            ev("2-0", "b:1", 300, 350, 1300, "sold", 9, 1)};
    e[0].written_us = 400;
    struct chk_entry l[] = {entry(9, "o-2-0")};
    struct chk_input in = {
        .events = e, .nevents = 2, .ledger = l, .nledger = 1, .stock = 9, .initial = 10};
    struct chk_report r = judge(&in);
    ck_assert_int_eq(r.counts[CHK_OVERLAP], 1); /* no reset said: A held to 500 */
    chk_report_free(&r);
    in.reset_us = 200;
    r = judge(&in);
    ck_assert_int_eq(r.counts[CHK_OVERLAP], 0);
    ck_assert(r.safe);
    chk_report_free(&r);
    snprintf(e[0].outcome, sizeof(e[0].outcome), "sold");
    e[0].unit = 10;
    struct chk_entry l2[] = {entry(10, "o-1-0"), entry(9, "o-2-0")};
    in.ledger = l2;
    in.nledger = 2;
    in.stock = 8;
    r = judge(&in);
    ck_assert_int_eq(r.counts[CHK_OVERLAP], 1);
    ck_assert(!r.safe);
    chk_report_free(&r);
}
END_TEST

START_TEST(test_a_late_write_that_duplicates_no_unit_is_a_late_write_and_an_overlap) {
    /* A was granted at 100 with a lease to 150, sent its write at 140, and
     * Redis applied it at 400; B was granted at 200 and sold the next unit.
     * No unit was sold twice, yet A wrote when B held the lock: judged from
     * the times of the write, not from A's own view. */
    struct chk_event e[] = {ev("1-0", "a:1", 100, 140, 150, "sold", 10, -1),
                            ev("2-0", "b:1", 200, 300, 1200, "sold", 9, -1)};
    e[0].written_us = 400;
    e[1].written_us = 310;
    struct chk_entry l[] = {entry(10, "o-1-0"), entry(9, "o-2-0")};
    struct chk_input in = {
        .events = e, .nevents = 2, .ledger = l, .nledger = 2, .stock = 8, .initial = 10};
    struct chk_report r = judge(&in);
    ck_assert_int_eq(r.counts[CHK_SOLD_TWICE], 0);
    ck_assert_int_eq(r.counts[CHK_LATE_WRITE], 1);
    ck_assert_int_eq(r.counts[CHK_OVERLAP], 1);
    ck_assert(!r.safe);
    chk_report_free(&r);
}
END_TEST

START_TEST(test_a_write_redis_saw_outside_its_owners_lock_is_late_whatever_the_clocks_say) {
    /* The guard looked as the write applied: the lock was not the
     * holder's. Its lease on its own clock looks fine; Redis's word wins,
     * with comparable clocks or not. */
    struct chk_event e[] = {ev("1-0", "a:1", 100, 140, 1000, "sold", 10, 0)};
    e[0].written_us = 150;
    struct chk_entry l[] = {entry(10, "o-1-0")};
    for (int apart = 0; apart < 2; apart++) {
        struct chk_input in = {.events = e,
                               .nevents = 1,
                               .ledger = l,
                               .nledger = 1,
                               .stock = 9,
                               .initial = 10,
                               .skip_overlaps = apart};
        struct chk_report r = judge(&in);
        ck_assert_int_eq(r.counts[CHK_LATE_WRITE], 1);
        ck_assert(!r.safe);
        chk_report_free(&r);
    }
    /* And a write Redis saw inside its lock is not late, though it applied
     * after the lease the holder counted (dated from its send, with a
     * margin). */
    e[0].owned = 1;
    e[0].lease_us = 120;
    struct chk_input in = {
        .events = e, .nevents = 1, .ledger = l, .nledger = 1, .stock = 9, .initial = 10};
    struct chk_report r = judge(&in);
    ck_assert_int_eq(r.counts[CHK_LATE_WRITE], 0);
    chk_report_free(&r);
}
END_TEST

START_TEST(test_a_trimmed_history_is_never_safe_however_clean) {
    struct chk_event e[] = {ev("1-0", "a:1", 100, 200, 1000, "sold", 10, 1)};
    struct chk_entry l[] = {entry(10, "o-1-0")};
    struct chk_input in = {
        .events = e, .nevents = 1, .ledger = l, .nledger = 1, .stock = 9, .initial = 10};
    in.trimmed = 5;
    struct chk_report r = judge(&in);
    for (int k = 0; k < CHK_KINDS; k++) ck_assert_int_eq(r.counts[k], 0);
    ck_assert(!r.complete);
    ck_assert(!r.safe);
    chk_report_free(&r);
    /* Nor one with ledger entries whose events are gone. */
    struct chk_entry l2[] = {entry(10, "o-1-0"), entry(9, "o-0-9")};
    struct chk_input in2 = {
        .events = e, .nevents = 1, .ledger = l2, .nledger = 2, .stock = 8, .initial = 10};
    r = judge(&in2);
    ck_assert_int_eq(r.missing, 1);
    ck_assert(!r.safe);
    chk_report_free(&r);
}
END_TEST

START_TEST(test_a_late_hold_that_wrote_nothing_is_not_a_late_write) {
    struct chk_event e[] = {ev("1-0", "a:1", 100, 400, 150, "lock_lost", 0, -1)};
    struct chk_input in = {.events = e, .nevents = 1, .stock = 10, .initial = 10};
    struct chk_report r = judge(&in);
    ck_assert(r.safe);
    chk_report_free(&r);
}
END_TEST

START_TEST(test_the_events_of_one_batch_are_one_hold) {
    struct chk_event e[] = {ev("1-0", "a:1", 100, 200, 0, "sold", 10, -1),
                            ev("1-1", "a:1", 100, 200, 0, "sold", 9, -1),
                            ev("1-2", "a:1", 100, 200, 0, "sold", 8, -1)};
    struct chk_entry l[] = {entry(10, "o-1-0"), entry(9, "o-1-1"), entry(8, "o-1-2")};
    struct chk_input in = {
        .events = e, .nevents = 3, .ledger = l, .nledger = 3, .stock = 7, .initial = 10};
    struct chk_report r = judge(&in);
    ck_assert_int_eq(r.counts[CHK_OVERLAP], 0);
    ck_assert(r.safe);
    chk_report_free(&r);
}
END_TEST

START_TEST(test_one_unit_in_two_ledger_entries_is_sold_twice_with_both_orders) {
    struct chk_entry l[] = {entry(10, "x-1"), entry(10, "y-7")};
    struct chk_input in = {.ledger = l, .nledger = 2, .stock = 9, .initial = 10};
    struct chk_report r = judge(&in);
    ck_assert_int_eq(r.counts[CHK_SOLD_TWICE], 1);
    ck_assert_int_eq(r.counts[CHK_STOCK_LEDGER], 1); /* 1 given, 2 entries */
    ck_assert_int_eq(r.oversold_units, 1);
    int found = 0;
    for (size_t i = 0; i < r.nfindings; i++)
        if (r.findings[i].kind == CHK_SOLD_TWICE) {
            ck_assert_str_eq(r.findings[i].a, "x-1");
            ck_assert_str_eq(r.findings[i].b, "y-7");
            ck_assert_int_eq(r.findings[i].unit, 10);
            found = 1;
        }
    ck_assert(found);
    chk_report_free(&r);
}
END_TEST

START_TEST(test_a_unit_a_client_was_told_and_a_ledger_entry_of_another_order_are_sold_twice) {
    /* The failover case: the answer's entry was lost with the old master,
     * and the promoted replica sold the unit again. */
    struct chk_entry l[] = {entry(10, "y-7")};
    struct chk_told t[] = {told("sold", "x-1", 10), told("sold", "y-7", 10)};
    struct chk_input in = {
        .ledger = l, .nledger = 1, .told = t, .ntold = 2, .stock = 9, .initial = 10};
    struct chk_report r = judge(&in);
    ck_assert_int_eq(r.counts[CHK_SOLD_TWICE], 1);
    ck_assert_int_eq(r.counts[CHK_LOST_SALE], 1);
    ck_assert(!r.safe);
    chk_report_free(&r);
}
END_TEST

START_TEST(test_a_ledger_entry_nobody_was_told_of_is_reported_but_safe) {
    struct chk_entry l[] = {entry(10, "x-1"), entry(9, "x-2")};
    struct chk_told t[] = {told("sold", "x-1", 10), told("backend_unavailable", "-", 0)};
    struct chk_input in = {
        .ledger = l, .nledger = 2, .told = t, .ntold = 2, .stock = 8, .initial = 10};
    struct chk_report r = judge(&in);
    ck_assert_int_eq(r.counts[CHK_UNTOLD_SALE], 1);
    ck_assert(r.safe);
    chk_report_free(&r);
}
END_TEST

START_TEST(test_a_stock_that_disagrees_with_the_ledger_is_flagged) {
    struct chk_entry l[] = {entry(10, "x-1")};
    struct chk_input in = {.ledger = l, .nledger = 1, .stock = 10, .initial = 10};
    struct chk_report r = judge(&in);
    ck_assert_int_eq(r.counts[CHK_STOCK_LEDGER], 1);
    ck_assert(!r.safe);
    chk_report_free(&r);
}
END_TEST

START_TEST(test_every_finding_is_counted_beyond_the_ones_listed) {
    struct chk_event e[40];
    for (int i = 0; i < 40; i++) {
        char id[16], owner[16];
        snprintf(id, sizeof(id), "%d-0", i);
        snprintf(owner, sizeof(owner), "o:%d", i);
        e[i] = ev(id, owner, 100, 500, 0, "sold_out", 0, -1); /* all at once */
    }
    struct chk_input in = {.events = e, .nevents = 40, .stock = 0, .initial = 0};
    struct chk_report r;
    ck_assert_int_eq(chk_run(&in, 5, &r), 0);
    ck_assert_int_eq(r.counts[CHK_OVERLAP], 39);
    ck_assert_int_eq(r.nfindings, 5);
    chk_report_free(&r);
}
END_TEST

START_TEST(test_ledger_entries_and_recorded_answers_parse_and_malformed_ones_do_not) {
    struct chk_entry e;
    ck_assert_int_eq(chk_parse_entry("199|ab12cd34-7|3786", &e), 0);
    ck_assert_int_eq(e.unit, 199);
    ck_assert_str_eq(e.order, "ab12cd34-7");
    ck_assert_int_eq(e.port, 3786);
    ck_assert_int_eq(chk_parse_entry("199", &e), -1);
    ck_assert_int_eq(chk_parse_entry("x|y|1", &e), -1);
    ck_assert_int_eq(chk_parse_entry("5||1", &e), -1);
    struct chk_told t;
    ck_assert_int_eq(chk_parse_told("1700000000000000 200 sold ab-1 42\n", &t), 0);
    ck_assert_str_eq(t.status, "sold");
    ck_assert_str_eq(t.order, "ab-1");
    ck_assert_int_eq(t.unit, 42);
    ck_assert_int_eq(chk_parse_told("garbage", &t), -1);
}
END_TEST

START_TEST(test_a_clean_run_whose_fault_missed_its_window_is_inconclusive_not_safe) {
    struct chk_event e[] = {ev("1-0", "a:1", 100, 200, 1000, "sold", 10, 1)};
    struct chk_entry l[] = {entry(10, "o-1-0")};
    const char *needs[] = {"holder_inside"};
    struct chk_input in = {.events = e,
                           .nevents = 1,
                           .ledger = l,
                           .nledger = 1,
                           .stock = 9,
                           .initial = 10,
                           .needs = needs,
                           .nneeds = 1};
    struct chk_report r = judge(&in);
    ck_assert(!r.safe);
    ck_assert(!r.covered);
    ck_assert(r.complete);
    ck_assert_str_eq(chk_verdict(&r), "inconclusive");
    chk_report_free(&r);
    /* the same run, with the fault's event recorded: safe */
    const char *seen[] = {"holder_inside", "holder_inside", "reply_lost"};
    in.coverage = seen;
    in.ncoverage = 3;
    r = judge(&in);
    ck_assert(r.safe);
    ck_assert(r.covered);
    ck_assert_str_eq(chk_verdict(&r), "safe");
    ck_assert_int_eq(chk_coverage(&r, "holder_inside"), 2);
    ck_assert_int_eq(chk_coverage(&r, "reply_lost"), 1);
    ck_assert_int_eq(chk_coverage(&r, "failover"), 0);
    chk_report_free(&r);
}
END_TEST

START_TEST(test_a_violation_is_its_own_evidence_whatever_the_coverage) {
    struct chk_entry l[] = {entry(10, "o-1"), entry(10, "o-2")};
    const char *needs[] = {"holder_inside"};
    struct chk_input in = {
        .ledger = l, .nledger = 2, .stock = 9, .initial = 10, .needs = needs, .nneeds = 1};
    struct chk_report r = judge(&in);
    ck_assert(!r.covered);
    ck_assert_str_eq(chk_verdict(&r), "unsafe");
    chk_report_free(&r);
}
END_TEST

START_TEST(test_a_lease_that_ran_out_inside_its_hold_is_derived_from_the_holds) {
    /* 1: Redis saw the write outside the lock; 2: the commit found the lease
     * gone; 3: the write applied past the deadline; 4: a clean hold. */
    struct chk_event e[] = {ev("1-0", "a:1", 100, 200, 1000, "sold", 10, 0),
                            ev("2-0", "b:1", 2000, 2100, 2050, "lock_lost", 0, -1),
                            ev("3-0", "c:1", 3000, 3300, 3200, "sold_out", 0, -1),
                            ev("4-0", "d:1", 4000, 4100, 5000, "sold", 9, 1)};
    struct chk_entry l[] = {entry(10, "o-1-0"), entry(9, "o-4-0")};
    const char *needs[] = {CHK_LEASE_EXPIRED_INSIDE};
    struct chk_input in = {.events = e,
                           .nevents = 4,
                           .ledger = l,
                           .nledger = 2,
                           .stock = 8,
                           .initial = 10,
                           .needs = needs,
                           .nneeds = 1};
    struct chk_report r = judge(&in);
    ck_assert(r.covered);
    ck_assert_int_eq(chk_coverage(&r, CHK_LEASE_EXPIRED_INSIDE), 3);
    chk_report_free(&r);
    /* with clocks that cannot be compared, only what Redis saw counts */
    in.skip_overlaps = 1;
    r = judge(&in);
    ck_assert_int_eq(chk_coverage(&r, CHK_LEASE_EXPIRED_INSIDE), 2);
    chk_report_free(&r);
    /* and a calm run shows none */
    in.events = e + 3;
    in.nevents = 1;
    in.ledger = l + 1;
    in.nledger = 1;
    in.stock = 9;
    r = judge(&in);
    ck_assert(!r.covered);
    ck_assert_int_eq(chk_coverage(&r, CHK_LEASE_EXPIRED_INSIDE), 0);
    ck_assert_str_eq(chk_verdict(&r), "inconclusive");
    chk_report_free(&r);
}
END_TEST

START_TEST(test_a_write_with_an_older_token_applied_after_a_newer_one_is_a_stale_token_write) {
    /* In the order Redis applied them: token 7 wrote, then token 5 (a
     * holder paused past its lease whose fence let it through), then 8. */
    struct chk_event e[] = {ev("1-0", "a:1", 100, 200, 1000, "sold", 10, -1),
                            ev("2-0", "b:1", 300, 400, 1300, "sold", 9, -1),
                            ev("3-0", "c:1", 500, 600, 1500, "sold", 8, -1)};
    e[0].token = 7;
    e[1].token = 5;
    e[2].token = 8;
    struct chk_entry l[] = {entry(10, "o-1-0"), entry(9, "o-2-0"), entry(8, "o-3-0")};
    struct chk_input in = {
        .events = e, .nevents = 3, .ledger = l, .nledger = 3, .stock = 7, .initial = 10};
    struct chk_report r = judge(&in);
    ck_assert_int_eq(r.counts[CHK_STALE_TOKEN], 1);
    ck_assert_int_eq(r.counts[CHK_OVERLAP], 0);
    ck_assert_int_eq(r.counts[CHK_SOLD_TWICE], 0);
    ck_assert(!r.safe);
    ck_assert_str_eq(chk_verdict(&r), "unsafe");
    ck_assert_str_eq(chk_kind_word(CHK_STALE_TOKEN), "stale_token_write");
    int found = 0;
    for (size_t i = 0; i < r.nfindings; i++)
        if (r.findings[i].kind == CHK_STALE_TOKEN) {
            ck_assert_str_eq(r.findings[i].a, "1-0");
            ck_assert_str_eq(r.findings[i].b, "2-0");
            found = 1;
        }
    ck_assert(found);
    chk_report_free(&r);
    /* the same token written again by another owner is stale too */
    e[1].token = 7;
    r = judge(&in);
    ck_assert_int_eq(r.counts[CHK_STALE_TOKEN], 1);
    chk_report_free(&r);
    /* and tokens that only grow, or a refused write, or no token, are fine */
    e[1].token = 7;
    snprintf(e[1].outcome, sizeof(e[1].outcome), "stale_token");
    struct chk_entry l2[] = {entry(10, "o-1-0"), entry(8, "o-3-0")};
    in.ledger = l2;
    in.nledger = 2;
    in.stock = 8;
    r = judge(&in);
    ck_assert_int_eq(r.counts[CHK_STALE_TOKEN], 0);
    ck_assert(r.safe);
    chk_report_free(&r);
    e[0].token = e[1].token = e[2].token = 0;
    snprintf(e[1].outcome, sizeof(e[1].outcome), "sold");
    in.ledger = l;
    in.nledger = 3;
    in.stock = 7;
    r = judge(&in);
    ck_assert_int_eq(r.counts[CHK_STALE_TOKEN], 0);
    ck_assert(r.safe);
    chk_report_free(&r);
}
END_TEST

START_TEST(test_a_fenced_write_applied_when_the_lock_was_not_its_own_is_late_whatever_its_token) {
    /* The review's double sale: a fenced holder's lease ran out, and a lock
     * that does not bump the fence (handoff, owner-lua, a hash lock) took the
     * key, sold and let go. The stale write still carried the newest token,
     * and Redis saw the lock was not its own as it applied (owned 0): late,
     * token or not. Where Redis did not look (owned unknown), the newest
     * token is judged by the fence alone and is not late. */
    struct chk_event e[] = {ev("1-0", "a:1", 100, 110, 1000, "sold", 10, 0),
                            ev("2-0", "b:1", 5000, 5100, 6000, "sold", 9, 1)};
    e[0].written_us = 4500;
    e[0].token = 77;
    e[1].token = 78;
    struct chk_entry l[] = {entry(10, "o-1-0"), entry(9, "o-2-0")};
    struct chk_input in = {
        .events = e, .nevents = 2, .ledger = l, .nledger = 2, .stock = 8, .initial = 10};
    struct chk_report r = judge(&in);
    ck_assert_int_eq(r.counts[CHK_LATE_WRITE], 1);
    ck_assert_int_eq(r.counts[CHK_STALE_TOKEN], 0);
    ck_assert(!r.safe);
    chk_report_free(&r);
    e[0].token = e[1].token = 0;
    r = judge(&in);
    ck_assert_int_eq(r.counts[CHK_LATE_WRITE], 1);
    ck_assert(!r.safe);
    chk_report_free(&r);
    e[0].token = 77;
    e[1].token = 78;
    e[0].owned = -1;
    r = judge(&in);
    ck_assert_int_eq(r.counts[CHK_LATE_WRITE], 0);
    ck_assert(r.safe);
    chk_report_free(&r);
}
END_TEST

START_TEST(test_the_counterexample_is_the_double_sale_and_the_holds_around_it) {
    /* 1 and 3 sold unit 10; 2 held between them; 4 came long after. */
    struct chk_event e[] = {ev("1-0", "a:1", 100, 400, 150, "sold", 10, -1),
                            ev("2-0", "b:1", 200, 250, 1200, "sold", 9, -1),
                            ev("3-0", "c:1", 300, 350, 1300, "sold", 10, -1),
                            ev("4-0", "d:1", 5000, 5100, 6000, "sold", 8, -1)};
    e[0].written_us = 390;
    struct chk_entry l[] = {entry(10, "o-1-0"), entry(9, "o-2-0"), entry(10, "o-3-0"),
                            entry(8, "o-4-0")};
    struct chk_input in = {
        .events = e, .nevents = 4, .ledger = l, .nledger = 4, .stock = 7, .initial = 10};
    struct chk_report r = judge(&in);
    ck_assert_int_eq(r.counts[CHK_SOLD_TWICE], 1);
    size_t idx[8];
    long f;
    size_t n = chk_counterexample(&in, &r, idx, 8, &f);
    ck_assert_int_ge(f, 0);
    ck_assert_int_eq(r.findings[f].kind, CHK_SOLD_TWICE);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(idx[0], 0);
    ck_assert_int_eq(idx[1], 1);
    ck_assert_int_eq(idx[2], 2);
    /* at most max */
    ck_assert_int_eq(chk_counterexample(&in, &r, idx, 2, &f), 2);
    chk_report_free(&r);
    /* a safe run has none */
    struct chk_input calm = {
        .events = e + 3, .nevents = 1, .ledger = l + 3, .nledger = 1, .stock = 9, .initial = 10};
    r = judge(&calm);
    ck_assert_int_eq(chk_counterexample(&calm, &r, idx, 8, &f), 0);
    ck_assert_int_eq(f, -1);
    chk_report_free(&r);
}
END_TEST

START_TEST(test_a_grant_whose_lease_had_run_out_held_nothing_and_overlaps_nobody) {
    /* b's grant came after its lease had already run out (granted 984, lease
     * 951): it refused to write (lock_lost) and never held the lock, while a
     * held it and wrote. Seen in the matrix's handoff/pause cell. */
    struct chk_event e[] = {ev("1-0", "a:1", 974, 985, 1962, "sold", 10, 1),
                            ev("2-0", "b:1", 984, 994, 951, "lock_lost", 0, 0)};
    struct chk_entry l[] = {entry(10, "o-1-0")};
    struct chk_input in = {
        .events = e, .nevents = 2, .ledger = l, .nledger = 1, .stock = 9, .initial = 10};
    struct chk_report r = judge(&in);
    ck_assert_int_eq(r.counts[CHK_OVERLAP], 0);
    ck_assert(r.safe);
    chk_report_free(&r);
    /* granted before its lease ended, it did hold: that overlap counts */
    e[1].lease_us = 1990;
    r = judge(&in);
    ck_assert_int_eq(r.counts[CHK_OVERLAP], 1);
    chk_report_free(&r);
}
END_TEST

Suite *checker_suite(void) {
    Suite *s = suite_create("checker");
    TCase *c = tcase_create("Core");
    tcase_add_test(c, test_holds_one_after_another_with_a_matching_ledger_pass);
    tcase_add_test(c, test_two_owners_holding_at_once_are_an_overlap_naming_both_events);
    tcase_add_test(c, test_without_comparable_clocks_overlaps_are_not_judged_but_the_ledger_is);
    tcase_add_test(c, test_a_hold_past_its_lease_that_wrote_nothing_is_cut_at_its_deadline);
    tcase_add_test(c, test_a_reset_ends_the_holds_it_freed_but_not_a_write_that_came_after_it);
    tcase_add_test(c,
                   test_a_hold_granted_before_a_reset_whose_reply_came_after_it_ends_at_the_reset);
    tcase_add_test(c, test_a_late_write_that_duplicates_no_unit_is_a_late_write_and_an_overlap);
    tcase_add_test(c,
                   test_a_write_redis_saw_outside_its_owners_lock_is_late_whatever_the_clocks_say);
    tcase_add_test(c, test_a_trimmed_history_is_never_safe_however_clean);
    tcase_add_test(c, test_a_late_hold_that_wrote_nothing_is_not_a_late_write);
    tcase_add_test(c, test_the_events_of_one_batch_are_one_hold);
    tcase_add_test(c, test_one_unit_in_two_ledger_entries_is_sold_twice_with_both_orders);
    tcase_add_test(
        c, test_a_unit_a_client_was_told_and_a_ledger_entry_of_another_order_are_sold_twice);
    tcase_add_test(c, test_a_ledger_entry_nobody_was_told_of_is_reported_but_safe);
    tcase_add_test(c, test_a_stock_that_disagrees_with_the_ledger_is_flagged);
    tcase_add_test(c, test_every_finding_is_counted_beyond_the_ones_listed);
    tcase_add_test(c, test_ledger_entries_and_recorded_answers_parse_and_malformed_ones_do_not);
    tcase_add_test(c, test_a_clean_run_whose_fault_missed_its_window_is_inconclusive_not_safe);
    tcase_add_test(c, test_a_violation_is_its_own_evidence_whatever_the_coverage);
    tcase_add_test(c, test_a_lease_that_ran_out_inside_its_hold_is_derived_from_the_holds);
    tcase_add_test(c, test_a_grant_whose_lease_had_run_out_held_nothing_and_overlaps_nobody);
    tcase_add_test(
        c, test_a_write_with_an_older_token_applied_after_a_newer_one_is_a_stale_token_write);
    tcase_add_test(
        c, test_a_fenced_write_applied_when_the_lock_was_not_its_own_is_late_whatever_its_token);
    tcase_add_test(c, test_the_counterexample_is_the_double_sale_and_the_holds_around_it);
    suite_add_tcase(s, c);
    return s;
}
