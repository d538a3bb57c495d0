/* checkcli.c -- inventory-check, the safety checker: reads one item's
 * recorded history, ledger and stock from Redis and what the clients were
 * told (inventory-load --record files), judges them (checker.h) and prints
 * the findings as JSON, each naming the events or orders involved.
 *
 * Exit status: 0 when nothing unsafe was found in a complete history, 1
 * when something unsafe was, 2 on bad usage or when Redis or a file could
 * not be read, 3 when nothing unsafe was found but the history is
 * incomplete (trimmed by its cap), 4 when nothing unsafe was found but a
 * coverage event named by --need was not seen (the fault missed its
 * window): never a verdict of safe then.
 *
 * The JSON also carries the counterexample: the few recorded holds that
 * show the first safety finding (chk_counterexample), for a reader or the
 * lab page to draw on a timeline.
 *
 * --synthetic N checks no Redis: it makes a history of N holds of two
 * instances, one after another, with their ledger and answers, and plants
 * one unit sold twice by two overlapping holds halfway through; it then
 * judges it as it would a real one and adds what that cost ("synthetic":
 * seconds to make it, seconds to check it, peak RSS). A correct checker
 * answers unsafe (exit 1) with exactly one unit sold twice and one overlap:
 * the proof that it judges a history of that size, within its time. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <getopt.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "addr.h"
#include "checker.h"
#include "mclock.h"
#include "stats.h"

#define TOLD_FILES_MAX 16
#define NEEDS_MAX 8

struct options {
    struct addr redis;
    const char *item;
    const char *told[TOLD_FILES_MAX];
    int ntold;
    long long since_us;
    long long reset_us;
    long max_findings;
    int text;
    int no_overlaps;
    char *needs[NEEDS_MAX]; /* --need, split at commas (strtok on optarg) */
    int nneeds;
    long synthetic; /* --synthetic N: 0, or the events to make */
};

/* The loaded input and the storage behind it. */
struct loaded {
    struct chk_event *events;
    struct chk_entry *ledger;
    struct chk_told *told;
    size_t ntold, cap_told;
    char (*cov)[32]; /* the coverage events' names */
    const char **covp;
    struct chk_input in;
};

static void usage(FILE *f) {
    fprintf(f, "usage: inventory-check [options]\n"
               "  --redis HOST:PORT   the Redis holding the item (127.0.0.1:6379)\n"
               "  --item KEY          the stock key (inventory001)\n"
               "  --told FILE         what the clients were told (inventory-load --record);\n"
               "                      repeatable, up to 16\n"
               "  --since-us US       ignore answers given before this wall-clock time\n"
               "  --reset-us US       the item was reset at this wall-clock time: the reset\n"
               "                      freed its lock, so a hold granted before it that wrote\n"
               "                      nothing held until then at most\n"
               "  --max-findings N    findings listed (100); all are counted\n"
               "  --no-overlaps       do not judge overlapping holds (the instances' clocks\n"
               "                      cannot be compared, e.g. one was made to drift)\n"
               "  --need EV[,EV...]   coverage events the fault must have shown for a verdict\n"
               "                      of safe (holder_inside, lease_expired_inside, ...);\n"
               "                      repeatable, up to 8 in all\n"
               "  --format json|text  (json)\n"
               "  --synthetic N       read no Redis: make a history of N holds with one unit\n"
               "                      sold twice planted in it, judge it, and say how long\n"
               "                      that took and the peak memory (a correct checker\n"
               "                      answers unsafe: sold_twice 1, overlap 1)\n"
               "Exit status: 0 safe, 1 unsafe, 2 bad usage or unreadable input, 3 incomplete\n"
               "(nothing unsafe found, but the history lost events), 4 inconclusive (nothing\n"
               "unsafe found, but a --need event was not seen): no verdict of safe then.\n");
}

