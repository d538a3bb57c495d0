/* pipeline.h -- one-script sales sent pipelined on one connection by one
 * thread, so that no thread waits for Redis per sale (pipeline.c). Inside
 * the inventory service: callers go through inventory.h
 * (inventory_sell_pipelined). */
#ifndef INVENTORYD_PIPELINE_H
#define INVENTORYD_PIPELINE_H

#include <stddef.h>
#include "inventory.h"

struct pipeline;
struct inventory;
struct item_keys;
struct sale_result;
struct strategy;

/* Starts the pipeline's thread, with a pool of one connection of its own
 * dialled with the options of inv's pool (not in cluster mode: its keys
 * may live on different masters). NULL with errstr set on failure. */
struct pipeline *pipeline_create(struct inventory *inv, char *errstr, size_t errlen);

/* Sends what is queued, waits for every reply in flight (each bounded by
 * redis.timeout-ms), joins the thread and frees p. Nothing may be
 * submitted once it has begun. Accepts NULL. */
void pipeline_free(struct pipeline *p);

/* Queues the sale r (started: its order set) of k's item with s, whose way
 * is one script. done(arg) is called once, in the pipeline's thread, when
 * r is filled. Never waits. 0, or -1 (out of memory, or stopping) with
 * nothing queued. */
int pipeline_submit(struct pipeline *p, const struct strategy *s, struct sale_result *r,
                    const struct item_keys *k, inventory_sold *done, void *arg);

#endif
