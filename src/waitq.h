/* waitq.h -- a keyed FIFO wait queue: for each key, at most one owner and a
 * line of waiters in arrival order. The lock core's gate (one thread per
 * process contends for a lock in Redis) and the batched sale's queue (one
 * leader sells for everyone queued) are both this.
 *
 * A waiter's node lives on its own stack. A key exists only while it has an
 * owner or waiters, and is freed when the last one leaves, so the memory
 * held is bounded by the threads using the queue, whatever keys clients
 * send. Keys are found by hash. Thread safe: everything is under one mutex
 * per queue, and nothing is ever done under it but bookkeeping. */
#ifndef INVENTORYD_WAITQ_H
#define INVENTORYD_WAITQ_H

#include <pthread.h>
#include <stdint.h>

struct waitq;
struct waitq_key;

/* What waitq_enter returns, and a node's state. */
#define WAITQ_QUEUED 0 /* in line (never returned) */
#define WAITQ_OWNER 1 /* the node owns its key: go ahead, then waitq_leave */
#define WAITQ_TAKEN 2 /* an owner took it (waitq_take) and will finish it */
#define WAITQ_DONE 3 /* the owner finished it (waitq_done): its work is done */
#define WAITQ_TIMEOUT 4 /* the deadline passed while in line; it has left */
#define WAITQ_NOMEM 5 /* the key could not be made */

struct waitq_node {
    pthread_cond_t cond;
    int state;
    void *data; /* the caller's, for the owner that takes it */
    struct waitq_key *key;
    struct waitq_node *next;
};

/* NULL when out of memory. */
struct waitq *waitq_create(void);

/* Frees the queue; no node may be in it. Accepts NULL. */
void waitq_free(struct waitq *q);

/* Joins key's line with node n (its data set to data) and waits until n
 * owns the key (WAITQ_OWNER), an owner finished it (WAITQ_DONE), or
 * deadline_us (monotonic) passed while it was still in line
 * (WAITQ_TIMEOUT: n has left). A node that was taken waits for
 * waitq_done whatever its deadline: its work is under way. */
int waitq_enter(struct waitq *q, const char *key, struct waitq_node *n, void *data,
                int64_t deadline_us);

/* For the owner n: takes up to max nodes out of the line, oldest first,
 * into out[]; each then waits for waitq_done. Returns how many. */
int waitq_take(struct waitq *q, struct waitq_node *owner, struct waitq_node **out, int max);

/* Marks a taken node done and wakes it. */
void waitq_done(struct waitq *q, struct waitq_node *n);

/* The owner leaves: the oldest node still in line becomes the owner, or
 * the key is freed. */
void waitq_leave(struct waitq *q, struct waitq_node *owner);

/* Keys alive now (for tests of the bound). */
int waitq_keys(struct waitq *q);

#endif