/* One history entry's fields into e. */
static void event_fields(const redisReply *f, struct chk_event *e) {
    for (size_t j = 0; j + 1 < f->elements; j += 2) {
        const char *k = f->element[j]->str, *v = f->element[j + 1]->str;
        if (!strcmp(k, "instance"))
            snprintf(e->instance, sizeof(e->instance), "%s", v);
        else if (!strcmp(k, "port"))
            e->port = atoi(v);
        else if (!strcmp(k, "owner"))
            snprintf(e->owner, sizeof(e->owner), "%s", v);
        else if (!strcmp(k, "order"))
            snprintf(e->order, sizeof(e->order), "%s", v);
        else if (!strcmp(k, "outcome"))
            snprintf(e->outcome, sizeof(e->outcome), "%s", v);
        else if (!strcmp(k, "granted_us"))
            e->granted_us = strtoll(v, NULL, 10);
        else if (!strcmp(k, "released_us"))
            e->released_us = strtoll(v, NULL, 10);
        else if (!strcmp(k, "lease_us"))
            e->lease_us = strtoll(v, NULL, 10);
        else if (!strcmp(k, "unit"))
            e->unit = strtoll(v, NULL, 10);
        else if (!strcmp(k, "written_us"))
            e->written_us = strtoll(v, NULL, 10);
        else if (!strcmp(k, "owned"))
            e->owned = atoi(v);
        else if (!strcmp(k, "token"))
            e->token = strtoll(v, NULL, 10);
        else if (!strcmp(k, "stock_read"))
            e->stock_read = strtoll(v, NULL, 10);
    }
}

/* When the entry's fields are a coverage event (outcome "coverage"), its
 * name into name and 1; else 0. */
static int coverage_name(const redisReply *f, char *name, size_t len) {
    int is = 0;
    name[0] = '\0';
    for (size_t j = 0; j + 1 < f->elements; j += 2) {
        const char *k = f->element[j]->str, *v = f->element[j + 1]->str;
        if (!k || !v) continue;
        if (!strcmp(k, "outcome"))
            is = !strcmp(v, "coverage");
        else if (!strcmp(k, "event"))
            snprintf(name, len, "%s", v);
    }
    return is && name[0];
}

static long long as_ll(const redisReply *r) {
    return r && r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : 0;
}

/* Events the stream's cap dropped, from XINFO STREAM (an error: no stream,
 * nothing dropped): entries-added - length. */
static long long trimmed(const redisReply *info) {
    long long length = -1, added = -1;
    if (!info || info->type != REDIS_REPLY_ARRAY) return 0;
    for (size_t i = 0; i + 1 < info->elements; i += 2) {
        const redisReply *k = info->element[i], *v = info->element[i + 1];
        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_INTEGER) continue;
        if (!strcmp(k->str, "length"))
            length = v->integer;
        else if (!strcmp(k->str, "entries-added"))
            added = v->integer;
    }
    return length >= 0 && added > length ? added - length : 0;
}

/* Reads the item's stock, initial stock, ledger and history. 0 or -1. */
/* Fills L from the ledger (r[2]) and history (r[3]) replies: ledger
 * entries, hold events and the faults' coverage events. 0, or -1 when out
 * of memory. */
static int load_replies(redisReply **r, struct loaded *L) {
    L->in.stock = as_ll(r[0]);
    L->in.initial = as_ll(r[1]);
    L->ledger = calloc(r[2]->elements + 1, sizeof(*L->ledger));
    L->events = calloc(r[3]->elements + 1, sizeof(*L->events));
    L->cov = calloc(r[3]->elements + 1, sizeof(*L->cov));
    L->covp = calloc(r[3]->elements + 1, sizeof(*L->covp));
    if (!L->ledger || !L->events || !L->cov || !L->covp) return -1;
    for (size_t i = 0; i < r[2]->elements; i++)
        if (chk_parse_entry(r[2]->element[i]->str, &L->ledger[L->in.nledger]) == 0) L->in.nledger++;
    for (size_t i = 0; i < r[3]->elements; i++) {
        const redisReply *e = r[3]->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements != 2) continue;
        struct chk_event *ev = &L->events[L->in.nevents];
        memset(ev, 0, sizeof(*ev));
        ev->owned = -1;
        snprintf(ev->id, sizeof(ev->id), "%s", e->element[0]->str);
        if (coverage_name(e->element[1], L->cov[L->in.ncoverage], sizeof(L->cov[0]))) {
            L->covp[L->in.ncoverage] = L->cov[L->in.ncoverage];
            L->in.ncoverage++;
            continue; /* a fault's coverage, not a hold */
        }
        event_fields(e->element[1], ev);
        L->in.nevents++;
    }
    return 0;
}

