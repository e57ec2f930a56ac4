// Where a buffer lives and whether this process can use a GPU. Compiled in
// every build: without CUDA every buffer is host memory and there are no
// devices.
#pragma once

#include <cstddef>
#include <memory>

#include "cc_coll.h"
#include "gpu/result.hpp"

namespace cc_coll::detail::gpu {

enum class Location { Host, Device };

// Device for device (cudaMalloc) and managed memory, Host for everything else:
// pageable or pinned host memory, NULL, and every pointer in a build without
// CUDA, on a machine without a usable driver, or in a process that has not
// started CUDA (the driver library is not loaded): locating a host buffer
// never starts CUDA itself.
Location locate(const void *ptr);

// False when no buffer of this process can be device memory yet: a build
// without CUDA, or a process that has not loaded the CUDA driver. Tens of
// nanoseconds; never starts CUDA.
bool device_memory_possible();

// locate() for a call's buffers: Host as above where CUDA is unusable (no
// driver or device, the runtime unloading at exit), but any other failure of
// cudaPointerGetAttributes, such as the sticky error a faulted kernel leaves
// in the context, is CC_COLL_ERR_CUDA naming `fn`: device memory can no
// longer be told from host memory then, and calling it Host would run the
// host algorithm on device pointers.
cc_coll_status_t locate_checked(const void *ptr, Location *out, const char *fn);

// Usable CUDA devices: 0 in a build without CUDA, without a driver or GPU.
int device_count();

// The device that holds device memory `ptr`, or -1.
int device_of(const void *ptr);

// The calling thread's current device, or -1 without CUDA.
int current_device();

// Makes `device` the calling thread's current device (a request's steps on
// the progress thread run on the device of its buffers).
cc_coll_status_t set_device(int device, const char *fn);

// Zeroed device memory of `bytes` bytes on the current device, freed when its
// last owner lets go. nullptr on failure, with the status in *st.
std::shared_ptr<void> device_zeroed(std::size_t bytes, cc_coll_status_t *st);

// Blocking copies between host and device memory (cudaMemcpy) and
// cudaStreamSynchronize; CC_COLL_ERR_CUDA naming `fn` on failure,
// CC_COLL_ERR_NOT_SUPPORTED in a build without CUDA. copy_to_device returns
// once the data is in device memory, so work on any stream, non-blocking
// ones included, may read it.
cc_coll_status_t copy_to_host(void *dst, const void *src, std::size_t bytes, const char *fn);
cc_coll_status_t copy_to_device(void *dst, const void *src, std::size_t bytes, const char *fn);
cc_coll_status_t synchronize(void *stream, const char *fn);

// CC_COLL_OK for a successful result, else CC_COLL_ERR_CUDA naming `fn`, the
// failing call, its library, its code and the library's text.
cc_coll_status_t check(const Result &r, const char *fn);

}  // namespace cc_coll::detail::gpu
