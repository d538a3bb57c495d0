/* http.h -- the HTTP front of the service, on libmicrohttpd.
 *
 * DESIGN
 * One thread per connection (MHD_USE_THREAD_PER_CONNECTION): a sale that
 * waits for a lock blocks only its own connection, never other requests.
 * Handlers run in the connection's thread and call the inventory service
 * or the lab (lab.h); this file turns routes into calls and results into
 * answers, and knows nothing of Redis commands. The lab's page is served
 * from the embedded files of web.h. */
#ifndef INVENTORYD_HTTP_H
#define INVENTORYD_HTTP_H

#include <stddef.h>

struct config;
struct inventory;
struct lab;
struct http_server;

/* Starts listening on cfg->bind:cfg->port. cfg, inv and lab must outlive
 * the server; lab is NULL when lab.enabled=false, and the lab's run
 * endpoints are then 404 like any unknown path (the page at / is served
 * either way). NULL on failure, with errstr set (e.g. the port is in use). */
struct http_server *http_start(const struct config *cfg, struct inventory *inv,
                               struct lab *lab, char *errstr, size_t errlen);

/* Stops accepting new connections; requests in flight go on. */
void http_quiesce(struct http_server *s);

/* Waits for requests in flight to finish, closes every connection and frees
 * the server. Accepts NULL. */
void http_stop(struct http_server *s);

#endif
