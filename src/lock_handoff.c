/* lock_handoff.c -- the handoff lock: a fair FIFO lock in Redis that is
 * handed, with the stock, straight to the next waiter (see
 * src/lua/handoff-lock.lua for the layout in Redis).
 *
 * DESIGN
 * The step after redisson. Redisson's unlock only wakes its waiters, one
 * per process, which then race for the lock with one more round trip each:
 * a herd, and no order between processes. Here the waiters queue in Redis,
 * each with its deadline, and whoever ends a hold grants the lock to the
 * first live waiter in the same script: the lock's key is set to that
 * waiter's owner id with a fresh lease, and one message, addressed to it,
 * goes to its process's channel, handoff_lock__channel:{<lock>}:<process>,
 * carrying the grant's time and the value of the waiter's carried key (the
 * stock: lock_carry). The process's one subscriber (pubsub.c) hands the
 * message to that thread alone. With the sale's commit doing the grant
 * (handoff-sale.lua, through lock_append_release), a sale on the hot path
 * takes one message in and sends one script out: no acquire round trip
 * after the wait, no GET, no release.
 *
 * Acquire is one script: free and nobody queued, the lock is granted with
 * the stock; otherwise the waiter is queued. It registers with the
 * subscriber before it sends that script, so no grant can come unheard.
 * Then it sleeps until its grant message, the holder's lease (the PTTL the
 * script answered), or its own deadline. When it wakes without a grant it
 * re-checks in one script, which also grants the first waiter when the
 * lock has gone without a grant (a holder whose lease ran out, a grantee
 * that died before using its grant, a lock deleted by a reset), and
 * queues the waiter anew when its entry has gone (the queue's key lost).
 * A grant passes over the waiters of a process that no longer listens on
 * its channel (it died, so Redis dropped its subscriber): a dead process's
 * waiters cost nothing; one whose grant was made while it still listened
 * (stopped, or dying just then) blocks the queue until its lease ends. A
 * waiter that missed its message (the subscriber reconnected: every
 * waiter is woken then) learns of its grant by that re-check. At its
 * deadline a waiter sends "cancel": granted if it was, else out of the
 * queue, atomically, so no grant goes to a waiter that left; a grant that
 * the cancel answers is taken, used and handed on by the commit.
 *
 * Leases are dated from the send. A grant by message happened in Redis at
 * the time it carries; mapped onto this host's monotonic clock through the
 * waiter's own queueing (sent at s, run at Redis time q), it began no
 * earlier than s + (grant - q). A grant seen by a script began its lease
 * PTTL - TTL before that script's send. The lock is renewed by the
 * watchdog while held (as redisson's), and the commit script checks in
 * Redis that it is still the holder's, so a holder paused past its lease
 * writes nothing (409 lock_lost).
 *
 * Riders. A thread that comes for the lock while another thread of its
 * process holds it (the carrier) does not send its own acquire: it boards
 * the process's station for that lock, and the carrier's commit queues it
 * in Redis, at the tail, in the same script (handoff-sale.lua), then
 * reports to it (queued, and when: the commit's send and Redis time). So
 * under load a sale costs one script in all. A grant that goes to a thread
 * of the same process comes back in the commit's answer and is handed over
 * in-process (pubsub_deliver), sparing the subscriber's wake-up, and that
 * thread becomes the carrier at once. A rider that is not taken within
 * RIDE_MAX_US queues itself, so a long hold delays nobody's place in the
 * queue by more than that; a carrier whose commit does not run (sold out,
 * lock lost, an error) sends its riders off to queue themselves, and one
 * whose answer was lost tells them so (they then check, and queue only if
 * they were not: "ensure").
 *
 * Not gated: every waiting thread queues in Redis, so the order is one
 * FIFO over every process (riders take their place when their carrier
 * commits). Threads: the handle's; renew and abandon on the watchdog's or
 * a fresh connection. stations_mu guards every station and rider; it is
 * taken before the pub/sub hub's mutex (pubsub_poke), never after, and
 * never across I/O. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lock_int.h"
#include "mclock.h"
#include "pubsub.h"

/* A waiter re-checks at least this often: its holder may be a lock of
 * another kind on the same key (owner-lua, fenced), whose release grants
 * nobody, or one without a lease. */
