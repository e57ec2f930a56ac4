// The per-element rules of top-k that host and device code share: the
// magnitude key, the digit passes of the device radix select and its tie
// rule, and the payload layout (offsets, header, value bytes, the
// non-finite overflow flag). Every function here is CC_COLL_HD, so the
// kernels of topk_cuda.cu and the host tests run the same code.
//
// Radix select (topk_cuda.cu): each element has the composite key
// (magnitude key, ~index); a larger composite key ranks first, so equal
// magnitudes rank lower index first, exactly as topk::select orders them.
// The composite keys are unique, and the k-th largest of them splits the
// selection: every element at or above it is kept. The digit passes find it
// from the top bits down: a pass counts, per digit value, the elements
// whose bits above the digit equal the prefix chosen so far, and keeps the
// digit holding the need-th element counted from the top. The search ends
// as soon as the chosen bucket holds exactly the elements still needed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cc_coll.h"
#include "wire/topk_payload.hpp"
#include "core/dtype.hpp"
#include "core/half.hpp"

namespace cc_coll::detail::topk::keys {

CC_COLL_HD inline std::uint64_t double_bits(double d)
{
#ifdef __CUDA_ARCH__
    return static_cast<std::uint64_t>(__double_as_longlong(d));
#else
    std::uint64_t u;
    std::memcpy(&u, &d, sizeof u);
    return u;
#endif
}

// ---------------------------------------------------------------- magnitude key

// |x| as an unsigned integer that orders like |x|: the IEEE bits with the
// sign cleared. -0 and +0 share key 0; +-inf sits above every finite value
// and NaN patterns above +-inf.
template <typename W>
struct MagnitudeKey;

template <>
struct MagnitudeKey<float> {
    using U = std::uint32_t;
    static constexpr int kBits = 31;
    static constexpr U kInfinity = 0x7f800000u;  // keys at or above: +-inf, NaN
    CC_COLL_HD static U of(float v) { return float_bits(v) & 0x7fffffffu; }
};

template <>
struct MagnitudeKey<double> {
    using U = std::uint64_t;
    static constexpr int kBits = 63;
    static constexpr U kInfinity = 0x7ff0000000000000ull;
    CC_COLL_HD static U of(double v) { return double_bits(v) & 0x7fffffffffffffffull; }
};

// The tie-break word: a lower index is a larger ~index, so it ranks first.
CC_COLL_HD inline std::uint32_t inverted_index(std::uint64_t i) { return ~static_cast<std::uint32_t>(i); }

// ---------------------------------------------------------------- digit passes

constexpr int kMaxDigitBits = 11;
constexpr int kBins = 1 << kMaxDigitBits;  // histogram bins of one pass
constexpr int kIndexBits = 32;

// Passes over `bits` bits with digits of at most kMaxDigitBits bits.
CC_COLL_HD constexpr int passes_for(int bits) { return (bits + kMaxDigitBits - 1) / kMaxDigitBits; }

// Passes over the magnitude key (float: 11+10+10 bits; double: 3x11+3x10),
// then over the inverted index (11+11+10), used only when more elements tie
// at the k-th magnitude than the tie list of the device select holds.
template <typename W>
CC_COLL_HD constexpr int key_passes()
{
    return passes_for(MagnitudeKey<W>::kBits);
}
constexpr int kIndexPasses = passes_for(kIndexBits);
template <typename W>
CC_COLL_HD constexpr int total_passes()
{
    return key_passes<W>() + kIndexPasses;
}

// One pass: the digit is `width` bits of the key (or of ~index) starting at
// bit `shift`; an element takes part when its bits fixed by earlier passes
// (key_mask, index_mask) equal the prefix chosen so far.
struct DigitPass {
    bool on_index;
    int shift;
    int width;
    std::uint64_t key_mask;
    std::uint32_t index_mask;
};

// Bits [from, bits) of a `bits`-bit word set (from <= bits <= 64).
CC_COLL_HD inline std::uint64_t bits_from(int from, int bits)
{
    const std::uint64_t all = bits == 64 ? ~0ull : ((1ull << bits) - 1ull);
    const std::uint64_t low = from == 64 ? ~0ull : ((1ull << from) - 1ull);
    return all & ~low;
}

// Pass p of `passes` over a `bits`-bit word, the widest digits first.
CC_COLL_HD inline void split_digits(int bits, int passes, int p, int *shift, int *width)
{
    const int base = bits / passes;
    const int extra = bits % passes;
    *width = base + (p < extra ? 1 : 0);
    const int consumed = (p + 1) * base + (p + 1 < extra ? p + 1 : extra);
    *shift = bits - consumed;
}

template <typename W>
CC_COLL_HD inline DigitPass digit_pass(int p)
{
    constexpr int kKeyBits = MagnitudeKey<W>::kBits;
    DigitPass d{};
    if (p < key_passes<W>()) {
        d.on_index = false;
        split_digits(kKeyBits, key_passes<W>(), p, &d.shift, &d.width);
        d.key_mask = bits_from(d.shift + d.width, kKeyBits);
        d.index_mask = 0;
    } else {
        d.on_index = true;
        split_digits(kIndexBits, kIndexPasses, p - key_passes<W>(), &d.shift, &d.width);
        d.key_mask = bits_from(0, kKeyBits);
        d.index_mask = static_cast<std::uint32_t>(bits_from(d.shift + d.width, kIndexBits));
    }
    return d;
}

// Where the search stands; lives in device memory between the kernels.
struct RadixState {
    std::uint64_t key_prefix;    // key bits chosen so far (the others zero)
    std::uint32_t index_prefix;  // ~index bits chosen so far (the others zero)
    std::uint32_t taken;         // elements ranked above the prefix: all kept
    std::uint32_t bucket;        // elements matching the prefix after the last pass
    std::uint32_t done;          // 1: the elements at or above the prefix are exactly k
};

CC_COLL_HD inline bool matches_prefix(std::uint64_t key, std::uint32_t nidx, const DigitPass &pass,
                                      const RadixState &s)
{
    return (key & pass.key_mask) == s.key_prefix && (nidx & pass.index_mask) == s.index_prefix;
}

CC_COLL_HD inline unsigned digit_of(std::uint64_t key, std::uint32_t nidx, const DigitPass &pass)
{
    const std::uint64_t word = pass.on_index ? nidx : key;
    return static_cast<unsigned>((word >> pass.shift) & ((1ull << pass.width) - 1ull));
}

// A digit holding `count` matching elements, with `above` matching elements
// in higher digits, holds the need-th element from the top. For need >= 1
// and at least `need` matching elements, exactly one digit qualifies.
CC_COLL_HD inline bool holds_needed(std::uint32_t above, std::uint32_t count, std::uint32_t need)
{
    return above < need && need - above <= count;
}

// Records the digit chosen in `pass`: the `above` elements of higher digits
// are kept, the prefix grows by the digit, and the search is done when the
// bucket holds exactly the elements still needed.
CC_COLL_HD inline void choose_digit(RadixState *s, const DigitPass &pass, unsigned digit, std::uint32_t above,
                                    std::uint32_t count, std::uint32_t k)
{
    s->taken += above;
    if (pass.on_index)
        s->index_prefix |= static_cast<std::uint32_t>(digit) << pass.shift;
    else
        s->key_prefix |= static_cast<std::uint64_t>(digit) << pass.shift;
    s->bucket = count;
    if (count == k - s->taken) s->done = 1;
}

// Ties at the k-th magnitude that the device select resolves from a list of
// their indices; more than this take the digit passes over ~index.
constexpr std::uint32_t kTieCapacity = 2048;

// After the key passes, when more than the needed elements tie at the k-th
// magnitude: of those tied, the needed ones are the lowest indices, so the
// tie rule ends the search with the ~index of the last one kept.
CC_COLL_HD inline void resolve_ties(RadixState *s, std::uint32_t last_kept_index)
{
    s->index_prefix = inverted_index(last_kept_index);
    s->done = 1;
}

// Kept once the search is done: the composite key is at or above the prefix.
CC_COLL_HD inline bool kept(std::uint64_t key, std::uint32_t nidx, const RadixState &s)
{
    return key > s.key_prefix || (key == s.key_prefix && nidx >= s.index_prefix);
}

// ---------------------------------------------------------------- payload layout

// Bytes of one element of a dtype (dtype_size, usable in kernels).
CC_COLL_HD inline std::size_t value_bytes(cc_coll_dtype_t dtype)
{
    switch (dtype) {
    case CC_COLL_F64: return 8;
    case CC_COLL_F32: return 4;
    case CC_COLL_F16:
    case CC_COLL_BF16: return 2;
    }
    return 0;
}

CC_COLL_HD inline std::size_t index_offset(std::size_t j) { return sizeof(PayloadHeader) + j * sizeof(std::uint32_t); }

CC_COLL_HD inline std::size_t value_offset(std::size_t k, std::size_t j, cc_coll_dtype_t dtype)
{
    return sizeof(PayloadHeader) + k * sizeof(std::uint32_t) + j * value_bytes(dtype);
}

// payload_bytes: the pairs end at value_offset(k, k); padded to 8 bytes.
CC_COLL_HD inline std::size_t padded_bytes(std::size_t k, cc_coll_dtype_t dtype)
{
    return (value_offset(k, k, dtype) + 7) & ~static_cast<std::size_t>(7);
}

// Values start 4-byte aligned only (after k indices), so an F64 value may
// sit at an address that is not a multiple of 8: values move as 16-bit
// units, which every value offset is aligned to.
CC_COLL_HD inline void copy_units(unsigned char *dst, const unsigned char *src, std::size_t bytes)
{
#ifdef __CUDA_ARCH__
    auto *d = reinterpret_cast<std::uint16_t *>(dst);
    const auto *s = reinterpret_cast<const std::uint16_t *>(src);
    for (std::size_t u = 0; u < bytes / 2; ++u) d[u] = s[u];
#else
    std::memcpy(dst, src, bytes);
#endif
}

// Writes v rounded to the dtype as value j of a payload's value array and
// returns the transmitted value as W (what topk::encode writes to sent[j]).
template <typename W>
CC_COLL_HD inline W store_value(unsigned char *values, std::size_t j, cc_coll_dtype_t dtype, W v)
{
    alignas(8) unsigned char element[8];
    store_element<W>(element, 0, dtype, v);
    const std::size_t bytes = value_bytes(dtype);
    copy_units(values + j * bytes, element, bytes);
    return load_element<W>(element, 0, dtype);
}

// Value j of a payload's value array as W.
template <typename W>
CC_COLL_HD inline W load_value(const unsigned char *values, std::size_t j, cc_coll_dtype_t dtype)
{
    alignas(8) unsigned char element[8];
    const std::size_t bytes = value_bytes(dtype);
    copy_units(element, values + j * bytes, bytes);
    return load_element<W>(element, 0, dtype);
}

// out[i] += value j in the dtype's arithmetic, as topk::scatter_add: F32 and
// F64 add in their own type, F16/BF16 in binary32 rounded to nearest even.
CC_COLL_HD inline void add_value(const unsigned char *values, std::size_t j, cc_coll_dtype_t dtype, void *out,
                                 std::size_t i)
{
    switch (dtype) {
    case CC_COLL_F32: static_cast<float *>(out)[i] += load_value<float>(values, j, dtype); break;
    case CC_COLL_F64: static_cast<double *>(out)[i] += load_value<double>(values, j, dtype); break;
    case CC_COLL_F16:
    case CC_COLL_BF16: {
        const float sum = load_element<float>(out, i, dtype) + load_value<float>(values, j, dtype);
        store_element<float>(out, i, dtype, sum);
        break;
    }
    }
}

// The header and the zero padding after the values (payload 8-byte aligned).
CC_COLL_HD inline void write_header(unsigned char *payload, std::uint64_t n, std::uint32_t k, std::uint32_t flags,
                                    cc_coll_dtype_t dtype)
{
#ifdef __CUDA_ARCH__
    *reinterpret_cast<std::uint64_t *>(payload) = n;
    reinterpret_cast<std::uint32_t *>(payload)[2] = k;
    reinterpret_cast<std::uint32_t *>(payload)[3] = flags;
#else
    const PayloadHeader h{n, k, flags};
    std::memcpy(payload, &h, sizeof h);
#endif
    for (std::size_t b = value_offset(k, k, dtype); b < padded_bytes(k, dtype); ++b) payload[b] = 0;
}

// topk::nonfinite_overflow from two counts: whether any kept element is
// finite, and how many elements of x are not (counted only when none kept
// is finite, as the host does).
CC_COLL_HD inline std::uint32_t overflow_flag(std::size_t k, bool kept_finite, std::uint64_t nonfinite)
{
    if (k == 0 || kept_finite) return 0;
    return nonfinite > k ? kFlagNonFiniteOverflow : 0;
}

template <typename W>
CC_COLL_HD inline bool is_nonfinite(W v)
{
    return MagnitudeKey<W>::of(v) >= MagnitudeKey<W>::kInfinity;
}

}  // namespace cc_coll::detail::topk::keys
