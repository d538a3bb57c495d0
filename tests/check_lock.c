/* check_lock.c -- the lock core's contract, type by type, against one real
 * redis-server: two handles on two threads, no HTTP and no inventory.
 *
 * Each lock type promises (lock.h, lock_int.h): a second owner is busy
 * while the first holds, and gives up when its wait runs out; it gets the
 * lock once the first lets go; re-entry through the handle counts for the
 * reentrant types and blocks on itself for the others; a lease runs out for
 * the leased types, and the release then says lost; the watched types are
 * renewed while held, and a lock that is gone is reported lost; releasing a
 * lost lock never deletes its next owner's (except for the DEL releases,
 * whose flaw that is); and a lost reply leaves no hold behind. */
#include "check_main.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "lock.h"
#include "mclock.h"
#include "rpool.h"

#define TTL_MS 600
#define WAIT_MS 300
#define KEY "check-lock"

static pid_t redis_pid;
static int redis_port;
static struct rpool *pool;
static struct lock_core *core;

/* What each type promises, as the tests below read it. */
struct contract {
    const struct lock_type *type;
    int reentrant; /* a nested acquire through the handle counts */
    int leased; /* its key expires after the TTL */
    int watched; /* renewed while held */
    int checked_release; /* its release never deletes another owner's lock */
};

static const struct contract contracts[] = {
    {&lock_type_setnx_retry, 0, 0, 0, 0}, {&lock_type_setnx_spin, 0, 0, 0, 0},
    {&lock_type_expiring, 0, 1, 0, 0},    {&lock_type_owner_check, 0, 1, 0, 1},
    {&lock_type_owner_lua, 0, 1, 0, 1},   {&lock_type_reentrant, 1, 1, 0, 1},
    {&lock_type_watchdog, 1, 1, 1, 1},    {&lock_type_redisson, 1, 1, 1, 1},
    {&lock_type_redlock, 1, 1, 1, 1},     {&lock_type_fenced, 0, 1, 0, 1},
    {&lock_type_rw_write, 1, 1, 1, 1},
};
#define NCONTRACTS ((int)(sizeof(contracts) / sizeof(contracts[0])))

static void core_start_ttl(int pool_size, int timeout_ms, int ttl_ms);

/* The Redlock masters' answer timeout the next core_start uses. */
static int node_timeout_ms = 200;

static void core_start(int pool_size, int timeout_ms) {
    core_start_ttl(pool_size, timeout_ms, TTL_MS);
}

static void core_start_ttl(int pool_size, int timeout_ms, int ttl_ms) {
    struct rpool_options po = {.host = "127.0.0.1",
                               .port = redis_port,
                               .timeout_ms = timeout_ms,
                               .size = pool_size,
                               .load_scripts = 1};
    pool = rpool_create(&po);
    ck_assert_ptr_nonnull(pool);
    char nodes[64], err[256];
    /* Redlock over one master, the test's Redis: a quorum of 1. */
    snprintf(nodes, sizeof(nodes), "127.0.0.1:%d", redis_port);
    struct lock_core_options lo = {
        .pool = pool,
        .pool_wait_ms = timeout_ms,
        .redlock_nodes = nodes,
        .redlock_node_timeout_ms = node_timeout_ms,
        .redlock_pool_size = 4,
        .ttl_ms = ttl_ms,
        .wait_ms = WAIT_MS,
        .spin_sleep_ms = 10,
        .retry_depth = 1000,
    };
    core = lock_core_init(&lo, err, sizeof(err));
    ck_assert_msg(core != NULL, "lock_core_init: %s", err);
}

static void setup(void) {
    redis_pid = harness_redis_start(0, &redis_port);
    ck_assert_int_gt(redis_pid, 0);
    /* The Redlock master votes once it has been up for the TTL. */
    ck_assert_int_eq(harness_redis_wait_uptime(redis_port, 1), 0);
    core_start(8, 1000);
}

static void teardown(void) {
    lock_core_shutdown(core);
    rpool_free(pool);
    harness_stop(redis_pid);
}

/* An acquire on its own thread, by a handle of its own. */
struct other {
    const struct lock_type *type;
    int delay_ms;
    int hold_ms; /* after a successful acquire, hold this long */
    int rc; /* of the acquire */
    int release_rc;
    int64_t took_ms; /* the acquire */
    int64_t done_ms; /* mclock_ms() once its handle was freed */
    pthread_t thread;
};

static void *other_main(void *arg) {
    struct other *o = arg;
    mclock_sleep_ms(o->delay_ms);
    struct lock *l = lock_new(core, o->type, KEY);
    int64_t t0 = mclock_ms();
    o->rc = lock_acquire(l);
    o->took_ms = mclock_ms() - t0;
    if (o->rc == LOCK_OK) {
        mclock_sleep_ms(o->hold_ms);
        o->release_rc = lock_release(l);
    }
    lock_free(l);
    o->done_ms = mclock_ms();
    return NULL;
}

static void other_start(struct other *o, const struct lock_type *t, int delay_ms, int hold_ms) {
    *o = (struct other){.type = t, .delay_ms = delay_ms, .hold_ms = hold_ms};
    pthread_create(&o->thread, NULL, other_main, o);
}

static void other_join(struct other *o) { pthread_join(o->thread, NULL); }

static int key_exists(void) { return (int)harness_redis_int(redis_port, "EXISTS " KEY); }

/* ---- Contract ------------------------------------------------------------ */

START_TEST(test_a_second_owner_is_busy_until_its_wait_runs_out_then_gets_the_lock_once_freed) {
    for (int i = 0; i < NCONTRACTS; i++) {
        const struct contract *c = &contracts[i];
        struct lock *a = lock_new(core, c->type, KEY);
        ck_assert_int_eq(lock_acquire(a), LOCK_OK);
        struct other b;
        other_start(&b, c->type, 0, 0);
        other_join(&b);
        ck_assert_msg(b.rc == LOCK_BUSY, "%s: the second owner got %d", lock_type_name(c->type),
                      b.rc);
        ck_assert_msg(b.took_ms >= WAIT_MS - 20 && b.took_ms < WAIT_MS + 250,
                      "%s: gave up after %lld ms", lock_type_name(c->type), (long long)b.took_ms);
        other_start(&b, c->type, 0, 0);
        mclock_sleep_ms(50);
        ck_assert_int_eq(lock_release(a), LOCK_OK);
        other_join(&b);
        ck_assert_msg(b.rc == LOCK_OK, "%s: not acquired once freed (%d)", lock_type_name(c->type),
                      b.rc);
        ck_assert_int_eq(b.release_rc, LOCK_OK);
        ck_assert_msg(key_exists() == 0, "%s: key left behind", lock_type_name(c->type));
        lock_free(a);
    }
}
END_TEST

/* hold_us ends where the last release went out, not where the report is
 * asked for: a holder preempted between its unlock and its report would
 * otherwise seem inside while the next holder already is (the lab's race
 * then drew an overlap under the in-process mutex). */
static void hold_ends_at_release(const struct lock_type *t) {
    struct lock *a = lock_new(core, t, KEY);
    ck_assert_int_eq(lock_acquire(a), LOCK_OK);
    mclock_sleep_ms(30);
    ck_assert_int_eq(lock_release(a), LOCK_OK);
    struct other b;
    other_start(&b, t, 0, 0);
    other_join(&b);
    ck_assert_int_eq(b.rc, LOCK_OK);
    mclock_sleep_ms(200); /* the holder, preempted before its report */
    struct lock_report r;
    lock_report(a, &r);
    ck_assert_msg(r.hold_us >= 30000 && r.hold_us < 130000,
                  "%s: hold_us %lld after a 30 ms hold reported 200 ms after its release",
                  lock_type_name(t), (long long)r.hold_us);
    lock_free(a);
}