#define RECHECK_MS 1000

/* A rider waits this long for its carrier's commit, then queues itself:
 * the most a long hold in its process delays its place in the queue. */
#define RIDE_MAX_US 50000
/* Riders one commit carries at most (each is three arguments). */
#define RIDERS_MAX 80

enum ride_state { RIDE_WAITING, RIDE_TAKEN, RIDE_QUEUED, RIDE_OWN, RIDE_UNKNOWN };

/* A thread waiting for its carrier's commit; on its own stack. */
struct rider {
    struct lock *l;
    struct pubsub_waiter *w;
    int state; /* enum ride_state, under stations_mu */
    char wait[24]; /* its wait left, in ms, as its carrier sends it */
    int64_t queued_sent_us; /* RIDE_QUEUED: the commit's send, this host's clock */
    int64_t queued_redis_us; /* and its run, Redis's */
    struct rider *next;
};

/* A process's riders for one lock. Exists while handles refer to it. */
struct station {
    struct rpool *pool;
    char key[192];
    char carrier[64]; /* owner id of the holder riders go with; "": none */
    struct rider *waiting; /* boarded, oldest first */
    struct rider *last; /* the newest boarded */
    int refs;
    struct station *next;
};

static pthread_mutex_t stations_mu = PTHREAD_MUTEX_INITIALIZER;
static struct station *stations;

struct handoff_state {
    int granted_by; /* LOCK_GRANT_* of the outermost hold */
    int polls; /* the acquire in progress could not subscribe: it polls */
    struct station *st; /* referred to while acquiring or carrying */
    int carrying;
    struct rider *taken; /* the riders its commit carries, until told */
    char nriders[16];
};

/* The station of l's lock, referred to once more; NULL when out of memory. */
static struct station *station_ref(struct lock *l) {
    pthread_mutex_lock(&stations_mu);
    struct station *st = stations;
    while (st && (st->pool != l->pool || strcmp(st->key, l->key) != 0)) st = st->next;
    if (!st && (st = calloc(1, sizeof(*st)))) {
        st->pool = l->pool;
        snprintf(st->key, sizeof(st->key), "%s", l->key);
        st->next = stations;
        stations = st;
    }
    if (st) st->refs++;
    pthread_mutex_unlock(&stations_mu);
    return st;
}

/* Drops a reference; the last frees the station. Called with stations_mu
 * held. */
static void station_unref_locked(struct station *st) {
    if (--st->refs > 0) return;
    for (struct station **p = &stations; *p; p = &(*p)->next)
        if (*p == st) {
            *p = st->next;
            break;
        }
    free(st);
}

/* Tells r its fate, and wakes it when it must act on it (queue itself,
 * or check): a queued rider sleeps on until its grant. Called with
 * stations_mu held. */
static void rider_tell(struct rider *r, int state) {
    r->state = state;
    if (state != RIDE_QUEUED) pubsub_poke(r->w);
}

/* The carrier is gone: its station's waiting riders queue themselves.
 * Called with stations_mu held. */
static void station_disperse(struct station *st) {
    st->carrier[0] = '\0';
    while (st->waiting) {
        struct rider *r = st->waiting;
        st->waiting = r->next;
        rider_tell(r, RIDE_OWN);
    }
    st->last = NULL;
}

/* l holds the lock: its station's newcomers ride with it. */
static void station_carry(struct lock *l) {
    struct handoff_state *hs = l->priv;
    if (!hs->st) return;
    pthread_mutex_lock(&stations_mu);
    snprintf(hs->st->carrier, sizeof(hs->st->carrier), "%s", l->owner);
    hs->carrying = 1;
    pthread_mutex_unlock(&stations_mu);
}

/* l's hold has ended: its taken riders learn `fate` (RIDE_QUEUED with
 * when, RIDE_OWN, RIDE_UNKNOWN); next, when not "", is the thread of this
 * process it was handed to, which carries from now on; else the waiting
 * riders queue themselves. Drops l's reference. */
