// HALF's host kernels (half_codec.hpp): element-wise over contiguous ranges
// on the communicator's threads, so results do not depend on the thread
// count; decode_sum adds the blocks in block (rank) order.
#include <algorithm>
#include <cstdint>

#include "compressors/half/half_codec.hpp"
#include "core/dtype.hpp"
#include "core/parallel.hpp"

namespace cc_coll::detail {

namespace {

constexpr std::size_t kGrain = std::size_t{1} << 14;

// The loops with the format and the error's use fixed at compile time, so
// the compiler can vectorise them; the same conversions as the device's.
template <half::Format F, int Error, typename W>
void encode_range(const W *v, std::size_t b, std::size_t e, std::uint16_t *out, W *error)
{
    for (std::size_t i = b; i < e; ++i) {
        const W value = v[i];
        const std::uint16_t c = half::encode_one(value, F);
        out[i] = c;
        if constexpr (Error != 0) {
            const W err = value - static_cast<W>(half::decode_one(c, F));
            error[i] = half::kept_error(Error == 2 ? error[i] + err : err);
        }
    }
}

template <half::Format F, typename W>
void decode_sum_range(const std::uint16_t *in, std::size_t blocks, std::size_t n, std::size_t b, std::size_t e,
                      W *sum)
{
    // 0 + block 0 first, as the device does (a -0 code sums to +0).
    for (std::size_t i = b; i < e; ++i) sum[i] = W(0) + static_cast<W>(half::decode_one(in[i], F));
    for (std::size_t r = 1; r < blocks; ++r) {
        const std::uint16_t *block = in + r * n;
        for (std::size_t i = b; i < e; ++i) sum[i] += static_cast<W>(half::decode_one(block[i], F));
    }
}

template <half::Format F, typename W>
void encode_any(const W *v, std::size_t b, std::size_t e, std::uint16_t *out, W *error, bool accumulate)
{
    if (error == nullptr) encode_range<F, 0>(v, b, e, out, error);
    else if (accumulate) encode_range<F, 2>(v, b, e, out, error);
    else encode_range<F, 1>(v, b, e, out, error);
}

}  // namespace

template <typename W>
cc_coll_status_t HalfCodec::encode(HostExec &x, const CallParams &p, const W *v, std::size_t n, unsigned char *out,
                                   W *error, bool accumulate)
{
    const half::Format f = format(p);
    auto *codes = reinterpret_cast<std::uint16_t *>(out);  // 2-byte aligned: whole codes into scratch
    parallel_for(n, x.comm().threads(), kGrain, [&](std::size_t b, std::size_t e) {
        if (f == half::Format::Bf16) encode_any<half::Format::Bf16, W>(v, b, e, codes, error, accumulate);
        else encode_any<half::Format::Fp16, W>(v, b, e, codes, error, accumulate);
    });
    return CC_COLL_OK;
}

// The sum of the blocks in block (rank) order: sum = block 0, then += block
// 1, ... (the same additions, in the same order, as the device's loop).
template <typename W>
cc_coll_status_t HalfCodec::decode_sum(HostExec &x, const CallParams &p, const unsigned char *in, std::size_t blocks,
                                       std::size_t n, W *sum)
{
    const half::Format f = format(p);
    const auto *codes = reinterpret_cast<const std::uint16_t *>(in);
    parallel_for(n, x.comm().threads(), kGrain, [&](std::size_t b, std::size_t e) {
        if (f == half::Format::Bf16) decode_sum_range<half::Format::Bf16, W>(codes, blocks, n, b, e, sum);
        else decode_sum_range<half::Format::Fp16, W>(codes, blocks, n, b, e, sum);
    });
    return CC_COLL_OK;
}

cc_coll_status_t HalfCodec::decode_store(HostExec &x, const CallParams &p, const unsigned char *in, std::size_t n,
                                         cc_coll_dtype_t dtype, void *dst)
{
    const half::Format f = format(p);
    const std::size_t es = dtype_size(dtype);
    const auto *codes = reinterpret_cast<const std::uint16_t *>(in);
    parallel_for(n, x.comm().threads(), kGrain, [&](std::size_t b, std::size_t e) {
        float v[256];
        for (std::size_t i = b; i < e; i += 256) {
            const std::size_t len = std::min<std::size_t>(256, e - i);
            if (f == half::Format::Bf16)
                for (std::size_t j = 0; j < len; ++j) v[j] = half::decode_one(codes[i + j], half::Format::Bf16);
            else
                for (std::size_t j = 0; j < len; ++j) v[j] = half::decode_one(codes[i + j], half::Format::Fp16);
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
