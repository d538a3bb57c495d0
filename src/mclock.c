/* mclock.c -- monotonic sleeps. */
#include <errno.h>
#include <time.h>
#include "mclock.h"

void mclock_sleep_ms(int ms) {
    if (ms <= 0) return;
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
        ;
}