static void station_leave(struct lock *l, int fate, int64_t sent_us, int64_t redis_us,
                          const char *next, size_t nextlen) {
    struct handoff_state *hs = l->priv;
    if (!hs->st) return;
    pthread_mutex_lock(&stations_mu);
    struct station *st = hs->st;
    while (hs->taken) {
        struct rider *r = hs->taken;
        hs->taken = r->next;
        r->queued_sent_us = sent_us;
        r->queued_redis_us = redis_us;
        rider_tell(r, fate);
    }
    if (hs->carrying && strcmp(st->carrier, l->owner) == 0) {
        if (nextlen > 0 && nextlen < sizeof(st->carrier)) {
            memcpy(st->carrier, next, nextlen);
            st->carrier[nextlen] = '\0';
        } else {
            station_disperse(st);
        }
    }
    hs->carrying = 0;
    hs->st = NULL;
    station_unref_locked(st);
    pthread_mutex_unlock(&stations_mu);
}

/* What one run of handoff-lock.lua answered. */
struct handoff_answer {
    int granted;
    int64_t pttl_ms; /* the holder's remaining lease; -1: none */
    int64_t redis_us; /* waiting: Redis's clock as the script ran */
    int queued; /* waiting: this script queued the caller (anew, for a check) */
};

static void queue_key(const struct lock *l, char *buf, size_t len) {
    snprintf(buf, len, "%s:queue", l->key);
}

static void channel_prefix(const struct lock *l, char *buf, size_t len) {
    snprintf(
        buf, len,
        strchr(l->key, '{') ? "handoff_lock__channel:%s:" : "handoff_lock__channel:{%s}:", l->key);
}

/* This handle's channel: the prefix and its process part. */
static void channel_of(const struct lock *l, char *buf, size_t len) {
    char prefix[240];
    channel_prefix(l, prefix, sizeof(prefix));
    snprintf(buf, len, "%s%.*s", prefix, (int)strcspn(l->owner, ":"), l->owner);
}

/* Sets what the grant carried: "=value", "-" (no value), or NULL (not
 * known: the holder reads for itself). */
static void carry_set(struct lock *l, const char *v, size_t len) {
    l->carried = 0;
    if (!v) return;
    if (len == 1 && v[0] == '-') {
        l->carried = 2;
    } else if (len > 0 && v[0] == '=' && len - 1 < sizeof(l->carried_value)) {
        memcpy(l->carried_value, v + 1, len - 1);
        l->carried_value[len - 1] = '\0';
        l->carried = 1;
    }
}

/* Reads a reply element as a whole number. */
static int64_t reply_ll(const redisReply *r) {
    if (r->type == REDIS_REPLY_INTEGER) return r->integer;
    if (r->type == REDIS_REPLY_STRING) return strtoll(r->str, NULL, 10);
    return -1;
}

/* One run of handoff-lock.lua in mode (acquire, check, cancel, ensure) on
 * l's connection. Counts an attempt. LOCK_OK (answer in *a), LOCK_BUSY (no
 * connection to be had from the pool in time: nothing was sent), LOCK_ERR. */
static int handoff_run(struct lock *l, const char *mode, struct handoff_answer *a) {
    int rc = lock_try_conn(l);
    if (rc != LOCK_OK) return rc;
    char queue[224], prefix[240], lease[16], wait[24];
    queue_key(l, queue, sizeof(queue));
    channel_prefix(l, prefix, sizeof(prefix));
    snprintf(lease, sizeof(lease), "%d", lock_lease_ms(l));
    int64_t left_ms = (l->deadline_us - mclock_us()) / 1000;
    snprintf(wait, sizeof(wait), "%" PRId64, left_ms > 0 ? left_ms : 0);
    int carries = l->carry_key[0] != '\0';
    const char *hears = ((struct handoff_state *)l->priv)->polls ? "0" : "1";
    const char *argv[] = {l->key, queue, l->carry_key, mode, l->owner, lease, prefix, wait, hears};
    const char *argv2[] = {l->key, queue, mode, l->owner, lease, prefix, wait, hears};
    l->attempts++;
    redisReply *r = carries ? lock_script(l, "handoff-lock", 3, 9, argv)
                            : lock_script(l, "handoff-lock", 2, 8, argv2);
    if (!r) return LOCK_ERR;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
        rc = lock_fail(l, r, "handoff-lock");
        freeReplyObject(r);
        return rc;
    }
    a->granted = r->element[0]->integer == 1;
    if (a->granted) {
        struct handoff_state *hs = l->priv;
        hs->granted_by = strcmp(mode, "acquire") == 0 ? LOCK_GRANT_FREE : LOCK_GRANT_CHECKED;
        const redisReply *v = r->element[1];
        if (v->type == REDIS_REPLY_STRING) {
            char buf[sizeof(l->carried_value) + 1];
            int n = snprintf(buf, sizeof(buf), "=%.*s", (int)v->len, v->str);
            carry_set(l, (size_t)n < sizeof(buf) && v->len + 1 < sizeof(buf) ? buf : NULL,
                      (size_t)n);
        } else {
            carry_set(l, carries ? "-" : NULL, 1);
        }
        a->pttl_ms = reply_ll(r->element[2]);
        /* The lease began PTTL - TTL before this script ran, so no later
         * than that before it was sent. */
        l->sent_us += (a->pttl_ms - lock_lease_ms(l)) * 1000;
    } else {
        a->pttl_ms = reply_ll(r->element[1]);
        a->redis_us = reply_ll(r->element[2]);
        a->queued = r->elements > 3 && reply_ll(r->element[3]) == 1;
    }
    freeReplyObject(r);
    return LOCK_OK;
}

