/* addr.c -- host:port parsing (see addr.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "addr.h"

/* Why the n bytes at h cannot be a host, or NULL when they can: a name or
 * an IPv4 address (letters, digits, '.', '-', '_'), or an IPv6 address
 * (hex digits, ':' and '.'). */
static const char *host_fault(const char *h, size_t n) {
    static const char name_chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                     "0123456789.-_";
    static const char ipv6_chars[] = "0123456789abcdefABCDEF:.";
    int colons = 0, name = 1, ipv6 = 1;
    for (size_t i = 0; i < n; i++) {
        if (h[i] == '/' && i + 1 < n && h[i + 1] == '/') return "no scheme: give host:port only";
        if (h[i] == '/') return "no path: give host:port only";
        if (h[i] == '@') return "no user: give host:port only";
        colons += h[i] == ':';
        name &= h[i] != '\0' && strchr(name_chars, h[i]) != NULL;
        ipv6 &= h[i] != '\0' && strchr(ipv6_chars, h[i]) != NULL;
    }
    if (name && colons == 0) return NULL;
    if (ipv6 && colons >= 2) return NULL;
    return "the host may hold only letters, digits, '.', '-' and '_'";
}

int addr_parse(const char *s, size_t len, struct addr *out, char *errstr, size_t errlen) {
    while (len > 0 && (*s == ' ' || *s == '\t')) {
        s++;
        len--;
    }
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t')) len--;
    const char *colon = NULL;
    for (size_t i = 0; i < len; i++)
        if (s[i] == ':') colon = s + i;
    size_t hostlen = colon ? (size_t)(colon - s) : 0;
    size_t portlen = colon ? len - hostlen - 1 : 0;
    long port = 0;
    int ok = colon && hostlen > 0 && hostlen < ADDR_HOST_MAX && portlen > 0 && portlen <= 5;
    for (size_t i = 0; ok && i < portlen; i++) {
        char ch = colon[1 + i];
        ok = ch >= '0' && ch <= '9';
        port = port * 10 + (ch - '0');
    }
    int shown = (int)(len < 60 ? len : 60);
    if (!ok || port < 1 || port > 65535) {
        snprintf(errstr, errlen, "'%.*s' is not host:port", shown, s);
        return -1;
    }
    const char *why = host_fault(s, hostlen);
    if (why) {
        snprintf(errstr, errlen, "'%.*s' is not host:port (%s)", shown, s, why);
        return -1;
    }
    memcpy(out->host, s, hostlen);
    out->host[hostlen] = '\0';
    out->port = (int)port;
    return 0;
}

int addr_list_parse(const char *list, struct addr *out, int max, char *errstr, size_t errlen) {
    int n = 0;
    const char *p = list ? list : "";
    while (*p) {
        size_t len = strcspn(p, ",");
        if (strspn(p, " \t") >= len) {
            snprintf(errstr, errlen, "an empty entry between two ','");
            return -1;
        }
        if (n == max) {
            snprintf(errstr, errlen, max == 1 ? "more than %d entry" : "more than %d entries", max);
            return -1;
        }
        if (addr_parse(p, len, &out[n], errstr, errlen) < 0) return -1;
        n++;
        p += len;
        if (*p == ',' && p[1] == '\0') {
            snprintf(errstr, errlen, "an empty entry after the last ','");
            return -1;
        }
        if (*p == ',') p++;
    }
    if (n == 0) {
        snprintf(errstr, errlen, "no host:port given");
        return -1;
    }
    return n;
}

void addr_format(const struct addr *a, char *buf, size_t len) {
    snprintf(buf, len, "%s:%d", a->host, a->port);
}
