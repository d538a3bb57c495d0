/* mclock.h -- monotonic time. Every TTL, wait, backoff and latency in this
 * project is measured with these, never with time() or gettimeofday().
 *
 * The one wall-clock reading, mclock_wall_us(), exists for the recorded
 * history only: it dates events for people and for other hosts, and is never
 * used to measure a duration. */
#ifndef INVENTORYD_MCLOCK_H
#define INVENTORYD_MCLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

typedef int64_t monotime_us;

static inline monotime_us mclock_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (monotime_us)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static inline int64_t mclock_ms(void) { return mclock_us() / 1000; }

/* A monotonic time in µs as the timespec that timed waits take (with
 * mclock_cond_init's condition variables, pthread_mutex_clocklock, ...). */
static inline struct timespec mclock_timespec(monotime_us us) {
    return (struct timespec){us / 1000000, (long)(us % 1000000) * 1000};
}

/* Wall-clock µs since the epoch, for dating recorded events only. */
static inline int64_t mclock_wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Initialises c to wait on CLOCK_MONOTONIC, so every timed wait in the
 * project takes a monotonic deadline. */
void mclock_cond_init(pthread_cond_t *c);

/* Waits on c (made by mclock_cond_init) with mu held until signalled or
 * until deadline_us (monotonic). Returns 0 when signalled (or woken
 * spuriously), ETIMEDOUT when the deadline passed. */
int mclock_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *mu, monotime_us deadline_us);

/* Sleeps ms milliseconds, resuming after signals. */
void mclock_sleep_ms(int ms);

#endif