/* A grant message's text, "<grant us> <=value or ->": takes the grant and
 * returns 1, or 0 for a stale one. queued_sent_us and queued_redis_us date
 * the waiter's queueing on this host's clock and on Redis's: a grant made
 * before that queueing was for an earlier place in the queue (a waiter
 * that had to queue again, its carrier's answer lost), whose lease is over
 * or nearly; it is ignored, and the grant of the present place, or the
 * re-check, follows. */
static int take_message(struct lock *l, const char *text, int whole, int64_t queued_sent_us,
                        int64_t queued_redis_us) {
    char *end;
    long long granted_redis_us = strtoll(text, &end, 10);
    if (granted_redis_us < queued_redis_us) return 0;
    ((struct handoff_state *)l->priv)->granted_by = LOCK_GRANT_HANDED;
    int64_t start = queued_sent_us + (granted_redis_us - queued_redis_us);
    int64_t now = mclock_us();
    if (start > now) start = now;
    l->sent_us = start;
    const char *v = *end == ' ' ? end + 1 : NULL;
    carry_set(l, whole == 1 ? v : NULL, v ? strlen(v) : 0);
    return 1;
}

/* The re-entry of a held lock: its lease renewed, dated from the send. */
static int handoff_reenter(struct lock *l) {
    int rc = lock_try_conn(l);
    if (rc != LOCK_OK) return rc;
    char queue[224], prefix[240], lease[16];
    queue_key(l, queue, sizeof(queue));
    channel_prefix(l, prefix, sizeof(prefix));
    snprintf(lease, sizeof(lease), "%d", lock_lease_ms(l));
    const char *argv[] = {l->key, queue, "renew", l->owner, lease, prefix};
    l->attempts++;
    redisReply *r = lock_script(l, "handoff-lock", 2, 6, argv);
    if (!r) return LOCK_ERR;
    if (r->type != REDIS_REPLY_INTEGER)
        rc = lock_fail(l, r, "handoff-lock");
    else if (r->integer == 1)
        rc = LOCK_OK;
    else {
        snprintf(l->errstr, sizeof(l->errstr), "the lock is no longer this holder's");
        rc = LOCK_BUSY;
    }
    freeReplyObject(r);
    return rc;
}

/* Boards l's station as r when a thread of this process holds the lock.
 * 1 when it rides. */
static int board(struct lock *l, struct rider *r) {
    struct handoff_state *hs = l->priv;
    if (!hs->st) return 0;
    pthread_mutex_lock(&stations_mu);
    int riding = hs->st->carrier[0] != '\0';
    if (riding) {
        r->state = RIDE_WAITING;
        r->next = NULL;
        if (hs->st->last)
            hs->st->last->next = r;
        else
            hs->st->waiting = r;
        hs->st->last = r;
    }
    pthread_mutex_unlock(&stations_mu);
    return riding;
}

/* One acquire of a handoff lock in progress: a waiter that may ride a
 * carrier of its own process, then sends its own scripts, then waits
 * queued for its grant. Each step below reads and writes it, and answers
 * 1 when the acquire is over (with rc its outcome). */
