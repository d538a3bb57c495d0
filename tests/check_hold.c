/* check_hold.c -- one definition of when a hold was inside (src/hold.h),
 * read by all three of its readers: the safety checker (tools/checker.h,
 * chk_run), the lab's scenario judge (scenario_judge) and the JSON the
 * lab's page draws (reply_history for GET /inventory/history,
 * reply_lab_run for GET /lab/runs/{id}). Each test feeds one history to
 * the three and asserts that they name the same overlapping pairs. No
 * server. */
#include "check_main.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "checker.h"
#include "hold.h"
#include "lab.h"
#include "reply.h"
#include "scenario.h"

#define T0 1700000000000000LL /* a wall-clock µs to start from */
#define MS 1000LL
#define HOLDS_MAX SCENARIO_STEPS_MAX

/* One recorded hold and what its sale was answered, in ms after T0. */
struct planted {
    char label; /* the sale: 'A', 'B', 'C' */
    double sent, granted, released, lease, written; /* lease 0: none */
    const char *outcome;
    long long unit;
    int hold_ms; /* the answer's lock.hold_ms; -1: absent */
};

static int64_t us(double ms) { return T0 + (int64_t)(ms * MS); }

static void id_of(const struct planted *p, char *buf, size_t len) {
    snprintf(buf, len, "%d-0", p->label - 'A' + 1);
}

static struct history_event event_of(const struct planted *p) {
    struct history_event e;
    memset(&e, 0, sizeof(e));
    id_of(p, e.id, sizeof(e.id));
    snprintf(e.instance, sizeof(e.instance), "%c", p->label);
    e.port = 3786;
    snprintf(e.owner, sizeof(e.owner), "owner-%c:1", p->label);
    snprintf(e.strategy, sizeof(e.strategy), "expiring");
    snprintf(e.outcome, sizeof(e.outcome), "%s", p->outcome);
    snprintf(e.order, sizeof(e.order), "order-%c", p->label);
    e.granted_us = us(p->granted);
    e.released_us = us(p->released);
    e.lease_us = p->lease ? us(p->lease) : 0;
    e.written_us = us(p->written);
    e.owned = -1;
    e.unit = p->unit;
    return e;
}

static struct chk_event chk_of(const struct planted *p) {
    struct history_event h = event_of(p);
    struct chk_event e;
    memset(&e, 0, sizeof(e));
    snprintf(e.id, sizeof(e.id), "%s", h.id);
    snprintf(e.instance, sizeof(e.instance), "%s", h.instance);
    snprintf(e.owner, sizeof(e.owner), "%s", h.owner);
    snprintf(e.order, sizeof(e.order), "%s", h.order);
    snprintf(e.outcome, sizeof(e.outcome), "%s", h.outcome);
    e.granted_us = h.granted_us;
    e.released_us = h.released_us;
    e.lease_us = h.lease_us;
    e.written_us = h.written_us;
    e.owned = -1;
    e.unit = h.unit;
    return e;
}

static struct scenario_hold scenario_hold_of(const struct planted *p) {
    struct history_event h = event_of(p);
    struct scenario_hold s;
    memset(&s, 0, sizeof(s));
    s.granted_us = h.granted_us;
    s.released_us = h.released_us;
    s.lease_us = h.lease_us;
    s.written_us = h.written_us;
    s.owned = -1;
    s.unit = p->unit ? p->unit : -1;
    snprintf(s.outcome, sizeof(s.outcome), "%s", p->outcome);
    snprintf(s.owner, sizeof(s.owner), "%s", h.owner);
    return s;
}

/* The overlapping pairs, as "A-B" words (labels, earlier granted first),
 * sorted and joined by spaces into out. */
struct pairs {
    char words[16][8];
    int n;
};

static void pairs_add(struct pairs *p, char a, char b) {
    ck_assert_int_lt(p->n, 16);
    snprintf(p->words[p->n++], sizeof(p->words[0]), "%c-%c", a, b);
}

static int cmp_word(const void *a, const void *b) { return strcmp(a, b); }

static const char *pairs_text(struct pairs *p, char *out, size_t len) {
    qsort(p->words, (size_t)p->n, sizeof(p->words[0]), cmp_word);
    out[0] = '\0';
    for (int i = 0; i < p->n; i++)
        snprintf(out + strlen(out), len - strlen(out), "%s%s", i ? " " : "", p->words[i]);
    return out;
}

/* The label of the hold with id "N-0". */
static char label_of_id(const char *id) { return (char)('A' + atoi(id) - 1); }