START_TEST(test_a_hold_ends_when_its_release_goes_out_not_when_it_is_reported) {
    hold_ends_at_release(&lock_type_local);
    for (int i = 0; i < NCONTRACTS; i++) hold_ends_at_release(contracts[i].type);
}
END_TEST

START_TEST(test_reentry_counts_for_reentrant_types_and_blocks_the_others_on_themselves) {
    for (int i = 0; i < NCONTRACTS; i++) {
        const struct contract *c = &contracts[i];
        struct lock *a = lock_new(core, c->type, KEY);
        ck_assert_int_eq(lock_acquire(a), LOCK_OK);
        int rc = lock_acquire(a);
        if (c->reentrant) {
            ck_assert_msg(rc == LOCK_OK, "%s: re-entry refused (%d)", lock_type_name(c->type), rc);
            ck_assert_int_eq(lock_holds(a), 2);
            ck_assert_int_eq(lock_release(a), LOCK_OK);
            ck_assert_msg(key_exists() == 1, "%s: one release freed two holds",
                          lock_type_name(c->type));
        } else {
            ck_assert_msg(rc == LOCK_BUSY, "%s: re-entry gave %d", lock_type_name(c->type), rc);
            ck_assert_int_eq(lock_holds(a), 1);
        }
        ck_assert_int_eq(lock_release(a), LOCK_OK);
        ck_assert_msg(key_exists() == 0, "%s: key left behind", lock_type_name(c->type));
        lock_free(a);
    }
}
END_TEST

START_TEST(test_a_lease_runs_out_unless_watched_and_the_release_then_says_lost) {
    for (int i = 0; i < NCONTRACTS; i++) {
        const struct contract *c = &contracts[i];
        struct lock *a = lock_new(core, c->type, KEY);
        ck_assert_int_eq(lock_acquire(a), LOCK_OK);
        mclock_sleep_ms(TTL_MS * 2);
        const char *name = lock_type_name(c->type);
        if (c->watched) {
            ck_assert_msg(key_exists() == 1, "%s: not renewed", name);
            ck_assert_int_eq(lock_check(a), LOCK_OK);
            struct lock_report r;
            lock_report(a, &r);
            ck_assert_msg(r.renewals >= 3, "%s: %d renewals in two TTLs", name, r.renewals);
            ck_assert_int_eq(lock_release(a), LOCK_OK);
        } else if (c->leased) {
            ck_assert_msg(key_exists() == 0, "%s: the key outlived its TTL", name);
            ck_assert_msg(lock_lease_passed(a), "%s: the lease did not pass", name);
            ck_assert_msg(lock_release(a) == LOCK_LOST, "%s: released a lock it lost", name);
        } else {
            ck_assert_msg(key_exists() == 1, "%s: a lock without a TTL expired", name);
            ck_assert_int_eq(lock_release(a), LOCK_OK);
        }
        lock_free(a);
        harness_redis_int(redis_port, "DEL " KEY);
    }
}
END_TEST

START_TEST(test_a_watched_lock_that_is_gone_is_reported_lost_and_not_committed) {
    for (int i = 0; i < NCONTRACTS; i++) {
        const struct contract *c = &contracts[i];
        if (!c->watched) continue;
        struct lock *a = lock_new(core, c->type, KEY);
        ck_assert_int_eq(lock_acquire(a), LOCK_OK);
        ck_assert_int_eq(harness_redis_int(redis_port, "DEL " KEY),
                         1); /* e.g. lost in a failover */
        /* The next renewal finds it gone: reported lost while its lease
         * still runs (once the lease has passed, lock_check says lost
         * anyway). Waited for, not slept: a loaded machine may run the
         * renewal late. */
        int rc = LOCK_OK, lease_left = 0;
        for (int64_t end = mclock_ms() + 5000; rc != LOCK_LOST && mclock_ms() < end;) {
            lease_left = !lock_lease_passed(a);
            rc = lock_check(a);
            if (rc != LOCK_LOST) mclock_sleep_ms(5);
        }
        ck_assert_msg(rc == LOCK_LOST, "%s: a lock that is gone may commit",
                      lock_type_name(c->type));
        /* lock_check writes this only when it finds the lease passed: a
         * deadline that fell between the two reads above is caught here */
        ck_assert_msg(lease_left && strstr(lock_errstr(a), "lease ran out") == NULL,
                      "%s: reported lost only once its lease had run out: no renewal found it "
                      "gone (%s)",
                      lock_type_name(c->type), lock_errstr(a));
        ck_assert_msg(lock_release(a) == LOCK_LOST, "%s: released a lock that was gone",
                      lock_type_name(c->type));
        lock_free(a);
    }
}
END_TEST

START_TEST(test_releasing_a_lost_lock_never_deletes_the_next_owners_but_for_a_bare_del) {
    for (int i = 0; i < NCONTRACTS; i++) {
        const struct contract *c = &contracts[i];
        if (!c->leased || c->watched) continue;
        struct lock *a = lock_new(core, c->type, KEY);
        ck_assert_int_eq(lock_acquire(a), LOCK_OK);
        mclock_sleep_ms(TTL_MS + 100); /* A's lease ran out */
        struct lock *b = lock_new(core, c->type, KEY);
        ck_assert_int_eq(lock_acquire(b), LOCK_OK); /* B owns it now */
        int rc = lock_release(a);
        const char *name = lock_type_name(c->type);
        if (c->checked_release) {
            ck_assert_msg(rc == LOCK_LOST, "%s: A's release gave %d", name, rc);
            ck_assert_msg(key_exists() == 1, "%s: A deleted B's lock", name);
            ck_assert_int_eq(lock_release(b), LOCK_OK);
        } else {
            ck_assert_msg(key_exists() == 0, "%s: the bare DEL spared B's lock", name);
            ck_assert_int_eq(lock_release(b), LOCK_LOST);
        }
        lock_free(a);
        lock_free(b);
    }
}
END_TEST

START_TEST(test_a_checked_lease_refuses_the_commit_once_renewals_cannot_reach_redis) {
    struct lock *a = lock_new(core, &lock_type_watchdog, KEY);
    ck_assert_int_eq(lock_acquire(a), LOCK_OK);
    ck_assert_int_eq(lock_check(a), LOCK_OK);
    redisReply *p = harness_redis(redis_port, "CLIENT PAUSE %d ALL", TTL_MS * 2);
    freeReplyObject(p);
    mclock_sleep_ms(TTL_MS + 100);
    ck_assert_int_eq(lock_check(a), LOCK_LOST);
    ck_assert(lock_lease_passed(a));
    lock_free(a);
}
END_TEST

/* README: "unlock channels nobody waits on are unsubscribed after 2 s". A
 * redisson handle waits for a Redisson client's lock, subscribed to its
 * unlock channel, and gives up. Right after, the channel still has its
 * subscriber; it loses it once idle for 2 s (not before; 10 s at most).
 * The waiter left between its deadline (WAIT_MS after lock_acquire began,
 * lock.c, lock_hash.c: the earliest) and lock_acquire's return: times are
 * counted from the earliest, so that a late look cannot make the channel
 * seem unsubscribed early, and the try counts only when the two are within
 * 100 ms, so that an unsubscribe a few hundred ms early cannot hide in a
 * late return either (a loaded machine may return late: up to three
 * tries). */
