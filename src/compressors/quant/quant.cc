// QUANT's and ONEBIT's host kernels (quant_codec.hpp): chunk by chunk on the
// communicator's threads, each chunk's bytes a function of its elements
// only, so results do not depend on the thread count; decode_sum adds the
// blocks in block (rank) order. The arithmetic is quant_kernels.hpp's, the
// same as the device's.
#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <cstdint>
#include <cstring>

#include "compressors/quant/quant_codec.hpp"
#include "core/dtype.hpp"
#include "core/parallel.hpp"

namespace cc_coll::detail {

namespace quant {

namespace {

// Elements per inner pass of a chunk (a multiple of 8: whole code groups).
constexpr std::size_t kSub = 256;

// The chunk's statistics over its binary32 values (make_header's inputs).
template <typename W>
Header chunk_header(const Options &o, const W *v, std::size_t len)
{
    // Integer and lane reductions, so that the compiler vectorises them.
    // Whether every value is finite follows from what each scheme reduces
    // (the device tests every value; the header is the same).
    if (o.scheme == Scheme::MaxMin) {
        std::int32_t klo = INT32_MAX, khi = INT32_MIN;  // order keys of min and max
        for (std::size_t i = 0; i < len; ++i) {
            const std::int32_t k = order_key(static_cast<float>(v[i]));
            klo = k < klo ? k : klo;
            khi = k > khi ? k : khi;
        }
        // A NaN's key lies beyond an infinity's on its side.
        const float inf = std::numeric_limits<float>::infinity();
        const bool all_finite = klo > order_key(-inf) && khi < order_key(inf);
        return make_header(o.scheme, o.bits, all_finite, key_value(klo), key_value(khi), 0.0f, 0.0f, len);
    }
    if (o.scheme == Scheme::Norm) {
        std::uint32_t amax_bits = 0;  // NaN and infinities above every finite |v|
        for (std::size_t i = 0; i < len; ++i) {
            const std::uint32_t a = float_bits(static_cast<float>(v[i])) & 0x7fffffffu;
            amax_bits = a > amax_bits ? a : amax_bits;
        }
        return make_header(o.scheme, o.bits, amax_bits < 0x7f800000u, 0.0f, 0.0f, bits_float(amax_bits), 0.0f, len);
    }
    // Sign: the lane-ordered sum of |v|, NaN or infinite when some |v| is.
    float lane[kLanes] = {};
    std::size_t i = 0;
    for (; i + kLanes <= len; i += kLanes)
        for (unsigned l = 0; l < kLanes; ++l) lane[l] += std::fabs(static_cast<float>(v[i + l]));
    for (unsigned l = 0; i + l < len; ++l) lane[l] += std::fabs(static_cast<float>(v[i + l]));
    for (unsigned off = kLanes / 2; off > 0; off /= 2)
        for (unsigned l = 0; l < off; ++l) lane[l] += lane[l + off];
    return make_header(o.scheme, o.bits, finite(lane[0]), 0.0f, 0.0f, 0.0f, lane[0], len);
}

// Codes of v[0..len) (len <= kSub) into q (r is the rounding's addend),
// and the coding error into e: Err 0 none, 1 stored, 2 added. One pass, so
// that e may be v.
template <Scheme S, bool Stochastic, int Err, typename W>
void code_range(const W *v, std::size_t len, const Header &h, unsigned levels, std::uint32_t key, std::uint32_t first,
                unsigned *q, W *e)
{
    for (std::size_t j = 0; j < len; ++j) {
        const W x = v[j];
        const float r = Stochastic ? uniform(key, first + static_cast<std::uint32_t>(j)) : 0.5f;
        const unsigned c = code_one(static_cast<float>(x), h, levels, S, r);
        q[j] = c;
        if constexpr (Err != 0) {
            const W err = x - static_cast<W>(decode_one(h.offset, h.step, c));
            e[j] = Err == 2 ? e[j] + err : err;
        }
    }
}

template <unsigned B>
void pack_range(const unsigned *q, std::size_t groups, unsigned char *out)
{
    if constexpr (8 % B == 0) {
        constexpr unsigned E = 8 / B;
        for (std::size_t k = 0; k < groups * B; ++k) {
            unsigned byte = 0;
            for (unsigned j = 0; j < E; ++j) byte |= q[E * k + j] << (B * j);
            out[k] = static_cast<unsigned char>(byte);
        }
    } else {
        for (std::size_t g = 0; g < groups; ++g) pack8(q + 8 * g, B, out + g * B);
    }
}

void pack_any(unsigned bits, const unsigned *q, std::size_t groups, unsigned char *out)
{
    switch (bits) {
    case 1: pack_range<1>(q, groups, out); break;
    case 2: pack_range<2>(q, groups, out); break;
    case 3: pack_range<3>(q, groups, out); break;
    case 4: pack_range<4>(q, groups, out); break;
    case 5: pack_range<5>(q, groups, out); break;
    case 6: pack_range<6>(q, groups, out); break;
    case 7: pack_range<7>(q, groups, out); break;
    default: pack_range<8>(q, groups, out); break;
    }
}

template <unsigned B>
void unpack_range(const unsigned char *in, std::size_t groups, unsigned *q)
{
    constexpr std::uint64_t mask = (std::uint64_t{1} << B) - 1;
    if constexpr (8 % B == 0) {
        constexpr unsigned E = 8 / B;
        for (std::size_t k = 0; k < groups * B; ++k) {
            const unsigned byte = in[k];
            for (unsigned j = 0; j < E; ++j) q[E * k + j] = (byte >> (B * j)) & static_cast<unsigned>(mask);
        }
        return;
    }
    for (std::size_t g = 0; g < groups; ++g) {
        std::uint64_t w = 0;
        for (unsigned j = 0; j < B; ++j) w |= static_cast<std::uint64_t>(in[g * B + j]) << (8 * j);
        for (unsigned j = 0; j < 8; ++j) q[8 * g + j] = static_cast<unsigned>((w >> (j * B)) & mask);
    }
}

void unpack_any(unsigned bits, const unsigned char *in, std::size_t groups, unsigned *q)
{
    switch (bits) {
    case 1: unpack_range<1>(in, groups, q); break;
    case 2: unpack_range<2>(in, groups, q); break;
    case 3: unpack_range<3>(in, groups, q); break;
    case 4: unpack_range<4>(in, groups, q); break;
    case 5: unpack_range<5>(in, groups, q); break;
    case 6: unpack_range<6>(in, groups, q); break;
    case 7: unpack_range<7>(in, groups, q); break;
    default: unpack_range<8>(in, groups, q); break;
    }
}

template <Scheme S, bool Stochastic, typename W>
void code_err(const W *v, std::size_t len, const Header &h, unsigned levels, std::uint32_t key, std::uint32_t first,
              unsigned *q, W *e, bool accumulate)
{
    if (e == nullptr) code_range<S, Stochastic, 0>(v, len, h, levels, key, first, q, e);
    else if (accumulate) code_range<S, Stochastic, 2>(v, len, h, levels, key, first, q, e);
    else code_range<S, Stochastic, 1>(v, len, h, levels, key, first, q, e);
}

template <typename W>
void code_any(const Options &o, const W *v, std::size_t len, const Header &h, std::uint32_t key, std::uint32_t first,
              unsigned *q, W *e, bool accumulate)
{
    const unsigned levels = (1u << o.bits) - 1u;
    if (o.scheme == Scheme::Sign) code_err<Scheme::Sign, false>(v, len, h, levels, key, first, q, e, accumulate);
    else if (o.rounding == Rounding::Stochastic)
        code_err<Scheme::MaxMin, true>(v, len, h, levels, key, first, q, e, accumulate);
    else code_err<Scheme::MaxMin, false>(v, len, h, levels, key, first, q, e, accumulate);
}

// One chunk: header, codes (padding zero), and the coding error.
template <typename W>
void encode_chunk(const Options &o, std::uint64_t seed, unsigned stage, std::size_t index, const W *v,
                  std::size_t len, unsigned char *out, W *error, bool accumulate)
{
    const Header h = chunk_header(o, v, len);
    std::memcpy(out, &h.offset, 4);
    std::memcpy(out + 4, &h.step, 4);
    unsigned char *codes = out + kHeaderBytes;
    const bool ok = finite(h.step);
    const std::uint32_t key = o.rounding == Rounding::Stochastic ? chunk_key(seed, stage, index, h) : 0u;
    unsigned q[kSub];
    for (std::size_t i = 0; i < len; i += kSub) {
        const std::size_t cnt = std::min(kSub, len - i);
        W *e = error != nullptr ? error + i : nullptr;
        if (ok) {
            code_any(o, v + i, cnt, h, key, static_cast<std::uint32_t>(i), q, e, accumulate);
        } else {
            std::fill(q, q + cnt, 0u);
            // Non-finite values are sent (as NaN), never kept (algorithms.md 1.3).
            if (e != nullptr && !accumulate) std::fill(e, e + cnt, W(0));
        }
        const std::size_t groups = (cnt + 7) / 8;
        std::fill(q + cnt, q + groups * 8, 0u);
        pack_any(o.bits, q, groups, codes + i / 8 * o.bits);
    }
    const std::size_t used = (len + 7) / 8 * o.bits;
    std::memset(codes + used, 0, code_bytes(len, o.bits) - used);
}

// Chunk c's decoded values, kSub at a time: f(i, values, count).
template <typename F>
void decode_chunk(const Options &o, const unsigned char *chunk, std::size_t len, F &&f)
{
    const float offset = load_f32(chunk), step = load_f32(chunk + 4);
    const unsigned char *codes = chunk + kHeaderBytes;
    unsigned q[kSub];
    float val[kSub];
    for (std::size_t i = 0; i < len; i += kSub) {
        const std::size_t cnt = std::min(kSub, len - i);
        unpack_any(o.bits, codes + i / 8 * o.bits, (cnt + 7) / 8, q);
        for (std::size_t j = 0; j < cnt; ++j) val[j] = decode_one(offset, step, q[j]);
        f(i, val, cnt);
    }
}

std::size_t chunk_grain(const Options &o) { return std::max<std::size_t>(1, (std::size_t{1} << 14) / o.chunk); }

}  // namespace

template <typename W>
void encode_host(const Options &o, std::uint64_t seed, unsigned stage, const W *v, std::size_t n, unsigned char *out,
                 W *error, bool accumulate)
{
    const std::size_t S = stride(o.chunk, o.bits);
    for (std::size_t c = 0; c * o.chunk < n; ++c) {
        const std::size_t lo = c * o.chunk, len = std::min<std::size_t>(o.chunk, n - lo);
        encode_chunk<W>(o, seed, stage, c, v + lo, len, out + c * S, error != nullptr ? error + lo : nullptr,
                        accumulate);
    }
}

void decode_host(const Options &o, const unsigned char *in, std::size_t n, float *out)
{
    const std::size_t S = stride(o.chunk, o.bits);
    for (std::size_t c = 0; c * o.chunk < n; ++c) {
        const std::size_t lo = c * o.chunk, len = std::min<std::size_t>(o.chunk, n - lo);
        decode_chunk(o, in + c * S, len, [&](std::size_t i, const float *val, std::size_t cnt) {
            std::copy(val, val + cnt, out + lo + i);
        });
    }
}

template void encode_host<float>(const Options &, std::uint64_t, unsigned, const float *, std::size_t,
                                 unsigned char *, float *, bool);
template void encode_host<double>(const Options &, std::uint64_t, unsigned, const double *, std::size_t,
                                  unsigned char *, double *, bool);

}  // namespace quant

template <cc_coll_method_t Id>
template <typename W>
cc_coll_status_t ChunkCodec<Id>::encode(HostExec &x, const CallParams &p, const W *v, std::size_t n,
                                        unsigned char *out, W *error, bool accumulate)
{
    const quant::Options o = options(p);
    const std::size_t S = quant::stride(o.chunk, o.bits), chunks = (n + o.chunk - 1) / o.chunk;
    const unsigned stage = accumulate ? 2 : 1;
    parallel_for(chunks, x.comm().threads(), quant::chunk_grain(o), [&](std::size_t cb, std::size_t ce) {
        for (std::size_t c = cb; c < ce; ++c) {
            const std::size_t lo = c * o.chunk, len = std::min<std::size_t>(o.chunk, n - lo);
            quant::encode_chunk<W>(o, p.seed, stage, c, v + lo, len, out + c * S,
                                   error != nullptr ? error + lo : nullptr, accumulate);
        }
    });
    return CC_COLL_OK;
}

// The sum of the blocks in block (rank) order: sum = 0 + block 0, then +=
// block 1, ... (the same additions, in the same order, as the device's).
template <cc_coll_method_t Id>
template <typename W>
cc_coll_status_t ChunkCodec<Id>::decode_sum(HostExec &x, const CallParams &p, const unsigned char *in,
                                            std::size_t blocks, std::size_t n, W *sum)
{
    const quant::Options o = options(p);
    const std::size_t S = quant::stride(o.chunk, o.bits), chunks = (n + o.chunk - 1) / o.chunk;
    const std::size_t B = quant::coded_size(n, o.chunk, o.bits);
    parallel_for(chunks, x.comm().threads(), quant::chunk_grain(o), [&](std::size_t cb, std::size_t ce) {
        for (std::size_t c = cb; c < ce; ++c) {
            const std::size_t lo = c * o.chunk, len = std::min<std::size_t>(o.chunk, n - lo);
            W *s = sum + lo;
            for (std::size_t r = 0; r < blocks; ++r)
                quant::decode_chunk(o, in + r * B + c * S, len, [&](std::size_t i, const float *val, std::size_t cnt) {
                    if (r == 0)
                        for (std::size_t j = 0; j < cnt; ++j) s[i + j] = W(0) + static_cast<W>(val[j]);
                    else
                        for (std::size_t j = 0; j < cnt; ++j) s[i + j] += static_cast<W>(val[j]);
                });
        }
    });
    return CC_COLL_OK;
}

template <cc_coll_method_t Id>
cc_coll_status_t ChunkCodec<Id>::decode_store(HostExec &x, const CallParams &p, const unsigned char *in,
                                              std::size_t n, cc_coll_dtype_t dtype, void *dst)
{
    const quant::Options o = options(p);
    const std::size_t S = quant::stride(o.chunk, o.bits), chunks = (n + o.chunk - 1) / o.chunk;
    const std::size_t es = dtype_size(dtype);
    parallel_for(chunks, x.comm().threads(), quant::chunk_grain(o), [&](std::size_t cb, std::size_t ce) {
        for (std::size_t c = cb; c < ce; ++c) {
            const std::size_t lo = c * o.chunk, len = std::min<std::size_t>(o.chunk, n - lo);
            quant::decode_chunk(o, in + c * S, len, [&](std::size_t i, const float *val, std::size_t cnt) {
                store_as<float>(val, cnt, dtype, static_cast<unsigned char *>(dst) + (lo + i) * es);
            });
        }
    });
    return CC_COLL_OK;
}

#define CC_COLL_QUANT_INSTANTIATE(Id)                                                                                 \
    template cc_coll_status_t ChunkCodec<Id>::decode_store(HostExec &, const CallParams &, const unsigned char *,     \
                                                           std::size_t, cc_coll_dtype_t, void *);                     \
    template cc_coll_status_t ChunkCodec<Id>::encode<float>(HostExec &, const CallParams &, const float *,            \
                                                            std::size_t, unsigned char *, float *, bool);             \
    template cc_coll_status_t ChunkCodec<Id>::encode<double>(HostExec &, const CallParams &, const double *,          \
                                                             std::size_t, unsigned char *, double *, bool);           \
    template cc_coll_status_t ChunkCodec<Id>::decode_sum<float>(HostExec &, const CallParams &,                       \
                                                                const unsigned char *, std::size_t, std::size_t,      \
                                                                float *);                                             \
    template cc_coll_status_t ChunkCodec<Id>::decode_sum<double>(HostExec &, const CallParams &,                      \
                                                                 const unsigned char *, std::size_t, std::size_t,     \
                                                                 double *);
CC_COLL_QUANT_INSTANTIATE(CC_COLL_METHOD_QUANT)
CC_COLL_QUANT_INSTANTIATE(CC_COLL_METHOD_ONEBIT)
#undef CC_COLL_QUANT_INSTANTIATE

}  // namespace cc_coll::detail
