/* wakering.c -- the cost of handing a turn from one thread to another, as a
 * FIFO lock in one process hands its grant, without Redis: N threads in a
 * ring, each sleeping on its own condition variable until the thread
 * before it wakes it, touching K KB of its own memory in its turn (a sale's
 * state: its buffers, its result, its stack), then waking the next.
 *
 *   wakering [--threads "16 64 200"] [--kb K] [--turns T] [--rounds R]
 *
 * For each N and round it prints turns/s and the process's CPU a turn
 * (user + system, getrusage), then the medians and each N's over the
 * first N's. This is the floor under `handoff` in lockbench as C grows:
 * every sale wakes a different thread, whose state is cold when C threads'
 * state no longer fits the caches (docs/speed.md). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include "stats.h"

struct seat {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int turn; /* 1: this thread's turn */
    struct seat *next;
    struct ring *ring;
    unsigned char *state; /* K KB of this thread's own */
};

struct ring {
    long turns_left; /* (the turn's holder alone touches it) */
    size_t state_bytes;
    int done;
    struct seat *seats;
    int n;
};

static void hand_on(struct seat *s) {
    pthread_mutex_lock(&s->mu);
    s->turn = 1;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->mu);
}

static void *seat_main(void *arg) {
    struct seat *s = arg;
    struct ring *r = s->ring;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->turn) pthread_cond_wait(&s->cond, &s->mu);
        s->turn = 0;
        pthread_mutex_unlock(&s->mu);
        if (r->done) break;
        for (size_t i = 0; i < r->state_bytes; i += 64) s->state[i]++;
        if (--r->turns_left <= 0) {
            r->done = 1;
            for (int i = 0; i < r->n; i++)
                if (&r->seats[i] != s) hand_on(&r->seats[i]);
            break;
        }
        hand_on(s->next);
    }
    return NULL;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double cpu_s(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/* One run of n threads for turns turns: turns/s in *rate, CPU us a turn in
 * *cpu_us. 0, or -1 when a thread could not be made. */
static int run(int n, size_t kb, long turns, double *rate, double *cpu_us) {
    struct ring r = {turns, kb * 1024, 0, calloc((size_t)n, sizeof(struct seat)), n};
    pthread_t *t = calloc((size_t)n, sizeof(*t));
    if (!r.seats || !t) return -1;
    for (int i = 0; i < n; i++) {
        struct seat *s = &r.seats[i];
        pthread_mutex_init(&s->mu, NULL);
        pthread_cond_init(&s->cond, NULL);
        s->next = &r.seats[(i + 1) % n];
        s->ring = &r;
        s->state = calloc(1, kb * 1024 + 1);
        if (!s->state) return -1;
    }
    double c0 = cpu_s(), t0 = now_s();
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], NULL, seat_main, &r.seats[i]) != 0) return -1;
    hand_on(&r.seats[0]);
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    double secs = now_s() - t0, cpu = cpu_s() - c0;
    *rate = (double)turns / secs;
    *cpu_us = cpu * 1e6 / (double)turns;
    for (int i = 0; i < n; i++) {
        free(r.seats[i].state);
        pthread_mutex_destroy(&r.seats[i].mu);
        pthread_cond_destroy(&r.seats[i].cond);
    }
    free(r.seats);
    free(t);
    return 0;
}

/* The median of v[0..n), v left as it is. */
static double median(const double *v, int n) {
    double tmp[99];
    memcpy(tmp, v, (size_t)n * sizeof(*v));
    stats_summary_double(tmp, (size_t)n); /* sorts */
    return stats_median_double(tmp, (size_t)n);
}

static int parse_ns(const char *s, int *ns, int max) {
    int k = 0;
    char *end;
    while (*s && k < max) {
        long v = strtol(s, &end, 10);
        if (end == s || v < 2 || v > 4096) return -1;
        ns[k++] = (int)v;
        s = end + strspn(end, " ,");
    }
    return k;
}

int main(int argc, char **argv) {
    int ns[16], nn = 0, rounds = 3;
    long turns = 200000, kb = 16;
    const char *threads = "16 64 200";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--threads") == 0)
            threads = argv[i + 1];
        else if (strcmp(argv[i], "--kb") == 0)
            kb = strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--turns") == 0)
            turns = strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--rounds") == 0)
            rounds = (int)strtol(argv[i + 1], NULL, 10);
        else
            argc = -1;
    }
    if (argc < 0 || argc % 2 == 0 || (nn = parse_ns(threads, ns, 16)) <= 0 || kb < 0 || kb > 1024 ||
        turns < 1000 || rounds < 1 || rounds > 99) {
        fprintf(stderr, "usage: wakering [--threads \"16 64 200\"] [--kb 0..1024] "
                        "[--turns 1000..] [--rounds 1..99]\n");
        return 2;
    }
    double rate[16][99], cpu[16][99];
    for (int r = 0; r < rounds; r++) /* each N in turn, round after round */
        for (int i = 0; i < nn; i++) {
            if (run(ns[i], (size_t)kb, turns, &rate[i][r], &cpu[i][r]) != 0) {
                fprintf(stderr, "wakering: could not start %d threads\n", ns[i]);
                return 2;
            }
            printf("round %d: %4d threads, %ld KB each: %8.0f turns/s, %6.2f us CPU a turn\n",
                   r + 1, ns[i], kb, rate[i][r], cpu[i][r]);
        }
    double m0 = median(rate[0], rounds);
    printf("medians of %d rounds, %ld turns each:\n", rounds, turns);
    for (int i = 0; i < nn; i++) {
        double m = median(rate[i], rounds);
        printf("threads=%d kb=%ld turns_per_s=%.0f cpu_us_per_turn=%.2f over_first=%.2f\n", ns[i],
               kb, m, median(cpu[i], rounds), m / m0);
    }
    return 0;
}
