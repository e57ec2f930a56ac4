// HALF's host kernels (half_codec.hpp): element-wise over contiguous ranges
// on the communicator's threads, so results do not depend on the thread
// count; decode_sum adds the blocks in block (rank) order.
#include <cstring>

#include "compressors/half/half_codec.hpp"
#include "core/dtype.hpp"
#include "core/parallel.hpp"

namespace cc_coll::detail {

namespace {

constexpr std::size_t kGrain = std::size_t{1} << 14;

std::uint16_t code_at(const unsigned char *in, std::size_t i)
{
    std::uint16_t c;
    std::memcpy(&c, in + 2 * i, 2);
    return c;
}

}  // namespace

template <typename W>
cc_coll_status_t HalfCodec::encode(HostExec &x, const CallParams &p, const W *v, std::size_t n, unsigned char *out,
                                   W *error, bool accumulate)
{
    const half::Format f = format(p);
    parallel_for(n, x.comm().threads(), kGrain, [&](std::size_t b, std::size_t e) {
        for (std::size_t i = b; i < e; ++i) {
            const W value = v[i];
            const std::uint16_t c = half::encode_one(value, f);
            std::memcpy(out + 2 * i, &c, 2);
            if (error != nullptr) {
                const W err = value - static_cast<W>(half::decode_one(c, f));
                error[i] = accumulate ? error[i] + err : err;
            }
        }
    });
    return CC_COLL_OK;
}

template <typename W>
cc_coll_status_t HalfCodec::decode_sum(HostExec &x, const CallParams &p, const unsigned char *in, std::size_t blocks,
                                       std::size_t n, W *sum)
{
    const half::Format f = format(p);
    parallel_for(n, x.comm().threads(), kGrain, [&](std::size_t b, std::size_t e) {
        for (std::size_t i = b; i < e; ++i) {
            W s = 0;
            for (std::size_t r = 0; r < blocks; ++r) s += static_cast<W>(half::decode_one(code_at(in + 2 * n * r, i), f));
            sum[i] = s;
        }
    });
    return CC_COLL_OK;
}

cc_coll_status_t HalfCodec::decode_store(HostExec &x, const CallParams &p, const unsigned char *in, std::size_t n,
                                         cc_coll_dtype_t dtype, void *dst)
{
    const half::Format f = format(p);
    const std::size_t es = dtype_size(dtype);
    parallel_for(n, x.comm().threads(), kGrain, [&](std::size_t b, std::size_t e) {
        float v[256];
        for (std::size_t i = b; i < e; i += 256) {
            const std::size_t len = std::min<std::size_t>(256, e - i);
            for (std::size_t j = 0; j < len; ++j) v[j] = half::decode_one(code_at(in, i + j), f);
            store_as<float>(v, len, dtype, static_cast<unsigned char *>(dst) + i * es);
        }
    });
    return CC_COLL_OK;
}

template cc_coll_status_t HalfCodec::encode<float>(HostExec &, const CallParams &, const float *, std::size_t,
                                                   unsigned char *, float *, bool);
template cc_coll_status_t HalfCodec::encode<double>(HostExec &, const CallParams &, const double *, std::size_t,
                                                    unsigned char *, double *, bool);
template cc_coll_status_t HalfCodec::decode_sum<float>(HostExec &, const CallParams &, const unsigned char *,
                                                       std::size_t, std::size_t, float *);
template cc_coll_status_t HalfCodec::decode_sum<double>(HostExec &, const CallParams &, const unsigned char *,
                                                        std::size_t, std::size_t, double *);

}  // namespace cc_coll::detail
