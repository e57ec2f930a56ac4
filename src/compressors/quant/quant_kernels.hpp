// The chunk codec of methods QUANT (b-bit levels) and ONEBIT (sign and
// mean magnitude): the block layout (docs/wire.md, "QUANT and ONEBIT
// blocks"), the options words, and the per-chunk arithmetic written once for
// the host loops (quant.cc) and the CUDA kernels (quant_cuda.cu), so that a
// device result has the host's bits.
//
// A block of n elements is cut into chunks of C elements (the last one may
// be shorter); chunk c sits at c * stride(C): an 8-byte header (binary32
// offset, binary32 step) then its codes, b bits each, element k of the chunk
// at bits [k b, k b + b) of the code bytes (least significant bit first),
// zero-padded to a multiple of 8 bytes. An element decodes to
// offset + q * step, in binary32, whatever the scheme: the schemes differ
// only in how the encoder picks the header and the codes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/half.hpp"

namespace cc_coll::detail::quant {

enum class Scheme : std::uint32_t {
    MaxMin = 0,  // offset = min, step = (max - min) / (2^b - 1), q in [0, 2^b - 1]
    Norm = 1,    // symmetric: offset = -max|v|, step = 2 max|v| / (2^b - 1)
    Sign = 2,    // ONEBIT (b = 1): offset = -mean|v|, step = 2 mean|v|, q = (v >= 0)
};
enum class Rounding : std::uint32_t { Nearest = 0, Stochastic = 1 };

constexpr unsigned kDefaultBits = 4;
constexpr std::uint32_t kDefaultChunk = 256;        // QUANT
constexpr std::uint32_t kDefaultOnebitChunk = 1024;  // ONEBIT
constexpr std::uint32_t kMaxChunk = (std::uint32_t{1} << 24) - 8;
constexpr std::size_t kHeaderBytes = 8;
// The reduction of a chunk's sum of |v| (ONEBIT) runs in kLanes partial
// sums, lane l over the elements l, l + kLanes, ... in order, then a tree
// (l += l + 16, 8, 4, 2, 1): the order of a CUDA warp's shuffle reduction.
constexpr unsigned kLanes = 32;

// A call's codec: bits, scheme, rounding and chunk elements.
struct Options {
    unsigned bits = kDefaultBits;
    Scheme scheme = Scheme::MaxMin;
    Rounding rounding = Rounding::Nearest;
    std::uint32_t chunk = kDefaultChunk;
};

// QUANT's options word (Config::method_options[CC_COLL_METHOD_QUANT]):
// bits 0-3 the bit count, bit 4 the scheme (norm), bit 5 the rounding
// (stochastic), bits 8-31 the chunk; a zero field is its default.
constexpr std::uint32_t kBitsMask = 0xfu, kSchemeBit = 1u << 4, kRoundingBit = 1u << 5, kChunkShift = 8;

inline Options quant_options(std::uint32_t word)
{
    Options o;
    const unsigned b = word & kBitsMask;
    o.bits = b >= 1 && b <= 8 ? b : kDefaultBits;
    o.scheme = (word & kSchemeBit) != 0 ? Scheme::Norm : Scheme::MaxMin;
    o.rounding = (word & kRoundingBit) != 0 ? Rounding::Stochastic : Rounding::Nearest;
    const std::uint32_t c = word >> kChunkShift;
    o.chunk = c != 0 ? c : kDefaultChunk;
    return o;
}

// ONEBIT's options word (Config::method_options[CC_COLL_METHOD_ONEBIT]): the
// chunk, 0 for its default.
inline Options onebit_options(std::uint32_t word)
{
    Options o;
    o.bits = 1;
    o.scheme = Scheme::Sign;
    o.rounding = Rounding::Nearest;
    o.chunk = word != 0 ? word : kDefaultOnebitChunk;
    return o;
}

// Code bytes of `len` elements: whole groups of 8 elements (b bytes each),
// rounded up to a multiple of 8.
CC_COLL_HD inline std::size_t code_bytes(std::size_t len, unsigned bits)
{
    return (((len + 7) / 8) * bits + 7) / 8 * 8;
}

CC_COLL_HD inline std::size_t stride(std::uint32_t chunk, unsigned bits)
{
    return kHeaderBytes + code_bytes(chunk, bits);
}

// Bytes of a block of n elements: whole chunks at the stride, then the
// shorter last chunk's header and codes. A multiple of 8.
CC_COLL_HD inline std::size_t coded_size(std::size_t n, std::uint32_t chunk, unsigned bits)
{
    const std::size_t full = n / chunk, rest = n % chunk;
    return full * stride(chunk, bits) + (rest != 0 ? kHeaderBytes + code_bytes(rest, bits) : 0);
}

// Binary32 arithmetic rounded once per operation on both sides (nvcc would
// otherwise contract a * b + c into one fused operation, the host does not).
CC_COLL_HD inline float mul_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
CC_COLL_HD inline float add_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

CC_COLL_HD inline float decode_one(float offset, float step, unsigned q)
{
    return add_rn(offset, mul_rn(static_cast<float>(static_cast<int>(q)), step));
}

CC_COLL_HD inline bool finite(float v) { return (float_bits(v) & 0x7f800000u) != 0x7f800000u; }

// A chunk's header from its statistics (over the binary32 values): lo, hi
// (MaxMin), amax = max |v| (Norm), abs_sum = the lane-ordered sum of |v|
// over len elements (Sign); all_finite false when some value is NaN or
// infinite. A chunk that is not finite, or whose step is not, gets a NaN
// offset and step: all of it decodes to NaN.
struct Header {
    float offset, step, inv;  // inv = 1 / step, 0 when step is 0 or 1 / step is not finite
};

CC_COLL_HD inline Header make_header(Scheme s, unsigned bits, bool all_finite, float lo, float hi, float amax,
                                     float abs_sum, std::size_t len)
{
    const double levels = static_cast<double>((1u << bits) - 1u);
    Header h{0.0f, 0.0f, 0.0f};
    if (s == Scheme::MaxMin) {
        lo = add_rn(lo, 0.0f);  // -0 as +0: a min over equal zeros may pick either
        hi = add_rn(hi, 0.0f);
        h.offset = lo;
        h.step = static_cast<float>((static_cast<double>(hi) - static_cast<double>(lo)) / levels);
    } else if (s == Scheme::Norm) {
        h.offset = -amax;
        h.step = static_cast<float>(2.0 * static_cast<double>(amax) / levels);
    } else {
        const float mean = static_cast<float>(static_cast<double>(abs_sum) / static_cast<double>(len));
        h.offset = -mean;
        h.step = static_cast<float>(2.0 * static_cast<double>(mean));
    }
    if (!all_finite || !finite(h.step) || !finite(h.offset)) {
        h.offset = bits_float(0x7fc00000u);
        h.step = h.offset;
        return h;
    }
    if (h.step > 0.0f) {
        const float inv = 1.0f / h.step;
        h.inv = finite(inv) ? inv : 0.0f;
    }
    return h;
}

// Stochastic rounding's uniform draws: a counter-based hash, no state. The
// key of a chunk mixes the call's seed, the stage (1: a rank's input, 2: an
// owner's sum), the chunk's index in its block and its header's bits (which
// differ between ranks, blocks and stages with the data); element k of the
// chunk draws hash(key + k).
CC_COLL_HD inline std::uint64_t mix64(std::uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

CC_COLL_HD inline std::uint32_t chunk_key(std::uint64_t seed, unsigned stage, std::size_t chunk_index, const Header &h)
{
    std::uint64_t k = mix64(seed ^ (static_cast<std::uint64_t>(stage) << 56));
    k = mix64(k ^ static_cast<std::uint64_t>(chunk_index));
    k = mix64(k ^ ((static_cast<std::uint64_t>(float_bits(h.offset)) << 32) | float_bits(h.step)));
    return static_cast<std::uint32_t>(k >> 32);
}

// A uniform draw in [0, 1): 24 bits of lowbias32(key + k).
CC_COLL_HD inline float uniform(std::uint32_t key, std::uint32_t k)
{
    std::uint32_t x = key + k;
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
}

// The code of binary32 value v in a finite chunk: t = (v - offset) / step
// plus 1/2 (nearest) or a uniform draw u (stochastic), clamped to
// [0, 2^b - 1] and truncated; Sign: v >= 0.
CC_COLL_HD inline unsigned code_one(float v, const Header &h, unsigned levels, Scheme s, float r)
{
    if (s == Scheme::Sign) return v >= 0.0f ? 1u : 0u;
    float t = add_rn(mul_rn(v - h.offset, h.inv), r);
    t = t > 0.0f ? t : 0.0f;
    t = t < static_cast<float>(levels) ? t : static_cast<float>(levels);
    return static_cast<unsigned>(static_cast<int>(t));
}

// A binary32 value's bits as an int32 that orders like the value (-0 below
// +0; for values that are not NaN): min and max as integer reductions.
CC_COLL_HD inline std::int32_t order_key(float v)
{
    const std::uint32_t u = float_bits(v);
    return static_cast<std::int32_t>(u ^ ((0u - (u >> 31)) >> 1));
}
CC_COLL_HD inline float key_value(std::int32_t k)
{
    const std::uint32_t u = static_cast<std::uint32_t>(k);
    return bits_float(u ^ ((0u - (u >> 31)) >> 1));
}

// 8 codes into b bytes (element j at bits [j b, j b + b)).
CC_COLL_HD inline void pack8(const unsigned *q, unsigned bits, unsigned char *out)
{
    std::uint64_t w = 0;
    for (unsigned j = 0; j < 8; ++j) w |= static_cast<std::uint64_t>(q[j]) << (j * bits);
    for (unsigned j = 0; j < bits; ++j) out[j] = static_cast<unsigned char>(w >> (8 * j));
}

// The device's encoder, one warp per chunk, in steps written once for the
// kernel (quant_cuda.cu) and its host replay (tests/gpu/
// test_quant_cuda_host.cc), which checks them against the host loops above
// bit for bit without a GPU.
//
// Lane l's share of a chunk's statistics: the elements l, l + kLanes, ...
// of the chunk's len, in order (lo and hi start at the chunk's first
// value, so a lane with no element changes nothing).
struct LaneStats {
    float lo, hi, abs_sum;
    std::uint32_t amax_bits;  // max |v| as bits: NaN and infinities above every finite |v|
};

template <typename W>
CC_COLL_HD inline LaneStats lane_stats(const W *x, std::size_t len, unsigned lane)
{
    const float first = static_cast<float>(x[0]);
    LaneStats s{first, first, 0.0f, 0u};
    for (std::size_t k = lane; k < len; k += kLanes) {
        const float f = static_cast<float>(x[k]);
        s.lo = f < s.lo ? f : s.lo;
        s.hi = f > s.hi ? f : s.hi;
        const std::uint32_t a = float_bits(f) & 0x7fffffffu;
        s.amax_bits = a > s.amax_bits ? a : s.amax_bits;
        s.abs_sum = add_rn(s.abs_sum, bits_float(a));
    }
    return s;
}

// One step of the tree: lane l < off takes in lane l + off's statistics
// (off = 16, 8, 4, 2, 1; the order of the host's lane sums).
CC_COLL_HD inline void merge_stats(LaneStats &s, const LaneStats &o)
{
    s.lo = o.lo < s.lo ? o.lo : s.lo;
    s.hi = o.hi > s.hi ? o.hi : s.hi;
    s.amax_bits = o.amax_bits > s.amax_bits ? o.amax_bits : s.amax_bits;
    s.abs_sum = add_rn(s.abs_sum, o.abs_sum);
}

// The chunk's header from lane 0's statistics after the tree.
CC_COLL_HD inline Header stats_header(const Options &o, const LaneStats &s, std::size_t len)
{
    return make_header(o.scheme, o.bits, s.amax_bits < 0x7f800000u, s.lo, s.hi, bits_float(s.amax_bits), s.abs_sum,
                       len);
}

// Group g of a chunk of len elements (its elements 8g .. 8g + 7 below len,
// codes of the rest 0) into its b bytes at codes + g b, and the coding
// error into e (stored, or added when accumulate; e may be null). In a
// chunk that is not finite every code is 0 and the kept error 0 (or
// unchanged when added): non-finite values are sent, as NaN, never kept.
template <typename W>
CC_COLL_HD inline void encode_group(const Options &o, const Header &h, std::uint32_t key, const W *x, std::size_t len,
                                    std::size_t g, unsigned char *codes, W *e, bool accumulate)
{
    const unsigned levels = (1u << o.bits) - 1u;
    const bool ok = finite(h.step);
    unsigned q[8];
    for (unsigned j = 0; j < 8; ++j) {
        const std::size_t k = 8 * g + j;
        q[j] = 0;
        if (k >= len || !ok) continue;
        const float r = o.rounding == Rounding::Stochastic ? uniform(key, static_cast<std::uint32_t>(k)) : 0.5f;
        q[j] = code_one(static_cast<float>(x[k]), h, levels, o.scheme, r);
    }
    pack8(q, o.bits, codes + g * o.bits);
    if (e == nullptr) return;
    for (unsigned j = 0; j < 8; ++j) {
        const std::size_t k = 8 * g + j;
        if (k >= len) break;
        if (!ok) {
            if (!accumulate) e[k] = W(0);
            continue;
        }
        const W err = x[k] - static_cast<W>(decode_one(h.offset, h.step, q[j]));
        e[k] = accumulate ? e[k] + err : err;
    }
}

// The code bytes after the last group of a chunk of len elements, zeroed.
CC_COLL_HD inline void zero_code_tail(unsigned char *codes, std::size_t len, unsigned bits)
{
    for (std::size_t b = (len + 7) / 8 * bits, all = code_bytes(len, bits); b < all; ++b) codes[b] = 0;
}

// Bits [k b, k b + b) of a chunk's code bytes.
CC_COLL_HD inline unsigned read_code(const unsigned char *codes, std::size_t k, unsigned bits)
{
    const std::size_t bit = k * bits;
    const unsigned shift = static_cast<unsigned>(bit & 7);
    unsigned w = codes[bit >> 3];
    if (shift + bits > 8) w |= static_cast<unsigned>(codes[(bit >> 3) + 1]) << 8;
    return (w >> shift) & ((1u << bits) - 1u);
}

// A binary32 of a chunk's header (8-byte aligned on the device).
CC_COLL_HD inline float load_f32(const unsigned char *p)
{
#ifdef __CUDA_ARCH__
    return *reinterpret_cast<const float *>(p);
#else
    float f;
    std::memcpy(&f, p, 4);
    return f;
#endif
}

// The device decoders' step: one thread per group of 8 elements of a
// block (group t is group t % G of chunk t / G, G = ceil(C / 8) groups a
// chunk), so that a chunk's header is read once per group and no element
// divides its index. Its first element and count (0 past n or the chunk).
struct GroupAt {
    std::size_t chunk, group, first;
    unsigned count;
};

CC_COLL_HD inline GroupAt group_at(const Options &o, std::size_t n, std::size_t t)
{
    const std::uint32_t G = (o.chunk + 7) / 8;
    GroupAt a;
    a.chunk = t <= 0xffffffffu ? static_cast<std::uint32_t>(t) / G : t / G;  // 32-bit division where it fits
    a.group = t - a.chunk * G;
    a.first = a.chunk * o.chunk + 8 * a.group;
    const std::size_t chunk_end = a.chunk * o.chunk + o.chunk, end = chunk_end < n ? chunk_end : n;
    a.count = a.first < end ? static_cast<unsigned>(end - a.first < 8 ? end - a.first : 8) : 0u;
    return a;
}

// The groups of a block of n elements, the last chunk's past n among them.
CC_COLL_HD inline std::size_t group_count(const Options &o, std::size_t n)
{
    return (n + o.chunk - 1) / o.chunk * ((o.chunk + 7) / 8);
}

// Group a's a.count values of a block, decoded into v: its 8 codes fill
// o.bits bytes (pack8), read at once.
CC_COLL_HD inline void decode_group(const Options &o, const unsigned char *block, const GroupAt &a, float *v)
{
    const unsigned char *chunk = block + a.chunk * stride(o.chunk, o.bits);
    const float offset = load_f32(chunk), step = load_f32(chunk + 4);
    const unsigned char *codes = chunk + kHeaderBytes + a.group * o.bits;
    std::uint64_t w = 0;
    for (unsigned j = 0; j < o.bits; ++j) w |= static_cast<std::uint64_t>(codes[j]) << (8 * j);
    const unsigned mask = (1u << o.bits) - 1u;
    for (unsigned j = 0; j < a.count; ++j)
        v[j] = decode_one(offset, step, static_cast<unsigned>(w >> (j * o.bits)) & mask);
}

}  // namespace cc_coll::detail::quant