#define CARRIED "check-lock-stock"

static long find_at(const char *log, const char *needle, long from);
static long line_with(const char *log, long from, const char *a, const char *b);

/* The start of the line of log holding offset `at` (-1: -1). */
static long line_of(const char *log, long at) {
    while (at > 0 && log[at - 1] != '\n') at--;
    return at;
}

/* The line of log before offset `at` that a client sent (not a script);
 * -1 if none. */
static long client_line_before(const char *log, long at) {
    long found = -1;
    for (long p = 0; p >= 0 && p < at;) {
        double ts;
        char addr[64];
        const char *cmd;
        if (harness_monitor_parse(log + p, &ts, addr, sizeof(addr), &cmd) == 0 &&
            strcmp(addr, "lua") != 0)
            found = p;
        long next = find_at(log, "\n", p);
        p = next < 0 ? -1 : next + 1;
    }
    return found;
}

/* lock_carry, for the string and hash types: the GET of the carried key
 * rides right behind the try that takes the lock (so it reads under the
 * lock, in the same write, and the holder reads nothing), and the value is
 * handed to the hold only when that try was granted. A busy try's GET is
 * dropped, a missing key is carried as missing, the GET that rode behind a
 * script Redis no longer knew (it did not run; it is sent again alone) is
 * not carried, and Redlock (its lock lives on the masters) carries none. */
START_TEST(test_a_granted_try_carries_the_value_it_read_right_behind_it) {
    for (int i = 0; i < NCONTRACTS; i++) {
        const struct lock_type *t = contracts[i].type;
        const char *name = lock_type_name(t);
        int rides = t != &lock_type_redlock;
        /* Every script back in Redis, after the last type's SCRIPT FLUSH. */
        const char *scripts[] = {"hash-lock",    "fenced-lock", "rw-lock",
                                 "unlock-owner", "hash-unlock", "rw-write-unlock"};
        for (size_t j = 0; j < sizeof(scripts) / sizeof(scripts[0]); j++)
            ck_assert_str_ne(harness_script_sha(redis_port, scripts[j]), "");
        freeReplyObject(harness_redis(redis_port, "SET %s 42", CARRIED));
        struct lock *a = lock_new(core, t, KEY);
        lock_carry(a, CARRIED);
        struct lock_report rep;
        lock_report(a, &rep);
        struct harness_monitor *m = harness_monitor_start(redis_port);
        ck_assert_ptr_nonnull(m);
        ck_assert_int_eq(lock_acquire(a), LOCK_OK);
        const char *v = NULL;
        int carried = lock_carried(a, &v);
        char *log = harness_monitor_stop(m);
        ck_assert_ptr_nonnull(log);
        if (!rides) {
            ck_assert_msg(carried == 0, "%s: carried a value its lock did not read", name);
            ck_assert_int_eq(lock_release(a), LOCK_OK);
            lock_free(a);
            free(log);
            continue;
        }
        ck_assert_msg(carried == 1 && v && strcmp(v, "42") == 0, "%s: carried %d '%s', not 42",
                      name, carried, v ? v : "(null)");
        /* In Redis: the GET came on the try's connection, right after the
         * try that took the lock (owner id in it). */
        long got = line_of(log, find_at(log, "\"GET\" \"" CARRIED "\"", 0));
        long before = got > 0 ? client_line_before(log, got) : -1;
        if (before < 0 || line_with(log, before - 1, rep.owner, "\"") != before)
            fprintf(stderr, "%s", log);
        ck_assert_msg(got > 0 && before >= 0, "%s: no GET of the carried key after a try", name);
        ck_assert_msg(line_with(log, before - 1, rep.owner, "\"") == before,
                      "%s: the GET did not follow the try that took the lock", name);
        char addr_try[64], addr_get[64];
        double ts;
        const char *cmd;
        ck_assert_int_eq(harness_monitor_parse(log + before, &ts, addr_try, sizeof(addr_try), &cmd),
                         0);
        ck_assert_int_eq(harness_monitor_parse(log + got, &ts, addr_get, sizeof(addr_get), &cmd),
                         0);
        ck_assert_msg(strcmp(addr_try, addr_get) == 0, "%s: the GET went on another connection",
                      name);
        free(log);
        ck_assert_int_eq(lock_release(a), LOCK_OK);

        /* A missing key is carried as missing. */
        freeReplyObject(harness_redis(redis_port, "DEL %s", CARRIED));
        ck_assert_int_eq(lock_acquire(a), LOCK_OK);
        ck_assert_msg(lock_carried(a, &v) == 1 && v == NULL,
                      "%s: a missing key was not carried as missing", name);
        ck_assert_int_eq(lock_release(a), LOCK_OK);

        /* A busy try carries nothing; the try that then takes the lock
         * carries what it read. */
        freeReplyObject(harness_redis(redis_port, "SET %s 42", CARRIED));
        struct lock *b = lock_new(core, t, KEY);
        ck_assert_int_eq(lock_acquire(b), LOCK_OK);
        lock_set_wait(a, 50);
        ck_assert_int_eq(lock_acquire(a), LOCK_BUSY);
        ck_assert_msg(lock_carried(a, &v) == 0, "%s: a busy try carried a value", name);
        freeReplyObject(harness_redis(redis_port, "SET %s 41", CARRIED));
        ck_assert_int_eq(lock_release(b), LOCK_OK);
        lock_free(b);
        lock_set_wait(a, WAIT_MS);
        ck_assert_int_eq(lock_acquire(a), LOCK_OK);
        ck_assert_msg(lock_carried(a, &v) == 1 && v && strcmp(v, "41") == 0,
                      "%s: carried '%s' after the busy try, not 41", name, v ? v : "(null)");
        ck_assert_int_eq(lock_release(a), LOCK_OK);

        /* The try is a script Redis has forgotten: NOSCRIPT, then loaded
         * and sent again alone. The GET behind the first send read before
         * any grant: not carried. */
        freeReplyObject(harness_redis(redis_port, "SCRIPT FLUSH"));
        ck_assert_int_eq(lock_acquire(a), LOCK_OK);
        int after_flush = lock_carried(a, &v);
        ck_assert_int_eq(lock_release(a), LOCK_OK);
        lock_free(a);
        /* (SET NX is no script: it carries as before.) */
        int scripted = t != &lock_type_setnx_retry && t != &lock_type_setnx_spin &&
                       t != &lock_type_expiring && t != &lock_type_owner_check &&
                       t != &lock_type_owner_lua;
        ck_assert_msg(after_flush == !scripted,
                      "%s: after SCRIPT FLUSH, carried %d (the GET %s before the grant)", name,
                      after_flush, scripted ? "ran" : "did not run");
    }
}
END_TEST

