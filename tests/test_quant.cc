// Methods QUANT and ONEBIT's chunk codec (src/compressors/quant/), without
// MPI: the block layout and its sizes, packing for every bit count, the
// error bounds of each scheme and rounding, stochastic rounding's mean and
// determinism, prefix decodes, non-finite chunks, the codec's error output,
// and the settings that write the options words.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "map_env.hpp"

#include "cc_coll.h"
#include "compressors/quant/quant_codec.hpp"
#include "core/config.hpp"

namespace {

using namespace cc_coll::detail;
using quant::Options;
using quant::Rounding;
using quant::Scheme;

Options make(unsigned bits, Scheme s, Rounding r, std::uint32_t chunk)
{
    Options o;
    o.bits = bits;
    o.scheme = s;
    o.rounding = r;
    o.chunk = chunk;
    return o;
}

std::vector<float> gaussian(std::size_t n, std::uint32_t seed, float scale = 1.0f)
{
    std::mt19937 gen(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (float &x : v) x = d(gen);
    return v;
}

std::vector<unsigned char> encode(const Options &o, const std::vector<float> &v, std::uint64_t seed = 1,
                                  std::vector<float> *error = nullptr)
{
    std::vector<unsigned char> out(quant::coded_size(v.size(), o.chunk, o.bits), 0xAB);
    if (error != nullptr) error->assign(v.size(), 0.0f);
    quant::encode_host<float>(o, seed, 1, v.data(), v.size(), out.data(), error != nullptr ? error->data() : nullptr,
                              false);
    return out;
}

std::vector<float> decode(const Options &o, const std::vector<unsigned char> &in, std::size_t n)
{
    std::vector<float> out(n);
    quant::decode_host(o, in.data(), n, out.data());
    return out;
}

float header(const std::vector<unsigned char> &b, std::size_t offset)
{
    float f;
    std::memcpy(&f, b.data() + offset, 4);
    return f;
}

// ---------------------------------------------------------------- layout

TEST(QuantLayout, CodedSizeIsChunksOfHeaderAndCodesInWholeWords)
{
    // 256 elements of 4 bits: 8 + 128 bytes per chunk.
    EXPECT_EQ(quant::stride(256, 4), 136u);
    EXPECT_EQ(quant::coded_size(0, 256, 4), 0u);
    EXPECT_EQ(quant::coded_size(1, 256, 4), 16u);    // header + 4 bits, padded to 8 bytes
    EXPECT_EQ(quant::coded_size(256, 256, 4), 136u);
    EXPECT_EQ(quant::coded_size(257, 256, 4), 152u);  // a second chunk of one element
    EXPECT_EQ(quant::coded_size(1000, 256, 4), 3 * 136u + 8 + 116 + 4);
    // 3 bits, chunk 8: 3 code bytes, padded to 8.
    EXPECT_EQ(quant::stride(8, 3), 16u);
    EXPECT_EQ(quant::coded_size(20, 8, 3), 16u + 16u + 16u);
    for (unsigned b = 1; b <= 8; ++b)
        for (std::size_t n : {1u, 7u, 8u, 9u, 63u, 64u, 65u, 1000u, 4096u})
            for (std::uint32_t c : {8u, 24u, 256u, 1024u}) {
                const std::size_t s = quant::coded_size(n, c, b);
                EXPECT_EQ(s % 8, 0u) << n << " " << c << " " << b;
                EXPECT_GE(s * 8, n * b + (n + c - 1) / c * 64) << n << " " << c << " " << b;
                // Per chunk: 8 header bytes, whole groups of 8 codes, at most 7 bytes of padding.
                std::size_t want = 0;
                for (std::size_t lo = 0; lo < n; lo += c) {
                    const std::size_t len = std::min<std::size_t>(c, n - lo), used = (len + 7) / 8 * b;
                    want += 8 + used + (8 - used % 8) % 8;
                }
                EXPECT_EQ(s, want) << n << " " << c << " " << b;
            }
}

TEST(QuantLayout, CodecCodedSizeFollowsTheOptionsWord)
{
    CallParams p;
    p.method_options[CC_COLL_METHOD_QUANT] = 8u | (64u << quant::kChunkShift);
    EXPECT_EQ(QuantCodec::coded_size(p, 128), 2 * (8 + 64u));
    p.method_options[CC_COLL_METHOD_QUANT] = 0;  // every field at its default: 4 bits, 256
    EXPECT_EQ(QuantCodec::coded_size(p, 256), 136u);
    p.method_options[CC_COLL_METHOD_ONEBIT] = 0;  // 1 bit, 1024
    EXPECT_EQ(OnebitCodec::coded_size(p, 1024), 8 + 128u);
    p.method_options[CC_COLL_METHOD_ONEBIT] = 64;
    EXPECT_EQ(OnebitCodec::coded_size(p, 128), 2 * (8 + 8u));
}

// Element k of a chunk sits at bits [k b, k b + b) of the code bytes, least
// significant bit first; every code value survives packing for every b.
TEST(QuantLayout, PackingRoundTripsEveryCodeForEveryBitCount)
{
    for (unsigned b = 1; b <= 8; ++b) {
        const unsigned L = (1u << b) - 1u;
        const std::uint32_t chunk = 64;
        // Values 0, 1, ..., L, 0, 1, ...: with offset 0 and step 1 (min 0,
        // max L in every chunk) each value is its own code.
        std::vector<float> v(3 * chunk + 13);
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % (L + 1));
        for (std::size_t c = 0; c * chunk < v.size(); ++c) {
            v[c * chunk] = 0.0f;
            v[c * chunk + 1] = static_cast<float>(L);
        }
        const Options o = make(b, Scheme::MaxMin, Rounding::Nearest, chunk);
        const auto bytes = encode(o, v);
        const auto back = decode(o, bytes, v.size());
        for (std::size_t i = 0; i < v.size(); ++i) ASSERT_EQ(back[i], v[i]) << "b=" << b << " i=" << i;
        // The bits themselves, read back one code at a time.
        const std::size_t S = quant::stride(chunk, b);
        for (std::size_t i = 0; i < v.size(); ++i) {
            const unsigned char *codes = bytes.data() + (i / chunk) * S + quant::kHeaderBytes;
            ASSERT_EQ(quant::read_code(codes, i % chunk, b), static_cast<unsigned>(v[i])) << "b=" << b << " i=" << i;
        }
        // Padding bytes are zero.
        const std::size_t last = (v.size() - 1) / chunk, len = v.size() - last * chunk;
        for (std::size_t j = last * S + 8 + (len + 7) / 8 * b; j < bytes.size(); ++j) ASSERT_EQ(bytes[j], 0) << j;
    }
}

TEST(QuantLayout, HeaderIsOffsetThenStep)
{
    std::vector<float> v = {-1.0f, 2.0f, 0.5f, 0.0f, 1.0f, -0.5f, 1.5f, 2.0f};
    const Options o = make(2, Scheme::MaxMin, Rounding::Nearest, 8);
    const auto bytes = encode(o, v);
    ASSERT_EQ(bytes.size(), 16u);
    EXPECT_EQ(header(bytes, 0), -1.0f);
    EXPECT_EQ(header(bytes, 4), 1.0f);  // (2 - -1) / 3
    // Levels -1, 0, 1, 2; a value halfway between two goes up.
    const auto back = decode(o, bytes, v.size());
    const float want[] = {-1.0f, 2.0f, 1.0f, 0.0f, 1.0f, 0.0f, 2.0f, 2.0f};  // 0.5 -> 1, -0.5 -> 0 (ties up)
    for (int i = 0; i < 8; ++i) EXPECT_EQ(back[i], want[i]) << i;
}

// ---------------------------------------------------------------- error bounds

TEST(QuantNearest, MaxMinErrorAtMostHalfAStep)
{
    for (unsigned b = 1; b <= 8; ++b) {
        const std::uint32_t chunk = 128;
        const auto v = gaussian(1000, 10 + b, 3.0f);
        const Options o = make(b, Scheme::MaxMin, Rounding::Nearest, chunk);
        std::vector<float> err;
        const auto bytes = encode(o, v, 1, &err);
        const auto back = decode(o, bytes, v.size());
        const std::size_t S = quant::stride(chunk, b);
        for (std::size_t i = 0; i < v.size(); ++i) {
            const float step = header(bytes, (i / chunk) * S + 4);
            const float off = header(bytes, (i / chunk) * S);
            ASSERT_GT(step, 0.0f);
            // step / 2, and a few binary32 roundings of the chunk's range.
            const float range = std::fabs(off) + step * static_cast<float>((1u << b) - 1);
            const float tol = step / 2 * (1 + 1e-5f) + 4 * std::numeric_limits<float>::epsilon() * range;
            ASSERT_LE(std::fabs(back[i] - v[i]), tol) << "b=" << b << " i=" << i;
            // The error output is v - decode, exactly.
            ASSERT_EQ(err[i], v[i] - back[i]) << "b=" << b << " i=" << i;
        }
        // The chunk's extremes are levels: min exact.
        for (std::size_t c = 0; c * chunk < v.size(); ++c) {
            float lo = v[c * chunk];
            for (std::size_t i = c * chunk; i < std::min(v.size(), (c + 1) * chunk); ++i) lo = std::min(lo, v[i]);
            EXPECT_EQ(header(bytes, c * S), lo);
        }
    }
}

TEST(QuantNearest, NormSchemeIsSymmetricWithStepTwoMaxOverLevels)
{
    for (unsigned b : {1u, 2u, 4u, 8u}) {
        const std::uint32_t chunk = 64;
        auto v = gaussian(256, 77 + b);
        const Options o = make(b, Scheme::Norm, Rounding::Nearest, chunk);
        const auto bytes = encode(o, v);
        const auto back = decode(o, bytes, v.size());
        const std::size_t S = quant::stride(chunk, b);
        const unsigned L = (1u << b) - 1u;
        for (std::size_t c = 0; c < 4; ++c) {
            float amax = 0.0f;
            for (std::size_t i = c * chunk; i < (c + 1) * chunk; ++i) amax = std::max(amax, std::fabs(v[i]));
            EXPECT_EQ(header(bytes, c * S), -amax);
            EXPECT_EQ(header(bytes, c * S + 4), static_cast<float>(2.0 * amax / L));
            const float step = header(bytes, c * S + 4);
            for (std::size_t i = c * chunk; i < (c + 1) * chunk; ++i) {
                ASSERT_LE(std::fabs(back[i] - v[i]), step / 2 * (1 + 1e-5f) + 1e-6f * amax) << b << " " << i;
                ASSERT_LE(std::fabs(back[i]), amax * (1 + 1e-6f));
            }
        }
        // Symmetric: -v codes to the mirrored levels (nearest; away from ties).
        std::vector<float> neg(v.size());
        for (std::size_t i = 0; i < v.size(); ++i) neg[i] = -v[i];
        const auto back_neg = decode(o, encode(o, neg), v.size());
        int mirrored = 0;
        for (std::size_t i = 0; i < v.size(); ++i) mirrored += std::fabs(back_neg[i] + back[i]) <= 1e-5f * 4;
        EXPECT_GE(mirrored, static_cast<int>(v.size()) * 9 / 10) << b;
    }
}

TEST(QuantNearest, ConstantAndZeroChunksAreExact)
{
    for (Scheme s : {Scheme::MaxMin, Scheme::Norm}) {
        std::vector<float> zeros(100, 0.0f);
        const Options o = make(3, s, Rounding::Nearest, 32);
        std::vector<float> err;
        const auto back = decode(o, encode(o, zeros, 1, &err), zeros.size());
        for (std::size_t i = 0; i < zeros.size(); ++i) {
            EXPECT_EQ(back[i], 0.0f);
            EXPECT_EQ(err[i], 0.0f);
        }
    }
    std::vector<float> c(40, 2.5f);
    const Options o = make(4, Scheme::MaxMin, Rounding::Stochastic, 16);
    const auto back = decode(o, encode(o, c), c.size());
    for (float x : back) EXPECT_EQ(x, 2.5f);
}

// ---------------------------------------------------------------- stochastic rounding

TEST(QuantStochastic, DeterministicForAFixedSeedAndVariesWithIt)
{
    const auto v = gaussian(2000, 5);
    const Options o = make(2, Scheme::MaxMin, Rounding::Stochastic, 256);
    const auto a = encode(o, v, 42), b = encode(o, v, 42), c = encode(o, v, 43);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
    // The stage is part of the draw.
    std::vector<unsigned char> d(a.size());
    quant::encode_host<float>(o, 42, 2, v.data(), v.size(), d.data(), nullptr, false);
    EXPECT_NE(a, d);
}

TEST(QuantStochastic, UnbiasedInTheMeanOverSeeds)
{
    // Every element sits strictly between two levels; the mean of its
    // decodes over many seeds approaches it (nearest would not: it is
    // biased towards the nearer level).
    const std::uint32_t chunk = 64;
    std::vector<float> v(chunk);
    for (std::size_t i = 0; i < chunk; ++i) v[i] = static_cast<float>(i) / (chunk - 1);  // 0 .. 1
    const Options o = make(1, Scheme::MaxMin, Rounding::Stochastic, chunk);  // levels 0 and 1
    const int seeds = 4000;
    std::vector<double> mean(chunk, 0.0);
    for (int s = 0; s < seeds; ++s) {
        const auto back = decode(o, encode(o, v, static_cast<std::uint64_t>(s) * 7919 + 1), chunk);
        for (std::size_t i = 0; i < chunk; ++i) mean[i] += back[i];
    }
    for (std::size_t i = 0; i < chunk; ++i) {
        mean[i] /= seeds;
        // Binomial: sd <= 0.5 / sqrt(4000) = 0.0079; 5 sd.
        EXPECT_NEAR(mean[i], v[i], 0.04) << i;
    }
    // Nearest, by contrast, sends 0.3 as 0.
    const Options near = make(1, Scheme::MaxMin, Rounding::Nearest, chunk);
    EXPECT_EQ(decode(near, encode(near, v), chunk)[19], 0.0f);
}

// ---------------------------------------------------------------- ONEBIT

TEST(Onebit, DecodesToSignTimesMeanMagnitude)
{
    const std::uint32_t chunk = 96;
    auto v = gaussian(250, 9);
    v[3] = 0.0f;
    const Options o = quant::onebit_options(chunk);
    ASSERT_EQ(o.bits, 1u);
    std::vector<float> err;
    const auto bytes = encode(o, v, 1, &err);
    EXPECT_EQ(bytes.size(), 2 * (8 + 16u) + 8 + 8);  // chunks of 96, 96, 58 elements
    const auto back = decode(o, bytes, v.size());
    for (std::size_t c = 0; c * chunk < v.size(); ++c) {
        const std::size_t lo = c * chunk, hi = std::min(v.size(), lo + chunk);
        double sum = 0.0;
        for (std::size_t i = lo; i < hi; ++i) sum += std::fabs(v[i]);
        const double mean = sum / static_cast<double>(hi - lo);
        for (std::size_t i = lo; i < hi; ++i) {
            const double want = v[i] >= 0.0f ? mean : -mean;
            ASSERT_NEAR(back[i], want, 1e-5 * mean) << i;
            ASSERT_EQ(err[i], v[i] - back[i]) << i;
        }
    }
    EXPECT_GT(back[3], 0.0f);  // zero goes up
}

TEST(Onebit, MeanMagnitudeMinimisesTheSquaredError)
{
    // For sign coding the best scale is mean |v|: scaling it either way
    // raises the squared error.
    const auto v = gaussian(1024, 31);
    const Options o = quant::onebit_options(1024);
    const auto back = decode(o, encode(o, v), v.size());
    auto sq = [&](double f) {
        double s = 0.0;
        for (std::size_t i = 0; i < v.size(); ++i) s += (v[i] - f * back[i]) * (v[i] - f * back[i]);
        return s;
    };
    EXPECT_LT(sq(1.0), sq(1.05));
    EXPECT_LT(sq(1.0), sq(0.95));
}

// ---------------------------------------------------------------- prefixes and non-finite

TEST(QuantDecode, PrefixDecodeIsTheFullDecodesPrefix)
{
    for (unsigned b : {1u, 3u, 4u, 7u}) {
        const auto v = gaussian(700, 100 + b);
        const Options o = make(b, Scheme::MaxMin, Rounding::Nearest, 128);
        const auto bytes = encode(o, v);
        const auto full = decode(o, bytes, v.size());
        for (std::size_t n : {1u, 5u, 127u, 128u, 129u, 300u, 699u}) {
            const auto part = decode(o, bytes, n);
            for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(part[i], full[i]) << b << " " << n << " " << i;
        }
    }
}

TEST(QuantDecode, NonFiniteChunkDecodesToNaNAndKeepsNoError)
{
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
        for (const Options &o : {make(4, Scheme::MaxMin, Rounding::Nearest, 64),
                                 make(4, Scheme::Norm, Rounding::Stochastic, 64), quant::onebit_options(64)}) {
            auto v = gaussian(200, 3);
            v[70] = bad;  // chunk 1 of 0..3
            std::vector<float> err;
            const auto back = decode(o, encode(o, v, 1, &err), v.size());
            for (std::size_t i = 0; i < v.size(); ++i) {
                if (i >= 64 && i < 128) {
                    ASSERT_TRUE(std::isnan(back[i])) << i;
                    ASSERT_EQ(err[i], 0.0f) << i;
                } else {
                    ASSERT_TRUE(std::isfinite(back[i])) << i;
                    ASSERT_EQ(err[i], v[i] - back[i]) << i;
                }
            }
        }
    }
    // A finite chunk whose range overflows binary32 is not finite either.
    std::vector<float> wide = {-3e38f, 3e38f, 0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f};
    const Options o = make(1, Scheme::MaxMin, Rounding::Nearest, 8);
    const auto back = decode(o, encode(o, wide), wide.size());
    for (float x : back) EXPECT_TRUE(std::isnan(x));
}