static int load_redis(const struct options *o, struct loaded *L) {
    redisContext *c = redisConnect(o->redis.host, o->redis.port);
    if (!c || c->err) {
        fprintf(stderr, "inventory-check: %s:%d: %s\n", o->redis.host, o->redis.port,
                c ? c->errstr : "out of memory");
        redisFree(c);
        return -1;
    }
    redisAppendCommand(c, "GET %s", o->item);
    redisAppendCommand(c, "GET %s:initial", o->item);
    redisAppendCommand(c, "LRANGE %s:sold 0 -1", o->item);
    redisAppendCommand(c, "XRANGE %s:history - +", o->item);
    redisAppendCommand(c, "XINFO STREAM %s:history", o->item);
    redisReply *r[5] = {0};
    int rc = 0;
    for (int i = 0; i < 5; i++)
        if (redisGetReply(c, (void **)&r[i]) != REDIS_OK) rc = -1;
    if (rc == 0) L->in.trimmed = trimmed(r[4]);
    if (rc == 0 && (r[2]->type != REDIS_REPLY_ARRAY || r[3]->type != REDIS_REPLY_ARRAY)) rc = -1;
    if (rc == 0) rc = load_replies(r, L);
    if (rc < 0)
        fprintf(stderr, "inventory-check: cannot read %s from Redis: %s\n", o->item,
                c->err ? c->errstr : "unexpected reply");
    for (int i = 0; i < 5; i++) freeReplyObject(r[i]);
    redisFree(c);
    L->in.ledger = L->ledger;
    L->in.events = L->events;
    L->in.coverage = L->covp;
    return rc;
}

/* Appends the answers of one --record file given at or after since_us. */
static int load_told(const char *path, long long since_us, struct loaded *L) {
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        return -1;
    }
    char line[256];
    while (fgets(line, sizeof(line), f)) {
        struct chk_told t;
        if (chk_parse_told(line, &t) != 0 || t.answered_us < since_us) continue;
        if (L->ntold == L->cap_told) {
            size_t cap = L->cap_told ? L->cap_told * 2 : 1024;
            struct chk_told *m = realloc(L->told, cap * sizeof(*m));
            if (!m) {
                fclose(f);
                return -1;
            }
            L->told = m;
            L->cap_told = cap;
        }
        L->told[L->ntold++] = t;
    }
    fclose(f);
    L->in.told = L->told;
    L->in.ntold = L->ntold;
    return 0;
}

/* What --synthetic measured. */
struct synth_cost {
    double make_s, check_s, max_rss_mb;
};

static void add_event(cJSON *list, const struct chk_event *e) {
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "id", e->id);
    cJSON_AddStringToObject(x, "instance", e->instance);
    cJSON_AddNumberToObject(x, "port", e->port);
    cJSON_AddStringToObject(x, "owner", e->owner);
    cJSON_AddStringToObject(x, "order", e->order);
    cJSON_AddStringToObject(x, "outcome", e->outcome);
    cJSON_AddNumberToObject(x, "granted_us", (double)e->granted_us);
    cJSON_AddNumberToObject(x, "released_us", (double)e->released_us);
    cJSON_AddNumberToObject(x, "lease_us", (double)e->lease_us);
    cJSON_AddNumberToObject(x, "written_us", (double)e->written_us);
    struct hold h = chk_hold(e);
    cJSON_AddNumberToObject(x, "inside_until_us", (double)hold_inside_until(&h));
    cJSON_AddNumberToObject(x, "owned", e->owned);
    cJSON_AddNumberToObject(x, "unit", (double)e->unit);
    cJSON_AddNumberToObject(x, "token", (double)e->token);
    cJSON_AddItemToArray(list, x);
}

#define COUNTEREXAMPLE_MAX 6

/* The events of a counterexample and its list of overlapping pairs. */
struct ce_pairs {
    const struct chk_event *events;
    const size_t *idx;
    cJSON *list;
};

static void ce_pair(size_t a, size_t b, int64_t lead_us, void *arg) {
    const struct ce_pairs *p = arg;
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "a", p->events[p->idx[a]].id);
    cJSON_AddStringToObject(x, "b", p->events[p->idx[b]].id);
    cJSON_AddNumberToObject(x, "lead_us", (double)lead_us);
    cJSON_AddItemToArray(p->list, x);
}

/* Adds to ce "overlaps": the pairs of its n events (indexes idx) inside at
 * once (hold.h), for a reader to draw without judging them again. */
static void add_ce_overlaps(cJSON *ce, const struct chk_event *events, const size_t *idx,
                            size_t n) {
    struct hold h[COUNTEREXAMPLE_MAX];
    for (size_t i = 0; i < n && i < COUNTEREXAMPLE_MAX; i++) h[i] = chk_hold(&events[idx[i]]);
    struct ce_pairs p = {events, idx, cJSON_AddArrayToObject(ce, "overlaps")};
    hold_overlaps(h, n < COUNTEREXAMPLE_MAX ? n : COUNTEREXAMPLE_MAX, ce_pair, &p);
}

