/* lab.c -- the lock lab's runs (see lab.h).
 *
 * DESIGN
 * A run is one record (struct run) in a ring of the LAB_RUNS_KEPT newest,
 * and at most one is running (lab->current). It is driven by one
 * coordinator thread (run_main): it resets the stock at the target, starts
 * the run's clients, joins them, for a scenario reads the holds its sales
 * left in the target's history, reads the target's audit, judges a
 * scenario from all that (scenario_judge), and marks the run finished. A load has C client threads, each with its own keep-alive
 * connection (struct httpc), taking request numbers from one shared atomic
 * counter, as tools/loadgen.c does; they wait at a start gate so the load
 * begins at once. A scenario has one thread per sale, each sleeping until
 * its planned time. Nothing is ever retried: a sale sent twice is two
 * sales.
 *
 * Threads and ownership. lab_start joins the previous coordinator (it has
 * finished: one run at a time) before starting the next; lab_stop sets
 * `stop` and wakes every sleeper (no new request goes out), and lab_free
 * joins the coordinator, which joins its clients. So no thread outlives the lab, and at most 1 + LAB_CLIENTS_MAX
 * exist. `mu` guards the ring, each record's state and texts, the start
 * gate and the sleeps (`cond`, on the monotonic clock); a running load's
 * counters are atomics. No I/O is done while `mu` is held.
 *
 * Time: monotonic for the 60 s bound, the schedule and every latency; the
 * wall clock only dates the run and each scenario sale for the timeline,
 * which places them among the history's wall-clock events. */
#include "lab.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cjson/cJSON.h>
#include "addr.h"
#include "alloc.h"
#include "httpc.h"
#include "lock.h"
#include "mclock.h"
#include "strategy.h"

#define CLIENT_STACK (256 * 1024)
#define HISTORY_PAGE 500 /* events per GET /inventory/history */
#define HISTORY_PAGES 20 /* at most this many pages after a scenario */
#define MATCH_EDGE_US                                                                              \
    50000 /* a hold matched by time may start this far
                                    outside its sale's send and answer */

enum run_state { RUN_RUNNING, RUN_DONE, RUN_FAILED, RUN_STOPPED };
enum run_phase { PHASE_RESET, PHASE_SALES, PHASE_AUDIT, PHASE_FINISHED };

static const char *const state_words[] = {"running", "done", "failed", "stopped"};
static const char *const phase_words[] = {"reset", "sales", "audit", "finished"};
static const char *const outcome_words[] = {
    "sold", "sold_out", "lock_timeout", "backend_unavailable", "other", "errors"};

struct run {
    int id;
    struct lab_request req;
    const struct scenario *sc; /* NULL: a load */
    enum run_state state;
    enum run_phase phase;
    char error[256];
    int64_t started_us, finished_us;
    double elapsed_s, p50_ms, p99_ms, max_ms;
    atomic_long counts[LAB_OUTCOMES];
    atomic_long next; /* the next request number of a load */
    double *lat_ms; /* one slot per request; < 0: not sent */
    size_t nlat;
    char first_error[200], first_other[200];
    int faults_refused;
    int go; /* the start gate is open */
    monotime_us t0_us, deadline_us;
    struct lab_step steps[SCENARIO_STEPS_MAX];
    int nsteps;
    char audit[LAB_AUDIT_MAX];
    int history_read, others; /* a scenario's evidence (read_history) */
    int audit_read;
    long long violations, sold_twice;
    struct scenario_verdict verdict;
};

struct lab {
    char results_dir[256];
    char auth[200]; /* "Authorization: Bearer <admin.token>\r\n", or "" */
    int ttl_ms, wait_ms, io_timeout_ms;
    struct scenario_settings set; /* what scenario timelines are sized for */
    struct addr target;
    struct addr role[2]; /* where scenario sales A and B go */
    struct addr inst[2];
    int ninst;

    pthread_mutex_t mu;
    pthread_cond_t cond;
    struct run *runs[LAB_RUNS_KEPT]; /* oldest first */
    int nruns;
    struct run *current; /* the run under way, or NULL */
    pthread_t coordinator;
    int joinable;
    int next_id;
    atomic_int stop;
};

/* One client thread of a run: a load's client, or a scenario's sale. */
struct client {
    struct lab *lab;
    struct run *run;
    int step; /* a scenario's sale, or -1 */
    pthread_t tid;
};

const char *lab_outcome_word(enum lab_outcome o) {
    return o >= 0 && o < LAB_OUTCOMES ? outcome_words[o] : "other";
}

/* ---- answers --------------------------------------------------------------- */

/* The word in "status":"<word>" of a JSON body into out ("" when none). */
static void status_word(const char *body, char *out, size_t len) {
    out[0] = '\0';
    const char *p = body ? strstr(body, "\"status\"") : NULL;
    if (!p) return;
    p += 8;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    if (*p++ != ':') return;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    if (*p++ != '"') return;
    size_t n = strcspn(p, "\"");
    if (p[n] != '"') return;
    snprintf(out, len, "%.*s", (int)n, p);
}

