#include "core/error.hpp"

#include <cstdarg>
#include <cstdio>
#include <string>

#include "core/log.hpp"

namespace cc_coll::detail {

namespace {
thread_local std::string t_last_error;
}

cc_coll_status_t fail(cc_coll_status_t status, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    try {
        t_last_error = buf;
    } catch (...) {
        // Out of memory while recording an error: keep the status, lose the text.
    }
    log_message(LogLevel::Error, "%s: %s", status_string(status), buf);
    return status;
}

void clear_error() { t_last_error.clear(); }

const char *last_error() { return t_last_error.c_str(); }

const char *status_string(cc_coll_status_t status)
{
    switch (status) {
    case CC_COLL_OK: return "CC_COLL_OK: success";
    case CC_COLL_ERR_NULL_BUFFER: return "CC_COLL_ERR_NULL_BUFFER: a buffer is NULL while count > 0";
    case CC_COLL_ERR_INVALID_DTYPE: return "CC_COLL_ERR_INVALID_DTYPE: unknown data type";
    case CC_COLL_ERR_INVALID_OP: return "CC_COLL_ERR_INVALID_OP: unknown reduction operation";
    case CC_COLL_ERR_INVALID_METHOD: return "CC_COLL_ERR_INVALID_METHOD: unknown compression method";
    case CC_COLL_ERR_COUNT_OVERFLOW: return "CC_COLL_ERR_COUNT_OVERFLOW: count does not fit MPI's count type";
    case CC_COLL_ERR_INVALID_COMM: return "CC_COLL_ERR_INVALID_COMM: NULL or destroyed communicator handle";
    case CC_COLL_ERR_INVALID_PARAMS: return "CC_COLL_ERR_INVALID_PARAMS: params struct has unknown mask bits";
    case CC_COLL_ERR_INVALID_ARG: return "CC_COLL_ERR_INVALID_ARG: invalid argument";
    case CC_COLL_ERR_MPI: return "CC_COLL_ERR_MPI: an MPI call failed";
    case CC_COLL_ERR_MPI_NOT_INITIALIZED: return "CC_COLL_ERR_MPI_NOT_INITIALIZED: MPI is not initialised or already finalised";
    case CC_COLL_ERR_VERSION_MISMATCH: return "CC_COLL_ERR_VERSION_MISMATCH: header and library versions disagree";
    case CC_COLL_ERR_CONFIG: return "CC_COLL_ERR_CONFIG: invalid CC_COLL_* environment setting";
    case CC_COLL_ERR_NOT_SUPPORTED: return "CC_COLL_ERR_NOT_SUPPORTED: not supported by this build";
    case CC_COLL_ERR_NO_MEMORY: return "CC_COLL_ERR_NO_MEMORY: out of memory";
    case CC_COLL_ERR_INTERNAL: return "CC_COLL_ERR_INTERNAL: internal error in libcc_coll";
    case CC_COLL_ERR_EF_LIMIT:
        return "CC_COLL_ERR_EF_LIMIT: a new residual would exceed CC_COLL_EF_MAX_BYTES, or new method state "
               "CC_COLL_STATE_MAX_BYTES";
    case CC_COLL_ERR_MISMATCH: return "CC_COLL_ERR_MISMATCH: ranks or calls disagree on a tensor's count, dtype or parameters";
    case CC_COLL_ERR_CUDA: return "CC_COLL_ERR_CUDA: a CUDA, cuBLAS, cuSOLVER or cuRAND call failed";
    }
    return "CC_COLL_ERR_UNKNOWN: not a cc_coll_status_t value";
}

}  // namespace cc_coll::detail
