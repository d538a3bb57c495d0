/* lock_local.c -- an in-process lock, the demo's synchronized/ReentrantLock:
 * one pthread mutex per process. Safe on one instance; two instances behind
 * nginx each hold their own mutex, so they oversell together.
 *
 * Like the demo's ReentrantLock it is reentrant for the thread that holds it
 * (a recursive mutex), and waits at most lock.wait-ms. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include "lock_int.h"
#include "mclock.h"

static pthread_mutex_t local_mutex;
static pthread_once_t local_once = PTHREAD_ONCE_INIT;

static void local_make(void) {
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&local_mutex, &a);
    pthread_mutexattr_destroy(&a);
}

static int local_acquire(struct lock *l) {
    pthread_once(&local_once, local_make);
    struct timespec deadline = mclock_timespec(l->deadline_us);
    l->attempts++;
    int rc = pthread_mutex_clocklock(&local_mutex, CLOCK_MONOTONIC, &deadline);
    if (rc == 0) return LOCK_OK;
    if (rc == ETIMEDOUT) return LOCK_BUSY;
    snprintf(l->errstr, sizeof(l->errstr), "pthread_mutex_clocklock: error %d", rc);
    return LOCK_ERR;
}

static int local_release(struct lock *l) {
    (void)l;
    pthread_mutex_unlock(&local_mutex);
    return LOCK_OK;
}

const struct lock_type lock_type_local = {
    .name = "local",
    .family = "local",
    .acquire = local_acquire,
    .release = local_release,
};
