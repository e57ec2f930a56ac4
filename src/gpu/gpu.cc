#include "gpu/gpu.hpp"

#include "core/error.hpp"

#ifdef CC_COLL_HAVE_CUDA
#include <link.h>

#include <atomic>
#include <cstddef>
#include <cstring>

#include <cuda_runtime_api.h>
#endif

namespace cc_coll::detail::gpu {

#ifdef CC_COLL_HAVE_CUDA
namespace {
// Failures that mean this process cannot use CUDA at all (so no buffer can
// be device memory), rather than that a working context broke.
bool cuda_unusable(cudaError_t e)
{
    switch (e) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorStubLibrary:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorSystemNotReady:
    case cudaErrorInitializationError:
    case cudaErrorDevicesUnavailable:  // exclusive-process GPU held by another process
    case cudaErrorNotPermitted:
    case cudaErrorOperatingSystem:
    case cudaErrorCudartUnloading:     // at exit
    case cudaErrorInvalidValue:        // CUDA < 11 on pageable host memory
        return true;
    default:
        return false;
    }
}

// Whether this process has started CUDA: the driver library is loaded.
// Device and managed memory cannot exist before that, and asking the runtime
// about a pointer would itself start CUDA and create a context on the
// current device (GPU memory and start-up time in every rank of a host-only
// program). Once loaded, the driver stays loaded.
//
// The answer "not loaded" is remembered together with the loader's count of
// objects loaded so far (dl_phdr_info::dlpi_adds): while no object has been
// loaded since, the driver cannot have been, and the check costs one
// dl_iterate_phdr callback (tens of nanoseconds) instead of a search of the
// library path. Any new object (dlopen of anything, libcuda or not) makes
// the next call look at the loaded objects' names again.
struct LoadedScan {
    unsigned long long known_adds;  // in: adds at the last negative answer
    unsigned long long adds;        // out: the loader's current count
    bool unchanged;                 // out: adds == known_adds
    bool cuda;                      // out: libcuda.so* is loaded
    bool no_counters;               // out: this C library gives no counters
};

int scan_object(struct dl_phdr_info *info, std::size_t size, void *data)
{
    auto *scan = static_cast<LoadedScan *>(data);
    if (size < offsetof(struct dl_phdr_info, dlpi_subs)) {
        scan->no_counters = true;  // look at every name, remember nothing
    } else if (scan->adds == 0) {  // the first object: compare the counters
        scan->adds = info->dlpi_adds;
        if (scan->adds == scan->known_adds) {
            scan->unchanged = true;
            return 1;
        }
    }
    const char *name = info->dlpi_name;
    if (name != nullptr) {
        const char *base = std::strrchr(name, '/');
        base = base != nullptr ? base + 1 : name;
        if (std::strncmp(base, "libcuda.so", 10) == 0) {
            scan->cuda = true;
            return 1;
        }
    }
    return 0;
}

bool cuda_started()
{
    static std::atomic<bool> started{false};
    static std::atomic<unsigned long long> known_adds{0};  // 0: never scanned
    if (started.load(std::memory_order_relaxed)) return true;
    LoadedScan scan{known_adds.load(std::memory_order_relaxed), 0, false, false, false};
    dl_iterate_phdr(scan_object, &scan);
    if (scan.unchanged) return false;
    if (!scan.cuda) {
        if (!scan.no_counters) known_adds.store(scan.adds, std::memory_order_relaxed);
        return false;
    }
    started.store(true, std::memory_order_relaxed);
    return true;
}

// Where `ptr` lives: cudaSuccess with *out set (Host also where CUDA is
// unusable), or the failure that leaves it unknown.
cudaError_t find_location(const void *ptr, Location *out)
{
    *out = Location::Host;
    if (ptr == nullptr || !cuda_started()) return cudaSuccess;
    cudaPointerAttributes attr{};
    const cudaError_t e = cudaPointerGetAttributes(&attr, ptr);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();  // clears it unless it is sticky
        // Without a usable driver or device no buffer is device memory.
        return cuda_unusable(e) || device_count() == 0 ? cudaSuccess : e;
    }
    if (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) *out = Location::Device;
    return cudaSuccess;
}
}  // namespace
#endif

bool device_memory_possible()
{
#ifdef CC_COLL_HAVE_CUDA
    return cuda_started();
#else
    return false;
#endif
}

Location locate(const void *ptr)
{
    Location where = Location::Host;
#ifdef CC_COLL_HAVE_CUDA
    (void)find_location(ptr, &where);  // a failure leaves Host
#else
    (void)ptr;
#endif
    return where;
}

