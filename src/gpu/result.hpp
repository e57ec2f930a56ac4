// The outcome of a GPU library call (CUDA runtime, cuBLAS, cuSOLVER, cuRAND),
// as the compressors and the transport report it. No CUDA headers here, so
// every layer can carry one; the collectives turn a failure into
// CC_COLL_ERR_CUDA with the call's name in the message.
#pragma once

namespace cc_coll::detail::gpu {

struct Result {
    const char *call = nullptr;     // the failing call ("cublasSgemm"); nullptr: success
    const char *library = nullptr;  // "CUDA", "cuBLAS", "cuSOLVER", "cuRAND"
    int code = 0;                   // the library's status code
    const char *text = nullptr;     // the library's own description, when it has one

    bool ok() const { return call == nullptr; }
    static Result success() { return Result{}; }
};

}  // namespace cc_coll::detail::gpu
