/* mclock.h -- monotonic time. Every TTL, wait, backoff and latency in this
 * project is measured with these, never with time() or gettimeofday(). */
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

/* Initialises c to wait on CLOCK_MONOTONIC, so every timed wait in the
 * project takes a monotonic deadline. */
void mclock_cond_init(pthread_cond_t *c);

/* Sleeps ms milliseconds, resuming after signals. */
void mclock_sleep_ms(int ms);

#endif
