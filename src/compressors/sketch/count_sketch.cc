#include "compressors/sketch/count_sketch.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace cc_coll::detail::sketch {

namespace {

constexpr std::uint32_t kBlockShift = 10;  // kBlock == 1 << kBlockShift
static_assert(kBlock == (std::size_t{1} << kBlockShift), "kBlock must be 1 << kBlockShift");
constexpr std::uint32_t kBlockMask = static_cast<std::uint32_t>(kBlock - 1);

// Cell indices are 32-bit: 3 * m * kBlock must stay below 2^32.
constexpr std::uint32_t kMaxRowsPerTable =
    static_cast<std::uint32_t>((std::numeric_limits<std::uint32_t>::max() / 3) / kBlock);

// MurmurHash3 (x86, 32-bit) finalizer.
inline std::uint32_t fmix32(std::uint32_t h)
{
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

inline std::uint32_t rotl32(std::uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

// MurmurHash3_x86_32 of the 4-byte key `key` with seed `seed`.
inline std::uint32_t murmur3_u32(std::uint32_t key, std::uint32_t seed)
{
    std::uint32_t k = key * 0xcc9e2d51u;
    k = rotl32(k, 15);
    k *= 0x1b873593u;
    std::uint32_t h = seed ^ k;
    h = rotl32(h, 13);
    h = h * 5 + 0xe6546b64u;
    h ^= 4u;  // length in bytes
    return fmix32(h);
}

// SplitMix64 step: the per-hash seeds from the layout's 64-bit seed.
inline std::uint64_t splitmix64(std::uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// The three hashes of a layout: seeds, and the row/sign of a block.
struct Hasher {
    std::uint32_t seed[3];
    std::uint32_t m;

    explicit Hasher(const Layout &layout) : m(layout.m)
    {
        for (std::uint32_t j = 0; j < 3; ++j)
            seed[j] = static_cast<std::uint32_t>(splitmix64(layout.seed ^ (0x632be59bd9b4e019ull * (j + 1))) >> 32);
    }

    // First cell of block b's row in sub-table j (row * kBlock), and the
    // sign bit (1: negative).
    void block(std::uint32_t b, std::uint32_t base[3], std::uint32_t neg[3]) const
    {
        for (std::uint32_t j = 0; j < 3; ++j) {
            const std::uint32_t h = murmur3_u32(b, seed[j]);
            const std::uint32_t row =
                j * m + static_cast<std::uint32_t>((static_cast<std::uint64_t>(h) * m) >> 32);
            base[j] = row << kBlockShift;
            neg[j] = h & 1u;
        }
    }
};

// Word w (bits 64w .. 64w+63) of an n-bit bitmap stored as bytes, bits at or
// beyond n cleared.
inline std::uint64_t load_word(const std::uint8_t *bitmap, std::size_t n, std::size_t w)
{
    const std::size_t first_bit = w * 64;
    const std::size_t bytes = bitmap_bytes(n);
    const std::size_t off = w * 8;
    std::uint64_t v = 0;
    if (off + 8 <= bytes) {
        std::memcpy(&v, bitmap + off, 8);  // little-endian: bit i of the word = bit off*8+i
    } else {
        for (std::size_t b = 0; off + b < bytes; ++b) v |= static_cast<std::uint64_t>(bitmap[off + b]) << (8 * b);
    }
    const std::size_t valid = n - first_bit;  // > 0 for w < words
    if (valid < 64) v &= (std::uint64_t{1} << valid) - 1;
    return v;
}

inline std::size_t words_of(std::size_t n) { return (n + 63) / 64; }

template <typename W>
inline W apply_sign(W v, std::uint32_t neg)
{
    return neg ? -v : v;
}

template <typename W>
inline W median3(W a, W b, W c)
{
    const W lo = std::min(a, b), hi = std::max(a, b);
    return std::max(lo, std::min(hi, c));
}

}  // namespace

void hits(const Layout &layout, std::size_t i, Hit out[3])
{
    const Hasher hasher(layout);
    std::uint32_t base[3], neg[3];
    hasher.block(static_cast<std::uint32_t>(i >> kBlockShift), base, neg);
    const std::uint32_t t = static_cast<std::uint32_t>(i) & kBlockMask;
    for (int j = 0; j < 3; ++j) {
        out[j].cell = base[j] + t;
        out[j].sign = neg[j] ? -1 : 1;
    }
}

std::uint32_t rows_per_table(const std::uint8_t *bitmap, std::size_t n, double load_factor)
{
    if (!(load_factor > 0)) load_factor = std::numeric_limits<double>::min();
    // Column t = i % kBlock; word w covers columns 64 * (w % 16) .. + 63.
    std::uint32_t col[kBlock] = {};
    const std::size_t words = words_of(n);
    constexpr std::size_t kWordsPerBlock = kBlock / 64;
    for (std::size_t w = 0; w < words; ++w) {
        std::uint64_t v = load_word(bitmap, n, w);
        std::uint32_t *c = col + 64 * (w % kWordsPerBlock);
        while (v) {
            ++c[__builtin_ctzll(v)];
            v &= v - 1;
        }
    }
    const std::uint32_t maxcol = *std::max_element(col, col + kBlock);
    if (maxcol == 0) return 1;
    // Smallest m with maxcol <= load_factor * 3m, computed then corrected
    // for rounding in either direction.
    const double capacity = 3.0 * load_factor;
    double guess = std::ceil(static_cast<double>(maxcol) / capacity);
    if (!(guess >= 1)) guess = 1;
    if (guess > kMaxRowsPerTable) return kMaxRowsPerTable;
    std::uint32_t m = static_cast<std::uint32_t>(guess);
    while (m < kMaxRowsPerTable && static_cast<double>(maxcol) > capacity * m) ++m;
    while (m > 1 && static_cast<double>(maxcol) <= capacity * (m - 1)) --m;
    return m;
}

void bitmap_set(std::uint8_t *bitmap, const std::uint32_t *idx, std::size_t k)
{
    for (std::size_t j = 0; j < k; ++j) bitmap[idx[j] >> 3] |= static_cast<std::uint8_t>(1u << (idx[j] & 7));
}

std::size_t bitmap_count(const std::uint8_t *bitmap, std::size_t n)
{
    std::size_t total = 0;
    const std::size_t words = words_of(n);
    for (std::size_t w = 0; w < words; ++w) total += static_cast<std::size_t>(__builtin_popcountll(load_word(bitmap, n, w)));
    return total;
}

template <typename W>
void encode(const Layout &layout, const W *x, const std::uint32_t *idx, std::size_t k, W *sketch)
{
    if (layout.m == 0) return;  // no cells (m >= 1 is the contract)
    const Hasher hasher(layout);
    std::uint32_t block = std::numeric_limits<std::uint32_t>::max();
    std::uint32_t base[3] = {0, 0, 0}, neg[3] = {0, 0, 0};
    for (std::size_t p = 0; p < k; ++p) {
        const std::uint32_t i = idx[p];
        const std::uint32_t b = i >> kBlockShift;
        if (b != block) {  // ascending indices rehash once per block
            hasher.block(b, base, neg);
            block = b;
        }
        const std::uint32_t t = i & kBlockMask;
        const W v = x[i];
        sketch[base[0] + t] += apply_sign(v, neg[0]);
        sketch[base[1] + t] += apply_sign(v, neg[1]);
        sketch[base[2] + t] += apply_sign(v, neg[2]);
    }
}

template <typename W>
DecodeInfo decode(const Layout &layout, const std::uint8_t *bitmap, W *sketch, W *out, DecodeScratch *scratch)
{
    DecodeInfo info;
    const std::size_t n = layout.n;
    const std::size_t cells = layout.cells();
    const Hasher hasher(layout);
    const std::size_t words = words_of(n);

    if (n > 0) std::memset(out, 0, n * sizeof(W));
    if (layout.m == 0) {  // no cells (m >= 1 is the contract): nothing to recover
        info.support = info.estimated = bitmap_count(bitmap, n);
        return info;
    }

    std::vector<std::uint32_t> &count = scratch->count;
    std::vector<std::uint32_t> &index_xor = scratch->index_xor;
    std::vector<std::uint32_t> &work = scratch->worklist;
    std::vector<std::uint8_t> &decoded = scratch->decoded;  // bitmap: bit i set = peeled
    count.assign(cells, 0);
    index_xor.assign(cells, 0);
    decoded.assign(bitmap_bytes(n), 0);
    work.clear();
    if (work.capacity() < cells) work.reserve(cells);
    std::uint32_t *cnt = count.data();
    std::uint32_t *ixr = index_xor.data();

    // 1. Counts and index xors from the support, block by block.
    constexpr std::size_t kWordsPerBlock = kBlock / 64;
    std::size_t support = 0;
    for (std::size_t w0 = 0; w0 < words; w0 += kWordsPerBlock) {
        const std::size_t wend = std::min(words, w0 + kWordsPerBlock);
        std::uint64_t any = 0;
        std::uint64_t v[kWordsPerBlock];
        for (std::size_t w = w0; w < wend; ++w) any |= v[w - w0] = load_word(bitmap, n, w);
        if (!any) continue;
        const std::uint32_t b = static_cast<std::uint32_t>(w0 / kWordsPerBlock);
        std::uint32_t base[3], neg[3];
        hasher.block(b, base, neg);
        for (std::size_t w = w0; w < wend; ++w) {
            std::uint64_t bits = v[w - w0];
            const std::uint32_t t0 = static_cast<std::uint32_t>((w - w0) * 64);
            support += static_cast<std::size_t>(__builtin_popcountll(bits));
            while (bits) {
                const std::uint32_t t = t0 + static_cast<std::uint32_t>(__builtin_ctzll(bits));
                bits &= bits - 1;
                const std::uint32_t i = (b << kBlockShift) | t;
                for (int j = 0; j < 3; ++j) {
                    ++cnt[base[j] + t];
                    ixr[base[j] + t] ^= i;
                }
            }
        }
    }
    info.support = support;

    // 2. Peeling. Every cell enters the worklist at most once: when it is
    // pure at the start, or when its count drops to 1.
    for (std::size_t c = 0; c < cells; ++c)
        if (cnt[c] == 1) work.push_back(static_cast<std::uint32_t>(c));
    std::size_t peeled = 0;
    std::uint8_t *dec = decoded.data();
    while (!work.empty()) {
        const std::uint32_t c = work.back();
        work.pop_back();
        if (cnt[c] != 1) continue;  // emptied since it was pushed
        const std::uint32_t i = ixr[c];
        const std::uint32_t t = i & kBlockMask;
        std::uint32_t base[3], neg[3];
        hasher.block(i >> kBlockShift, base, neg);
        std::uint32_t jc = 0;
        while (base[jc] + t != c) ++jc;  // c is one of i's three cells
        const W value = apply_sign(sketch[c], neg[jc]);
        out[i] = value;
        dec[i >> 3] |= static_cast<std::uint8_t>(1u << (i & 7));
        ++peeled;
        for (std::uint32_t j = 0; j < 3; ++j) {
            const std::uint32_t cj = base[j] + t;
            if (j == jc) {
                sketch[cj] = W(0);
                cnt[cj] = 0;
                ixr[cj] = 0;
                continue;
            }
            sketch[cj] -= apply_sign(value, neg[j]);
            ixr[cj] ^= i;
            if (--cnt[cj] == 1) work.push_back(cj);
        }
    }
    info.peeled = peeled;
    info.estimated = support - peeled;

    // 3. Count-sketch estimate (median of the three signed residual cells)
    // for what did not peel.
    if (info.estimated > 0) {
        std::uint32_t block = std::numeric_limits<std::uint32_t>::max();
        std::uint32_t base[3] = {0, 0, 0}, neg[3] = {0, 0, 0};
        for (std::size_t w = 0; w < words; ++w) {
            std::uint64_t d = 0;
            const std::size_t off = w * 8;
            const std::size_t bytes = decoded.size();
            if (off + 8 <= bytes) {
                std::memcpy(&d, dec + off, 8);
            } else {
                for (std::size_t q = 0; off + q < bytes; ++q) d |= static_cast<std::uint64_t>(dec[off + q]) << (8 * q);
            }
            std::uint64_t bits = load_word(bitmap, n, w) & ~d;
            while (bits) {
                const std::uint32_t i = static_cast<std::uint32_t>(w * 64 + static_cast<std::size_t>(__builtin_ctzll(bits)));
                bits &= bits - 1;
                const std::uint32_t b = i >> kBlockShift;
                if (b != block) {
                    hasher.block(b, base, neg);
                    block = b;
                }
                const std::uint32_t t = i & kBlockMask;
                out[i] = median3(apply_sign(sketch[base[0] + t], neg[0]), apply_sign(sketch[base[1] + t], neg[1]),
                                 apply_sign(sketch[base[2] + t], neg[2]));
            }
        }
    }
    return info;
}

template void encode<float>(const Layout &, const float *, const std::uint32_t *, std::size_t, float *);
template void encode<double>(const Layout &, const double *, const std::uint32_t *, std::size_t, double *);
template DecodeInfo decode<float>(const Layout &, const std::uint8_t *, float *, float *, DecodeScratch *);
template DecodeInfo decode<double>(const Layout &, const std::uint8_t *, double *, double *, DecodeScratch *);

}  // namespace cc_coll::detail::sketch
