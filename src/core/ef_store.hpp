// The error-feedback store of a communicator: one residual per tensor key,
// with its memory accounted and an optional cap (CC_COLL_EF_MAX_BYTES).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "cc_coll.h"

namespace cc_coll::detail {

// Names a residual: an explicit caller key, or (recvbuf address, count,
// dtype). Point-to-point channels add the peer and whether `key` is a tag.
struct EfKey {
    bool is_explicit = false;
    std::uint64_t key = 0;
    std::uintptr_t address = 0;
    std::size_t count = 0;
    int dtype = 0;
    int peer = -1;        // p2p: the other rank; -1 for collectives
    bool by_tag = false;  // p2p: `key` is the MPI tag, not params->ef_key

    static EfKey from(bool has_key, std::uint64_t key, const void *recvbuf, std::size_t count, cc_coll_dtype_t dtype);
    // The p2p channel (peer, params->ef_key when has_key, else tag).
    static EfKey channel(int peer, bool has_key, std::uint64_t key, int tag);
    bool operator==(const EfKey &o) const
    {
        return is_explicit == o.is_explicit && peer == o.peer && by_tag == o.by_tag &&
               (is_explicit ? key == o.key : (address == o.address && count == o.count && dtype == o.dtype));
    }
};

struct EfKeyHash {
    std::size_t operator()(const EfKey &k) const;
};

// A residual in the work type of its dtype: binary64 for F64, binary32 else.
// Residuals of calls on device buffers live in device memory (`device`, the
// vectors stay empty); the others in host memory.
struct Residual {
    cc_coll_dtype_t dtype = CC_COLL_F32;
    std::size_t count = 0;
    std::vector<float> f32;
    std::vector<double> f64;
    std::shared_ptr<void> device;

    bool on_device() const { return device != nullptr; }
    std::size_t work_size() const { return dtype == CC_COLL_F64 ? sizeof(double) : sizeof(float); }
    std::uint64_t bytes() const
    {
        return on_device() ? count * work_size() : f32.size() * sizeof(float) + f64.size() * sizeof(double);
    }
    template <typename W>
    W *data();
};

template <>
inline float *Residual::data<float>() { return on_device() ? static_cast<float *>(device.get()) : f32.data(); }
template <>
inline double *Residual::data<double>() { return on_device() ? static_cast<double *>(device.get()) : f64.data(); }

// Where a residual is created: host vectors, or zeroed device memory from
// this allocator (nullptr with the status set on failure).
using DeviceAllocator = std::shared_ptr<void> (*)(std::size_t bytes, cc_coll_status_t *st);

// The residual's values as doubles in host memory (out: r.count elements),
// copied down from device memory for a residual of a call on device buffers.
cc_coll_status_t residual_to_host(const Residual &r, double *out, const char *fn);

class EfStore {
public:
    explicit EfStore(std::uint64_t max_bytes) : max_bytes_(max_bytes) {}

    // The residual for `key`, created zeroed when absent. Errors:
    // CC_COLL_ERR_MISMATCH when an explicit key was used with another count or
    // dtype; CC_COLL_ERR_EF_LIMIT when creating it would pass the cap.
    // With `device` set the residual is created in device memory; a residual
    // in the other kind of memory than the call's is CC_COLL_ERR_MISMATCH.
    cc_coll_status_t acquire(const EfKey &key, std::size_t count, cc_coll_dtype_t dtype, Residual **out,
                             DeviceAllocator device = nullptr);

    // CC_COLL_ERR_EF_LIMIT when a new residual of `count` elements of
    // `dtype` would pass the cap (the message acquire() gives), else OK.
    cc_coll_status_t check_room(std::size_t count, cc_coll_dtype_t dtype) const;

    // The residual for `key`, or nullptr.
    const Residual *find(const EfKey &key) const;

    // Like acquire() for an existing residual, but never creates one: *out is
    // nullptr when `key` has none. CC_COLL_ERR_MISMATCH as acquire().
    cc_coll_status_t find_matching(const EfKey &key, std::size_t count, cc_coll_dtype_t dtype, Residual **out,
                                   bool on_device = false);

    void reset(const EfKey &key);
    void reset_all();

    // Every residual, in no particular order (a checkpoint's export).
    template <typename F>
    void for_each(F &&f) const
    {
        for (const auto &kv : residuals_) f(kv.first, kv.second);
    }
    // Replaces every residual with `residuals` (a checkpoint's import, whose
    // caller has checked them against the cap).
    using Map = std::unordered_map<EfKey, Residual, EfKeyHash>;
    void replace_all(Map residuals);
    std::uint64_t bytes() const { return bytes_; }
    std::uint64_t max_bytes() const { return max_bytes_; }

private:
    std::uint64_t max_bytes_;  // 0: no cap
    std::uint64_t bytes_ = 0;
    Map residuals_;
};

}  // namespace cc_coll::detail