TEST(QuantDecode, AccumulateAddsTheErrorAndDoubleInputsWork)
{
    std::vector<double> v(300);
    std::mt19937 gen(8);
    std::normal_distribution<double> d;
    for (double &x : v) x = d(gen);
    const Options o = make(4, Scheme::MaxMin, Rounding::Nearest, 256);
    std::vector<unsigned char> bytes(quant::coded_size(v.size(), o.chunk, o.bits));
    std::vector<double> err(v.size(), 1.0);
    quant::encode_host<double>(o, 0, 2, v.data(), v.size(), bytes.data(), err.data(), true);
    std::vector<float> back(v.size());
    quant::decode_host(o, bytes.data(), v.size(), back.data());
    for (std::size_t i = 0; i < v.size(); ++i) ASSERT_EQ(err[i], 1.0 + (v[i] - static_cast<double>(back[i]))) << i;
    // In place: the error overwrites the input.
    std::vector<double> w = v;
    std::vector<unsigned char> bytes2(bytes.size());
    quant::encode_host<double>(o, 0, 2, w.data(), w.size(), bytes2.data(), w.data(), false);
    EXPECT_EQ(bytes, bytes2);
    for (std::size_t i = 0; i < v.size(); ++i) ASSERT_EQ(w[i], v[i] - static_cast<double>(back[i])) << i;
}

