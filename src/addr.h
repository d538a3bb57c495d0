/* addr.h -- the one parser of "host:port" and of comma-separated lists of
 * them (redis.sentinel.nodes, redlock.nodes, redis.cluster.nodes, the
 * tools' --redis and --redlock). Pure: no I/O, no allocation, thread safe.
 *
 * An entry is host ":" port, the port being the digits after the LAST ':'
 * (1..65535), the host 1 to ADDR_HOST_MAX-1 bytes of a name or IPv4 address
 * (letters, digits, '.', '-', '_') or an IPv6 address (hex digits, ':',
 * '.'): a scheme ("http://"), a path or a user is refused, and so is an
 * empty entry in a list. Spaces and tabs around an entry are forgiven
 * ("a:1, b:2"). */
#ifndef INVENTORYD_ADDR_H
#define INVENTORYD_ADDR_H

#include <stddef.h>

#define ADDR_HOST_MAX 256

struct addr {
    char host[ADDR_HOST_MAX];
    int port;
};

/* Parses one entry of len bytes at s. Returns 0, or -1 with errstr set
 * ("'x' is not host:port"). */
int addr_parse(const char *s, size_t len, struct addr *out, char *errstr, size_t errlen);

/* Parses a comma-separated list into out[] (room for max). Returns how many
 * entries it names (at least 1), or -1 with errstr set ("'x' is not
 * host:port", "more than 9 entries", "no host:port given"). */
int addr_list_parse(const char *list, struct addr *out, int max, char *errstr, size_t errlen);

/* "host:port" of a into buf. */
void addr_format(const struct addr *a, char *buf, size_t len);

#endif
