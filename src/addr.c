/* addr.c -- host:port parsing (see addr.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "addr.h"

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
    if (!ok || port < 1 || port > 65535) {
        snprintf(errstr, errlen, "'%.*s' is not host:port", (int)(len < 60 ? len : 60), s);
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
        if (n == max) {
            snprintf(errstr, errlen, "more than %d entries", max);
            return -1;
        }
        if (addr_parse(p, len, &out[n], errstr, errlen) < 0) return -1;
        n++;
        p += len;
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