/* The checker's overlaps (chk_run's findings). */
static const char *checker_pairs(const struct planted *h, int n, char *out, size_t len) {
    struct chk_event e[HOLDS_MAX];
    for (int i = 0; i < n; i++) e[i] = chk_of(&h[i]);
    struct chk_input in = {.events = e, .nevents = (size_t)n};
    struct chk_report r;
    ck_assert_int_eq(chk_run(&in, 16, &r), 0);
    struct pairs p = {.n = 0};
    for (size_t i = 0; i < r.nfindings; i++)
        if (r.findings[i].kind == CHK_OVERLAP)
            pairs_add(&p, label_of_id(r.findings[i].a), label_of_id(r.findings[i].b));
    ck_assert_int_eq(r.counts[CHK_OVERLAP], p.n);
    chk_report_free(&r);
    return pairs_text(&p, out, len);
}

/* The "overlaps" of a JSON answer, labels read by label(). */
static const char *json_pairs(const char *body, char (*label)(const char *), char *out,
                              size_t len) {
    ck_assert_ptr_nonnull(body);
    cJSON *j = cJSON_Parse(body);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(j, "overlaps"), *x;
    ck_assert_msg(cJSON_IsArray(list), "no overlaps in %s", body);
    struct pairs p = {.n = 0};
    cJSON_ArrayForEach(x, list) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(x, "a");
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(x, "b");
        ck_assert(cJSON_IsString(a) && cJSON_IsString(b));
        ck_assert(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(x, "lead_us")) > 0);
        pairs_add(&p, label(a->valuestring), label(b->valuestring));
    }
    cJSON_Delete(j);
    return pairs_text(&p, out, len);
}

static char label_itself(const char *s) { return s[0]; }

/* The page's overlaps of the timeline: GET /inventory/history's answer. */
static const char *history_pairs(const struct planted *h, int n, char *out, size_t len) {
    struct history_event e[HOLDS_MAX];
    for (int i = 0; i < n; i++) e[i] = event_of(&h[i]);
    char *body = reply_history(e, 0, n, 0);
    json_pairs(body, label_of_id, out, len);
    /* every event says until when it was inside */
    ck_assert_ptr_nonnull(strstr(body, "\"inside_until_us\":"));
    free(body);
    return out;
}

/* The evidence of a run of h (every sale sold or refused as planted). */
static void evidence_of(int ttl_ms, const struct planted *h, int n, struct scenario_evidence *ev) {
    *ev = (struct scenario_evidence){
        .strategy = "expiring", .ttl_ms = ttl_ms, .nsales = n, .history = 1, .audit = 1};
    for (int i = 0; i < n; i++) {
        struct scenario_sale *s = &ev->sale[i];
        s->label = h[i].label;
        s->sent = 1;
        s->sent_us = us(h[i].sent);
        s->took_ms = h[i].released - h[i].sent;
        int sold = strcmp(h[i].outcome, "sold") == 0;
        s->status = sold ? 200 : 409;
        snprintf(s->word, sizeof(s->word), "%s", h[i].outcome);
        s->unit = sold ? h[i].unit : -1;
        s->waited_ms = (int)(h[i].granted - h[i].sent);
        s->hold_ms = h[i].hold_ms;
        s->attempts = 1;
        s->has_hold = 1;
        s->hold = scenario_hold_of(&h[i]);
    }
}

/* The scenario sc judged from h. */
static void judge(const char *sc, int ttl_ms, const struct planted *h, int n,
                  struct scenario_verdict *v) {
    struct scenario_evidence ev;
    evidence_of(ttl_ms, h, n, &ev);
    scenario_judge(scenario_find(sc), &ev, v);
}

/* The overlaps of the lab's run answer (what its verdict read, with the
 * answers' hold_ms): GET /lab/runs/{id}. */
static const char *run_pairs(const char *sc, const struct planted *h, int n, char *out,
                             size_t len) {
    struct lab_run_view *v = calloc(1, sizeof(*v));
    ck_assert_ptr_nonnull(v);
    snprintf(v->req.scenario, sizeof(v->req.scenario), "%s", sc);
    snprintf(v->req.strategy, sizeof(v->req.strategy), "expiring");
    v->state = "done";
    v->phase = "finished";
    v->nsteps = n;
    for (int i = 0; i < n; i++) {
        v->steps[i].label = h[i].label;
        v->steps[i].has_hold = 1;
        v->steps[i].hold = scenario_hold_of(&h[i]);
        v->steps[i].hold_ms = h[i].hold_ms;
        v->steps[i].unit = -1;
    }
    char *body = reply_lab_run(v);
    json_pairs(body, label_itself, out, len);
    free(body);
    free(v);
    return out;
}

