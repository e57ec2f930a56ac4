// Where a buffer lives and whether this process can use a GPU. Compiled in
// every build: without CUDA every buffer is host memory and there are no
// devices.
#pragma once

#include <cstddef>

#include "cc_coll.h"
#include "gpu/result.hpp"

namespace cc_coll::detail::gpu {

enum class Location { Host, Device };

// Device for device (cudaMalloc) and managed memory, Host for everything else:
// pageable or pinned host memory, NULL, and every pointer in a build without
// CUDA or on a machine without a usable driver.
Location locate(const void *ptr);

// Usable CUDA devices: 0 in a build without CUDA, without a driver or GPU.
int device_count();

// CC_COLL_OK for a successful result, else CC_COLL_ERR_CUDA naming `fn`, the
// failing call, its library, its code and the library's text.
cc_coll_status_t check(const Result &r, const char *fn);

}  // namespace cc_coll::detail::gpu
