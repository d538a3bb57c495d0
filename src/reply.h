/* reply.h -- the bodies the service answers with: JSON by default, or the
 * demo's one-line text. Knows the shapes of answers, not HTTP transport.
 * Every function returns a heap string (free with free()) or NULL when out of
 * memory. Thread safe. */
#ifndef INVENTORYD_REPLY_H
#define INVENTORYD_REPLY_H

#include "inventory.h"

/* The most overlapping pairs an answer lists (it counts every one). */
#define REPLY_OVERLAPS_MAX 1000

/* The HTTP status for a sale result: 200 sold/sold_out, 503 lock_timeout
 * and backend_unavailable, 409 stale_token, lock_lost, stock_changed and
 * bad_stock, 403 strategy_not_allowed. */
int reply_sale_http_status(int inv_status);

/* The status word for a sale result: "sold", "sold_out", "lock_timeout",
 * "backend_unavailable", "stale_token", "lock_lost", "stock_changed",
 * "bad_stock", "strategy_not_allowed". */
const char *reply_sale_status_word(int inv_status);

/* A sale answer. JSON:
 * {"status":"sold","remaining":N,"unit":U,"order":ID,"strategy":S,"port":P,
 *  "lock":{"attempts":A,"wait_ms":W}} (error results add "error"; a lock
 *  acquired with lock.sync-replicas > 0 adds "replicas":{"wanted":N,"acked":M}
 *  inside "lock").
 * Text (the demo's): "成功卖出一个商品,库存剩余: N\t服务端口号:P",
 * "商品卖完了", or the error sentence. */
char *reply_sale(const struct sale_result *r, const char *strategy, int port, int text);

/* The same JSON answer, always built as a cJSON tree; and written
 * directly, as reply_sale does for the common answers (sold and sold_out
 * with the usual lock fields): NULL when the answer is not one of those.
 * Where the direct one answers, the two match byte for byte (check_reply
 * compares them). */
char *reply_sale_tree(const struct sale_result *r, const char *strategy, int port);
char *reply_sale_direct(const struct sale_result *r, const char *strategy, int port);

/* An error body: {"status":word,"error":sentence} or, as text, the sentence. */
char *reply_error(const char *word, const char *sentence, int text);

/* GET /readyz: {"status":"ready","ready":true,"port":P}, or with reason
 * not NULL {"status":"not_ready","ready":false,"reason":R,"port":P}; as
 * text, the reason or "ready: a sale can succeed". */
char *reply_ready(const char *reason, int port, int text);

/* The 404 for an unknown strategy: names it and lists the known ones. */
char *reply_unknown_strategy(const char *name, int text);

/* {"stock":N,"port":P} or "库存: N\t服务端口号:P". */
char *reply_stock(long long stock, int port, int text);

/* The audit as JSON (text: one "key: value" per line), with "families"
 * and "warnings" (a sentence when the stock was sold under more than one
 * lock family since its reset). */
char *reply_audit(const struct audit *a, int text);

/* The history events ev[before..n), oldest first, as
 * {"events":[...],"next":ID,"overlaps":[...],"overlaps_found":N} (text: one
 * line each). Each event carries inside_until_us, and the overlaps are the
 * pairs of holds inside at once (hold.h) of which at least one is listed,
 * with ev[0..before), the events recorded before them that may still have
 * been inside then, as the others' partners; the first REPLY_OVERLAPS_MAX
 * are listed, all are counted. */
char *reply_history(const struct history_event *ev, int before, int n, int text);

/* Every strategy with its description and flaw, and the default one;
 * unavailable[i], when not NULL, says why strategies[i] cannot be used here
 * ("mysql.host is not configured"): JSON "available": false and
 * "unavailable", text "(unavailable: ...)". */
char *reply_strategies(const char *default_strategy, const char *const *unavailable, int text);

struct lab_run_view;
struct lab_info;

/* A lab run (lab.h), JSON only: its request, state and phase, the counts by
 * outcome, elapsed_s, sales_per_s, p50_ms, p99_ms, max_ms, a scenario's
 * "steps" with each answer and its recorded "hold" (or null), the target's
 * "audit" at the end (null until then), and a finished scenario's
 * "verdict" ({"result":"flaw_shown"|"fixed"|"inconclusive", "window",
 * "window_reached", "evidence"}; null for a load or an unfinished run). */
char *reply_lab_run(const struct lab_run_view *v);

/* GET /lab: {"enabled":false,"error":sentence} when info is NULL (runs
 * off); else "enabled":true, "target", "instances", "ttl_ms", "wait_ms",
 * "token_required" (POST /lab/runs needs the admin token), "running" (an
 * id or null), "bounds" and "results" (which files exist). */
char *reply_lab_status(const struct lab_info *info);

/* The kept runs, newest first, as reply_lab_run, and "running". */
char *reply_lab_runs(const struct lab_run_view *v, int n, int running);

/* Every scenario (scenario.h) with its sales' times and waits in ms for the
 * lab's settings, its window, what shows the flaw and the fix, and
 * "refused": null, or why it cannot run at these settings (the 400 that
 * POST /lab/runs would answer). */
char *reply_lab_scenarios(const struct lab_info *info);

#endif