cc_coll_status_t locate_checked(const void *ptr, Location *out, const char *fn)
{
    *out = Location::Host;
#ifdef CC_COLL_HAVE_CUDA
    const cudaError_t e = find_location(ptr, out);
    if (e == cudaSuccess) return CC_COLL_OK;
    return fail(CC_COLL_ERR_CUDA,
                "%s: cudaPointerGetAttributes failed (CUDA status %d: %s), so whether the buffers are device "
                "memory is unknown (an earlier CUDA error may have left the context unusable)",
                fn, static_cast<int>(e), cudaGetErrorString(e));
#else
    (void)ptr, (void)fn;
    return CC_COLL_OK;
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

int device_of(const void *ptr)
{
#ifdef CC_COLL_HAVE_CUDA
    cudaPointerAttributes attr{};
    if (ptr == nullptr || cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged ? attr.device : -1;
#else
    (void)ptr;
    return -1;
#endif
}

cc_coll_status_t set_device(int device, const char *fn)
{
#ifdef CC_COLL_HAVE_CUDA
    const cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return fail(CC_COLL_ERR_CUDA, "%s: cudaSetDevice(%d) failed: %s", fn, device, cudaGetErrorString(e));
    }
    return CC_COLL_OK;
#else
    return fail(CC_COLL_ERR_NOT_SUPPORTED, "%s: device %d requested but this build has no CUDA support", fn, device);
#endif
}

int current_device()
{
#ifdef CC_COLL_HAVE_CUDA
    int d = -1;
    if (cudaGetDevice(&d) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return d;
#else
    return -1;
#endif
}

#ifdef CC_COLL_HAVE_CUDA
namespace {
cc_coll_status_t cuda_status(cudaError_t e, const char *call, const char *fn)
{
    if (e == cudaSuccess) return CC_COLL_OK;
    (void)cudaGetLastError();
    return fail(CC_COLL_ERR_CUDA, "%s: %s failed (CUDA status %d: %s)", fn, call, static_cast<int>(e),
                cudaGetErrorString(e));
}
}  // namespace
#endif

std::shared_ptr<void> device_zeroed(std::size_t bytes, cc_coll_status_t *st)
{
#ifdef CC_COLL_HAVE_CUDA
    void *p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes > 0 ? bytes : 1);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        *st = fail(CC_COLL_ERR_NO_MEMORY, "cudaMalloc of %zu bytes: out of device memory", bytes);
        return nullptr;
    }
    if ((*st = cuda_status(e, "cudaMalloc", "device residual")) != CC_COLL_OK) return nullptr;
    // cudaMemset may return before it has run, and the caller's stream may be
    // non-blocking: wait for it before the memory is handed out.
    cudaError_t z = cudaMemset(p, 0, bytes);
    if (z == cudaSuccess) z = cudaStreamSynchronize(nullptr);
    if ((*st = cuda_status(z, "cudaMemset", "device residual")) != CC_COLL_OK) {
        (void)cudaFree(p);
        return nullptr;
    }
    return std::shared_ptr<void>(p, [](void *q) { (void)cudaFree(q); });
#else
    (void)bytes;
    *st = fail(CC_COLL_ERR_NOT_SUPPORTED, "device memory: this build has no CUDA support");
    return nullptr;
#endif
}

cc_coll_status_t copy_to_host(void *dst, const void *src, std::size_t bytes, const char *fn)
{
#ifdef CC_COLL_HAVE_CUDA
    if (bytes == 0) return CC_COLL_OK;
    return cuda_status(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (device to host)", fn);
#else
    (void)dst, (void)src, (void)bytes;
    return fail(CC_COLL_ERR_NOT_SUPPORTED, "%s: this build has no CUDA support", fn);
#endif
}

cc_coll_status_t copy_to_device(void *dst, const void *src, std::size_t bytes, const char *fn)
{
#ifdef CC_COLL_HAVE_CUDA
    if (bytes == 0) return CC_COLL_OK;
    // From pageable memory cudaMemcpy may return once the data is staged,
    // before it lands; a non-blocking stream would not wait for the legacy
    // stream that carries it.
    cc_coll_status_t st =
        cuda_status(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (host to device)", fn);
    if (st == CC_COLL_OK)
        st = cuda_status(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize after cudaMemcpy (host to device)",
                         fn);
    return st;
#else
    (void)dst, (void)src, (void)bytes;
    return fail(CC_COLL_ERR_NOT_SUPPORTED, "%s: this build has no CUDA support", fn);
#endif
}

cc_coll_status_t synchronize(void *stream, const char *fn)
{
#ifdef CC_COLL_HAVE_CUDA
    return cuda_status(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)),
                       "cudaStreamSynchronize of the call's stream", fn);
#else
    (void)stream;
    return fail(CC_COLL_ERR_NOT_SUPPORTED, "%s: a stream was given but this build has no CUDA support", fn);
#endif
}

cc_coll_status_t check(const Result &r, const char *fn)
{
    if (r.ok()) return CC_COLL_OK;
    return fail(CC_COLL_ERR_CUDA, "%s: %s failed (%s status %d%s%s)", fn, r.call, r.library ? r.library : "CUDA",
                r.code, r.text ? ": " : "", r.text ? r.text : "");
}

}  // namespace cc_coll::detail::gpu
