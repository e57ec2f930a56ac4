// QUANT's and ONEBIT's device encoder and decoders (quant_cuda.cu) replayed
// on the host, without a GPU: one emulated warp per chunk runs the kernel's
// steps, the functions quant_kernels.hpp writes once for both (lane_stats of
// the 32 lanes, the shuffle tree of merge_stats, stats_header, encode_group
// for each lane's groups, zero_code_tail; decode_group for each group of
// 8 elements), and its bytes, kept errors and decoded values are compared
// bit for bit with the host loops (quant::encode_host, decode_host): every
// bit count, scheme and rounding, chunks around the lane and group widths,
// short last chunks, signed zeros, constant chunks, NaN and infinities,
// steps that overflow, subnormals, binary64 values beyond binary32.
// test_quant_cuda_device.cc runs the kernels themselves where there is a
// GPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "compressors/quant/quant_codec.hpp"

namespace {

using namespace cc_coll::detail;
using quant::Options;
using quant::Rounding;
using quant::Scheme;

// The kernel's warp on one chunk after another (the grid's order does not
// matter: chunks share no byte or element).
template <typename W>
void replay_encode(const Options &o, std::uint64_t seed, unsigned stage, const W *v, std::size_t n,
                   unsigned char *out, W *error, bool accumulate)
{
    const std::size_t S = quant::stride(o.chunk, o.bits);
    for (std::size_t c = 0; c * o.chunk < n; ++c) {
        const std::size_t lo = c * o.chunk, len = std::min<std::size_t>(o.chunk, n - lo);
        const W *x = v + lo;
        W *e = error != nullptr ? error + lo : nullptr;
        unsigned char *chunk = out + c * S;
        quant::LaneStats lanes[quant::kLanes];
        for (unsigned l = 0; l < quant::kLanes; ++l) lanes[l] = quant::lane_stats(x, len, l);
        // __shfl_down_sync: lane l < off reads lane l + off's value of the
        // round before; ascending l never reads a lane updated this round.
        for (unsigned off = quant::kLanes / 2; off > 0; off /= 2)
            for (unsigned l = 0; l < off; ++l) quant::merge_stats(lanes[l], lanes[l + off]);
        const quant::Header h = quant::stats_header(o, lanes[0], len);
        std::memcpy(chunk, &h.offset, 4);
        std::memcpy(chunk + 4, &h.step, 4);
        const std::uint32_t key = o.rounding == Rounding::Stochastic ? quant::chunk_key(seed, stage, c, h) : 0u;
        unsigned char *codes = chunk + quant::kHeaderBytes;
        for (unsigned l = 0; l < quant::kLanes; ++l)
            for (std::size_t g = l; g < (len + 7) / 8; g += quant::kLanes)
                quant::encode_group(o, h, key, x, len, g, codes, e, accumulate);
        quant::zero_code_tail(codes, len, o.bits);
    }
}

enum class Data { Gaussian, SignedZeros, Constant, NonFinite, Overflow, Subnormal, BeyondFloat };
constexpr Data kAllData[] = {Data::Gaussian, Data::SignedZeros, Data::Constant,   Data::NonFinite,
                             Data::Overflow, Data::Subnormal,   Data::BeyondFloat};

template <typename W>
std::vector<W> make_data(Data d, std::size_t n, std::uint32_t seed)
{
    std::mt19937 rng(seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<W> x(n);
    for (std::size_t i = 0; i < n; ++i) {
        const double g = normal(rng);
        switch (d) {
        case Data::Gaussian: x[i] = static_cast<W>(g); break;
        case Data::SignedZeros: x[i] = static_cast<W>(i % 3 == 0 ? 0.0 : i % 3 == 1 ? -0.0 : g > 0 ? 0.0 : -0.0); break;
        case Data::Constant: x[i] = static_cast<W>(i % 97 == 5 ? g : -1.5); break;
        case Data::NonFinite: {
            const double inf = std::numeric_limits<double>::infinity();
            const std::size_t k = i % 211;
            x[i] = static_cast<W>(k == 7 ? std::nan("") : k == 70 ? inf : k == 140 ? -inf : g);
            break;
        }
        case Data::Overflow: x[i] = static_cast<W>(g > 0 ? 3.0e38 : -3.0e38); break;
        case Data::Subnormal: x[i] = static_cast<W>(g * 1e-40); break;
        case Data::BeyondFloat: x[i] = static_cast<W>(i % 53 == 3 ? g * 1e300 : g); break;
        }
    }
    return x;
}

std::string describe(const Options &o, std::size_t n, Data d, int err)
{
    return "bits " + std::to_string(o.bits) + " scheme " + std::to_string(static_cast<int>(o.scheme)) +
           " rounding " + std::to_string(static_cast<int>(o.rounding)) + " chunk " + std::to_string(o.chunk) +
           " n " + std::to_string(n) + " data " + std::to_string(static_cast<int>(d)) + " error mode " +
           std::to_string(err);
}

template <typename T>
bool same_bits(const std::vector<T> &a, const std::vector<T> &b, std::size_t *first)
{
    for (std::size_t i = 0; i < a.size(); ++i)
        if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) {
            *first = i;
            return false;
        }
    return true;
}

// One configuration: the host loops and the replay on the same data and
// error buffers; every byte of both outputs written (they start from
// different garbage), the same bytes, errors and decoded values.
template <typename W>
void check_case(const Options &o, std::size_t n, Data d, int err_mode, std::uint32_t seed)
{
    const std::string what = describe(o, n, d, err_mode);
    const std::vector<W> v = make_data<W>(d, n, seed);
    const std::size_t bytes = quant::coded_size(n, o.chunk, o.bits);
    std::vector<unsigned char> host(bytes, 0xcd), replay(bytes, 0xab);
    // err_mode 0: no error output; 1: stored; 2: added to what is there.
    std::vector<W> e_host = make_data<W>(Data::Gaussian, n, seed + 1), e_replay = e_host;
    const unsigned stage = err_mode == 2 ? 2 : 1;
    const std::uint64_t call_seed = 0x5eed0000ull + seed;
    quant::encode_host<W>(o, call_seed, stage, v.data(), n, host.data(), err_mode ? e_host.data() : nullptr,
                          err_mode == 2);
    replay_encode<W>(o, call_seed, stage, v.data(), n, replay.data(), err_mode ? e_replay.data() : nullptr,
                     err_mode == 2);
    std::size_t at = 0;
    ASSERT_TRUE(same_bits(host, replay, &at)) << what << ": byte " << at << " host " << int(host[at]) << " replay "
                                              << int(replay[at]);
    ASSERT_TRUE(same_bits(e_host, e_replay, &at)) << what << ": error of element " << at;
    std::vector<float> dh(n), dr(n);
    quant::decode_host(o, host.data(), n, dh.data());
    // The decoders' threads, one per group of 8 (each writes its elements).
    std::vector<unsigned> written(n, 0);
    for (std::size_t t = 0; t < quant::group_count(o, n); ++t) {
        const quant::GroupAt a = quant::group_at(o, n, t);
        float v[8];
        quant::decode_group(o, replay.data(), a, v);
        for (unsigned j = 0; j < a.count; ++j) {
            dr[a.first + j] = v[j];
            ++written[a.first + j];
        }
    }
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(written[i], 1u) << what << ": element " << i << " decoded";
    ASSERT_TRUE(same_bits(dh, dr, &at)) << what << ": decoded element " << at;
}

// Chunks around the lanes (32) and the groups (8), and QUANT's default.
constexpr std::uint32_t kChunks[] = {1, 3, 8, 31, 32, 33, 100, 256};

std::vector<std::size_t> sizes(std::uint32_t chunk)
{
    std::vector<std::size_t> n{1, chunk, 2 * std::size_t{chunk} + 5, 777};
    if (chunk > 1) n.push_back(chunk - 1);
    return n;
}

template <typename W>
void sweep_quant()
{
    std::uint32_t seed = 1;
    for (unsigned bits = 1; bits <= 8; ++bits)
        for (const Scheme s : {Scheme::MaxMin, Scheme::Norm})
            for (const Rounding r : {Rounding::Nearest, Rounding::Stochastic})
                for (const std::uint32_t chunk : kChunks)
                    for (const std::size_t n : sizes(chunk))
                        for (const Data d : kAllData) {
                            Options o;
                            o.bits = bits;
                            o.scheme = s;
                            o.rounding = r;
                            o.chunk = chunk;
                            const int err_mode = static_cast<int>(seed % 3);
                            check_case<W>(o, n, d, err_mode, seed++);
                            if (::testing::Test::HasFatalFailure()) return;
                        }
}

template <typename W>
void sweep_onebit()
{
    std::uint32_t seed = 1;
    for (const std::uint32_t chunk : {1u, 3u, 8u, 31u, 32u, 33u, 100u, 1024u})
        for (const std::size_t n : sizes(chunk))
            for (const Data d : kAllData)
                for (int err_mode = 0; err_mode < 3; ++err_mode) {
                    check_case<W>(quant::onebit_options(chunk), n, d, err_mode, seed++);
                    if (::testing::Test::HasFatalFailure()) return;
                }
}

TEST(QuantCudaReplay, QuantFloat) { sweep_quant<float>(); }
TEST(QuantCudaReplay, QuantDouble) { sweep_quant<double>(); }
TEST(QuantCudaReplay, OnebitFloat) { sweep_onebit<float>(); }
TEST(QuantCudaReplay, OnebitDouble) { sweep_onebit<double>(); }

// A long chunk: many elements per lane, a sum of |v| long enough that
// another order of additions would round differently.
TEST(QuantCudaReplay, LongChunks)
{
    for (const std::uint32_t chunk : {4096u, 65536u + 3u}) {
        check_case<float>(quant::onebit_options(chunk), 3 * std::size_t{chunk} + 11, Data::Gaussian, 1, chunk);
        Options o;
        o.chunk = chunk;
        o.rounding = Rounding::Stochastic;
        check_case<double>(o, 2 * std::size_t{chunk} + 1, Data::Gaussian, 2, chunk + 1);
    }
}

// The replay is a real check: a tree in another order than the kernel's
// changes ONEBIT's scale on data where the order of additions matters.
TEST(QuantCudaReplay, TheLaneOrderMatters)
{
    const Options o = quant::onebit_options(4096);
    const std::vector<float> v = make_data<float>(Data::Gaussian, 4096, 9);
    quant::LaneStats lanes[quant::kLanes];
    for (unsigned l = 0; l < quant::kLanes; ++l) lanes[l] = quant::lane_stats(v.data(), v.size(), l);
    quant::LaneStats serial = lanes[0];
    for (unsigned l = 1; l < quant::kLanes; ++l) quant::merge_stats(serial, lanes[l]);
    for (unsigned off = quant::kLanes / 2; off > 0; off /= 2)
        for (unsigned l = 0; l < off; ++l) quant::merge_stats(lanes[l], lanes[l + off]);
    float plain = 0.0f;
    for (const float x : v) plain += std::fabs(x);
    EXPECT_TRUE(serial.abs_sum != lanes[0].abs_sum || plain != lanes[0].abs_sum)
        << "this data does not tell the orders apart; pick another seed";
    std::vector<unsigned char> host(quant::coded_size(v.size(), o.chunk, o.bits));
    quant::encode_host<float>(o, 0, 1, v.data(), v.size(), host.data(), nullptr, false);
    const quant::Header h = quant::stats_header(o, lanes[0], v.size());
    EXPECT_EQ(std::memcmp(host.data() + 4, &h.step, 4), 0) << "the host's scale is the tree's";
}

}  // namespace
