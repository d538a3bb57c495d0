/* lab.h -- the lock lab's runs: a bounded load, or a named scenario
 * (scenario.h), fired by the service itself at a target over HTTP, with
 * its progress and its result readable while it runs and after.
 *
 * DESIGN
 * struct lab (opaque) is made once at start-up (lab_create); at shutdown
 * lab_stop stops a run under way and, once no HTTP request can call in any
 * more, lab_free joins every thread it started and frees it. One run at a time: lab_start refuses a second (LAB_BUSY).
 * A run resets the stock at the target (POST /inventory/reset), sends its
 * sales (GET /inventory/sale/<strategy>, with fault parameters and its own
 * wait_ms for a scenario), then reads the target's audit (GET
 * /inventory/audit) and keeps its body in the result. A scenario run also
 * reads the holds its sales left in the history (GET /inventory/history),
 * matched to its sales by order id (or, for an answer without one, by
 * instance and time), and is judged from them, the answers and the audit
 * (scenario_judge): flaw shown, fixed or inconclusive. The reset and the scenario sales carry the admin
 * token when there is one (the instances of a lab share it). It talks to the target through the service's
 * HTTP API only (httpc.h): the lab knows nothing of Redis, and the target
 * may be this instance, another one, or nginx in front of both.
 *
 * Bounds: LAB_CLIENTS_MAX clients, LAB_REQUESTS_MAX requests, and no
 * request is sent more than LAB_SECONDS_MAX seconds after the start (a
 * request in flight then ends within its I/O timeout). The last
 * LAB_RUNS_KEPT runs are kept, oldest dropped first.
 *
 * Thread safe: every call may come from any event loop or worker of the HTTP server. */
#ifndef INVENTORYD_LAB_H
#define INVENTORYD_LAB_H

#include <stddef.h>
#include <stdint.h>
#include "scenario.h"

#define LAB_CLIENTS_MAX 500
#define LAB_REQUESTS_MAX 20000
#define LAB_SECONDS_MAX 60
#define LAB_RUNS_KEPT 32
#define LAB_STOCK_MAX 1000000000LL
#define LAB_AUDIT_MAX 4096 /* bytes of the target's audit kept */
#define LAB_RESULT_FILE_MAX (1024 * 1024)

/* Results of lab calls. */
#define LAB_OK 0
#define LAB_BAD 1 /* the request is malformed or out of bounds (400) */
#define LAB_BUSY 2 /* a run is already going (409) */
#define LAB_NOT_FOUND 3 /* no such run or file (404) */
#define LAB_ERR (-1) /* out of memory, or a thread could not start (500) */

/* How each answer of a load counts, by its JSON "status" word; a request
 * that got no HTTP answer is an error. */
enum lab_outcome {
    LAB_SOLD,
    LAB_SOLD_OUT,
    LAB_LOCK_TIMEOUT,
    LAB_BACKEND,
    LAB_OTHER,
    LAB_ERRORS,
    LAB_OUTCOMES
};

struct lab_options {
    const char *target; /* host:port of the load (lab.target); "" = self */
    const char *self_host; /* how this instance is reached: server.bind */
    int self_port; /* server.port */
    const char *instances; /* lab.instances: "" or host:port[,host:port] */
    const char *results_dir; /* lab.results-dir */
    int ttl_ms; /* lock.ttl-ms: scenario times are in its units */
    int wait_ms; /* lock.wait-ms: reported only; a scenario's sales
                                    carry their own wait_ms */
    int spin_sleep_ms; /* lock.spin-sleep-ms: added to every scenario wait */
    int max_hold_ms; /* faults.max-hold-ms: the bound of a scenario's
                                    fault parameters and waits */
    int history; /* history.enabled: scenarios are judged from it */
    int io_timeout_ms; /* per request of a load */
    const char *admin_token; /* admin.token: "" or NULL = none; else sent as
                                    "Authorization: Bearer" with the run's reset
                                    and its scenario sales, and POST /lab/runs
                                    needs it (http.c) */
};

/* What a run is asked to do (POST /lab/runs). */
struct lab_request {
    char strategy[33];
    int clients; /* 1..LAB_CLIENTS_MAX */
    int requests; /* 1..LAB_REQUESTS_MAX */
    long long stock; /* 0..LAB_STOCK_MAX: the reset before the run */
    char scenario[33]; /* "" = a load; else a scenario's name */
};