/* Asserts that the checker, the history's answer and the run's answer name
 * the pairs want, and returns the judge's verdict of scenario sc. */
static void same_everywhere(const char *sc, int ttl_ms, const struct planted *h, int n,
                            const char *want, struct scenario_verdict *v) {
    char c[128], p[128], r[128];
    ck_assert_str_eq(checker_pairs(h, n, c, sizeof(c)), want);
    ck_assert_str_eq(history_pairs(h, n, p, sizeof(p)), want);
    ck_assert_str_eq(run_pairs(sc, h, n, r, sizeof(r)), want);
    judge(sc, ttl_ms, h, n, v);
}

START_TEST(test_one_history_fed_to_the_checker_the_judge_and_the_page_gives_the_same_overlaps) {
    /* slow-holder with expiring (TTL 1 s): A sold at once and stalled its
     * release to 1.3 s, past its lease (1 s), so only its answer's hold_ms
     * dates its release; B took the expired lock at 1.005 s; A's late DEL
     * freed it, and C walked in at 1.55 s while B worked to 1.8 s. */
    const struct planted h[] = {
        {'A', 0, 1, 100, 1000, 100.1, "sold", 200, 1300},
        {'B', 200, 1005, 1800, 2005, 1800.1, "sold", 199, 795},
        {'C', 1549, 1550, 1560, 2550, 1560.1, "sold", 199, 10},
    };
    struct scenario_verdict v;
    same_everywhere("slow-holder", 1000, h, 3, "B-C", &v);
    ck_assert_int_eq(v.result, SCENARIO_FLAW_SHOWN);
    ck_assert_msg(strstr(v.evidence, "B and C were inside together") != NULL, "%s", v.evidence);
    ck_assert_msg(strstr(v.evidence, "250 ms before B left") != NULL, "%s", v.evidence);
}
END_TEST

START_TEST(
    test_a_write_applied_late_after_its_release_overlaps_for_the_checker_the_judge_and_page) {
    /* overrun at a 100 ms TTL: A sent its write at 150 ms, past its lease
     * (100 ms), and Redis applied it only at 400 ms, while B, granted at
     * 200 ms, held the lock. Before hold.c the three disagreed: the checker
     * found A and B overlapping (A held until its write applied); the judge
     * ended A at its release or its answer's hold (150 ms), so it said
     * fixed ("B waited for A"); the page drew grant to release, no red. */
    const struct planted h[] = {
        {'A', 0, 1, 150, 100, 400, "sold", 200, 149},
        {'B', 20, 200, 300, 300, 300.1, "sold", 200, 100},
    };
    struct scenario_verdict v;
    same_everywhere("overrun", 100, h, 2, "A-B", &v);
    ck_assert_int_eq(v.result, SCENARIO_FLAW_SHOWN);
    ck_assert_msg(strstr(v.evidence, "A and B were inside together") != NULL, "%s", v.evidence);
}
END_TEST

START_TEST(test_a_hold_past_its_lease_whose_write_was_refused_overlaps_nobody_anywhere) {
    /* overrun with fenced at a 1 s TTL: A worked to 1.5 s, past its lease
     * (1 s); B was granted at 1.001 s; A's late write was refused (stale
     * token). Before hold.c the three disagreed: the checker cut A at its
     * lease, no overlap; the judge kept A until its release (1.5 s) and
     * said "A and B were inside together"; the page drew the same red. Now
     * none sees an overlap, and the judge still shows the flaw: B got the
     * lock while A, no longer holding it, worked on. */
    const struct planted h[] = {
        {'A', 0, 1, 1500, 1000, 1500.1, "stale_token", 0, 1499},
        {'B', 250, 1001, 1300, 2001, 1300.1, "sold", 200, 299},
    };
    struct scenario_verdict v;
    same_everywhere("overrun", 1000, h, 2, "", &v);
    ck_assert_int_eq(v.result, SCENARIO_FLAW_SHOWN);
    ck_assert_msg(strstr(v.evidence, "without the lock") != NULL, "%s", v.evidence);
    ck_assert_msg(strstr(v.evidence, "inside together") == NULL, "%s", v.evidence);
    ck_assert_msg(strstr(v.evidence, "409 stale_token") != NULL, "%s", v.evidence);
}
END_TEST