START_TEST(test_an_unlock_channel_nobody_waits_on_is_unsubscribed_after_2_s) {
    const char *other = "b983c153-7421-469a-addb-44fb92259a1b:1";
    const char *channel = "redisson_lock__channel:{" KEY "}";
    ck_assert_int_eq(harness_redisson_lock(redis_port, KEY, other, 30000), 1);
    int64_t late = -1;
    for (int try = 0; try < 3; try++) {
        struct lock *a = lock_new(core, &lock_type_redisson, KEY);
        int64_t asked = mclock_ms();
        ck_assert_int_eq(lock_acquire(a), LOCK_BUSY);
        int64_t left = asked + WAIT_MS; /* the earliest it can have left */
        late = mclock_ms() - left; /* how much later it may have */
        lock_free(a);
        long long subscribers = harness_subscribers(redis_port, channel);
        int64_t checked = mclock_ms() - left;
        ck_assert_msg(subscribers == 1,
                      "the waiter's channel had %lld subscribers %lld ms after it left",
                      subscribers, (long long)checked);
        int64_t gone = -1;
        for (int64_t end = left + 10000; gone < 0 && mclock_ms() < end; mclock_sleep_ms(20))
            if (harness_subscribers(redis_port, channel) == 0) gone = mclock_ms() - left;
        ck_assert_msg(gone >= 0,
                      "the idle channel was still subscribed 10 s after its last waiter left");
        ck_assert_msg(gone >= 1990,
                      "the channel was unsubscribed %lld ms after its last waiter left, before 2 s",
                      (long long)gone);
        if (late <= 100) break;
    }
    ck_assert_msg(late <= 100,
                  "fault missed its window: lock_acquire returned %lld ms after the waiter's "
                  "deadline in three tries, so when it left is not known to 100 ms",
                  (long long)late);
    ck_assert_int_eq(harness_redisson_unlock(redis_port, KEY, other), 1);
}
END_TEST

/* ---- Faults -------------------------------------------------------------- */

/* Where `needle` first occurs in log at or after `from`; -1 if nowhere. */
static long find_at(const char *log, const char *needle, long from) {
    const char *p = from >= 0 ? strstr(log + from, needle) : NULL;
    return p ? (long)(p - log) : -1;
}

/* The offset of the first line of log that starts after offset `from` (-1:
 * any line) and holds both a and b; -1 if none. */
static long line_with(const char *log, long from, const char *a, const char *b) {
    for (long at = from < 0 ? -1 : find_at(log, "\n", from); from < 0 || at >= 0;
         at = find_at(log, "\n", at + 1)) {
        from = 0;
        long next = find_at(log, "\n", at + 1);
        long pa = find_at(log, a, at + 1), pb = find_at(log, b, at + 1);
        if (pa >= 0 && pb >= 0 && (next < 0 || (pa < next && pb < next))) return at + 1;
    }
    return -1;
}

/* Opens n of the pool's connections at once and puts them back idle, so
 * that every later rpool_get finds one with the scripts already loaded:
 * a fresh connection's SCRIPT LOAD would otherwise be the command that
 * Redis sleeps through, and the acquire would never be sent. */
static void pool_warm(int n) {
    redisContext *c[8] = {0};
    char err[256];
    for (int i = 0; i < n && i < 8; i++)
        ck_assert_msg(rpool_get(pool, 1000, &c[i], err, sizeof(err)) == RPOOL_OK, "warm: %s", err);
    for (int i = 0; i < n && i < 8; i++) rpool_put(pool, c[i]);
}

/* Redis sleeps through the acquire's reply (DEBUG SLEEP), so the client
 * times out not knowing whether it was granted; it was. (So was the GET of
 * the carried key that rode behind it: both replies are lost.) The test first
 * proves the fault: in what Redis ran (MONITOR, which does not show DEBUG),
 * the acquire itself, carrying this handle's owner id, ran more than the
 * client's 200 ms after it was sent, and the client had waited those
 * 200 ms; only then the outcome: the acquire answered LOCK_ERR, a release
 * checked against that owner ran after the acquire, and no hold is left. */
START_TEST(test_a_lost_acquire_reply_leaves_no_hold_behind) {
    lock_core_shutdown(core);
    rpool_free(pool);
    core_start(8, 200); /* replies are lost after 200 ms */
    struct {
        const struct lock_type *type;
        const char *acquire; /* how the acquire shows in MONITOR, before the owner id */
    } cases[] = {
        {&lock_type_owner_lua, "\"SET\" \"" KEY "\" \""},
        {&lock_type_redisson, "hash-lock"},
        {&lock_type_setnx_spin, "\"SET\" \"" KEY "\" \""},
        {&lock_type_fenced, "fenced-lock"},
        {&lock_type_rw_write, "rw-lock"},
        {&lock_type_rw_read, "rw-lock"},
    };
    char hash_lock[48], fenced_lock[48], unlock_owner[48], hash_abandon[48];
    char rw_lock[48], rw_abandon[48];
    snprintf(rw_lock, sizeof(rw_lock), "%s", harness_script_sha(redis_port, "rw-lock"));
    snprintf(rw_abandon, sizeof(rw_abandon), "%s", harness_script_sha(redis_port, "rw-abandon"));
    snprintf(hash_lock, sizeof(hash_lock), "%s", harness_script_sha(redis_port, "hash-lock"));
    snprintf(fenced_lock, sizeof(fenced_lock), "%s", harness_script_sha(redis_port, "fenced-lock"));
    snprintf(unlock_owner, sizeof(unlock_owner), "%s",
             harness_script_sha(redis_port, "unlock-owner"));
    snprintf(hash_abandon, sizeof(hash_abandon), "%s",
             harness_script_sha(redis_port, "hash-abandon"));
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *name = lock_type_name(cases[i].type);
        pool_warm(4);
        struct lock *a = lock_new(core, cases[i].type, KEY);
        lock_carry(a, CARRIED); /* as a sale does: the GET rides behind the try */
        struct lock_report rep;
        lock_report(a, &rep);
        struct harness_monitor *m = harness_monitor_start(redis_port);
        ck_assert_ptr_nonnull(m);
        /* The sleep goes out on a connection Redis has already accepted (a
         * PING answered on it), so its bytes are ready before the
         * acquire's, and Redis, which serves ready sockets in the order
         * they became ready, sleeps first. */
        redisContext *c = redisConnect("127.0.0.1", redis_port);
        ck_assert(c && !c->err);
        freeReplyObject(redisCommand(c, "PING"));
        ck_assert_int_eq(redisAppendCommand(c, "DEBUG SLEEP 0.6"), REDIS_OK);
        int done = 0;
        while (!done) ck_assert_int_eq(redisBufferWrite(c, &done), REDIS_OK);
        int64_t sent_wall_us = mclock_wall_us();
        int64_t t0 = mclock_ms();
        int rc = lock_acquire(a);
        int64_t took = mclock_ms() - t0;
        int holds = lock_holds(a);
        char why[256];
        snprintf(why, sizeof(why), "%s", lock_errstr(a));
        lock_free(a);
        void *r = NULL;
        ck_assert_int_eq(redisGetReply(c, &r), REDIS_OK); /* Redis is awake again */
        freeReplyObject(r);
        redisFree(c);
        /* The compensating release may still be in flight (or left to the
         * watchdog): wait for the key to go, 5 s at most. */
        for (int64_t end = mclock_ms() + 5000; key_exists() != 0 && mclock_ms() < end;)
            mclock_sleep_ms(20);
        char *log = harness_monitor_stop(m);
        ck_assert_ptr_nonnull(log);
        /* The fault: the acquire itself (not a connection's SCRIPT LOAD)
         * was sent, and Redis ran it after the sleep, when the client had
         * given up on its reply. */
        const char *shape = cases[i].acquire;
        if (strcmp(shape, "hash-lock") == 0)
            shape = hash_lock;
        else if (strcmp(shape, "fenced-lock") == 0)
            shape = fenced_lock;
        else if (strcmp(shape, "rw-lock") == 0)
            shape = rw_lock;
        long acquired = line_with(log, -1, shape, rep.owner);
        if (acquired < 0) fprintf(stderr, "%s", log);
        ck_assert_msg(acquired >= 0,
                      "%s: fault missed its window: the acquire never ran in Redis "
                      "(client said: %s)",
                      name, why);
        /* MONITOR dates a command when Redis has run it: after the client's
         * 200 ms, its reply could only be lost. */
        double ran_s = strtod(log + acquired, NULL);
        ck_assert_msg(
            ran_s * 1e6 >= (double)sent_wall_us + 200e3,
            "%s: fault missed its window: Redis ran the acquire %.0f ms after it was sent", name,
            (ran_s * 1e6 - (double)sent_wall_us) / 1e3);
        /* Both replies were lost: the try's, and the carried key's GET's,
         * which rode right behind it. */
        long carried_get = line_of(log, find_at(log, "\"GET\" \"" CARRIED "\"", acquired));
        ck_assert_msg(carried_get > acquired && client_line_before(log, carried_get) == acquired,
                      "%s: the carried key's GET did not ride behind the lost try", name);
        long loaded = find_at(log, "\"SCRIPT\" \"LOAD\"", 0);
        ck_assert_msg(loaded < 0 || loaded > acquired, "%s: a SCRIPT LOAD ran before the acquire",
                      name);
        ck_assert_msg(took >= 200,
                      "%s: fault missed its window: the acquire answered %d in %lld ms", name, rc,
                      (long long)took);
        ck_assert_msg(rc == LOCK_ERR, "%s: the acquire gave %d through a lost reply", name, rc);
        ck_assert_int_eq(holds, 0);
        /* The outcome: a release checked against the owner ran after the
         * acquire, and nothing is held. */
        long released = line_with(log, acquired, rep.owner, unlock_owner);
        if (released < 0) released = line_with(log, acquired, rep.owner, hash_abandon);
        if (released < 0) released = line_with(log, acquired, rep.owner, rw_abandon);
        if (released <= acquired) fprintf(stderr, "%s", log);
        ck_assert_msg(released > acquired, "%s: no checked release of the owner after the acquire",
                      name);
        free(log);
        ck_assert_msg(key_exists() == 0, "%s: an orphan hold was left", name);
        /* A read hold also has its lease key ({key}:owner:rwlock_timeout:1). */
        redisReply *left = harness_redis(redis_port, "KEYS *rwlock_timeout*");
        ck_assert_msg(left && left->type == REDIS_REPLY_ARRAY && left->elements == 0,
                      "%s: a read hold's lease key was left: %s", name,
                      left && left->elements ? left->element[0]->str : "?");
        freeReplyObject(left);
        struct lock *b = lock_new(core, cases[i].type, KEY);
        ck_assert_int_eq(lock_acquire(b), LOCK_OK);
        ck_assert_int_eq(lock_release(b), LOCK_OK);
        lock_free(b);
    }
}
END_TEST