struct acquiring {
    struct lock *l;
    struct handoff_state *hs;
    struct pubsub_waiter w;
    int subscribed; /* registered with the subscriber: grants wake it */
    struct rider me;
    int riding; /* boarded its process's station, not queued by it yet */
    int64_t leave_at; /* a rider not taken by then queues itself */
    const char *mode; /* the script to send next, or NULL */
    struct handoff_answer a;
    int rc, queued, slept;
    int64_t queued_sent_us, queued_redis_us; /* when its place in the queue was taken */
    char text[PUBSUB_TEXT_MAX];
};

/* What became of the ride (its state in *state). Its carrier says so only
 * when the rider must act (queue itself, or check): queued, it sleeps on
 * until its grant, or until it would leave. */
static int acquiring_ride(struct acquiring *x, int64_t now, int *state) {
    struct lock *l = x->l;
    pthread_mutex_lock(&stations_mu);
    *state = x->me.state;
    if (*state == RIDE_WAITING && (now >= x->leave_at || now >= l->deadline_us)) {
        struct rider *prev = NULL;
        for (struct rider **p = &x->hs->st->waiting; *p; prev = *p, p = &(*p)->next)
            if (*p == &x->me) {
                *p = x->me.next;
                if (x->hs->st->last == &x->me) x->hs->st->last = prev;
                break;
            }
        *state = x->me.state = RIDE_OWN;
    }
    x->queued_sent_us = x->me.queued_sent_us;
    x->queued_redis_us = x->me.queued_redis_us;
    pthread_mutex_unlock(&stations_mu);
    if (*state == RIDE_QUEUED) {
        x->riding = 0;
        x->queued = 1;
        l->attempts++; /* its carrier's commit queued it */
    } else if (*state == RIDE_OWN || *state == RIDE_UNKNOWN) {
        x->riding = 0;
        if (now >= l->deadline_us && *state == RIDE_OWN) {
            x->rc = LOCK_BUSY; /* never queued */
            return 1;
        }
        x->mode = *state == RIDE_OWN ? "acquire" : "ensure";
    }
    return 0;
}

/* Sends x->mode's script (acquire or ensure): granted, or queued. */
static int acquiring_send(struct acquiring *x) {
    struct lock *l = x->l;
    while ((x->rc = handoff_run(l, x->mode, &x->a)) == LOCK_BUSY) /* the pool was busy */
        if (lock_backoff(l) < 0) break;
    x->mode = NULL;
    if (x->rc != LOCK_OK || x->a.granted) return 1;
    x->queued = 1;
    x->queued_sent_us = l->sent_us;
    x->queued_redis_us = x->a.redis_us;
    x->slept = 0;
    return 0;
}

/* Queued: a grant message ends the wait; so does the deadline, after a
 * cancel (whose answer may be a grant); a wake-up without a grant sends a
 * check. */
static int acquiring_queued(struct acquiring *x, int64_t now) {
    struct lock *l = x->l;
    int whole = x->subscribed ? pubsub_take_text(&x->w, x->text, sizeof(x->text)) : 0;
    if (whole && take_message(l, x->text, whole, x->queued_sent_us, x->queued_redis_us)) return 1;
    if (now >= l->deadline_us) {
        x->rc = handoff_run(l, "cancel", &x->a);
        if (x->rc == LOCK_OK)
            x->rc = x->a.granted ? LOCK_OK : LOCK_BUSY;
        else
            x->rc = LOCK_ERR; /* not known to have left the queue */
        return 1;
    }
    if (!x->slept) return 0;
    /* Woken without a grant: the holder's lease is over, or the subscriber
     * reconnected (a grant may have been missed), or a second passed. One
     * script says, and grants the first waiter if the lock has gone
     * without a grant; a waiter no longer in the queue (its entry lost, or
     * passed over) is queued anew there, from then on. */
    x->rc = handoff_run(l, "check", &x->a);
    if (x->rc == LOCK_BUSY) {
        x->rc = LOCK_OK; /* no connection now: wait on */
    } else if (x->rc != LOCK_OK || x->a.granted) {
        return 1;
    } else if (x->a.queued) {
        x->queued_sent_us = l->sent_us;
        x->queued_redis_us = x->a.redis_us;
    }
    return 0;
}

/* Waits, holding no connection, until the next thing to look at: the
 * ride's end, the holder's lease end, a second, or the deadline. */
