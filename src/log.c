/* log.c -- rate-limited log lines (see log.h).
 *
 * Threads: any. One mutex (mu) guards the per-kind rate table and the
 * enabled flag; it is never held while writing to stderr. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "log.h"
#include "mclock.h"

#define KINDS_MAX 16
#define INTERVAL_US 1000000

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int enabled;
static struct {
    const char *kind;
    int64_t last_us;
    long long dropped;
} kinds[KINDS_MAX];

void log_enable(int on) {
    pthread_mutex_lock(&mu);
    enabled = on;
    pthread_mutex_unlock(&mu);
}

void log_limited(const char *kind, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    int64_t now = mclock_us();
    pthread_mutex_lock(&mu);
    int i = 0;
    while (i < KINDS_MAX && kinds[i].kind && strcmp(kinds[i].kind, kind) != 0) i++;
    if (!enabled || i == KINDS_MAX) {
        pthread_mutex_unlock(&mu);
        return;
    }
    if (!kinds[i].kind) kinds[i].kind = kind;
    if (kinds[i].last_us && now - kinds[i].last_us < INTERVAL_US) {
        kinds[i].dropped++;
        pthread_mutex_unlock(&mu);
        return;
    }
    long long dropped = kinds[i].dropped;
    kinds[i].dropped = 0;
    kinds[i].last_us = now;
    pthread_mutex_unlock(&mu);
    /* Written outside the mutex: a stderr that blocks (a full pipe) stalls
     * only the thread that logs, never every other one. */
    if (dropped)
        fprintf(stderr, "inventoryd: %s (and %lld more like it since the last line)\n", line,
                dropped);
    else
        fprintf(stderr, "inventoryd: %s\n", line);
}
