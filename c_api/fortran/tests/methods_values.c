/* The C side of the Fortran method-listing test (methods.F90): the values
 * of the cc_coll_method_cap_t enumerators as this compiler sees
 * include/cc_coll.h, in the order methods.F90 lists its parameters. */
#include "cc_coll.h"

int cc_coll_ftest_method_cap_values(int *out, int capacity);

int cc_coll_ftest_method_cap_values(int *out, int capacity)
{
    const int v[] = {
        CC_COLL_METHOD_CAP_LOSSY,    CC_COLL_METHOD_CAP_REDUCE_SCATTER, CC_COLL_METHOD_CAP_P2P,
        CC_COLL_METHOD_CAP_MATRIX,   CC_COLL_METHOD_CAP_STATE,          CC_COLL_METHOD_CAP_SELECTS,
        CC_COLL_METHOD_CAP_AUTO_CANDIDATE, CC_COLL_METHOD_CAP_DENSITY,
    };
    const int n = (int)(sizeof v / sizeof v[0]);
    for (int i = 0; i < n && i < capacity; ++i) out[i] = v[i];
    return n;
}