static void acquiring_wait(struct acquiring *x, int64_t now, int state) {
    struct lock *l = x->l;
    lock_park(l);
    int64_t until;
    if (x->riding)
        until = state == RIDE_WAITING
                    ? (x->leave_at < l->deadline_us ? x->leave_at : l->deadline_us)
                    : now + 100000; /* taken: its commit answers soon */
    else
        until = now + (x->a.pttl_ms > 0 && x->a.pttl_ms + 2 < RECHECK_MS ? x->a.pttl_ms + 2
                                                                         : RECHECK_MS) *
                          1000;
    if (until > l->deadline_us) until = l->deadline_us;
    if (x->subscribed) {
        pubsub_wait(&x->w, until);
    } else {
        int64_t ms = (until - now + 999) / 1000;
        mclock_sleep_ms((int)(ms < l->core->spin_sleep_ms ? ms : l->core->spin_sleep_ms));
    }
    x->slept = x->queued;
}

static int handoff_acquire(struct lock *l) {
    if (l->holds > 0) return handoff_reenter(l);
    struct acquiring x = {.l = l, .hs = l->priv, .a = {.pttl_ms = lock_lease_ms(l)}};
    char channel[320], err[128];
    channel_of(l, channel, sizeof(channel));
    /* Registered before anything is sent: a grant that follows at once is
     * not missed. */
    x.subscribed = pubsub_wait_begin_tagged(l->core->pubsub, &x.w, l->pool, channel, l->owner,
                                            l->deadline_us, err, sizeof(err)) == 0;
    x.hs->polls = !x.subscribed; /* its entry says so: no grant passes it over */
    x.hs->st = station_ref(l);
    x.me = (struct rider){.l = l, .w = &x.w};
    x.riding = x.subscribed && board(l, &x.me);
    x.leave_at = mclock_us() + RIDE_MAX_US;
    x.mode = x.riding ? NULL : "acquire";
    for (;;) {
        int64_t now = mclock_us();
        int state = RIDE_QUEUED;
        if (x.riding && acquiring_ride(&x, now, &state)) break;
        if (x.mode && acquiring_send(&x)) break;
        if (x.queued && acquiring_queued(&x, now)) break;
        acquiring_wait(&x, now, state);
    }
    if (x.subscribed) pubsub_wait_end(&x.w);
    /* Still queued in Redis, or not known: the core gives it up there,
     * checked against the owner (abandon), on a fresh connection. */
    if (x.rc == LOCK_ERR) l->unknown = 1;
    if (x.rc == LOCK_OK)
        station_carry(l);
    else
        station_leave(l, RIDE_OWN, 0, 0, NULL, 0);
    return x.rc;
}

static int handoff_release(struct lock *l) {
    if (l->holds > 0) return LOCK_OK; /* an inner hold: the lock stays */
    /* No commit carried the riders: they queue themselves. */
    station_leave(l, RIDE_OWN, 0, 0, NULL, 0);
    char queue[224], prefix[240], lease[16];
    queue_key(l, queue, sizeof(queue));
    channel_prefix(l, prefix, sizeof(prefix));
    snprintf(lease, sizeof(lease), "%d", lock_lease_ms(l));
    const char *argv[] = {l->key, queue, "release", l->owner, lease, prefix};
    lock_release_pause(l);
    redisReply *r = lock_script(l, "handoff-lock", 2, 6, argv);
    if (!r) return LOCK_ERR;
    int rc = r->type != REDIS_REPLY_INTEGER ? lock_fail(l, r, "handoff-lock")
             : r->integer == 1              ? LOCK_OK
                                            : LOCK_LOST;
    freeReplyObject(r);
    return rc;
}

/* renew and abandon, on a link. */
static int handoff_link(struct lock *l, struct lock_link *k, const char *mode) {
    char queue[224], prefix[240], lease[16];
    queue_key(l, queue, sizeof(queue));
    channel_prefix(l, prefix, sizeof(prefix));
    snprintf(lease, sizeof(lease), "%d", lock_lease_ms(l));
    const char *argv[] = {l->key, queue, mode, l->owner, lease, prefix};
    return lock_link_owned(l, k, "handoff-lock", 2, 6, argv);
}