static void print_json(const struct options *o, const struct loaded *L, const struct chk_report *r,
                       const struct synth_cost *cost) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "item", o->item);
    cJSON_AddBoolToObject(root, "safe", r->safe);
    cJSON_AddStringToObject(root, "verdict", chk_verdict(r));
    cJSON_AddBoolToObject(root, "complete", r->complete);
    cJSON_AddBoolToObject(root, "covered", r->covered);
    cJSON *needs = cJSON_AddArrayToObject(root, "needs");
    for (int i = 0; i < o->nneeds; i++)
        cJSON_AddItemToArray(needs, cJSON_CreateString(o->needs[i]));
    cJSON *cov = cJSON_AddObjectToObject(root, "coverage");
    for (int i = 0; i < r->ncover; i++)
        cJSON_AddNumberToObject(cov, r->cover[i].name, (double)r->cover[i].count);
    cJSON_AddNumberToObject(root, "trimmed", (double)L->in.trimmed);
    cJSON_AddNumberToObject(root, "missing", (double)r->missing);
    cJSON_AddNumberToObject(root, "events", (double)L->in.nevents);
    cJSON_AddNumberToObject(root, "ledger", (double)L->in.nledger);
    cJSON_AddNumberToObject(root, "answers", (double)L->in.ntold);
    cJSON_AddNumberToObject(root, "stock", (double)L->in.stock);
    cJSON_AddNumberToObject(root, "initial", (double)L->in.initial);
    cJSON_AddNumberToObject(root, "oversold_units", (double)r->oversold_units);
    cJSON *counts = cJSON_AddObjectToObject(root, "counts");
    for (int k = 0; k < CHK_KINDS; k++)
        cJSON_AddNumberToObject(counts, chk_kind_word(k), (double)r->counts[k]);
    cJSON *list = cJSON_AddArrayToObject(root, "findings");
    for (size_t i = 0; i < r->nfindings; i++) {
        const struct chk_finding *f = &r->findings[i];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "kind", chk_kind_word(f->kind));
        cJSON *names = cJSON_AddArrayToObject(x, "involves");
        if (f->a[0]) cJSON_AddItemToArray(names, cJSON_CreateString(f->a));
        if (f->b[0]) cJSON_AddItemToArray(names, cJSON_CreateString(f->b));
        if (f->unit) cJSON_AddNumberToObject(x, "unit", (double)f->unit);
        cJSON_AddStringToObject(x, "detail", f->detail);
        cJSON_AddItemToArray(list, x);
    }
    size_t idx[COUNTEREXAMPLE_MAX];
    long fi;
    size_t n = chk_counterexample(&L->in, r, idx, COUNTEREXAMPLE_MAX, &fi);
    if (fi >= 0) {
        cJSON *ce = cJSON_AddObjectToObject(root, "counterexample");
        cJSON_AddStringToObject(ce, "kind", chk_kind_word(r->findings[fi].kind));
        cJSON_AddStringToObject(ce, "detail", r->findings[fi].detail);
        cJSON *evs = cJSON_AddArrayToObject(ce, "events");
        for (size_t i = 0; i < n; i++) add_event(evs, &L->in.events[idx[i]]);
        add_ce_overlaps(ce, L->in.events, idx, n);
    } else {
        cJSON_AddNullToObject(root, "counterexample");
    }
    if (cost) {
        cJSON *syn = cJSON_AddObjectToObject(root, "synthetic");
        cJSON_AddNumberToObject(syn, "events", (double)o->synthetic);
        cJSON_AddNumberToObject(syn, "make_s", cost->make_s);
        cJSON_AddNumberToObject(syn, "check_s", cost->check_s);
        cJSON_AddNumberToObject(syn, "max_rss_mb", cost->max_rss_mb);
    }
    char *s = cJSON_Print(root);
    if (s) puts(s);
    free(s);
    cJSON_Delete(root);
}

