/* scenario.h -- the lab's named scenarios: README's "Seeing each flaw with
 * curl" recipes as data, so that the service can run them itself (lab.c)
 * and the page can offer them ("Show the flaw"), and the rule that judges
 * each run from what happened.
 *
 * DESIGN
 * A scenario is one row of a constant table: a name, what happens, what to
 * look for, the strategies whose flaw it shows, the next step that fixes
 * it, up to SCENARIO_STEPS_MAX sales, its window in words, and its judge.
 * Each sale is sent to one of two roles (instance A or instance B:
 * lab.instances) at a time after the start, with fault parameters
 * (hold_ms, release_delay_ms, nested) and its own lock wait (wait_ms), so
 * that no sale depends on lock.wait-ms. Times that race a lock's expiry are
 * written in thousandths of the lock's TTL plus milliseconds, so one
 * scenario fits a 1 s TTL in a test and a 10 s TTL in the demo; a waiter's
 * wait is sized from the timeline, plus one lock.spin-sleep-ms (a polling
 * waiter may be one sleep late).
 *
 * Where no timing fits the settings (a wait or a stall above
 * faults.max-hold-ms, a run longer than the lab's bound, margins too thin
 * for a TTL this short, or polls too far apart), scenario_check refuses it
 * with a sentence that names the setting.
 *
 * The verdict. A run is judged from evidence only (struct
 * scenario_evidence): each sale's answer (status, unit, lock wait, hold),
 * its hold as the history recorded it (grant, release, lease, write,
 * owned), and the target's audit. Each scenario's judge first decides
 * whether its window was reached (e.g. slow-holder: "A's lease expired
 * while A was inside and B got the lock"), then says what the run shows:
 * SCENARIO_FLAW_SHOWN (which flaw, with its evidence), SCENARIO_FIXED (the
 * evidence of the fix) or SCENARIO_INCONCLUSIVE (why: the window was not
 * reached, or a sale gave up). It never calls a run fine whose window was
 * not reached. The table and its judges are built at compile time: any
 * thread may read them.
 *
 * A flaw that needs a process to die or a Redis to fail over (setnx-spin's
 * crashed holder, watchdog's failover) has no scenario here: the lab must
 * not kill the servers it runs against. */
#ifndef INVENTORYD_SCENARIO_H
#define INVENTORYD_SCENARIO_H

#include <stddef.h>
#include <stdint.h>
#include "hold.h"

#define SCENARIO_STEPS_MAX 4

/* The least margin between two events of a timeline that must keep their
 * order: a sale's send, sleep and answer may drift this much on a busy
 * machine. */
#define SCENARIO_SLACK_MIN_MS 50

/* A duration: permille thousandths of the lock TTL, plus ms. */
struct scenario_time {
    int permille;
    int ms;
};

struct scenario_step {
    char label; /* 'A', 'B', 'C': the sale's name */
    int role; /* 0: the first of lab.instances, 1: the second */
    struct scenario_time at; /* sent this long after the start */
    struct scenario_time hold; /* hold_ms: work inside the critical section */
    struct scenario_time release_delay; /* release_delay_ms: a stall before the release */
    int nested; /* nested: re-acquire this many times inside */
    struct scenario_time wait; /* wait_ms: how long it may wait for the lock
                                          (plus lock.spin-sleep-ms) */
    int end_session; /* end_session: once inside, its lock's store session is
                                          ended from outside (only the strategies
                                          whose lock has one can run it) */
};

/* The settings a scenario's timeline is sized for. */
struct scenario_settings {
    int ttl_ms; /* lock.ttl-ms */
    int spin_sleep_ms; /* lock.spin-sleep-ms: how late a polling waiter may be */
    int max_hold_ms; /* faults.max-hold-ms: the bound of every fault parameter */
    int seconds_max; /* how long a run may last (LAB_SECONDS_MAX) */
    int history; /* history.enabled: the holds a verdict is judged from */
};

/* ---- the evidence of one run ------------------------------------------- */

/* One hold of the lock as the history recorded it (GET /inventory/history). */
struct scenario_hold {
    int64_t granted_us; /* wall clock: the acquire returned */
    int64_t released_us; /* the write (or event) and release were sent */
    int64_t lease_us; /* the lease deadline the holder knew; 0: none */
    int64_t written_us; /* Redis's clock when the write applied; 0: none */
    int owned; /* 1, 0, or -1 when not recorded */
    int late; /* the holder's own view: its lease had passed */
    long long unit; /* the unit sold; -1: none */
    char outcome[16]; /* sold, sold_out, lock_lost, stale_token, ... */
    char owner[64]; /* the lock's owner id: the holds of one batch share it */
};