static int handoff_renew(struct lock *l, struct lock_link *k) {
    return handoff_link(l, k, "renew");
}

static int handoff_abandon(struct lock *l, struct lock_link *k) {
    int rc = handoff_link(l, k, "abandon");
    return rc == LOCK_LOST ? LOCK_OK : rc; /* nothing was ours: done */
}

static void handoff_report(const struct lock *l, struct lock_report *r) {
    const struct handoff_state *hs = l->priv;
    r->granted_by = hs->granted_by;
}

static void handoff_handover(const struct lock *l, struct lock_handover *h) {
    queue_key(l, h->queue, sizeof(h->queue));
    channel_prefix(l, h->channel_prefix, sizeof(h->channel_prefix));
}

/* The riders the commit carries: up to RIDERS_MAX waiting ones, each as
 * its wait left, owner id and carried key, then their number. */
static int handoff_release_args(struct lock *l, const char **argv, int max) {
    struct handoff_state *hs = l->priv;
    int n = 0;
    if (hs->st && hs->carrying) {
        int64_t now = mclock_us();
        pthread_mutex_lock(&stations_mu);
        struct rider **p = &hs->st->waiting, **tail = &hs->taken;
        while (*p && n < RIDERS_MAX && 3 * (n + 1) + 1 <= max) {
            struct rider *r = *p;
            int64_t left_ms = (r->l->deadline_us - now) / 1000;
            if (left_ms <= 0) { /* its own deadline: it leaves by itself */
                p = &r->next;
                continue;
            }
            *p = r->next;
            r->next = NULL;
            r->state = RIDE_TAKEN;
            snprintf(r->wait, sizeof(r->wait), "%" PRId64, left_ms);
            *tail = r;
            tail = &r->next;
            argv[3 * n] = r->wait;
            argv[3 * n + 1] = r->l->owner;
            argv[3 * n + 2] = r->l->carry_key;
            n++;
        }
        hs->st->last = NULL; /* what is left: riders past their deadline, few */
        for (struct rider *r = hs->st->waiting; r; r = r->next) hs->st->last = r;
        pthread_mutex_unlock(&stations_mu);
    }
    if (3 * n + 1 > max) return -1;
    snprintf(hs->nriders, sizeof(hs->nriders), "%d", n);
    argv[3 * n] = hs->nriders;
    return 3 * n + 1;
}

/* The commit's answer: "<Redis us>", then " <owner> <us> <=stock>" when
 * it granted the lock to a thread of this process instead of publishing
 * it; or an error (nothing written, no rider queued); or NULL, the holds
 * given up (the core's give_up: nothing known). The riders learn where
 * they stand; the grant is handed over here, as the subscriber would
 * have. */
static void handoff_handed(struct lock *l, const redisReply *answer) {
    if (!answer) { /* given up: its riders may or may not have been queued */
        station_leave(l, RIDE_UNKNOWN, 0, 0, NULL, 0);
        return;
    }
    if (answer->type != REDIS_REPLY_STRING) {
        station_leave(l, RIDE_OWN, 0, 0, NULL, 0);
        return;
    }
    char *end;
    long long redis_us = strtoll(answer->str, &end, 10);
    const char *grant = *end == ' ' ? end + 1 : NULL;
    size_t len = grant ? answer->len - (size_t)(grant - answer->str) : 0;
    station_leave(l, RIDE_QUEUED, l->sent_us, redis_us, grant, grant ? strcspn(grant, " ") : 0);
    if (grant) {
        char channel[320];
        channel_of(l, channel, sizeof(channel)); /* this process's: the grantee's too */
        pubsub_deliver(l->core->pubsub, l->pool, channel, grant, len);
    }
}

const struct lock_type lock_type_handoff = {
    .name = "handoff",
    .family = "redis",
    .flags = LOCK_T_REDIS | LOCK_T_LEASED | LOCK_T_WATCHED | LOCK_T_CHECKED,
    .priv_size = sizeof(struct handoff_state),
    .acquire = handoff_acquire,
    .release = handoff_release,
    .renew = handoff_renew,
    .abandon = handoff_abandon,
    .report = handoff_report,
    .guard = lock_string_guard,
    .handover = handoff_handover,
    .release_args = handoff_release_args,
    .handed = handoff_handed,
};
