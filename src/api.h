/* api.h -- the service's HTTP API: the handler of each row of routes.def,
 * and the dispatch that reads the table (404, 405 with Allow, 413, the
 * admin token of admin rows, ?item=). Above http.h: the server calls
 * api_answer through the function pointer it was started with, and never
 * includes this header. */
#ifndef INVENTORYD_API_H
#define INVENTORYD_API_H

#include <stddef.h>

struct config;
struct http_request;
struct inventory;
struct lab;
struct api;

/* The handlers' state: cfg, inv and lab must outlive it; lab is NULL when
 * lab.enabled=false, and the lab's run endpoints are then 404 like any
 * unknown path (the page at / is served either way). NULL on failure, with
 * errstr set (lock.strategy names no strategy, out of memory). */
struct api *api_create(const struct config *cfg, struct inventory *inv, struct lab *lab,
                       char *errstr, size_t errlen);

/* Accepts NULL. Only once the server that called api_answer has stopped. */
void api_free(struct api *a);

/* An http_handler (http.h): answers rq, cls being a struct api. Called on
 * an event loop or in a worker, as api_on_loop says; thread safe. */
int api_answer(void *cls, const struct http_request *rq);

/* http_hooks.on_loop: whether method url is answered without waiting on a
 * store or a lock (a row with ROUTE_F_LOOP, or no row at all: the 404 and
 * 405 answers; /healthz while its last PING stands; a sale whose strategy
 * goes pipelined, inventory_pipelined, which the handler defers), and so
 * on the event loop. */
int api_on_loop(void *cls, const char *method, const char *url);

#endif