static enum lab_outcome classify(const char *word) {
    for (int o = 0; o < LAB_OTHER; o++)
        if (strcmp(word, outcome_words[o]) == 0) return (enum lab_outcome)o;
    return LAB_OTHER;
}

/* Records one answer (rc from httpc_request) of run r. */
static void count_answer(struct lab *lab, struct run *r, struct httpc *h, int rc,
                         const struct httpc_response *resp, char *word, size_t wordlen) {
    enum lab_outcome o = LAB_ERRORS;
    word[0] = '\0';
    if (rc == 0) {
        status_word(resp->body, word, wordlen);
        o = classify(word);
    }
    atomic_fetch_add(&r->counts[o], 1);
    if (o != LAB_ERRORS && o != LAB_OTHER) return;
    pthread_mutex_lock(&lab->mu);
    if (o == LAB_ERRORS && !r->first_error[0])
        snprintf(r->first_error, sizeof(r->first_error), "%s", httpc_errstr(h));
    if (o == LAB_OTHER && !r->first_other[0])
        snprintf(r->first_other, sizeof(r->first_other), "HTTP %d %.160s", resp->status,
                 resp->body);
    pthread_mutex_unlock(&lab->mu);
}

/* Sleeps until deadline (monotonic) or until the lab stops. Returns 0, or
 * -1 when it stopped. */
static int sleep_until(struct lab *lab, monotime_us deadline) {
    pthread_mutex_lock(&lab->mu);
    while (!atomic_load(&lab->stop) && mclock_us() < deadline)
        mclock_cond_wait_until(&lab->cond, &lab->mu, deadline);
    int stopped = atomic_load(&lab->stop);
    pthread_mutex_unlock(&lab->mu);
    return stopped ? -1 : 0;
}

/* ---- a load's clients ------------------------------------------------------ */

static void *load_client(void *arg) {
    struct client *c = arg;
    struct lab *lab = c->lab;
    struct run *r = c->run;
    char path[64], word[32];
    snprintf(path, sizeof(path), "/inventory/sale/%s", r->req.strategy);
    struct httpc *h = httpc_create(lab->target.host, lab->target.port, lab->io_timeout_ms);

    pthread_mutex_lock(&lab->mu);
    while (!r->go && !atomic_load(&lab->stop)) pthread_cond_wait(&lab->cond, &lab->mu);
    pthread_mutex_unlock(&lab->mu);
    if (!h) {
        atomic_fetch_add(&r->counts[LAB_ERRORS], 1);
        return NULL;
    }
    while (!atomic_load(&lab->stop) && mclock_us() < r->deadline_us) {
        long i = atomic_fetch_add(&r->next, 1);
        if (i >= r->req.requests) break;
        struct httpc_response resp;
        monotime_us t0 = mclock_us();
        int rc = httpc_request(h, "GET", path, NULL, NULL, &resp);
        r->lat_ms[i] = (double)(mclock_us() - t0) / 1000.0;
        count_answer(lab, r, h, rc, &resp, word, sizeof(word));
    }
    httpc_free(h);
    return NULL;
}

/* ---- a scenario's sales ----------------------------------------------------- */

static void step_query(const struct scenario_step *st, int ttl_ms, int wait_ms, char *buf,
                       size_t len) {
    int hold = scenario_ms(st->hold, ttl_ms), delay = scenario_ms(st->release_delay, ttl_ms);
    size_t off = 0;
    buf[0] = '\0';
    if (hold > 0) off += (size_t)snprintf(buf + off, len - off, "hold_ms=%d&", hold);
    if (delay > 0 && off < len)
        off += (size_t)snprintf(buf + off, len - off, "release_delay_ms=%d&", delay);
    if (st->nested > 0 && off < len)
        off += (size_t)snprintf(buf + off, len - off, "nested=%d&", st->nested);
    if (st->end_session && off < len)
        off += (size_t)snprintf(buf + off, len - off, "end_session=1&");
    if (off < len) snprintf(buf + off, len - off, "wait_ms=%d", wait_ms);
}

/* A number of the JSON object o (a dotted path is not needed: one level),
 * or dflt when absent. */
static double json_num(const cJSON *o, const char *key, double dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

/* Reads what a sale's answer says into out: its unit, order, port and lock
 * report. Fields stay at their "absent" values when the body is no JSON. */
static void read_answer(const char *body, struct lab_step *out) {
    cJSON *j = cJSON_Parse(body);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return;
    }
    out->unit = (long long)json_num(j, "unit", -1);
    out->port = (int)json_num(j, "port", 0);
    out->session_ended = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "session_ended"));
    out->session_end_us = (int64_t)json_num(j, "session_end_us", 0);
    out->session_gone_us = (int64_t)json_num(j, "session_gone_us", 0);
    const cJSON *order = cJSON_GetObjectItemCaseSensitive(j, "order");
    if (cJSON_IsString(order)) snprintf(out->order, sizeof(out->order), "%s", order->valuestring);
    const cJSON *lk = cJSON_GetObjectItemCaseSensitive(j, "lock");
    if (cJSON_IsObject(lk)) {
        out->waited_ms = (int)json_num(lk, "wait_ms", -1);
        out->hold_ms = (int)json_num(lk, "hold_ms", -1);
        out->attempts = (int)json_num(lk, "attempts", 0);
        out->depth = (int)json_num(lk, "depth", 0);
        out->renewals = (int)json_num(lk, "renewals", 0);
    }
    cJSON_Delete(j);
}

