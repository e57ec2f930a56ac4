// Per-thread last-error message and the helper every layer uses to fail.
#pragma once

#include "cc_coll.h"

// Returns the status of `expr` from the enclosing function unless it is
// CC_COLL_OK: the one way the library's steps pass a failure up.
#define CC_COLL_TRY(expr)                            \
    do {                                             \
        const cc_coll_status_t cc_st_ = (expr);      \
        if (cc_st_ != CC_COLL_OK) return cc_st_;     \
    } while (0)

namespace cc_coll::detail {

// Records the calling thread's last-error message (printf-style) and returns
// `status`, so a failing path reads `return fail(CC_COLL_ERR_..., "...")`.
// When CC_COLL_LOG_LEVEL is "error" or more verbose, the message also goes
// to stderr.
cc_coll_status_t fail(cc_coll_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

// Clears the calling thread's last-error message (at the start of each call).
void clear_error();

// The calling thread's last-error message ("" if none).
const char *last_error();

// The static name and description of a status code.
const char *status_string(cc_coll_status_t status);

}  // namespace cc_coll::detail