// ---------------------------------------------------------------- settings

using cc_coll::test::MapEnv;

TEST(QuantSettings, DefaultsAndValuesGoIntoTheOptionsWords)
{
    MapEnv env;
    Config cfg;
    std::string why;
    ASSERT_EQ(load_config(env.lookup(), &cfg, &why), CC_COLL_OK) << why;
    Options q = quant::quant_options(cfg.method_options[CC_COLL_METHOD_QUANT]);
    EXPECT_EQ(q.bits, 4u);
    EXPECT_EQ(q.chunk, 256u);
    EXPECT_EQ(q.scheme, Scheme::MaxMin);
    EXPECT_EQ(q.rounding, Rounding::Nearest);
    EXPECT_EQ(quant::onebit_options(cfg.method_options[CC_COLL_METHOD_ONEBIT]).chunk, 1024u);

    env.vars = {{"CC_COLL_QUANT_BITS", "8"},
                {"CC_COLL_QUANT_CHUNK", "64"},
                {"CC_COLL_QUANT_SCHEME", " Norm "},
                {"CC_COLL_QUANT_ROUNDING", "STOCHASTIC"},
                {"CC_COLL_ONEBIT_CHUNK", "4096"}};
    ASSERT_EQ(load_config(env.lookup(), &cfg, &why), CC_COLL_OK) << why;
    q = quant::quant_options(cfg.method_options[CC_COLL_METHOD_QUANT]);
    EXPECT_EQ(q.bits, 8u);
    EXPECT_EQ(q.chunk, 64u);
    EXPECT_EQ(q.scheme, Scheme::Norm);
    EXPECT_EQ(q.rounding, Rounding::Stochastic);
    const Options ob = quant::onebit_options(cfg.method_options[CC_COLL_METHOD_ONEBIT]);
    EXPECT_EQ(ob.chunk, 4096u);
    EXPECT_EQ(ob.bits, 1u);
    EXPECT_EQ(ob.scheme, Scheme::Sign);
}