static void print_text(const struct loaded *L, const struct chk_report *r,
                       const struct synth_cost *cost) {
    char word[16];
    size_t i = 0;
    for (const char *v = chk_verdict(r); *v && i + 1 < sizeof(word); v++)
        word[i++] = (char)toupper((unsigned char)*v);
    word[i] = '\0';
    printf("%s: %zu events, %zu ledger entries, %zu answers; stock %lld of %lld; oversold %lld\n",
           word, L->in.nevents, L->in.nledger, L->in.ntold, L->in.stock, L->in.initial,
           r->oversold_units);
    if (!r->complete)
        printf("  the history is incomplete: %lld events trimmed by history.max-events, %lld "
               "ledger entries without their event; no verdict of safe\n",
               L->in.trimmed, r->missing);
    if (!r->covered)
        printf("  the fault missed its window: a needed coverage event was not seen; no verdict "
               "of safe\n");
    for (int k = 0; k < r->ncover; k++)
        printf("  covered %-20s %lld\n", r->cover[k].name, r->cover[k].count);
    for (int k = 0; k < CHK_KINDS; k++) printf("  %-12s %lld\n", chk_kind_word(k), r->counts[k]);
    for (size_t i = 0; i < r->nfindings; i++)
        printf("  - %s: %s\n", chk_kind_word(r->findings[i].kind), r->findings[i].detail);
    if (cost)
        printf("  synthetic: %zu events made in %.2f s, checked in %.2f s, peak RSS %.0f MB\n",
               L->in.nevents, cost->make_s, cost->check_s, cost->max_rss_mb);
}

/* Adds --need's comma-separated events to o. 0, or -1 when too many or
 * too long. */
static int add_needs(char *list, struct options *o) {
    for (char *save, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o->nneeds == NEEDS_MAX || strlen(t) >= 32) return -1;
        o->needs[o->nneeds++] = t;
    }
    return 0;
}

/* Applies one option that takes a value: 0, or -1 when the value is bad. */
static int set_option(int ch, char *arg, struct options *o) {
    long v;
    char why[128];
    switch (ch) {
    case 'r':
        return addr_parse(arg, strlen(arg), &o->redis, why, sizeof(why)) != 0 ? -1 : 0;
    case 'i':
        o->item = arg;
        return 0;
    case 't':
        if (o->ntold == TOLD_FILES_MAX) return -1;
        o->told[o->ntold++] = arg;
        return 0;
    case 's':
        o->since_us = strtoll(arg, NULL, 10);
        return 0;
    case 'R':
        o->reset_us = strtoll(arg, NULL, 10);
        return 0;
    case 'm':
        if (stats_parse_long(arg, 0, 1000000, &v) != 0) return -1;
        o->max_findings = v;
        return 0;
    case 'f':
        if (strcmp(arg, "json") && strcmp(arg, "text")) return -1;
        o->text = strcmp(arg, "text") == 0;
        return 0;
    case 'n':
        return add_needs(arg, o);
    default: /* 'S' */
        if (stats_parse_long(arg, 1, 50000000, &v) != 0) return -1;
        o->synthetic = v;
        return 0;
    }
}

static int parse_args(int argc, char **argv, struct options *o) {
    static const struct option longopts[] = {
        {"redis", required_argument, NULL, 'r'},
        {"item", required_argument, NULL, 'i'},
        {"told", required_argument, NULL, 't'},
        {"since-us", required_argument, NULL, 's'},
        {"reset-us", required_argument, NULL, 'R'},
        {"max-findings", required_argument, NULL, 'm'},
        {"format", required_argument, NULL, 'f'},
        {"no-overlaps", no_argument, NULL, 'O'},
        {"help", no_argument, NULL, 'h'},
        {"need", required_argument, NULL, 'n'},
        {"synthetic", required_argument, NULL, 'S'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "r:i:t:s:R:m:f:n:S:Oh", longopts, NULL)) != -1) {
        if (ch == 'h') {
            usage(stdout);
            exit(0);
        }
        if (ch == 'O') {
            o->no_overlaps = 1;
            continue;
        }
        if (!strchr("ritsRmfnS", ch)) {
            usage(stderr);
            return -1;
        }
        if (set_option(ch, optarg, o) != 0) {
            stats_bad_value("inventory-check", longopts, ch, optarg);
            return -1;
        }
    }
    return optind < argc ? (usage(stderr), -1) : 0;
}

static double mono_s(void) { return (double)mclock_us() / 1e6; }

/* --synthetic: n holds of two instances, each granted 1 ms after the one
 * before and held 0.8 ms, writing the next unit down with the next token,
 * with its ledger entry and its answer; halfway, one hold is granted while
 * the one before still holds, and sells that one's unit again. 0 or -1. */
