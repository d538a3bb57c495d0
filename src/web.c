/* web.c -- looks up the embedded page's files (see web.h). */
#include <string.h>
#include "web.h"

const struct web_asset *web_asset_find(const char *name) {
    for (int i = 0; web_assets[i].name; i++)
        if (strcmp(web_assets[i].name, name) == 0) return &web_assets[i];
    return NULL;
}
