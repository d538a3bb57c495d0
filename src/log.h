/* log.h -- the service's log: lines on stderr, "inventoryd: ...", off until
 * the daemon turns it on (library code never prints by itself), and rate
 * limited per kind of event so that a storm of failures costs a line a
 * second, with the count of the lines it stood for. Thread safe. */
#ifndef INVENTORYD_LOG_H
#define INVENTORYD_LOG_H

/* Turns logging on (the daemon does; tests and tools may). */
void log_enable(int on);

/* Logs one line of kind (a short constant word, e.g. "backend"), at most
 * one per kind per second; the next line logged says how many were
 * dropped in between. At most 16 kinds. */
void log_limited(const char *kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