/* The test's Redis asleep for `seconds` before it runs the next command
 * (harness_redis_sleep_begin); sleep_end waits until it is awake again. */
static redisContext *sleep_begin(const char *seconds) {
    redisContext *c = harness_redis_sleep_begin(redis_port, seconds);
    ck_assert_ptr_nonnull(c);
    return c;
}

static void sleep_end(redisContext *c) { ck_assert_int_eq(harness_redis_sleep_end(c), 0); }

/* How many sockets that the Redis at port accepted hold bytes it has not
 * read yet (/proc/net/tcp, ESTABLISHED, rx_queue above 0); -1 on error. */
static int redis_sockets_unread(int port) {
    FILE *f = fopen("/proc/net/tcp", "r");
    if (!f) return -1;
    char line[512];
    int n = fgets(line, sizeof(line), f) ? 0 : -1;
    while (n >= 0 && fgets(line, sizeof(line), f)) {
        unsigned lport, st, tx, rx;
        if (sscanf(line, " %*d: %*x:%x %*x:%*x %x %x:%x", &lport, &st, &tx, &rx) == 4 &&
            lport == (unsigned)port && st == 1 && rx > 0)
            n++;
    }
    fclose(f);
    return n;
}

/* A thread that releases a held lock, or acquires one (wait 3 s). */
struct step {
    struct lock *l;
    int acquire;
    int rc;
    atomic_int done;
    pthread_t thread;
};

static void *step_main(void *arg) {
    struct step *s = arg;
    s->rc = s->acquire ? lock_acquire(s->l) : lock_release(s->l);
    atomic_store(&s->done, 1);
    return NULL;
}

/* The gated types pass the gate on once the last release is written, not
 * once it is answered: the next thread's try goes out right behind it, and
 * Redis, which decides, runs the release first (Redlock: its unlock round,
 * here on one master, the test's Redis). The test makes Redis sleep
 * (DEBUG SLEEP) just before the holder releases, and looks into the kernel
 * while it sleeps: the release and the next thread's try both wait unread in
 * Redis's sockets. The window first: neither the release nor the acquire
 * had returned then; then the outcome: both succeed once Redis wakes. */
START_TEST(test_the_gate_passes_on_once_the_last_release_is_written_not_answered) {
    lock_core_shutdown(core);
    rpool_free(pool);
    node_timeout_ms = 2000; /* the master's answer outlasts the sleep */
    core_start_ttl(8, 2000, 3000); /* no renewal comes due meanwhile (every 1 s) */
    ck_assert_int_eq(harness_redis_wait_uptime(redis_port, 3), 0); /* the master votes */
    const struct lock_type *types[] = {&lock_type_redisson, &lock_type_rw_write,
                                       &lock_type_redlock};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        const char *name = lock_type_name(types[i]);
        pool_warm(4);
        struct lock *a = lock_new(core, types[i], KEY);
        ck_assert_int_eq(lock_acquire(a), LOCK_OK);
        struct step next = {.l = lock_new(core, types[i], KEY), .acquire = 1};
        lock_set_wait(next.l, 3000);
        ck_assert_int_eq(pthread_create(&next.thread, NULL, step_main, &next), 0);
        mclock_sleep_ms(100); /* it waits in the gate */
        ck_assert_int_eq(redis_sockets_unread(redis_port), 0);
        redisContext *c = sleep_begin("0.6");
        struct step release = {.l = a};
        ck_assert_int_eq(pthread_create(&release.thread, NULL, step_main, &release), 0);
        mclock_sleep_ms(300);
        int unread = redis_sockets_unread(redis_port);
        int released = atomic_load(&release.done), acquired = atomic_load(&next.done);
        sleep_end(c);
        pthread_join(release.thread, NULL);
        pthread_join(next.thread, NULL);
        ck_assert_msg(!released && !acquired,
                      "%s: fault missed its window: Redis was not asleep (release %s, acquire %s)",
                      name, released ? "returned" : "waiting", acquired ? "returned" : "waiting");
        ck_assert_msg(unread >= 2,
                      "%s: while Redis slept, %d of its sockets held a command: the next "
                      "thread's try did not go out behind the release",
                      name, unread);
        ck_assert_int_eq(release.rc, LOCK_OK);
        ck_assert_msg(next.rc == LOCK_OK, "%s: the next thread was not granted (%d)", name,
                      next.rc);
        ck_assert_int_eq(lock_release(next.l), LOCK_OK);
        lock_free(next.l);
        lock_free(a);
    }
}
END_TEST

/* The watchdog lane's compensation retries so far (0 if no lane yet). */
static long long lane_retries(void) {
    struct lock_lane_stats st[8];
    int n = lock_core_lanes(core, st, 8);
    long long sum = 0;
    for (int i = 0; i < n; i++) sum += st[i].retries;
    return sum;
}