/* One sale of a scenario, as it went. */
struct lab_step {
    char label; /* 'A', 'B', 'C' */
    char role; /* 'A' or 'B': which of lab.instances */
    char addr[280]; /* host:port it went to */
    char query[128]; /* its fault parameters and wait_ms */
    int at_ms; /* planned send time after the start */
    int wait_ms; /* the wait_ms it is sent with */
    int64_t sent_us; /* wall-clock µs when sent; 0 = not sent */
    int status; /* HTTP status; 0 = no answer */
    char word[32]; /* the answer's "status" word */
    double took_ms;
    char body[640]; /* the answer, cut to fit */
    /* Read from the answer: */
    long long unit; /* -1: none */
    char order[48]; /* "" when none */
    int port; /* the instance that answered; 0: unknown */
    int waited_ms, hold_ms; /* lock.wait_ms, lock.hold_ms; -1: absent */
    int attempts, depth, renewals;
    int session_ended; /* session_ended (end_session): 1 true, 0 false or absent */
    int64_t session_end_us, session_gone_us; /* session_end_us, session_gone_us; 0: absent */
    /* Read from the history once the sales are over: */
    int has_hold;
    struct scenario_hold hold;
};

/* A run as seen from outside: a copy, consistent at one instant. */
struct lab_run_view {
    int id;
    struct lab_request req;
    const char *state; /* "running", "done", "failed", "stopped" */
    const char *phase; /* "reset", "sales", "audit", "finished" */
    char target[280];
    char error[256]; /* why it failed, or "" */
    int64_t started_us, finished_us; /* wall-clock µs, for the timeline */
    double elapsed_s; /* monotonic, from the first sale to the last answer */
    long counts[LAB_OUTCOMES];
    long done; /* answers and errors so far */
    double sales_per_s, p50_ms, p99_ms, max_ms; /* percentiles once finished */
    char first_error[200]; /* the first transport error seen */
    char first_other[200]; /* the first "other" answer seen */
    int faults_refused; /* a scenario sale was answered 403 faults_disabled */
    int nsteps;
    struct lab_step steps[SCENARIO_STEPS_MAX];
    char audit[LAB_AUDIT_MAX]; /* the target's audit body at the end, or "" */
    struct scenario_verdict verdict; /* a finished scenario's; else SCENARIO_UNJUDGED */
    int others; /* holds in the history that were none of the run's sales */
};

/* What the lab is set to, for GET /lab/runs. */
struct lab_info {
    char target[280];
    char instances[2][280];
    int ninstances;
    int ttl_ms, wait_ms;
    struct scenario_settings scenario; /* what scenario times are sized for */
    int running; /* the id of the run under way, or 0 */
    int has_demo, has_matrix; /* results/demo.csv, results/matrix.csv exist */
    int has_campaign; /* results/campaign.csv exists */
    int has_counterexample; /* results/campaign-counterexample.json exists */
    int token_required; /* POST /lab/runs needs the admin token */
};

struct lab;

/* Makes the lab from o (copied). NULL with errstr set when lab.target or
 * lab.instances cannot be parsed, or out of memory. Starts no thread. */
struct lab *lab_create(const struct lab_options *o, char *errstr, size_t errlen);

/* Asks a run under way to stop: no new request is sent, sleeping sales
 * wake, and lab_start refuses from now on. Does not wait. Accepts NULL. */
void lab_stop(struct lab *lab);

/* Stops as lab_stop, joins every thread the lab started (a request in
 * flight ends within its I/O timeout) and frees the lab. No other lab call
 * may be running or come later. Accepts NULL. */
void lab_free(struct lab *lab);

/* Checks r and starts it. Returns LAB_OK with *id set; LAB_BAD or LAB_BUSY
 * with a sentence in errstr; LAB_ERR when it could not start. */
int lab_start(struct lab *lab, const struct lab_request *r, int *id, char *errstr, size_t errlen);

/* Copies run id into *v. LAB_OK, or LAB_NOT_FOUND. */
int lab_run(struct lab *lab, int id, struct lab_run_view *v);

/* Copies the kept runs, newest first, into v[0..max); returns how many. */
int lab_runs(struct lab *lab, struct lab_run_view *v, int max);

/* The lab's settings and the run under way. */
void lab_get_info(struct lab *lab, struct lab_info *info);

/* Reads results file name ("demo.csv", "matrix.csv", "campaign.csv" or
 * "campaign-counterexample.json"; any other name is LAB_NOT_FOUND) from lab.results-dir into *body (malloc'd, NUL-terminated;
 * the caller frees it) and *len. LAB_OK; LAB_NOT_FOUND with errstr set when
 * the name is not one of those or the file does not exist; LAB_BAD when it
 * is larger than LAB_RESULT_FILE_MAX or unreadable. */
int lab_result_file(struct lab *lab, const char *name, char **body, size_t *len, char *errstr,
                    size_t errlen);

/* The word for an outcome: "sold", "sold_out", "lock_timeout",
 * "backend_unavailable", "other", "errors". */
const char *lab_outcome_word(enum lab_outcome o);

#endif
