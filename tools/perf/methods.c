/* The methods cc_coll_perf measures, from the library's own list and caps. */
#include "methods.h"

#include <string.h>

int list_library_methods(cc_coll_method_t *out, int cap)
{
    const int count = cc_coll_method_count();
    int n = 0;
    for (int i = 0; i < count && n < cap; ++i)
        if (cc_coll_method_at(i, &out[n]) == CC_COLL_OK && cc_coll_method_name(out[n]) != NULL) ++n;
    return n;
}

int slot_method(const options_t *o, int slot) { return slot < 0 ? METHOD_MPI : (int)o->methods[slot]; }

int slot_wanted(const options_t *o, int slot) { return slot < 0 || o->want[slot]; }

const char *method_label(int method)
{
    return method == METHOD_MPI ? "mpi" : cc_coll_method_name((cc_coll_method_t)method);
}

static unsigned method_caps(int method)
{
    return method == METHOD_MPI ? 0u : cc_coll_method_caps((cc_coll_method_t)method);
}

int method_is_exact(int method) { return (method_caps(method) & CC_COLL_METHOD_CAP_LOSSY) == 0; }

int method_selects(int method) { return (method_caps(method) & CC_COLL_METHOD_CAP_SELECTS) != 0; }

cc_coll_params_t method_params(const options_t *o, int method)
{
    const unsigned caps = method_caps(method);
    cc_coll_params_t p;
    memset(&p, 0, sizeof p);
    p.mask = CC_COLL_PARAMS_FIELD_METHOD;
    p.method = (cc_coll_method_t)method;
    if (o->has_density) {
        p.mask |= CC_COLL_PARAMS_FIELD_DENSITY;
        p.density = o->density;
    }
    if (o->has_ef) {
        p.mask |= CC_COLL_PARAMS_FIELD_EF;
        p.ef = o->ef;
    }
    if (o->has_rank && (caps & CC_COLL_METHOD_CAP_MATRIX)) {
        p.mask |= CC_COLL_PARAMS_FIELD_RANK;
        p.rank = o->rank;
    }
    if (caps & (CC_COLL_METHOD_CAP_MATRIX | CC_COLL_METHOD_CAP_SELECTS)) {
        /* A flat benchmark buffer has no tensor shape: the near-square view
         * (rows = cols = 0), so that a matrix method compresses it (also when
         * a selecting method picks one). */
        p.mask |= CC_COLL_PARAMS_FIELD_SHAPE;
        p.rows = 0;
        p.cols = 0;
    }
    return p;
}
