/* web.h -- the lab's page (src/web/: index.html, app.js, app.css, icon.svg),
 * embedded in the binary at build time by cmake/embed_web.cmake, as the Lua
 * scripts are. Nothing is read from disk or from elsewhere at run time; the
 * page loads only these files, from its own origin. The table is constant:
 * any thread may read it. */
#ifndef INVENTORYD_WEB_H
#define INVENTORYD_WEB_H

#include <stddef.h>

struct web_asset {
    const char *name; /* file name, e.g. "app.js" */
    const char *type; /* its Content-Type */
    const unsigned char *data; /* its bytes (NUL after the last) */
    size_t len;
};

/* The generated table, terminated by {NULL, NULL, NULL, 0}. */
extern const struct web_asset web_assets[];

/* The asset called name, or NULL. */
const struct web_asset *web_asset_find(const char *name);

#endif