static void *scenario_sale(void *arg) {
    struct client *c = arg;
    struct lab *lab = c->lab;
    struct run *r = c->run;
    const struct scenario_step *st = &r->sc->steps[c->step];
    struct lab_step *out = &r->steps[c->step]; /* its planned fields are fixed */
    const struct addr *to = &lab->role[st->role];
    int timeout = scenario_length_ms(r->sc, &lab->set) + 10000;

    if (sleep_until(lab, r->t0_us + (monotime_us)out->at_ms * 1000) < 0) return NULL;
    struct httpc *h = httpc_create(to->host, to->port, timeout);
    char path[192], word[32];
    snprintf(path, sizeof(path), "/inventory/sale/%s%s%s", r->req.strategy,
             out->query[0] ? "?" : "", out->query);
    struct httpc_response resp = {0};
    int64_t sent = mclock_wall_us();
    monotime_us t0 = mclock_us();
    int rc = h ? httpc_request(h, "GET", path, lab->auth, NULL, &resp) : -1;
    double took = (double)(mclock_us() - t0) / 1000.0;
    r->lat_ms[c->step] = took;
    if (h)
        count_answer(lab, r, h, rc, &resp, word, sizeof(word));
    else
        atomic_fetch_add(&r->counts[LAB_ERRORS], 1);
    struct lab_step got = {.unit = -1, .waited_ms = -1, .hold_ms = -1};
    if (rc == 0) read_answer(resp.body, &got);

    pthread_mutex_lock(&lab->mu);
    out->sent_us = sent;
    out->took_ms = took;
    out->status = rc == 0 ? resp.status : 0;
    if (rc == 0) {
        status_word(resp.body, out->word, sizeof(out->word));
        snprintf(out->body, sizeof(out->body), "%s", resp.body);
        if (resp.status == 403 && strcmp(out->word, "faults_disabled") == 0) r->faults_refused = 1;
    } else {
        snprintf(out->word, sizeof(out->word), "no_answer");
        snprintf(out->body, sizeof(out->body), "%s", h ? httpc_errstr(h) : "out of memory");
    }
    out->unit = got.unit;
    memcpy(out->order, got.order, sizeof(out->order));
    out->port = got.port;
    out->waited_ms = got.waited_ms;
    out->hold_ms = got.hold_ms;
    out->attempts = got.attempts;
    out->depth = got.depth;
    out->renewals = got.renewals;
    out->session_ended = got.session_ended;
    out->session_end_us = got.session_end_us;
    out->session_gone_us = got.session_gone_us;
    pthread_mutex_unlock(&lab->mu);
    httpc_free(h);
    return NULL;
}

/* ---- the coordinator -------------------------------------------------------- */

