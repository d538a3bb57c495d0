/* scenario.h -- the lab's named scenarios: README's "Seeing each flaw with
 * curl" recipes as data, so that the service can run them itself (lab.c)
 * and the page can offer them ("Show the flaw").
 *
 * DESIGN
 * A scenario is one row of a constant table: a name, what happens, what to
 * look for, the strategies whose flaw it shows, the next step that fixes
 * it, and up to SCENARIO_STEPS_MAX sales. Each sale is sent to one of two
 * roles (instance A or instance B: lab.instances) at a time after the start,
 * with fault parameters (hold_ms, release_delay_ms, nested). Times that race
 * a lock's expiry are written in thousandths of the lock's TTL plus
 * milliseconds, so one scenario fits a 1 s TTL in a test and a 10 s TTL in
 * the demo. The table is built at compile time: any thread may read it.
 *
 * A flaw that needs a process to die or a Redis to fail over (setnx-spin's
 * crashed holder, watchdog's failover) has no scenario here: the lab must
 * not kill the servers it runs against. */
#ifndef INVENTORYD_SCENARIO_H
#define INVENTORYD_SCENARIO_H

#define SCENARIO_STEPS_MAX 4

/* A duration: permille thousandths of the lock TTL, plus ms. */
struct scenario_time {
    int permille;
    int ms;
};

struct scenario_step {
    char label;                        /* 'A', 'B', 'C': the sale's name */
    int role;                          /* 0: the first of lab.instances, 1: the second */
    struct scenario_time at;           /* sent this long after the start */
    struct scenario_time hold;         /* hold_ms: work inside the critical section */
    struct scenario_time release_delay;/* release_delay_ms: a stall before the release */
    int nested;                        /* nested: re-acquire this many times inside */
};

struct scenario {
    const char *name;                  /* e.g. "slow-holder" */
    const char *title;                 /* a few words */
    const char *what;                  /* what the sales do, in units of the TTL */
    const char *look_for;              /* what the timeline and the audit show */
    const char *shows;                 /* strategies whose flaw it shows, comma-separated */
    const char *fixed_by;              /* the step that fixes it */
    int waits_for_timeout;             /* a sale waits out lock.wait-ms */
    int nsteps;
    struct scenario_step steps[SCENARIO_STEPS_MAX];
};

/* Every scenario; the last row's name is NULL. */
extern const struct scenario scenarios[];

/* The scenario called name, or NULL. */
const struct scenario *scenario_find(const char *name);

/* A duration in ms for a lock TTL of ttl_ms. */
int scenario_ms(struct scenario_time t, int ttl_ms);

/* When the last sale of sc should be over for ttl_ms and wait_ms (its
 * send time, hold and release stall, plus wait_ms when a sale waits the
 * lock out, plus one TTL for sales that wait for a lease to run out). */
int scenario_length_ms(const struct scenario *sc, int ttl_ms, int wait_ms);

/* Whether sc names strategy in its "shows" list. */
int scenario_shows(const struct scenario *sc, const char *strategy);

#endif
