/* What the mpirun suites expect of a stream argument that is no stream. */
#ifndef CC_COLL_MPI_TESTS_FAKE_STREAM_H
#define CC_COLL_MPI_TESTS_FAKE_STREAM_H

#include "cc_coll.h"

/* The status of a call given a made-up stream (a pointer that is no
 * cudaStream_t): CC_COLL_ERR_NOT_SUPPORTED in a build without CUDA,
 * CC_COLL_ERR_CUDA in a CUDA build on a machine without a GPU (the stream
 * cannot be synchronised), and CC_COLL_OK where a GPU is present, meaning
 * "do not try": a made-up stream is undefined behaviour in CUDA itself (the
 * GPU suite tests real streams). */
static inline cc_coll_status_t fake_stream_status(void)
{
    if (!(cc_coll_build_flags() & CC_COLL_BUILD_CUDA)) return CC_COLL_ERR_NOT_SUPPORTED;
    return cc_coll_cuda_device_count() == 0 ? CC_COLL_ERR_CUDA : CC_COLL_OK;
}

#endif