static void set_error(struct lab *lab, struct run *r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_error(struct lab *lab, struct run *r, const char *fmt, ...) {
    char buf[sizeof(r->error)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&lab->mu);
    if (!r->error[0]) snprintf(r->error, sizeof(r->error), "%s", buf);
    pthread_mutex_unlock(&lab->mu);
}

static void set_phase(struct lab *lab, struct run *r, enum run_phase p) {
    pthread_mutex_lock(&lab->mu);
    r->phase = p;
    pthread_mutex_unlock(&lab->mu);
}

/* POST /inventory/reset with the run's stock. 0, or -1 with r->error set. */
static int reset_stock(struct lab *lab, struct run *r) {
    char body[64], where[280];
    addr_format(&lab->target, where, sizeof(where));
    snprintf(body, sizeof(body), "{\"stock\":%lld}", r->req.stock);
    struct httpc *h = httpc_create(lab->target.host, lab->target.port, lab->io_timeout_ms);
    struct httpc_response resp;
    int rc = h ? httpc_request(h, "POST", "/inventory/reset", lab->auth, body, &resp) : -1;
    if (rc != 0)
        set_error(lab, r, "the reset at %s failed: %s", where,
                  h ? httpc_errstr(h) : "out of memory");
    else if (resp.status != 200)
        set_error(lab, r, "the reset at %s answered %d: %.160s", where, resp.status, resp.body);
    httpc_free(h);
    return rc == 0 && resp.status == 200 ? 0 : -1;
}

/* GET /inventory/audit into r->audit ("" when it failed). */
static void read_audit(struct lab *lab, struct run *r) {
    struct httpc *h = httpc_create(lab->target.host, lab->target.port, lab->io_timeout_ms);
    struct httpc_response resp;
    int rc = h ? httpc_request(h, "GET", "/inventory/audit", NULL, NULL, &resp) : -1;
    cJSON *j = rc == 0 && resp.status == 200 ? cJSON_Parse(resp.body) : NULL;
    pthread_mutex_lock(&lab->mu);
    if (cJSON_IsObject(j)) {
        r->audit_read = 1;
        r->violations = (long long)json_num(j, "violations", 0);
        r->sold_twice = (long long)json_num(j, "sold_twice", 0);
    }
    if (rc == 0 && resp.status == 200 && resp.body_len < sizeof(r->audit))
        memcpy(r->audit, resp.body, resp.body_len + 1);
    else if (!r->error[0])
        snprintf(r->error, sizeof(r->error), "the audit failed: %.200s",
                 rc != 0 ? (h ? httpc_errstr(h) : "out of memory") : resp.body);
    pthread_mutex_unlock(&lab->mu);
    cJSON_Delete(j);
    httpc_free(h);
}

static int64_t json_us(const cJSON *o, const char *key) { return (int64_t)json_num(o, key, 0); }

/* The step of r that history event e is the hold of, or -1: the one whose
 * answer named its order; else, for an answer without one (a refused
 * write, a lost lock), the first unmatched step answered by the same
 * instance whose send and answer bracket the grant. mu held. */
static int match_step(const struct run *r, const cJSON *e) {
    const cJSON *order = cJSON_GetObjectItemCaseSensitive(e, "order");
    int port = (int)json_num(e, "port", 0);
    int64_t granted = json_us(e, "granted_us");
    for (int i = 0; i < r->nsteps; i++)
        if (cJSON_IsString(order) && r->steps[i].order[0] &&
            strcmp(r->steps[i].order, order->valuestring) == 0)
            return r->steps[i].has_hold ? -1 : i;
    for (int i = 0; i < r->nsteps; i++) {
        const struct lab_step *st = &r->steps[i];
        if (st->has_hold || st->order[0] || !st->sent_us || st->port != port) continue;
        int64_t end = st->sent_us + (int64_t)(st->took_ms * 1000);
        if (granted >= st->sent_us - MATCH_EDGE_US && granted <= end + MATCH_EDGE_US) return i;
    }
    return -1;
}

/* Fills the hold of step st from history event e. */
static void hold_of(const cJSON *e, struct lab_step *st) {
    struct scenario_hold *h = &st->hold;
    memset(h, 0, sizeof(*h));
    h->granted_us = json_us(e, "granted_us");
    h->released_us = json_us(e, "released_us");
    h->lease_us = json_us(e, "lease_us");
    h->written_us = json_us(e, "written_us");
    const cJSON *owned = cJSON_GetObjectItemCaseSensitive(e, "owned");
    h->owned = cJSON_IsBool(owned) ? cJSON_IsTrue(owned) : -1;
    h->late = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "late"));
    h->unit = (long long)json_num(e, "unit", -1);
    const cJSON *out = cJSON_GetObjectItemCaseSensitive(e, "outcome");
    snprintf(h->outcome, sizeof(h->outcome), "%s", cJSON_IsString(out) ? out->valuestring : "");
    const cJSON *owner = cJSON_GetObjectItemCaseSensitive(e, "owner");
    snprintf(h->owner, sizeof(h->owner), "%s", cJSON_IsString(owner) ? owner->valuestring : "");
    st->has_hold = 1;
}

/* After a scenario's sales: reads the history the run's reset started
 * (GET /inventory/history, page by page) and gives each sale its hold;
 * the holds no sale claims are counted in r->others. r->history_read stays
 * 0 when a page could not be read. */
static void read_history(struct lab *lab, struct run *r) {
    struct httpc *h = httpc_create(lab->target.host, lab->target.port, lab->io_timeout_ms);
    char path[160], since[64] = "0";
    int ok = h != NULL;
    for (int page = 0; ok && page < HISTORY_PAGES; page++) {
        struct httpc_response resp;
        snprintf(path, sizeof(path), "/inventory/history?limit=%d&since=%s", HISTORY_PAGE, since);
        cJSON *j = httpc_request(h, "GET", path, NULL, NULL, &resp) == 0 && resp.status == 200
                       ? cJSON_Parse(resp.body)
                       : NULL;
        const cJSON *events = cJSON_GetObjectItemCaseSensitive(j, "events");
        const cJSON *next = cJSON_GetObjectItemCaseSensitive(j, "next");
        if (!cJSON_IsArray(events)) {
            ok = 0;
            cJSON_Delete(j);
            break;
        }
        const cJSON *e;
        pthread_mutex_lock(&lab->mu);
        cJSON_ArrayForEach(e, events) {
            int i = match_step(r, e);
            if (i >= 0)
                hold_of(e, &r->steps[i]);
            else
                r->others++;
        }
        pthread_mutex_unlock(&lab->mu);
        int more = cJSON_GetArraySize(events) == HISTORY_PAGE && cJSON_IsString(next);
        if (more) snprintf(since, sizeof(since), "%s", next->valuestring);
        cJSON_Delete(j);
        if (!more) break;
    }
    if (!ok)
        set_error(lab, r, "the history at the target could not be read: %s",
                  h ? httpc_errstr(h) : "out of memory");
    pthread_mutex_lock(&lab->mu);
    r->history_read = ok;
    pthread_mutex_unlock(&lab->mu);
    httpc_free(h);
}

