/* The library's settings in effect, for the report. */
#include "settings.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "cc_coll.h"

/* The value of a cc_coll setting in effect (environment or default). */
static const char *setting_value(const char *name)
{
    for (size_t i = 0; i < cc_coll_setting_count(); ++i) {
        cc_coll_setting_t s;
        cc_coll_setting_get(i, &s); /* an invalid value still fills the default */
        if (strcmp(s.name, name) == 0) return s.value;
    }
    return NULL;
}

/* -D / -E when given, else the communicator's defaults for the report. */
void effective_density_ef(const options_t *o, double *density, int *ef)
{
    const char *d = setting_value("DENSITY");
    *density = o->has_density ? o->density : (d ? strtod(d, NULL) : NAN);
    if (o->has_ef) {
        *ef = o->ef;
        return;
    }
    char v[16] = "";
    const char *e = setting_value("EF");
    size_t j = 0;
    for (; e && *e && j + 1 < sizeof v; ++e)
        if (!isspace((unsigned char)*e)) v[j++] = (char)tolower((unsigned char)*e);
    v[j] = '\0';
    *ef = strcmp(v, "1") == 0 || strcmp(v, "true") == 0 || strcmp(v, "yes") == 0 || strcmp(v, "on") == 0;
}

/* -R when given, else the communicator's CC_COLL_LOWRANK_RANK. */
int effective_lowrank_rank(const options_t *o)
{
    if (o->has_rank) return o->rank;
    const char *r = setting_value("LOWRANK_RANK");
    return r ? atoi(r) : 0;
}

/* Who advances the non-blocking collectives, as the library decides it
 * (docs/api.md, CC_COLL_PROGRESS): caller when asked for; otherwise thread
 * under MPI_THREAD_MULTIPLE; auto without it falls back to caller, thread
 * without it fails ("unavailable"). *setting receives CC_COLL_PROGRESS as
 * set (lower case). */
const char *effective_progress(char *setting, size_t cap)
{
    const char *p = setting_value("PROGRESS");
    size_t j = 0;
    for (; p && *p && j + 1 < cap; ++p)
        if (!isspace((unsigned char)*p)) setting[j++] = (char)tolower((unsigned char)*p);
    setting[j] = '\0';
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    if (strcmp(setting, "caller") == 0) return "caller";
    if (provided == MPI_THREAD_MULTIPLE) return "thread";
    return strcmp(setting, "thread") == 0 ? "unavailable" : "caller";
}

const char *thread_level_name(int level)
{
    switch (level) {
    case MPI_THREAD_SINGLE: return "single";
    case MPI_THREAD_FUNNELED: return "funneled";
    case MPI_THREAD_SERIALIZED: return "serialized";
    case MPI_THREAD_MULTIPLE: return "multiple";
    default: return "unknown";
    }
}