TEST(QuantSettings, BadValuesNameTheSettingAndWhatIsAllowed)
{
    struct Case {
        const char *var, *value, *allowed;
    } cases[] = {
        {"CC_COLL_QUANT_BITS", "0", "1 to 8"},
        {"CC_COLL_QUANT_BITS", "9", "1 to 8"},
        {"CC_COLL_QUANT_BITS", "four", "1 to 8"},
        {"CC_COLL_QUANT_CHUNK", "100", "multiple of 8"},
        {"CC_COLL_QUANT_CHUNK", "0", "multiple of 8"},
        {"CC_COLL_QUANT_CHUNK", "16777216", "multiple of 8"},
        {"CC_COLL_QUANT_SCHEME", "minmax", "maxmin, norm"},
        {"CC_COLL_QUANT_ROUNDING", "up", "nearest, stochastic"},
        {"CC_COLL_ONEBIT_CHUNK", "12", "multiple of 8"},
    };
    for (const Case &c : cases) {
        MapEnv env;
        env.vars[c.var] = c.value;
        Config cfg;
        std::string why;
        EXPECT_EQ(load_config(env.lookup(), &cfg, &why), CC_COLL_ERR_CONFIG) << c.var << "=" << c.value;
        EXPECT_NE(why.find(c.var), std::string::npos) << why;
        EXPECT_NE(why.find(c.allowed), std::string::npos) << why;
    }
}

}  // namespace