/* Judges a scenario run from its evidence into r->verdict. mu held. */
static void judge_run(const struct lab *lab, struct run *r) {
    struct scenario_evidence ev = {.strategy = r->req.strategy,
                                   .ttl_ms = lab->ttl_ms,
                                   .nsales = r->nsteps,
                                   .history = r->history_read,
                                   .others = r->others,
                                   .audit = r->audit_read,
                                   .violations = r->violations,
                                   .sold_twice = r->sold_twice};
    for (int i = 0; i < r->nsteps; i++) {
        const struct lab_step *st = &r->steps[i];
        struct scenario_sale *s = &ev.sale[i];
        s->label = st->label;
        s->sent = st->sent_us != 0;
        s->sent_us = st->sent_us;
        s->took_ms = st->took_ms;
        s->status = st->status;
        snprintf(s->word, sizeof(s->word), "%s", st->word);
        s->unit = st->unit;
        s->wait_ms = st->wait_ms;
        s->waited_ms = st->waited_ms;
        s->hold_ms = st->hold_ms;
        s->attempts = st->attempts;
        s->depth = st->depth;
        s->renewals = st->renewals;
        s->nested = r->sc->steps[i].nested;
        s->session_ended = st->session_ended;
        s->session_end_us = st->session_end_us;
        s->session_gone_us = st->session_gone_us;
        s->has_hold = st->has_hold;
        s->hold = st->hold;
    }
    scenario_judge(r->sc, &ev, &r->verdict);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile p of sorted[0..n). */
static double percentile(const double *sorted, size_t n, double p) {
    if (n == 0) return 0;
    size_t rank = (size_t)(p / 100.0 * (double)n + 0.999999);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return sorted[rank - 1];
}

/* Starts n clients of r (fn, each with its own struct client); returns how
 * many started. */
static int start_clients(struct lab *lab, struct run *r, struct client *cl, int n,
                         void *(*fn)(void *)) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, CLIENT_STACK);
    int started = 0;
    for (; started < n; started++) {
        cl[started] = (struct client){lab, r, fn == scenario_sale ? started : -1, 0};
        if (pthread_create(&cl[started].tid, &attr, fn, &cl[started]) != 0) break;
    }
    pthread_attr_destroy(&attr);
    return started;
}

static void run_sales(struct lab *lab, struct run *r) {
    int n = r->sc ? r->sc->nsteps : r->req.clients;
    struct client *cl = calloc((size_t)n, sizeof(*cl));
    if (!cl) {
        set_error(lab, r, "out of memory");
        return;
    }
    pthread_mutex_lock(&lab->mu);
    r->t0_us = mclock_us();
    r->deadline_us = r->t0_us + (monotime_us)LAB_SECONDS_MAX * 1000000;
    pthread_mutex_unlock(&lab->mu);
    int started = start_clients(lab, r, cl, n, r->sc ? scenario_sale : load_client);
    if (started < n) set_error(lab, r, "only %d of %d clients could start (threads)", started, n);
    pthread_mutex_lock(&lab->mu);
    r->go = 1;
    pthread_cond_broadcast(&lab->cond);
    pthread_mutex_unlock(&lab->mu);
    for (int i = 0; i < started; i++) pthread_join(cl[i].tid, NULL);
    free(cl);
    pthread_mutex_lock(&lab->mu);
    double elapsed = (double)(mclock_us() - r->t0_us) / 1e6;
    pthread_mutex_unlock(&lab->mu);

    size_t k = 0;
    for (size_t i = 0; i < r->nlat; i++)
        if (r->lat_ms[i] >= 0) r->lat_ms[k++] = r->lat_ms[i];
    qsort(r->lat_ms, k, sizeof(double), cmp_double);
    pthread_mutex_lock(&lab->mu);
    r->elapsed_s = elapsed;
    r->p50_ms = percentile(r->lat_ms, k, 50);
    r->p99_ms = percentile(r->lat_ms, k, 99);
    r->max_ms = k ? r->lat_ms[k - 1] : 0;
    pthread_mutex_unlock(&lab->mu);
}

static void *run_main(void *arg) {
    struct lab *lab = arg;
    pthread_mutex_lock(&lab->mu);
    struct run *r = lab->current;
    pthread_mutex_unlock(&lab->mu);

    int ok = reset_stock(lab, r) == 0;
    if (ok && !atomic_load(&lab->stop)) {
        set_phase(lab, r, PHASE_SALES);
        run_sales(lab, r);
        if (!atomic_load(&lab->stop)) { /* at shutdown the target may be gone */
            set_phase(lab, r, PHASE_AUDIT);
            if (r->sc) read_history(lab, r);
            read_audit(lab, r);
        }
    }
    pthread_mutex_lock(&lab->mu);
    if (ok && r->sc && !atomic_load(&lab->stop)) judge_run(lab, r);
    free(r->lat_ms);
    r->lat_ms = NULL;
    r->nlat = 0;
    r->phase = PHASE_FINISHED;
    r->state = !ok ? RUN_FAILED : atomic_load(&lab->stop) ? RUN_STOPPED : RUN_DONE;
    r->finished_us = mclock_wall_us();
    lab->current = NULL;
    pthread_mutex_unlock(&lab->mu);
    return NULL;
}

/* ---- the API ---------------------------------------------------------------- */