/* README: "After a time-out on acquire or release, the command is taken to
 * have run: the handle's cleanup commands and a release checked against the
 * owner go out on a fresh connection." The release's reply is lost (Redis
 * sleeps 500 ms through it, within the 5 s lease; the compensation after
 * it may be lost too, and is then retried by the watchdog). The fault first: the release ran in Redis more than
 * the client's 200 ms after it was sent. Then the outcome: lock_release
 * answered LOCK_ERR and nothing is held; after the release, on another
 * connection, the cleanup command went out again, then a release checked
 * against the owner; and the next owner gets the lock. */
START_TEST(
    test_a_lost_release_reply_is_followed_by_the_cleanups_and_a_checked_release_on_another_connection) {
    lock_core_shutdown(core);
    rpool_free(pool);
    core_start_ttl(8, 200, 5000); /* a lease that outlives the sleep */
    const struct lock_type *types[] = {&lock_type_owner_lua, &lock_type_redisson};
    char unlock_owner[48], hash_unlock[48], hash_abandon[48];
    snprintf(unlock_owner, sizeof(unlock_owner), "%s",
             harness_script_sha(redis_port, "unlock-owner"));
    snprintf(hash_unlock, sizeof(hash_unlock), "%s", harness_script_sha(redis_port, "hash-unlock"));
    snprintf(hash_abandon, sizeof(hash_abandon), "%s",
             harness_script_sha(redis_port, "hash-abandon"));
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        const char *name = lock_type_name(types[i]);
        const int is_hash = types[i] == &lock_type_redisson;
        pool_warm(4);
        struct lock *a = lock_new(core, types[i], KEY);
        ck_assert_int_eq(lock_acquire(a), LOCK_OK);
        struct lock_report rep;
        lock_report(a, &rep);
        const char *cleanup[] = {"DEL", "check-lock-cleanup"};
        ck_assert_int_eq(lock_cleanup(a, 2, cleanup, NULL), 0);
        struct harness_monitor *m = harness_monitor_start(redis_port);
        ck_assert_ptr_nonnull(m);
        long long scripts0 = harness_redis_calls(redis_port, "evalsha");
        redisContext *zz = sleep_begin("0.5");
        int64_t sent_wall_us = mclock_wall_us();
        int rc = lock_release(a);
        int holds = lock_holds(a);
        lock_free(a);
        sleep_end(zz);
        /* Until Redis has run two scripts: the release, and the checked
         * release after it (the watchdog's, if it was retried). */
        for (int64_t end = mclock_ms() + 10000;
             harness_redis_calls(redis_port, "evalsha") < scripts0 + 2 && mclock_ms() < end;)
            mclock_sleep_ms(20);
        char *log = harness_monitor_stop(m);
        ck_assert_ptr_nonnull(log);
        /* The fault: the release ran after the client had given up. */
        long released = line_with(log, -1, is_hash ? hash_unlock : unlock_owner, rep.owner);
        if (released < 0) fprintf(stderr, "%s", log);
        ck_assert_msg(released >= 0, "%s: fault missed its window: the release never ran in Redis",
                      name);
        double ran_s = strtod(log + released, NULL);
        ck_assert_msg(
            ran_s * 1e6 >= (double)sent_wall_us + 200e3,
            "%s: fault missed its window: Redis ran the release %.0f ms after it was sent", name,
            (ran_s * 1e6 - (double)sent_wall_us) / 1e3);
        /* The outcome. */
        ck_assert_msg(rc == LOCK_ERR && holds == 0, "%s: the release gave %d, %d holds left", name,
                      rc, holds);
        char addr[64], again_addr[64];
        ck_assert_int_eq(harness_monitor_parse(log + released, NULL, addr, sizeof(addr), NULL), 0);
        long cleaned = line_with(log, released, "\"DEL\"", "check-lock-cleanup");
        long again = line_with(log, released, is_hash ? hash_abandon : unlock_owner, rep.owner);
        if (cleaned < 0 || again < 0) fprintf(stderr, "%s", log);
        ck_assert_msg(cleaned > released,
                      "%s: the cleanup did not go out again after the lost release", name);
        ck_assert_msg(again > cleaned, "%s: no release checked against %s after the cleanup", name,
                      rep.owner);
        ck_assert_int_eq(
            harness_monitor_parse(log + again, NULL, again_addr, sizeof(again_addr), NULL), 0);
        ck_assert_msg(strcmp(addr, again_addr) != 0,
                      "%s: the checked release went on the connection that "
                      "lost the reply",
                      name);
        free(log);
        ck_assert_msg(key_exists() == 0, "%s: a hold was left", name);
        struct lock *b = lock_new(core, types[i], KEY);
        ck_assert_int_eq(lock_acquire(b), LOCK_OK);
        ck_assert_int_eq(lock_release(b), LOCK_OK);
        lock_free(b);
    }
}
END_TEST

/* README: "if that fails too, the watchdog thread retries them until they
 * succeed or the lease is over." A setnx-spin acquire (no TTL: nothing but
 * a release can free it) loses its reply, and so does the compensation
 * that follows at once: Redis sleeps 1.5 s, and the only pooled connection
 * is the acquire's, dropped, so the compensation dials a fresh one, whose
 * SCRIPT LOAD times out before the release is sent. The fault first: the
 * acquire ran in Redis, and the compensation at once failed (the acquire's
 * error says so). Then the outcome: the watchdog's lane counts a retry, and
 * a release checked against the owner deletes the key, though nothing
 * would ever have expired it. */
START_TEST(test_the_watchdog_retries_a_compensation_that_failed_until_it_succeeds) {
    lock_core_shutdown(core);
    rpool_free(pool);
    core_start(1, 200); /* one connection: the compensation must dial its own */
    char unlock_owner[48];
    snprintf(unlock_owner, sizeof(unlock_owner), "%s",
             harness_script_sha(redis_port, "unlock-owner"));
    pool_warm(1);
    long long retries0 = lane_retries();
    struct lock *a = lock_new(core, &lock_type_setnx_spin, KEY);
    struct lock_report rep;
    lock_report(a, &rep);
    struct harness_monitor *m = harness_monitor_start(redis_port);
    ck_assert_ptr_nonnull(m);
    redisContext *zz = sleep_begin("1.5");
    int rc = lock_acquire(a);
    char why[256];
    snprintf(why, sizeof(why), "%s", lock_errstr(a));
    lock_free(a); /* orphaned: handed to the watchdog */
    sleep_end(zz);
    for (int64_t end = mclock_ms() + 10000; key_exists() != 0 && mclock_ms() < end;)
        mclock_sleep_ms(20);
    long long retries = lane_retries() - retries0;
    char *log = harness_monitor_stop(m);
    ck_assert_ptr_nonnull(log);
    long acquired = line_with(log, -1, "\"SET\" \"" KEY "\"", rep.owner);
    if (acquired < 0) fprintf(stderr, "%s", log);
    ck_assert_msg(acquired >= 0 && rc == LOCK_ERR,
                  "fault missed its window: the acquire (%d: %s) never ran in Redis", rc, why);
    /* lock.c appends "; then <why>" when the compensation failed too. */
    ck_assert_msg(strstr(why, "; then ") != NULL,
                  "fault missed its window: the compensation at once did not fail (%s)", why);
    ck_assert_msg(retries >= 1, "the watchdog retried no compensation (%s)", why);
    long released = line_with(log, acquired, unlock_owner, rep.owner);
    if (released < 0) fprintf(stderr, "%s", log);
    ck_assert_msg(released > acquired, "no release checked against %s after its acquire",
                  rep.owner);
    ck_assert_msg(line_with(log, released, "\"DEL\" \"" KEY "\"", "lua") > released ||
                      line_with(log, released, "\"del\" \"" KEY "\"", "lua") > released,
                  "the checked release did not delete the orphan");
    free(log);
    ck_assert_msg(key_exists() == 0, "the orphan hold is still there after %lld retries", retries);
}
END_TEST

