#include "core/ef_store.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "gpu/gpu.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace cc_coll::detail {

EfKey EfKey::from(bool has_key, std::uint64_t key, const void *recvbuf, std::size_t count, cc_coll_dtype_t dtype)
{
    EfKey k;
    if (has_key) {
        k.is_explicit = true;
        k.key = key;
    } else {
        k.address = reinterpret_cast<std::uintptr_t>(recvbuf);
        k.count = count;
        k.dtype = static_cast<int>(dtype);
    }
    return k;
}

EfKey EfKey::channel(int peer, bool has_key, std::uint64_t key, int tag)
{
    EfKey k;
    k.is_explicit = true;
    k.peer = peer;
    k.by_tag = !has_key;
    k.key = has_key ? key : static_cast<std::uint64_t>(tag);
    return k;
}

std::size_t EfKeyHash::operator()(const EfKey &k) const
{
    std::uint64_t h = k.is_explicit ? (k.key ^ 0x9e3779b97f4a7c15ull)
                                    : (k.address * 0x9e3779b97f4a7c15ull) ^ (k.count << 3) ^ static_cast<unsigned>(k.dtype);
    h ^= (static_cast<std::uint64_t>(static_cast<std::uint32_t>(k.peer)) << 1 | (k.by_tag ? 1u : 0u)) *
         0xc2b2ae3d27d4eb4full;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return static_cast<std::size_t>(h);
}

cc_coll_status_t EfStore::find_matching(const EfKey &key, std::size_t count, cc_coll_dtype_t dtype, Residual **out,
                                        bool on_device)
{
    auto it = residuals_.find(key);
    if (it == residuals_.end()) {
        *out = nullptr;
        return CC_COLL_OK;
    }
    Residual &r = it->second;
    if (r.count != count || r.dtype != dtype)
        return fail(CC_COLL_ERR_MISMATCH,
                    "ef_key %llu holds a residual of %zu %s elements but this call has %zu %s elements; use "
                    "another key or cc_coll_ef_reset() first",
                    static_cast<unsigned long long>(key.key), r.count, dtype_name(r.dtype), count,
                    dtype_name(dtype));
    if (r.on_device() != on_device)
        return fail(CC_COLL_ERR_MISMATCH,
                    "the residual of this tensor is in %s memory but this call's buffers are %s memory; use "
                    "another key or cc_coll_ef_reset() first",
                    r.on_device() ? "device" : "host", on_device ? "device" : "host");
    *out = &r;
    return CC_COLL_OK;
}

cc_coll_status_t EfStore::check_room(std::size_t count, cc_coll_dtype_t dtype) const
{
    const std::uint64_t need = count * (dtype == CC_COLL_F64 ? sizeof(double) : sizeof(float));
    if (max_bytes_ != 0 && bytes_ + need > max_bytes_)
        return fail(CC_COLL_ERR_EF_LIMIT,
                    "a new error-feedback residual of %llu bytes (%zu %s elements) would raise this "
                    "communicator's residual memory from %llu to %llu bytes, over CC_COLL_EF_MAX_BYTES = %llu; "
                    "raise the cap, reset residuals, or turn EF off for this call",
                    static_cast<unsigned long long>(need), count, dtype_name(dtype),
                    static_cast<unsigned long long>(bytes_), static_cast<unsigned long long>(bytes_ + need),
                    static_cast<unsigned long long>(max_bytes_));
    return CC_COLL_OK;
}

cc_coll_status_t EfStore::acquire(const EfKey &key, std::size_t count, cc_coll_dtype_t dtype, Residual **out,
                                  DeviceAllocator device)
{
    cc_coll_status_t st = find_matching(key, count, dtype, out, device != nullptr);
    if (st != CC_COLL_OK || *out != nullptr) return st;
    if ((st = check_room(count, dtype)) != CC_COLL_OK) return st;
    const std::uint64_t need = count * (dtype == CC_COLL_F64 ? sizeof(double) : sizeof(float));
    Residual r;
    r.dtype = dtype;
    r.count = count;
    if (device != nullptr) {
        r.device = device(need, &st);
        if (r.device == nullptr) return st;
    } else if (dtype == CC_COLL_F64) {
        r.f64.assign(count, 0.0);
    } else {
        r.f32.assign(count, 0.0f);
    }
    auto ins = residuals_.emplace(key, std::move(r));
    bytes_ += need;
    *out = &ins.first->second;
    return CC_COLL_OK;
}

const Residual *EfStore::find(const EfKey &key) const
{
    auto it = residuals_.find(key);
    return it == residuals_.end() ? nullptr : &it->second;
}

void EfStore::reset(const EfKey &key)
{
    auto it = residuals_.find(key);
    if (it == residuals_.end()) return;
    bytes_ -= it->second.bytes();
    residuals_.erase(it);
}

void EfStore::reset_all()
{
    residuals_.clear();
    bytes_ = 0;
}

void EfStore::replace_all(Map residuals)
{
    residuals_ = std::move(residuals);
    bytes_ = 0;
    for (const auto &kv : residuals_) bytes_ += kv.second.bytes();
}

cc_coll_status_t residual_to_host(const Residual &r, double *out, const char *fn)
{
    if (r.on_device()) {
        std::vector<unsigned char> host(r.bytes());
        const cc_coll_status_t st = gpu::copy_to_host(host.data(), r.device.get(), host.size(), fn);
        if (st != CC_COLL_OK) return st;
        for (std::size_t i = 0; i < r.count; ++i) {
            if (r.dtype == CC_COLL_F64) {
                std::memcpy(&out[i], host.data() + i * sizeof(double), sizeof(double));
            } else {
                float f;
                std::memcpy(&f, host.data() + i * sizeof(float), sizeof f);
                out[i] = f;
            }
        }
        return CC_COLL_OK;
    }
    if (r.dtype == CC_COLL_F64) std::copy(r.f64.begin(), r.f64.end(), out);
    else std::copy(r.f32.begin(), r.f32.end(), out);
    return CC_COLL_OK;
}

}  // namespace cc_coll::detail
