/* scenario.c -- the table of named scenarios (see scenario.h), in ladder
 * order of the flaw each one shows. */
#include <string.h>
#include "scenario.h"

#define T(p) {p, 0}      /* p thousandths of the TTL */
#define MS(m) {0, m}     /* m milliseconds */
#define NONE {0, 0}

const struct scenario scenarios[] = {
    {"race", "two sales at once on one instance",
     "A sells on instance A and works 300 ms inside the critical section; B sells on the same "
     "instance 100 ms later.",
     "none: the two holds overlap (red) and both sell the unit they read, so one unit is sold "
     "twice. local: the in-process mutex makes B wait until A is done; the bars follow each "
     "other.",
     "none", "local", 0, 2,
     {{'A', 0, NONE, MS(300), NONE, 0}, {'B', 0, MS(100), NONE, NONE, 0}}},
    {"two-instances", "two sales at once on two instances",
     "A sells on instance A and works 300 ms inside the critical section; B sells on instance "
     "B 100 ms later.",
     "local: each instance has its own mutex, so A and B are inside together: their bars, in "
     "two lanes, overlap (red) and one unit is sold twice. setnx-spin and every Redis lock "
     "after it: B waits for A.",
     "local", "setnx-spin", 0, 2,
     {{'A', 0, NONE, MS(300), NONE, 0}, {'B', 1, MS(100), NONE, NONE, 0}}},
    {"long-hold", "a long hold and a retrying waiter",
     "A sells on instance A and works 2000 ms inside the critical section; B sells on instance "
     "B 100 ms later and waits.",
     "setnx-retry: B's answer reports lock.depth, one recursive call per 20 ms of waiting "
     "(about 95 here), capped by lock.retry-max-depth. setnx-spin waits in a loop: depth 0.",
     "setnx-retry", "setnx-spin", 0, 2,
     {{'A', 0, NONE, MS(2000), NONE, 0}, {'B', 1, MS(100), NONE, NONE, 0}}},
    {"slow-holder", "a holder slower than the TTL",
     "A sells on instance A within 0.2 x TTL, then stalls 1.3 x TTL before releasing (a GC "
     "pause, a slow network): its lock expires at 1 x TTL and B, waiting on instance B since "
     "0.25 x TTL, takes it and holds it 0.9 x TTL. A's late release arrives at 1.5 x TTL, "
     "while B holds the lock. C sells on instance A at 1.65 x TTL.",
     "expiring and owner-check: A's late DEL deletes B's lock, so C walks in while B is still "
     "inside: B and C overlap (red) and the audit counts a violation. owner-lua: A's release "
     "deletes only its own lock, so C waits for B: no overlap.",
     "expiring,owner-check", "owner-lua", 0, 3,
     {{'A', 0, NONE, T(200), T(1300), 0},
      {'B', 1, T(250), T(900), NONE, 0},
      {'C', 0, T(1650), NONE, NONE, 0}}},
    {"nested", "a nested acquire by the same owner",
     "A sells on instance A and, inside the critical section, acquires the same lock twice "
     "more (nested=2).",
     "owner-lua: the lock is a plain string, so A's nested acquire waits for A itself: A "
     "answers 503 lock_timeout when lock.wait-ms runs out first, or, when the TTL is the "
     "shorter, gets in only once its own lock has expired (its lock wait shows how long it "
     "waited for itself). reentrant: the hash lock counts the holds (3) and A sells at once.",
     "owner-lua", "reentrant", 1, 1,
     {{'A', 0, NONE, NONE, NONE, 2}}},
    {"overrun", "work longer than the TTL",
     "A sells on instance A and works 1.5 x TTL inside the critical section; B sells on "
     "instance B at 0.25 x TTL and works 0.3 x TTL.",
     "reentrant (and owner-lua, expiring): nothing renews A's lease, so at 1 x TTL B takes the "
     "lock while A still works: the holds overlap (red), A's write comes after its lease "
     "(marked late) and sells the unit B sold. watchdog: renewals keep A's lock and B waits. "
     "fenced: the holds overlap too, but A's late write carries an older token and is refused "
     "(409 stale_token): nothing is sold twice.",
     "reentrant,fenced", "watchdog", 0, 2,
     {{'A', 0, NONE, T(1500), NONE, 0}, {'B', 1, T(250), T(300), NONE, 0}}},
    {"herd", "three waiters when the lock is freed",
     "A sells on instance A and works 600 ms inside the critical section; B sells on instance "
     "B at 100 ms, C on instance A at 250 ms, D on instance B at 400 ms, each working 150 ms.",
     "redisson: each waiter tries, subscribes and tries again (two attempts) before it "
     "sleeps; A's unlock then wakes one waiter per instance (B, and C, next in A's own queue), "
     "and they race: the loser tries again (four attempts or more), and C, who came after B, "
     "may be served first. handoff: A's write grants the lock straight to B, B's to C, C's to "
     "D, in the order they came across both instances: units 199, 198, 197, one attempt "
     "each, every answer saying granted_by handed.",
     "redisson", "handoff", 0, 4,
     {{'A', 0, NONE, MS(600), NONE, 0},
      {'B', 1, MS(100), MS(150), NONE, 0},
      {'C', 0, MS(250), MS(150), NONE, 0},
      {'D', 1, MS(400), MS(150), NONE, 0}}},
    {NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, {{0}}},
};

const struct scenario *scenario_find(const char *name) {
    for (int i = 0; scenarios[i].name; i++)
        if (strcmp(scenarios[i].name, name) == 0) return &scenarios[i];
    return NULL;
}

int scenario_ms(struct scenario_time t, int ttl_ms) {
    return (int)((long long)ttl_ms * t.permille / 1000) + t.ms;
}

int scenario_length_ms(const struct scenario *sc, int ttl_ms, int wait_ms) {
    int end = 0;
    for (int i = 0; i < sc->nsteps; i++) {
        const struct scenario_step *st = &sc->steps[i];
        int e = scenario_ms(st->at, ttl_ms) + scenario_ms(st->hold, ttl_ms) +
                scenario_ms(st->release_delay, ttl_ms);
        if (e > end) end = e;
    }
    return end + ttl_ms + (sc->waits_for_timeout ? wait_ms : 0);
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
