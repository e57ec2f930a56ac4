// QUANT's and ONEBIT's CUDA kernels (src/compressors/quant/quant_cuda.hpp)
// run on a GPU against the host loops on the same data, bit for bit as
// quant_kernels.hpp promises: the coded block (headers, codes, padding) and
// the kept error, stored or added, of quant::cuda::encode against
// quant::encode_host; decode_sum of several blocks in block order; and
// decode_store into each dtype against the host's decode and store_as.
// test_quant_cuda_host.cc replays the same kernels' steps without a GPU.
// Every test skips without a CUDA device. A chunk holding a NaN decodes
// to NaN on both, but not to the same NaN: device arithmetic returns the
// canonical NaN, the host's keeps its operand's payload (docs/gpu.md), so
// two NaNs of a dtype compare equal.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include "cc_coll.h"
#include "compressors/quant/quant_codec.hpp"
#include "compressors/quant/quant_cuda.hpp"
#include "core/dtype.hpp"
#include "device_test_util.hpp"
#include "gpu/gpu.hpp"

namespace cc_coll::detail {
namespace {

using device_test::DeviceBuffer;
using device_test::ok;
using quant::Options;
using quant::Rounding;
using quant::Scheme;

constexpr std::size_t kLarge = 3 * (std::size_t{1} << 20) + 17;  // many chunks per warp slot, odd tail

template <typename W>
std::vector<W> gaussian(std::size_t n, std::uint32_t seed)
{
    std::mt19937 rng(seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<W> x(n);
    for (W &v : x) v = static_cast<W>(normal(rng));
    // Some non-finite chunks (all NaN when decoded, their error kept at 0).
    if (n > 5000) {
        x[4097] = static_cast<W>(std::nan(""));
        x[n - 2] = static_cast<W>(std::numeric_limits<double>::infinity());
    }
    return x;
}

std::vector<Options> configs()
{
    std::vector<Options> out;
    for (const unsigned bits : {1u, 3u, 4u, 8u})
        for (const Scheme s : {Scheme::MaxMin, Scheme::Norm})
            for (const Rounding r : {Rounding::Nearest, Rounding::Stochastic}) {
                Options o;
                o.bits = bits;
                o.scheme = s;
                o.rounding = r;
                o.chunk = bits == 3 ? 100 : quant::kDefaultChunk;
                out.push_back(o);
            }
    out.push_back(quant::onebit_options(0));
    out.push_back(quant::onebit_options(33));
    return out;
}

std::string describe(const Options &o)
{
    return "bits " + std::to_string(o.bits) + " scheme " + std::to_string(static_cast<int>(o.scheme)) +
           " rounding " + std::to_string(static_cast<int>(o.rounding)) + " chunk " + std::to_string(o.chunk);
}

// The element at `a` and `b` (one of dtype `d` each) is the same: the same
// bits, or NaN on both.
bool same_element(const unsigned char *a, const unsigned char *b, cc_coll_dtype_t d)
{
    const std::size_t es = dtype_size(d);
    if (std::memcmp(a, b, es) == 0) return true;
    const auto is_nan = [d, es](const unsigned char *p) {
        std::uint64_t bits = 0;
        std::memcpy(&bits, p, es);
        switch (d) {
        case CC_COLL_F64: return (bits & 0x7ff0000000000000ull) == 0x7ff0000000000000ull && (bits & 0xfffffffffffffull) != 0;
        case CC_COLL_F16: return (bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu) != 0;
        case CC_COLL_BF16: return (bits & 0x7f80u) == 0x7f80u && (bits & 0x7fu) != 0;
        default: return (bits & 0x7f800000u) == 0x7f800000u && (bits & 0x7fffffu) != 0;
        }
    };
    return is_nan(a) && is_nan(b);
}

template <typename W>
constexpr cc_coll_dtype_t dtype_of()
{
    return sizeof(W) == 8 ? CC_COLL_F64 : CC_COLL_F32;
}

class QuantDevice : public device_test::StreamTest {
protected:
    template <typename W>
    void encode_case(const Options &o, std::size_t n, int err_mode)
    {
        const std::string what = describe(o) + " n " + std::to_string(n) + " error mode " + std::to_string(err_mode);
        const std::vector<W> v = gaussian<W>(n, 3);
        const std::size_t bytes = quant::coded_size(n, o.chunk, o.bits);
        std::vector<unsigned char> host(bytes);
        std::vector<W> e_host = gaussian<W>(n, 4);
        const std::vector<W> e_start = e_host;
        const unsigned stage = err_mode == 2 ? 2 : 1;
        quant::encode_host<W>(o, 77, stage, v.data(), n, host.data(), err_mode ? e_host.data() : nullptr,
                              err_mode == 2);

        DeviceBuffer<W> dv(v), de(e_start);
        DeviceBuffer<unsigned char> dout(bytes);
        ASSERT_CUDA(dv.status());
        ASSERT_CUDA(de.status());
        ASSERT_CUDA(dout.fill(device_test::kFill, stream_));
        ASSERT_TRUE(ok(quant::cuda::encode<W>(o, 77, stage, dv.get(), n, dout.get(), err_mode ? de.get() : nullptr,
                                              err_mode == 2, stream_)));
        std::vector<unsigned char> dev;
        std::vector<W> e_dev;
        ASSERT_CUDA(dout.read(&dev, stream_));
        ASSERT_CUDA(de.read(&e_dev, stream_));
        for (std::size_t i = 0; i < bytes; ++i)
            ASSERT_EQ(dev[i], host[i]) << what << ": byte " << i << " (chunk " << i / quant::stride(o.chunk, o.bits)
                                       << ")";
        for (std::size_t i = 0; i < n; ++i)
            ASSERT_EQ(std::memcmp(&e_dev[i], &e_host[i], sizeof(W)), 0) << what << ": error of element " << i;
    }

    template <typename W>
    void decode_sum_case(const Options &o, std::size_t n, std::size_t blocks)
    {
        const std::size_t B = quant::coded_size(n, o.chunk, o.bits);
        std::vector<unsigned char> in(blocks * B);
        std::vector<W> expect(n);
        std::vector<float> dec(n);
        for (std::size_t r = 0; r < blocks; ++r) {
            const std::vector<W> v = gaussian<W>(n, static_cast<std::uint32_t>(10 + r));
            quant::encode_host<W>(o, 5, 1, v.data(), n, in.data() + r * B, nullptr, false);
            quant::decode_host(o, in.data() + r * B, n, dec.data());
            for (std::size_t i = 0; i < n; ++i)
                expect[i] = (r == 0 ? W(0) : expect[i]) + static_cast<W>(dec[i]);
        }
        DeviceBuffer<unsigned char> din(in);
        DeviceBuffer<W> dsum(n);
        ASSERT_CUDA(din.status());
        ASSERT_TRUE(ok(quant::cuda::decode_sum<W>(o, din.get(), blocks, n, dsum.get(), stream_)));
        std::vector<W> got;
        ASSERT_CUDA(dsum.read(&got, stream_));
        for (std::size_t i = 0; i < n; ++i)
            ASSERT_TRUE(same_element(reinterpret_cast<const unsigned char *>(&got[i]),
                                     reinterpret_cast<const unsigned char *>(&expect[i]), dtype_of<W>()))
                << describe(o) << ": sum of element " << i << ": " << got[i] << " against " << expect[i];
    }

};

TEST_F(QuantDevice, EncodeMatchesTheHost)
{
    for (const Options &o : configs())
        for (int err_mode = 0; err_mode < 3; ++err_mode) {
            encode_case<float>(o, kLarge, err_mode);
            encode_case<double>(o, 1001, err_mode);
            if (HasFatalFailure()) return;
        }
}

TEST_F(QuantDevice, OneElementChunks)
{
    Options o;
    o.chunk = 1;
    encode_case<float>(o, 4099, 1);
    encode_case<float>(quant::onebit_options(1), 4099, 2);
}

TEST_F(QuantDevice, DecodeSumInBlockOrder)
{
    for (const Options &o : configs()) {
        decode_sum_case<float>(o, kLarge, 3);
        decode_sum_case<double>(o, 1001, 4);
        if (HasFatalFailure()) return;
    }
}

TEST_F(QuantDevice, DecodeStoreEveryDtype)
{
    const Options o;
    const std::size_t n = kLarge;
    const std::vector<float> v = gaussian<float>(n, 21);
    std::vector<unsigned char> in(quant::coded_size(n, o.chunk, o.bits));
    quant::encode_host<float>(o, 0, 1, v.data(), n, in.data(), nullptr, false);
    std::vector<float> dec(n);
    quant::decode_host(o, in.data(), n, dec.data());
    DeviceBuffer<unsigned char> din(in);
    ASSERT_CUDA(din.status());
    for (const cc_coll_dtype_t dtype : {CC_COLL_F32, CC_COLL_F64, CC_COLL_F16, CC_COLL_BF16}) {
        const std::size_t es = dtype_size(dtype);
        std::vector<unsigned char> expect(n * es);
        store_as<float>(dec.data(), n, dtype, expect.data());
        DeviceBuffer<unsigned char> dst(n * es);
        ASSERT_CUDA(dst.fill(device_test::kFill, stream_));
        ASSERT_TRUE(ok(quant::cuda::decode_store(o, din.get(), n, dtype, dst.get(), stream_)));
        std::vector<unsigned char> got;
        ASSERT_CUDA(dst.read(&got, stream_));
        for (std::size_t i = 0; i < n; ++i)
            ASSERT_TRUE(same_element(&got[i * es], &expect[i * es], dtype)) << "dtype " << dtype << ": element " << i;
    }
}

}  // namespace
}  // namespace cc_coll::detail
