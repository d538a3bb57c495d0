/* waitq.c -- a keyed FIFO wait queue (see waitq.h).
 *
 * DESIGN
 * Keys sit in a fixed table of buckets chained by `next`, hashed with
 * FNV-1a. A key records whether it is owned and its line (head, tail).
 * Nodes are the waiters' own, on their stacks: the queue never allocates
 * for them, and only a key is allocated, on first use, and freed as soon as
 * it is neither owned nor waited on.
 *
 * Threads: any; all state is under `mu`, and a waiter sleeps on its own
 * node's condition variable. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "mclock.h"
#include "waitq.h"

#define NBUCKETS 1024

struct waitq_key {
    struct waitq_key *next; /* bucket chain */
    int owned;
    struct waitq_node *head, *tail; /* the line */
    char name[];
};

struct waitq {
    pthread_mutex_t mu;
    int nkeys;
    struct waitq_key *buckets[NBUCKETS];
};

static uint32_t fnv1a(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

struct waitq *waitq_create(void) {
    struct waitq *q = calloc(1, sizeof(*q));
    if (q) pthread_mutex_init(&q->mu, NULL);
    return q;
}

void waitq_free(struct waitq *q) {
    if (!q) return;
    for (int i = 0; i < NBUCKETS; i++)
        while (q->buckets[i]) {
            struct waitq_key *k = q->buckets[i];
            q->buckets[i] = k->next;
            free(k);
        }
    pthread_mutex_destroy(&q->mu);
    free(q);
}

/* The key called name, made when missing. Called with mu held. */
static struct waitq_key *key_get(struct waitq *q, const char *name) {
    struct waitq_key **b = &q->buckets[fnv1a(name) % NBUCKETS];
    for (struct waitq_key *k = *b; k; k = k->next)
        if (strcmp(k->name, name) == 0) return k;
    size_t n = strlen(name);
    struct waitq_key *k = calloc(1, sizeof(*k) + n + 1);
    if (!k) return NULL;
    memcpy(k->name, name, n + 1);
    k->next = *b;
    *b = k;
    q->nkeys++;
    return k;
}

/* Frees k when nobody owns or waits on it. Called with mu held. */
static void key_release(struct waitq *q, struct waitq_key *k) {
    if (k->owned || k->head) return;
    struct waitq_key **p = &q->buckets[fnv1a(k->name) % NBUCKETS];
    while (*p != k) p = &(*p)->next;
    *p = k->next;
    q->nkeys--;
    free(k);
}

static void line_remove(struct waitq_key *k, struct waitq_node *n) {
    struct waitq_node *prev = NULL;
    for (struct waitq_node *x = k->head; x; prev = x, x = x->next) {
        if (x != n) continue;
        if (prev)
            prev->next = n->next;
        else
            k->head = n->next;
        if (k->tail == n) k->tail = prev;
        return;
    }
}

int waitq_enter(struct waitq *q, const char *key, struct waitq_node *n, void *data,
                int64_t deadline_us) {
    n->state = WAITQ_QUEUED;
    n->data = data;
    n->next = NULL;
    pthread_mutex_lock(&q->mu);
    struct waitq_key *k = key_get(q, key);
    n->key = k;
    if (!k) {
        pthread_mutex_unlock(&q->mu);
        return WAITQ_NOMEM;
    }
    if (!k->owned) {
        k->owned = 1;
        n->state = WAITQ_OWNER;
        pthread_mutex_unlock(&q->mu);
        return WAITQ_OWNER;
    }
    mclock_cond_init(&n->cond);
    if (k->tail)
        k->tail->next = n;
    else
        k->head = n;
    k->tail = n;
    while (n->state == WAITQ_QUEUED || n->state == WAITQ_TAKEN) {
        if (n->state == WAITQ_TAKEN) {
            pthread_cond_wait(&n->cond, &q->mu);
            continue;
        }
        if (mclock_cond_wait_until(&n->cond, &q->mu, deadline_us) == ETIMEDOUT &&
            n->state == WAITQ_QUEUED) {
            line_remove(k, n);
            n->state = WAITQ_TIMEOUT;
            key_release(q, k);
        }
    }
    int state = n->state;
    pthread_mutex_unlock(&q->mu);
    pthread_cond_destroy(&n->cond);
    return state;
}

int waitq_take(struct waitq *q, struct waitq_node *owner, struct waitq_node **out, int max) {
    struct waitq_key *k = owner->key;
    int n = 0;
    pthread_mutex_lock(&q->mu);
    while (k->head && n < max) {
        struct waitq_node *x = k->head;
        k->head = x->next;
        x->next = NULL;
        x->state = WAITQ_TAKEN;
        out[n++] = x;
    }
    if (!k->head) k->tail = NULL;
    pthread_mutex_unlock(&q->mu);
    return n;
}

void waitq_done(struct waitq *q, struct waitq_node *n) {
    pthread_mutex_lock(&q->mu);
    n->state = WAITQ_DONE;
    pthread_cond_signal(&n->cond);
    pthread_mutex_unlock(&q->mu);
}

void waitq_leave(struct waitq *q, struct waitq_node *owner) {
    struct waitq_key *k = owner->key;
    pthread_mutex_lock(&q->mu);
    struct waitq_node *next = k->head;
    if (next) {
        k->head = next->next;
        if (!k->head) k->tail = NULL;
        next->next = NULL;
        next->state = WAITQ_OWNER; /* the key passes on, still owned */
        pthread_cond_signal(&next->cond);
    } else {
        k->owned = 0;
        key_release(q, k);
    }
    owner->key = NULL;
    pthread_mutex_unlock(&q->mu);
}

int waitq_keys(struct waitq *q) {
    pthread_mutex_lock(&q->mu);
    int n = q->nkeys;
    pthread_mutex_unlock(&q->mu);
    return n;
}