struct lab *lab_create(const struct lab_options *o, char *errstr, size_t errlen) {
    struct lab *lab = alloc_zeroed(sizeof(*lab), errstr, errlen);
    if (!lab) return NULL;
    char why[160];
    if (o->target && o->target[0]) {
        if (addr_list_parse(o->target, &lab->target, 1, why, sizeof(why)) != 1) {
            snprintf(errstr, errlen, "lab.target: %s", why);
            free(lab);
            return NULL;
        }
    } else {
        /* This instance: through loopback when it listens on every address. */
        const char *host = o->self_host && o->self_host[0] && strcmp(o->self_host, "0.0.0.0") != 0
                               ? o->self_host
                               : "127.0.0.1";
        snprintf(lab->target.host, sizeof(lab->target.host), "%s", host);
        lab->target.port = o->self_port;
    }
    if (o->instances && o->instances[0]) {
        lab->ninst = addr_list_parse(o->instances, lab->inst, 2, why, sizeof(why));
        if (lab->ninst < 1) {
            snprintf(errstr, errlen, "lab.instances: %s", why);
            free(lab);
            return NULL;
        }
    }
    lab->role[0] = lab->ninst >= 1 ? lab->inst[0] : lab->target;
    lab->role[1] = lab->ninst >= 2 ? lab->inst[1] : lab->role[0];
    snprintf(lab->results_dir, sizeof(lab->results_dir), "%s",
             o->results_dir && o->results_dir[0] ? o->results_dir : "results");
    lab->ttl_ms = o->ttl_ms > 0 ? o->ttl_ms : 10000;
    lab->wait_ms = o->wait_ms >= 0 ? o->wait_ms : 5000;
    lab->set =
        (struct scenario_settings){.ttl_ms = lab->ttl_ms,
                                   .spin_sleep_ms = o->spin_sleep_ms > 0 ? o->spin_sleep_ms : 0,
                                   .max_hold_ms = o->max_hold_ms > 0 ? o->max_hold_ms : 0,
                                   .seconds_max = LAB_SECONDS_MAX,
                                   .history = o->history};
    lab->io_timeout_ms = o->io_timeout_ms > 0 ? o->io_timeout_ms : 30000;
    if (o->admin_token && o->admin_token[0] &&
        (size_t)snprintf(lab->auth, sizeof(lab->auth), "Authorization: Bearer %s\r\n",
                         o->admin_token) >= sizeof(lab->auth)) {
        snprintf(errstr, errlen, "admin.token is too long for the lab's requests");
        free(lab);
        return NULL;
    }
    pthread_mutex_init(&lab->mu, NULL);
    mclock_cond_init(&lab->cond);
    lab->next_id = 1;
    return lab;
}

static void run_free(struct run *r) {
    if (!r) return;
    free(r->lat_ms);
    free(r);
}

void lab_stop(struct lab *lab) {
    if (!lab) return;
    pthread_mutex_lock(&lab->mu);
    atomic_store(&lab->stop, 1);
    pthread_cond_broadcast(&lab->cond);
    pthread_mutex_unlock(&lab->mu);
}

void lab_free(struct lab *lab) {
    if (!lab) return;
    lab_stop(lab);
    pthread_mutex_lock(&lab->mu);
    int joinable = lab->joinable;
    lab->joinable = 0;
    pthread_mutex_unlock(&lab->mu);
    if (joinable) pthread_join(lab->coordinator, NULL);
    for (int i = 0; i < lab->nruns; i++) run_free(lab->runs[i]);
    pthread_cond_destroy(&lab->cond);
    pthread_mutex_destroy(&lab->mu);
    free(lab);
}

/* Checks r; 0, or -1 with a sentence in errstr. */
static int check_request(const struct lab *lab, const struct lab_request *r,
                         const struct scenario **sc, char *errstr, size_t errlen) {
    char names[512];
    *sc = NULL;
    if (!strategy_find(r->strategy)) {
        strategy_names(names, sizeof(names));
        snprintf(errstr, errlen, "unknown strategy '%.32s'; known: %s", r->strategy, names);
        return -1;
    }
    if (r->stock < 0 || r->stock > LAB_STOCK_MAX) {
        snprintf(errstr, errlen, "\"stock\" must be a whole number from 0 to %lld", LAB_STOCK_MAX);
        return -1;
    }
    if (r->scenario[0]) {
        if (!(*sc = scenario_find(r->scenario))) {
            size_t off = 0;
            names[0] = '\0';
            for (int i = 0; scenarios[i].name && off < sizeof(names); i++)
                off += (size_t)snprintf(names + off, sizeof(names) - off, "%s%s", i ? ", " : "",
                                        scenarios[i].name);
            snprintf(errstr, errlen, "unknown scenario '%.32s'; known: %s", r->scenario, names);
            return -1;
        }
        if (scenario_ends_session(*sc) &&
            !lock_type_ends_session(strategy_find(r->strategy)->lock)) {
            strategy_session_names(names, sizeof(names));
            snprintf(errstr, errlen,
                     "scenario %s ends the store session that holds A's lock (end_session), and "
                     "%.32s keeps no such session: run it with %s",
                     (*sc)->name, r->strategy, names);
            return -1;
        }
        return scenario_check(*sc, &lab->set, errstr, errlen);
    }
    if (r->clients < 1 || r->clients > LAB_CLIENTS_MAX) {
        snprintf(errstr, errlen, "\"clients\" must be a whole number from 1 to %d",
                 LAB_CLIENTS_MAX);
        return -1;
    }
    if (r->requests < 1 || r->requests > LAB_REQUESTS_MAX) {
        snprintf(errstr, errlen, "\"requests\" must be a whole number from 1 to %d",
                 LAB_REQUESTS_MAX);
        return -1;
    }
    return 0;
}