START_TEST(test_an_end_that_rests_on_the_answer_must_pass_a_grant_by_more_than_the_clock_edge) {
    /* A's end comes from its answer (whole ms): a grant 0.5 ms before it is
     * the clocks' edge, not an overlap; 1.5 ms before it is one. An end
     * from the history alone has no edge. */
    struct hold a = {.granted_us = 0,
                     .released_us = 9000,
                     .written_us = 9000,
                     .wrote = 1,
                     .held_until_us = 10000};
    struct hold b = {.granted_us = 9500, .released_us = 20000, .written_us = 20000, .wrote = 1};
    int64_t lead = 0;
    ck_assert_int_eq(hold_edge_us(&a), HOLD_EDGE_US);
    ck_assert(!hold_overlap(&a, &b, &lead));
    b.granted_us = 8500;
    ck_assert(hold_overlap(&a, &b, &lead));
    ck_assert_int_eq(lead, 1500);
    a.held_until_us = 0; /* the history alone: A inside until 9000 */
    ck_assert_int_eq(hold_edge_us(&a), 0);
    ck_assert_int_eq(hold_inside_until(&a), 9000);
    ck_assert(hold_overlap(&b, &a, &lead));
    ck_assert_int_eq(lead, 500);
    /* one owner is one hold: never an overlap with itself */
    a.owner = b.owner = "x:1";
    ck_assert(!hold_overlap(&a, &b, NULL));
}
END_TEST

/* session-lost judged from h, A's store session ended at ended_ms (seen
 * gone 5 ms later), or not ended when ended_ms < 0. */
static void judge_session_lost(const struct planted *h, double ended_ms,
                               struct scenario_verdict *v) {
    struct scenario_evidence ev;
    evidence_of(10000, h, 2, &ev);
    ev.strategy = "zookeeper";
    if (ended_ms >= 0) {
        ev.sale[0].session_ended = 1;
        ev.sale[0].session_end_us = us(ended_ms);
        ev.sale[0].session_gone_us = us(ended_ms + 5);
    }
    scenario_judge(scenario_find("session-lost"), &ev, v);
}

START_TEST(test_session_lost_is_judged_from_the_faults_own_word_and_bs_grant_inside_as_window) {
    /* A granted at 1 ms, its session ended at 10 ms, A wrote at 1100 ms;
     * B, waiting since 200 ms, granted at 12 ms... after A's end. */
    struct planted h[] = {
        {'A', 0, 1, 1100, 0, 1100.1, "sold", 200, 1099},
        {'B', 5, 12, 20, 0, 20.1, "sold", 200, 8},
    };
    struct scenario_verdict v;
    judge_session_lost(h, 10, &v);
    ck_assert_int_eq(v.result, SCENARIO_FLAW_SHOWN);
    ck_assert(v.window);
    ck_assert_msg(strstr(v.evidence, "unit 200 sold twice") != NULL, "%s", v.evidence);
    /* fenced: A's late write refused */
    h[0].outcome = "stale_token";
    judge_session_lost(h, 10, &v);
    ck_assert_int_eq(v.result, SCENARIO_FIXED);
    ck_assert_msg(strstr(v.evidence, "409 stale_token") != NULL, "%s", v.evidence);
    /* the fault did not say it ended the session: the window is not proven */
    judge_session_lost(h, -1, &v);
    ck_assert_int_eq(v.result, SCENARIO_INCONCLUSIVE);
    ck_assert(!v.window);
    /* B got the lock before the end began: not through it */
    h[0].outcome = "sold";
    judge_session_lost(h, 500, &v);
    ck_assert_int_eq(v.result, SCENARIO_INCONCLUSIVE);
    ck_assert_msg(strstr(v.evidence, "before A's store session was ended") != NULL, "%s",
                  v.evidence);
    /* B got the lock only once A had left */
    h[1] = (struct planted){'B', 5, 1101, 1110, 0, 1110.1, "sold", 199, 9};
    judge_session_lost(h, 10, &v);
    ck_assert_int_eq(v.result, SCENARIO_INCONCLUSIVE);
    ck_assert_msg(strstr(v.evidence, "only after A had left") != NULL, "%s", v.evidence);
}
END_TEST

Suite *hold_suite(void) {
    Suite *s = suite_create("hold");
    TCase *c = tcase_create("Core");
    tcase_add_test(
        c, test_one_history_fed_to_the_checker_the_judge_and_the_page_gives_the_same_overlaps);
    tcase_add_test(
        c, test_a_write_applied_late_after_its_release_overlaps_for_the_checker_the_judge_and_page);
    tcase_add_test(c, test_a_hold_past_its_lease_whose_write_was_refused_overlaps_nobody_anywhere);
    tcase_add_test(
        c, test_an_end_that_rests_on_the_answer_must_pass_a_grant_by_more_than_the_clock_edge);
    tcase_add_test(
        c, test_session_lost_is_judged_from_the_faults_own_word_and_bs_grant_inside_as_window);
    suite_add_tcase(s, c);
    return s;
}