static int load_synthetic(long n, struct loaded *L) {
    L->events = calloc((size_t)n, sizeof(*L->events));
    L->ledger = calloc((size_t)n, sizeof(*L->ledger));
    L->told = calloc((size_t)n, sizeof(*L->told));
    if (!L->events || !L->ledger || !L->told) return -1;
    const int64_t t0 = 1700000000000000;
    const long planted = n / 2;
    for (long i = 0; i < n; i++) {
        struct chk_event *e = &L->events[i];
        const char *inst = i % 2 ? "b1c2d3e4" : "a1b2c3d4";
        int64_t g = t0 + (int64_t)i * 1000;
        long long unit = n - i;
        if (i == planted && i > 0) {
            g -= 500; /* while the hold before still holds */
            unit = L->events[i - 1].unit; /* and its unit, again */
        }
        char id[48];
        snprintf(id, sizeof(id), "%lld-%ld", (long long)(g / 1000), i);
        snprintf(e->id, sizeof(e->id), "%.31s", id);
        snprintf(e->instance, sizeof(e->instance), "%s", inst);
        e->port = i % 2 ? 3787 : 3786;
        snprintf(e->owner, sizeof(e->owner), "%s00000000000000000000000000000000:%ld", inst, i);
        snprintf(e->order, sizeof(e->order), "%s-%ld", inst, i);
        snprintf(e->outcome, sizeof(e->outcome), "sold");
        e->granted_us = g;
        e->released_us = g + 800;
        e->lease_us = g + 10000;
        e->written_us = g + 700;
        e->owned = 1;
        e->unit = unit;
        e->token = i + 1;
        L->ledger[i].unit = unit;
        snprintf(L->ledger[i].order, sizeof(L->ledger[i].order), "%s", e->order);
        L->ledger[i].port = e->port;
        L->told[i].answered_us = g + 900;
        snprintf(L->told[i].status, sizeof(L->told[i].status), "sold");
        snprintf(L->told[i].order, sizeof(L->told[i].order), "%s", e->order);
        L->told[i].unit = unit;
    }
    L->in.events = L->events;
    L->in.nevents = (size_t)n;
    L->in.ledger = L->ledger;
    L->in.nledger = (size_t)n;
    L->in.told = L->told;
    L->in.ntold = L->ntold = (size_t)n;
    L->in.initial = n;
    L->in.stock = 0;
    return 0;
}

int main(int argc, char **argv) {
    struct options o = {.item = "inventory001", .max_findings = 100};
    snprintf(o.redis.host, sizeof(o.redis.host), "127.0.0.1");
    o.redis.port = 6379;
    if (parse_args(argc, argv, &o) != 0) return 2;
    struct loaded L;
    memset(&L, 0, sizeof(L));
    struct synth_cost cost = {0}, *costp = NULL;
    double t = mono_s();
    int rc;
    if (o.synthetic) {
        costp = &cost;
        rc = load_synthetic(o.synthetic, &L);
        if (rc != 0)
            fprintf(stderr, "inventory-check: out of memory making %ld events\n", o.synthetic);
        cost.make_s = mono_s() - t;
        o.ntold = 0; /* the answers are made too */
    } else {
        rc = load_redis(&o, &L);
    }
    L.in.skip_overlaps = o.no_overlaps;
    L.in.reset_us = o.reset_us;
    L.in.needs = (const char *const *)o.needs;
    L.in.nneeds = (size_t)o.nneeds;
    for (int i = 0; rc == 0 && i < o.ntold; i++) rc = load_told(o.told[i], o.since_us, &L);
    struct chk_report r;
    t = mono_s();
    if (rc == 0 && chk_run(&L.in, (size_t)o.max_findings, &r) != 0) {
        fprintf(stderr, "inventory-check: out of memory\n");
        rc = -1;
    }
    cost.check_s = mono_s() - t;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) cost.max_rss_mb = (double)ru.ru_maxrss / 1024.0;
    int status = 2;
    if (rc == 0) {
        if (o.text)
            print_text(&L, &r, costp);
        else
            print_json(&o, &L, &r, costp);
        const char *v = chk_verdict(&r);
        status = r.safe ? 0 : !strcmp(v, "unsafe") ? 1 : !strcmp(v, "incomplete") ? 3 : 4;
        chk_report_free(&r);
    }
    free(L.events);
    free(L.cov);
    free(L.covp);
    free(L.ledger);
    free(L.told);
    return status;
}