/* The address of a client of the test's Redis whose EVALSHA is held by a
 * CLIENT PAUSE (CLIENT LIST: flags=b, cmd=evalsha) into addr; 0 if none.
 * Read from Redis, not from the core: no mutex of the core is needed. */
static int stalled_evalsha(char *addr, size_t len) {
    redisReply *r = harness_redis(redis_port, "CLIENT LIST");
    int found = 0;
    for (char *line = r && r->type == REDIS_REPLY_STRING ? r->str : NULL;
         line && *line && !found;) {
        char *end = strchr(line, '\n');
        if (end) *end = '\0';
        char *at = strstr(line, " addr=");
        if (strstr(line, " flags=b ") && strstr(line, " cmd=evalsha ") && at) {
            snprintf(addr, len, "%.*s", (int)strcspn(at + 6, " "), at + 6);
            found = 1;
        }
        line = end ? end + 1 : NULL;
    }
    freeReplyObject(r);
    return found;
}

/* README: the watchdog "holds no mutex across a round trip". A watchdog
 * lock on the test's Redis is renewed every 200 ms; that Redis then holds
 * every write for 4 s (CLIENT PAUSE WRITE). The fault first: a renewal is
 * in flight and stalled (Redis lists the watchdog's EVALSHA as held by the
 * pause). Then, on this thread, a Redlock lock (its master: another Redis)
 * is acquired and released, which takes the watchdog's mutex to watch and
 * unwatch it: that must be done while the stalled renewal is still held
 * in Redis, not after it. */
START_TEST(test_a_stalled_renewal_round_trip_holds_no_mutex_another_lock_needs) {
    int other_port;
    pid_t other = harness_redis_start(0, &other_port);
    ck_assert_int_gt(other, 0);
    ck_assert_int_eq(harness_redis_wait_uptime(other_port, 1), 0);
    lock_core_shutdown(core);
    rpool_free(pool);
    struct rpool_options po = {
        .host = "127.0.0.1", .port = redis_port, .timeout_ms = 10000, .size = 8, .load_scripts = 1};
    pool = rpool_create(&po);
    char nodes[64], err[256];
    snprintf(nodes, sizeof(nodes), "127.0.0.1:%d", other_port);
    struct lock_core_options lo = {
        .pool = pool,
        .pool_wait_ms = 10000,
        .redlock_nodes = nodes,
        .redlock_node_timeout_ms = 200,
        .redlock_pool_size = 4,
        .ttl_ms = TTL_MS,
        .wait_ms = WAIT_MS,
        .spin_sleep_ms = 10,
        .retry_depth = 1000,
    };
    core = lock_core_init(&lo, err, sizeof(err));
    ck_assert_msg(core != NULL, "lock_core_init: %s", err);
    struct lock *a = lock_new(core, &lock_type_watchdog, KEY);
    ck_assert_int_eq(lock_acquire(a), LOCK_OK);
    freeReplyObject(harness_redis(redis_port, "CLIENT PAUSE 4000 WRITE"));
    char stalled[64] = "", still[64] = "";
    int in_flight = 0;
    for (int64_t end = mclock_ms() + 3000; !in_flight && mclock_ms() < end; mclock_sleep_ms(10))
        in_flight = stalled_evalsha(stalled, sizeof(stalled));
    ck_assert_msg(in_flight, "fault missed its window: no renewal was held by the pause");
    struct lock *b = lock_new(core, &lock_type_redlock, KEY);
    int acquired = lock_acquire(b), released = lock_release(b);
    lock_free(b);
    int still_in_flight = stalled_evalsha(still, sizeof(still)) && strcmp(still, stalled) == 0;
    ck_assert_msg(still_in_flight,
                  "the Redlock lock was acquired and released only once the stalled "
                  "renewal (%s) had ended: a mutex was held across its round trip",
                  stalled);
    ck_assert_int_eq(acquired, LOCK_OK);
    ck_assert_int_eq(released, LOCK_OK);
    lock_free(a);
    harness_stop(other);
}
END_TEST

START_TEST(test_waiters_hold_no_pooled_connection_and_the_watchdog_needs_none) {
    lock_core_shutdown(core);
    rpool_free(pool);
    core_start(2, 1000); /* two connections for three sales */
    struct lock *a = lock_new(core, &lock_type_redisson, KEY);
    ck_assert_int_eq(lock_acquire(a), LOCK_OK);
    ck_assert_int_eq(lock_connect(a), 0); /* the holder keeps one */
    struct other b, c;
    other_start(&b, &lock_type_redisson, 0, 0);
    other_start(&c, &lock_type_redisson, 50, 0);
    /* Three TTLs: renewed all along on the watchdog's own connection. */
    for (int t = 0; t < 6; t++) {
        mclock_sleep_ms(TTL_MS / 2);
        ck_assert_msg(harness_redis_int(redis_port, "PTTL " KEY) > 0, "not renewed at %d", t);
    }
    ck_assert_int_eq(lock_check(a), LOCK_OK);
    other_join(&b);
    other_join(&c);
    ck_assert_int_eq(b.rc, LOCK_BUSY); /* their wait (300 ms) ran out */
    ck_assert_int_eq(c.rc, LOCK_BUSY);
    ck_assert_int_eq(lock_release(a), LOCK_OK);
    lock_free(a);
}
END_TEST

/* A waiter that met another instance's lock in Redis (not this process's
 * gate) waits on the unlock channel with no pooled connection: with two,
 * one taken by the test as a holder would, the other is free while the
 * waiter waits, and a waiter that kept its connection between tries would
 * leave none for this get's 50 ms. */
START_TEST(test_a_waiter_on_another_instances_lock_keeps_no_pooled_connection) {
    lock_core_shutdown(core);
    rpool_free(pool);
    core_start(2, 1000);
    freeReplyObject(harness_redis(redis_port, "HSET " KEY " another-instance:1 1"));
    freeReplyObject(harness_redis(redis_port, "PEXPIRE " KEY " 5000"));
    redisContext *held = NULL, *spare = NULL;
    char err[256] = "";
    ck_assert_int_eq(rpool_get(pool, 1000, &held, err, sizeof(err)), RPOOL_OK);
    struct other b;
    other_start(&b, &lock_type_redisson, 0, 0);
    /* its first try is made, and met the lock, once it has subscribed */
    int64_t end = mclock_ms() + 5000;
    long long subs = 0;
    for (; subs < 1 && mclock_ms() < end; mclock_sleep_ms(5))
        subs = harness_subscribers(redis_port, "redisson_lock__channel:{" KEY "}");
    int get = rpool_get(pool, 50, &spare, err, sizeof(err));
    int64_t got_ms = mclock_ms();
    other_join(&b);
    ck_assert_msg(subs == 1, "fault missed its window: the waiter never subscribed");
    ck_assert_msg(got_ms < b.done_ms,
                  "fault missed its window: the waiter had gone %lld ms "
                  "before the get ended",
                  (long long)(got_ms - b.done_ms));
    rpool_put(pool, spare);
    rpool_put(pool, held);
    ck_assert_int_eq(b.rc, LOCK_BUSY);
    ck_assert_msg(b.took_ms >= WAIT_MS - 20, "fault missed its window: b gave up after %lld ms",
                  (long long)b.took_ms);
    ck_assert_msg(get == RPOOL_OK, "a waiter holds a pooled connection while it waits: %s", err);
}
END_TEST

