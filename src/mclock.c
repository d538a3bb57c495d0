/* mclock.c -- monotonic sleeps and waits. */
#include <errno.h>
#include <time.h>
#include "mclock.h"

void mclock_sleep_ms(int ms) {
    if (ms <= 0) return;
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
        ;
}

void mclock_cond_init(pthread_cond_t *c) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(c, &ca);
    pthread_condattr_destroy(&ca);
}

int mclock_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *mu, monotime_us deadline_us) {
    struct timespec ts = mclock_timespec(deadline_us);
    return pthread_cond_timedwait(c, mu, &ts);
}