/* A new record for request r (scenario sc or NULL); NULL when out of memory. */
static struct run *run_new(const struct lab *lab, const struct lab_request *r,
                           const struct scenario *sc) {
    struct run *run = calloc(1, sizeof(*run));
    if (!run) return NULL;
    run->req = *r;
    run->sc = sc;
    if (sc) {
        run->req.clients = sc->nsteps;
        run->req.requests = sc->nsteps;
        run->nsteps = sc->nsteps;
        for (int i = 0; i < sc->nsteps; i++) {
            const struct scenario_step *st = &sc->steps[i];
            struct lab_step *s = &run->steps[i];
            s->label = st->label;
            s->role = st->role ? 'B' : 'A';
            addr_format(&lab->role[st->role], s->addr, sizeof(s->addr));
            s->wait_ms = scenario_wait_ms(st, &lab->set);
            step_query(st, lab->ttl_ms, s->wait_ms, s->query, sizeof(s->query));
            s->at_ms = scenario_ms(st->at, lab->ttl_ms);
            s->unit = -1;
            s->waited_ms = s->hold_ms = -1;
        }
    }
    run->nlat = (size_t)run->req.requests;
    run->lat_ms = malloc(run->nlat * sizeof(double));
    if (!run->lat_ms) {
        free(run);
        return NULL;
    }
    for (size_t i = 0; i < run->nlat; i++) run->lat_ms[i] = -1;
    return run;
}

int lab_start(struct lab *lab, const struct lab_request *r, int *id, char *errstr, size_t errlen) {
    const struct scenario *sc;
    if (check_request(lab, r, &sc, errstr, errlen) < 0) return LAB_BAD;
    struct run *run = run_new(lab, r, sc);
    if (!run) {
        snprintf(errstr, errlen, "out of memory");
        return LAB_ERR;
    }

    pthread_mutex_lock(&lab->mu);
    if (lab->current || atomic_load(&lab->stop)) {
        int busy = lab->current ? lab->current->id : 0;
        pthread_mutex_unlock(&lab->mu);
        run_free(run);
        if (!busy) {
            snprintf(errstr, errlen, "the lab is shutting down");
            return LAB_ERR;
        }
        snprintf(errstr, errlen,
                 "run %d is still going; one run at a time: wait for it "
                 "(GET /lab/runs/%d)",
                 busy, busy);
        return LAB_BUSY;
    }
    /* The previous coordinator has finished (current is NULL): join it. */
    int joinable = lab->joinable;
    lab->joinable = 0;
    pthread_t prev = lab->coordinator;
    pthread_mutex_unlock(&lab->mu);
    if (joinable) pthread_join(prev, NULL);

    pthread_mutex_lock(&lab->mu);
    if (lab->current) { /* another lab_start got in while we joined */
        int busy = lab->current->id;
        pthread_mutex_unlock(&lab->mu);
        run_free(run);
        snprintf(errstr, errlen,
                 "run %d is still going; one run at a time: wait for it "
                 "(GET /lab/runs/%d)",
                 busy, busy);
        return LAB_BUSY;
    }
    run->id = lab->next_id++;
    run->started_us = mclock_wall_us();
    if (lab->nruns == LAB_RUNS_KEPT) {
        run_free(lab->runs[0]);
        memmove(lab->runs, lab->runs + 1, sizeof(lab->runs[0]) * (LAB_RUNS_KEPT - 1));
        lab->nruns--;
    }
    lab->runs[lab->nruns++] = run;
    lab->current = run;
    int rc = pthread_create(&lab->coordinator, NULL, run_main, lab);
    if (rc != 0) {
        run->state = RUN_FAILED;
        run->phase = PHASE_FINISHED;
        snprintf(run->error, sizeof(run->error), "cannot start the run's thread: %s", strerror(rc));
        lab->current = NULL;
        pthread_mutex_unlock(&lab->mu);
        snprintf(errstr, errlen, "cannot start the run's thread: %s", strerror(rc));
        return LAB_ERR;
    }
    lab->joinable = 1;
    *id = run->id;
    pthread_mutex_unlock(&lab->mu);
    return LAB_OK;
}