/* lock_hold: the steps of a hold a holder plans, run by the core in its
 * order. */
struct plan_log {
    char steps[64]; /* one letter a step: r(ead) i(nside) w(rite) d(one) */
    int got, set; /* reply indexes */
    char read[32]; /* what the GET answered */
    int held_at_write; /* the lock's key was there as the write was appended */
    char value_at_write[32]; /* the value in Redis then: the write not yet sent */
    int refuse; /* the read step answers -1 */
    int acquired, set_ok, held_after;
};

static int plan_read(struct lock_hold *h, void *arg) {
    struct plan_log *p = arg;
    strcat(p->steps, "r");
    const char *get[] = {"GET", KEY ":value"};
    p->got = h->connected ? lock_append(h->l, 2, get, NULL) : -1;
    return p->refuse || p->got < 0 ? -1 : 0;
}

static int plan_inside(struct lock_hold *h, void *arg) {
    struct plan_log *p = arg;
    strcat(p->steps, "i");
    const redisReply *r = h->flushed == 0 ? lock_reply(h->l, p->got) : NULL;
    snprintf(p->read, sizeof(p->read), "%s", r && r->type == REDIS_REPLY_STRING ? r->str : "?");
    return 0;
}

static void plan_write(struct lock_hold *h, void *arg) {
    struct plan_log *p = arg;
    strcat(p->steps, "w");
    p->held_at_write = key_exists();
    redisReply *v = harness_redis(redis_port, "GET %s", KEY ":value");
    snprintf(p->value_at_write, sizeof(p->value_at_write), "%s", v && v->str ? v->str : "");
    freeReplyObject(v);
    const char *set[] = {"SET", KEY ":value", "written"};
    p->set = lock_append(h->l, 3, set, NULL);
}

static void plan_done(struct lock_hold *h, void *arg) {
    struct plan_log *p = arg;
    strcat(p->steps, "d");
    p->acquired = h->acquired;
    const redisReply *r = p->set >= 0 ? lock_reply(h->l, p->set) : NULL;
    p->set_ok = r && r->type == REDIS_REPLY_STATUS;
    p->held_after = h->report.holds;
}

static int run_plan(const struct lock_type *t, struct plan_log *p, int wait_ms) {
    p->got = p->set = -1;
    const struct lock_hold_plan plan = {.type = t,
                                        .key = KEY,
                                        .wait_given = 1,
                                        .wait_ms = wait_ms,
                                        .read = plan_read,
                                        .inside = plan_inside,
                                        .write = plan_write,
                                        .done = plan_done,
                                        .arg = p};
    struct lock_hold h;
    int rc = lock_hold(core, &plan, &h);
    ck_assert_ptr_null(h.l);
    return rc;
}

START_TEST(test_a_hold_in_one_call_runs_its_steps_in_order_and_writes_with_the_release) {
    const struct lock_type *types[] = {&lock_type_owner_lua, &lock_type_redisson, &lock_type_fenced,
                                       &lock_type_handoff};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        const char *name = lock_type_name(types[i]);
        harness_redis_int(redis_port, "DEL %s", KEY ":value");
        freeReplyObject(harness_redis(redis_port, "SET %s %s", KEY ":value", "before"));
        struct plan_log p = {0};
        ck_assert_int_eq(run_plan(types[i], &p, WAIT_MS), LOCK_OK);
        ck_assert_msg(strcmp(p.steps, "riwd") == 0, "%s: steps %s", name, p.steps);
        ck_assert_msg(strcmp(p.read, "before") == 0, "%s: read %s", name, p.read);
        ck_assert_msg(p.held_at_write == 1 && strcmp(p.value_at_write, "before") == 0,
                      "%s: at the write step the lock was %s and the value %s", name,
                      p.held_at_write ? "held" : "gone", p.value_at_write);
        ck_assert_msg(p.set_ok && p.held_after == 0 && key_exists() == 0,
                      "%s: after the release: set %d, holds %d, lock key %d", name, p.set_ok,
                      p.held_after, key_exists());
        redisReply *v = harness_redis(redis_port, "GET %s", KEY ":value");
        ck_assert_str_eq(v->str, "written");
        freeReplyObject(v);

        /* A read that refuses: nothing is written, and the lock is let go. */
        struct plan_log q = {.refuse = 1};
        ck_assert_int_eq(run_plan(types[i], &q, WAIT_MS), LOCK_OK);
        ck_assert_msg(strcmp(q.steps, "rd") == 0, "%s: steps %s", name, q.steps);
        ck_assert_int_eq(key_exists(), 0);

        /* Busy: only done runs, and says so. */
        struct lock *other = lock_new(core, types[i], KEY);
        ck_assert_int_eq(lock_acquire(other), LOCK_OK);
        struct plan_log b = {0};
        ck_assert_int_eq(run_plan(types[i], &b, 0), LOCK_BUSY);
        ck_assert_msg(strcmp(b.steps, "d") == 0 && b.acquired == LOCK_BUSY, "%s: steps %s", name,
                      b.steps);
        lock_free(other);
    }
}
END_TEST

Suite *lock_suite(void) {
    Suite *s = suite_create("lock");
    TCase *contract = tcase_create("Contract");
    tcase_add_checked_fixture(contract, setup, teardown);
    tcase_set_timeout(contract, 60);
    tcase_add_test(
        contract,
        test_a_second_owner_is_busy_until_its_wait_runs_out_then_gets_the_lock_once_freed);
    tcase_add_test(contract,
                   test_reentry_counts_for_reentrant_types_and_blocks_the_others_on_themselves);
    tcase_add_test(contract, test_a_lease_runs_out_unless_watched_and_the_release_then_says_lost);
    tcase_add_test(contract, test_a_hold_ends_when_its_release_goes_out_not_when_it_is_reported);
    tcase_add_test(contract, test_a_watched_lock_that_is_gone_is_reported_lost_and_not_committed);
    tcase_add_test(contract,
                   test_releasing_a_lost_lock_never_deletes_the_next_owners_but_for_a_bare_del);
    tcase_add_test(contract,
                   test_a_checked_lease_refuses_the_commit_once_renewals_cannot_reach_redis);
    tcase_add_test(contract, test_an_unlock_channel_nobody_waits_on_is_unsubscribed_after_2_s);
    tcase_add_test(contract, test_a_granted_try_carries_the_value_it_read_right_behind_it);
    tcase_add_test(contract,
                   test_a_hold_in_one_call_runs_its_steps_in_order_and_writes_with_the_release);
    suite_add_tcase(s, contract);
    TCase *faults = tcase_create("Faults");
    tcase_add_checked_fixture(faults, setup, teardown);
    tcase_set_timeout(faults, 60);
    tcase_add_test(faults, test_a_lost_acquire_reply_leaves_no_hold_behind);
    tcase_add_test(faults, test_the_gate_passes_on_once_the_last_release_is_written_not_answered);
    tcase_add_test(
        faults,
        test_a_lost_release_reply_is_followed_by_the_cleanups_and_a_checked_release_on_another_connection);
    tcase_add_test(faults, test_the_watchdog_retries_a_compensation_that_failed_until_it_succeeds);
    tcase_add_test(faults, test_a_stalled_renewal_round_trip_holds_no_mutex_another_lock_needs);
    tcase_add_test(faults, test_waiters_hold_no_pooled_connection_and_the_watchdog_needs_none);
    tcase_add_test(faults, test_a_waiter_on_another_instances_lock_keeps_no_pooled_connection);
    suite_add_tcase(s, faults);
    return s;
}