/* One sale of the run: its answer, and its hold when one was recorded. */
struct scenario_sale {
    char label;
    int sent; /* 0: never sent */
    int64_t sent_us; /* wall clock */
    double took_ms; /* from the send to the answer */
    int status; /* HTTP status; 0: no answer */
    char word[32]; /* the answer's "status" */
    long long unit; /* the unit sold; -1: none */
    int wait_ms; /* the wait it was given (its wait_ms) */
    int waited_ms; /* lock.wait_ms of its answer; -1: absent */
    int hold_ms; /* lock.hold_ms of its answer; -1: absent */
    int attempts, depth, renewals;
    int nested; /* its nested parameter */
    /* Its answer's session_ended (end_session): 1 ended, 0 absent or
     * false; and the wall-clock µs when the end was begun and seen done. */
    int session_ended;
    int64_t session_end_us, session_gone_us;
    int has_hold; /* hold is filled */
    struct scenario_hold hold;
};

struct scenario_evidence {
    const char *strategy;
    int ttl_ms;
    int nsales;
    struct scenario_sale sale[SCENARIO_STEPS_MAX];
    int history; /* 1: the history was read */
    int others; /* holds in it that are none of these sales */
    int audit; /* 1: the audit was read */
    long long violations, sold_twice;
};

enum scenario_result {
    SCENARIO_UNJUDGED, /* not a finished scenario run */
    SCENARIO_FLAW_SHOWN,
    SCENARIO_FIXED,
    SCENARIO_INCONCLUSIVE,
};

struct scenario_verdict {
    enum scenario_result result;
    int window; /* 1: the scenario's window was reached */
    char evidence[400]; /* what shows it, or why it is inconclusive */
};

struct scenario {
    const char *name; /* e.g. "slow-holder" */
    const char *title; /* a few words */
    const char *what; /* what the sales do, in units of the TTL */
    const char *look_for; /* what the timeline and the audit show */
    const char *shows; /* strategies whose flaw it shows, comma-separated */
    const char *fixed_by; /* the step that fixes it; one per strategy of shows,
                                 comma-separated in the same order, where they differ
                                 (scenario_fix_for) */
    const char *window; /* the moment both the flaw and the fix must go through */
    const char *flaw; /* the evidence of the flaw */
    const char *fix; /* the evidence of the fix */
    struct scenario_time slack; /* the timeline's tightest margin ({0,0}: none) */
    struct scenario_time poll_slack; /* how late a waiter may get the lock after it
                                          frees ({0,0}: any) */
    void (*judge)(const struct scenario_evidence *ev, struct scenario_verdict *v);
    int nsteps;
    struct scenario_step steps[SCENARIO_STEPS_MAX];
};

/* Every scenario; the last row's name is NULL. */
extern const struct scenario scenarios[];

/* The scenario called name, or NULL. */
const struct scenario *scenario_find(const char *name);

/* A duration in ms for a lock TTL of ttl_ms. */
int scenario_ms(struct scenario_time t, int ttl_ms);

/* The wait_ms a step is sent with under settings s. */
int scenario_wait_ms(const struct scenario_step *st, const struct scenario_settings *s);

/* The longest sc may last under s: for each sale, its send time, every
 * acquire waiting its whole wait, its hold and its release stall. */
int scenario_length_ms(const struct scenario *sc, const struct scenario_settings *s);

/* Whether sc can run and be judged under s. 0, or -1 with a sentence in
 * why that names the setting to change (history.enabled,
 * faults.max-hold-ms, lock.ttl-ms, lock.spin-sleep-ms). */
int scenario_check(const struct scenario *sc, const struct scenario_settings *s, char *why,
                   size_t whylen);

/* Whether sc names strategy in its "shows" list. */
int scenario_shows(const struct scenario *sc, const char *strategy);

/* The step that fixes shown strategy's flaw in sc (its entry of fixed_by),
 * into buf; "" when sc does not show strategy. Returns buf. */
const char *scenario_fix_for(const struct scenario *sc, const char *strategy, char *buf,
                             size_t len);

/* Whether sc ends a store session (a step with end_session): it runs only
 * with a strategy whose lock has one. */
int scenario_ends_session(const struct scenario *sc);

/* Judges a finished run of sc from ev into v (never SCENARIO_UNJUDGED). */
void scenario_judge(const struct scenario *sc, const struct scenario_evidence *ev,
                    struct scenario_verdict *v);

/* The hold (hold.h) of a sale whose recorded hold is h and whose answer
 * said lock.hold_ms hold_ms (-1: absent): the judge reads its holds so, and
 * the lab's run answer gives the page what they say. */
struct hold scenario_hold_times(const struct scenario_hold *h, int hold_ms);

/* "flaw_shown", "fixed", "inconclusive", or "" for SCENARIO_UNJUDGED. */
const char *scenario_result_word(enum scenario_result r);

#endif