/* Copies r into v; mu held. */
static void view_of(const struct lab *lab, const struct run *r, struct lab_run_view *v) {
    memset(v, 0, sizeof(*v));
    v->id = r->id;
    v->req = r->req;
    v->state = state_words[r->state];
    v->phase = phase_words[r->phase];
    addr_format(&lab->target, v->target, sizeof(v->target));
    snprintf(v->error, sizeof(v->error), "%s", r->error);
    v->started_us = r->started_us;
    v->finished_us = r->finished_us;
    for (int o = 0; o < LAB_OUTCOMES; o++) {
        v->counts[o] = atomic_load(&r->counts[o]);
        v->done += v->counts[o];
    }
    v->elapsed_s = r->state == RUN_RUNNING && r->phase == PHASE_SALES
                       ? (double)(mclock_us() - r->t0_us) / 1e6
                       : r->elapsed_s;
    v->sales_per_s = v->elapsed_s > 0 ? (double)v->counts[LAB_SOLD] / v->elapsed_s : 0;
    v->p50_ms = r->p50_ms;
    v->p99_ms = r->p99_ms;
    v->max_ms = r->max_ms;
    snprintf(v->first_error, sizeof(v->first_error), "%s", r->first_error);
    snprintf(v->first_other, sizeof(v->first_other), "%s", r->first_other);
    v->faults_refused = r->faults_refused;
    v->nsteps = r->nsteps;
    memcpy(v->steps, r->steps, sizeof(v->steps));
    memcpy(v->audit, r->audit, sizeof(v->audit));
    v->verdict = r->verdict;
    v->others = r->others;
}

int lab_run(struct lab *lab, int id, struct lab_run_view *v) {
    int rc = LAB_NOT_FOUND;
    pthread_mutex_lock(&lab->mu);
    for (int i = 0; i < lab->nruns; i++) {
        if (lab->runs[i]->id == id) {
            view_of(lab, lab->runs[i], v);
            rc = LAB_OK;
            break;
        }
    }
    pthread_mutex_unlock(&lab->mu);
    return rc;
}

int lab_runs(struct lab *lab, struct lab_run_view *v, int max) {
    int n = 0;
    pthread_mutex_lock(&lab->mu);
    for (int i = lab->nruns - 1; i >= 0 && n < max; i--) view_of(lab, lab->runs[i], &v[n++]);
    pthread_mutex_unlock(&lab->mu);
    return n;
}

void lab_get_info(struct lab *lab, struct lab_info *info) {
    memset(info, 0, sizeof(*info));
    addr_format(&lab->target, info->target, sizeof(info->target));
    info->ninstances = lab->ninst;
    for (int i = 0; i < lab->ninst; i++)
        addr_format(&lab->inst[i], info->instances[i], sizeof(info->instances[i]));
    info->ttl_ms = lab->ttl_ms;
    info->wait_ms = lab->wait_ms;
    info->scenario = lab->set;
    info->token_required = lab->auth[0] != '\0';
    pthread_mutex_lock(&lab->mu);
    info->running = lab->current ? lab->current->id : 0;
    pthread_mutex_unlock(&lab->mu);
    char path[512];
    struct stat st;
    snprintf(path, sizeof(path), "%s/demo.csv", lab->results_dir);
    info->has_demo = stat(path, &st) == 0 && S_ISREG(st.st_mode);
    snprintf(path, sizeof(path), "%s/matrix.csv", lab->results_dir);
    info->has_matrix = stat(path, &st) == 0 && S_ISREG(st.st_mode);
    snprintf(path, sizeof(path), "%s/campaign.csv", lab->results_dir);
    info->has_campaign = stat(path, &st) == 0 && S_ISREG(st.st_mode);
    snprintf(path, sizeof(path), "%s/campaign-counterexample.json", lab->results_dir);
    info->has_counterexample = stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The results files served, each with the script that writes it. */
static const struct {
    const char *name, *script;
} result_files[] = {
    {"demo.csv", "demo"},
    {"matrix.csv", "matrix"},
    {"campaign.csv", "campaign"},
    {"campaign-counterexample.json", "campaign"},
};

int lab_result_file(struct lab *lab, const char *name, char **body, size_t *len, char *errstr,
                    size_t errlen) {
    *body = NULL;
    *len = 0;
    const char *script = NULL;
    for (size_t i = 0; i < sizeof(result_files) / sizeof(result_files[0]); i++)
        if (strcmp(name, result_files[i].name) == 0) script = result_files[i].script;
    if (!script) {
        snprintf(errstr, errlen,
                 "only demo.csv, matrix.csv, campaign.csv and "
                 "campaign-counterexample.json are served here");
        return LAB_NOT_FOUND;
    }
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", lab->results_dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(errstr, errlen, "%s: %s (scripts/%s.sh writes it)", path, strerror(errno), script);
        return errno == ENOENT ? LAB_NOT_FOUND : LAB_BAD;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > LAB_RESULT_FILE_MAX) {
        snprintf(errstr, errlen, "%s is not a regular file of at most %d bytes", path,
                 LAB_RESULT_FILE_MAX);
        fclose(f);
        return LAB_BAD;
    }
    char *b = malloc((size_t)st.st_size + 1);
    size_t n = b ? fread(b, 1, (size_t)st.st_size, f) : 0;
    int bad = !b || ferror(f);
    fclose(f);
    if (bad) {
        free(b);
        snprintf(errstr, errlen, "%s: cannot read it", path);
        return LAB_BAD;
    }
    b[n] = '\0';
    *body = b;
    *len = n;
    return LAB_OK;
}
