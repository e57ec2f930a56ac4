#include "gpu/gpu.hpp"

#include "core/error.hpp"

#ifdef CC_COLL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace cc_coll::detail::gpu {

Location locate(const void *ptr)
{
#ifdef CC_COLL_HAVE_CUDA
    if (ptr == nullptr) return Location::Host;
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
        (void)cudaGetLastError();  // no driver or device: host memory
        return Location::Host;
    }
    return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged ? Location::Device
                                                                                    : Location::Host;
#else
    (void)ptr;
    return Location::Host;
#endif
}

int device_count()
{
#ifdef CC_COLL_HAVE_CUDA
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
#else
    return 0;
#endif
}

cc_coll_status_t check(const Result &r, const char *fn)
{
    if (r.ok()) return CC_COLL_OK;
    return fail(CC_COLL_ERR_CUDA, "%s: %s failed (%s status %d%s%s)", fn, r.call, r.library ? r.library : "CUDA",
                r.code, r.text ? ": " : "", r.text ? r.text : "");
}

}  // namespace cc_coll::detail::gpu
