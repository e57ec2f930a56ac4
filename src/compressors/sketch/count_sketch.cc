#include "compressors/sketch/count_sketch.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace cc_coll::detail::sketch {

namespace {

// Word w (bits 64w .. 64w+63) of an n-bit bitmap stored as bytes, bits at or
// beyond n cleared.
inline std::uint64_t load_word(const std::uint8_t *bitmap, std::size_t n, std::size_t w)
{
    const std::size_t first_bit = w * 64;
    const std::size_t bytes = bitmap_bytes(n);
    const std::size_t off = w * 8;
    std::uint64_t v = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (off + 8 <= bytes) {
        std::memcpy(&v, bitmap + off, 8);  // bit i of the word = bit off * 8 + i
    } else
#endif
    {
        for (std::size_t b = 0; b < 8 && off + b < bytes; ++b) v |= static_cast<std::uint64_t>(bitmap[off + b]) << (8 * b);
    }
    const std::size_t valid = n - first_bit;  // > 0 for w < words
    if (valid < 64) v &= (std::uint64_t{1} << valid) - 1;
    return v;
}

// f(w, word) for every word of an n-bit bitmap, bits at or beyond n cleared.
template <typename F>
inline void for_each_word(const std::uint8_t *bitmap, std::size_t n, F &&f)
{
    const std::size_t full = n / 64;
    for (std::size_t w = 0; w < full; ++w) {
        std::uint64_t v;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        std::memcpy(&v, bitmap + 8 * w, 8);
#else
        v = 0;
        for (std::size_t b = 0; b < 8; ++b) v |= static_cast<std::uint64_t>(bitmap[8 * w + b]) << (8 * b);
#endif
        f(w, v);
    }
    if (n % 64) f(full, load_word(bitmap, n, full));
}

// +1 or -1 from a sign bit (1: negative), for branch-free sign application:
// multiplying by +-1 is exact.
template <typename W>
inline W sign_value(std::uint32_t neg)
{
    static constexpr W kSign[2] = {W(1), W(-1)};
    return kSign[neg];
}

}  // namespace

void hits(const Layout &layout, std::size_t i, Hit out[3])
{
    const ElementHits e = element_hits(Hasher(layout.seed, layout.m), i);
    for (int j = 0; j < 3; ++j) {
        out[j].cell = e.cell[j];
        out[j].sign = e.neg[j] ? -1 : 1;
    }
}

std::uint32_t rows_per_table(const std::uint8_t *bitmap, std::size_t n, double load_factor)
{
    // Column t = i % kBlock; word w covers columns 64 * (w % 16) .. + 63.
    std::uint32_t col[kBlock] = {};
    constexpr std::size_t kWordsPerBlock = kBlock / 64;
    for_each_word(bitmap, n, [&](std::size_t w, std::uint64_t v) {
        std::uint32_t *c = col + 64 * (w % kWordsPerBlock);
        while (v) {
            ++c[__builtin_ctzll(v)];
            v &= v - 1;
        }
    });
    return rows_for_loads(col, load_factor);
}

std::uint32_t rows_for_loads(const std::uint32_t *loads, double load_factor)
{
    if (!(load_factor > 0)) load_factor = std::numeric_limits<double>::min();
    const std::uint32_t maxcol = *std::max_element(loads, loads + kBlock);
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
    for_each_word(bitmap, n, [&](std::size_t, std::uint64_t v) { total += static_cast<std::size_t>(__builtin_popcountll(v)); });
    return total;
}

template <typename W>
void encode(const Layout &layout, const W *x, const std::uint32_t *idx, std::size_t k, W *sketch)
{
    if (layout.m == 0) return;  // no cells (m >= 1 is the contract)
    const Hasher hasher(layout.seed, layout.m);
    // x is read sparsely: prefetch kAhead positions ahead, so that its cache
    // misses overlap (on their own they wait behind the stores to the cells
    // whenever the addresses agree modulo 4 KiB, which serializes them).
    constexpr std::size_t kAhead = 16;
    std::uint32_t block = std::numeric_limits<std::uint32_t>::max();
    BlockHash h{};
    for (std::size_t p = 0; p < k; ++p) {
        if (p + kAhead < k) __builtin_prefetch(x + idx[p + kAhead]);
        const std::uint32_t i = idx[p];
        const std::uint32_t b = i >> kBlockShift;
        if (b != block) {  // ascending indices rehash once per block
            h = hasher.block(b);
            block = b;
        }
        const std::uint32_t t = i & kBlockMask;
        const W v = x[i];
        sketch[hasher.cell(h, 0, t)] += apply_sign(v, h.neg[0]);
        sketch[hasher.cell(h, 1, t)] += apply_sign(v, h.neg[1]);
        sketch[hasher.cell(h, 2, t)] += apply_sign(v, h.neg[2]);
    }
}

namespace {

template <typename W>
struct Values;
template <>
struct Values<float> {
    static std::vector<float> &of(DecodeScratch *s) { return s->values32; }
};
template <>
struct Values<double> {
    static std::vector<double> &of(DecodeScratch *s) { return s->values64; }
};

// Budget for one column group's cells (3m x G values, counts and key
// xors): about a per-core L2 cache.
constexpr std::size_t kGroupBudget = std::size_t{1} << 20;

// Columns per group: whole rotation groups (elements of one never reach the
// cells of another), and beyond that the largest power of two <= 64 whose
// cells fit the budget; 8 at the least, so each row segment copied is >= 32
// bytes.
std::size_t group_columns(std::uint32_t m, std::size_t value_bytes)
{
    const std::size_t rows = 3 * static_cast<std::size_t>(m);
    std::size_t g = 64;
    while (g > 8 && g * rows * (value_bytes + 24) > kGroupBudget) g /= 2;
    return std::max(g, rotation_columns(m));
}

// Decoding, one group of G adjacent columns at a time (see decode()).
template <typename W, std::size_t G>
DecodeInfo decode_groups(const Layout &layout, const std::uint8_t *bitmap, W *sketch, W *out, DecodeScratch *scratch)
{
    static_assert(G >= 8 && G <= kBlock && (G & (G - 1)) == 0, "G: a power of two in [8, kBlock]");
    constexpr std::size_t kGroupShift = static_cast<std::size_t>(__builtin_ctzll(G));
    constexpr std::size_t kGroups = kBlock / G;
    constexpr std::size_t kWordsPerBlock = kBlock / 64;
    DecodeInfo info;
    const std::size_t n = layout.n;
    const std::size_t m = layout.m;
    const std::size_t blocks = (n + kBlock - 1) / kBlock;
    const std::size_t rows = layout.rows();
    const std::size_t groups = (std::min(n, kBlock) + G - 1) / G;  // groups that hold elements

    // 1. Support positions by column group: start[g] .. start[g + 1].
    std::size_t start[kGroups + 1] = {};
    for_each_word(bitmap, n, [&](std::size_t w, std::uint64_t v) {
        if (!v) return;
        const std::size_t g0 = (64 * (w % kWordsPerBlock)) >> kGroupShift;
        if constexpr (G >= 64) {
            start[g0 + 1] += static_cast<std::size_t>(__builtin_popcountll(v));
        } else {
            constexpr std::uint64_t kMask = (std::uint64_t{1} << G) - 1;
            for (std::size_t k = 0; k < 64 / G; ++k)
                start[g0 + k + 1] += static_cast<std::size_t>(__builtin_popcountll((v >> (k * G)) & kMask));
        }
    });
    for (std::size_t g = 0; g < kGroups; ++g) start[g + 1] += start[g];
    const std::size_t support = start[kGroups];
    info.support = support;
    if (support == 0) return info;

    std::vector<std::uint32_t> &elements = scratch->elements;
    if (elements.size() < support) elements.resize(support);
    std::uint32_t *elem = elements.data();
    std::size_t next[kGroups];
    std::copy(start, start + kGroups, next);
    for_each_word(bitmap, n, [&](std::size_t w, std::uint64_t v) {
        while (v) {
            const std::uint32_t i = static_cast<std::uint32_t>(w * 64 + static_cast<std::size_t>(__builtin_ctzll(v)));
            v &= v - 1;
            elem[next[(i & kBlockMask) >> kGroupShift]++] = i;
        }
    });

    // 2. Per block: its row in sub-table j (0 .. m-1, < 2^21) | sign bit
    // << 31 at [4b + j]; its rotations o_0 | o_1 << 10 | o_2 << 20 at
    // [4b + 3].
    const Hasher hasher(layout.seed, layout.m);
    std::vector<std::uint32_t> &block_rows = scratch->block_rows;
    if (block_rows.size() < 4 * blocks) block_rows.resize(4 * blocks);
    std::uint32_t *brow = block_rows.data();
    for (std::size_t b = 0; b < blocks; ++b) {
        const BlockHash h = hasher.block(static_cast<std::uint32_t>(b));
        for (std::uint32_t j = 0; j < 3; ++j) brow[4 * b + j] = ((h.base[j] >> kBlockShift) - j * layout.m) | (h.neg[j] << 31);
        brow[4 * b + 3] = h.rot[0] | (h.rot[1] << 10) | (h.rot[2] << 20);
    }

    // 3. The groups. A group's cell (row r, column t0 + q) is at r * G + q
    // and holds its count and the xors of its elements' keys: index_xor =
    // the list position within the group, row_xor = the three rows packed
    // 21 bits apart (m < 2^21), column_xor = q | rotations << 10 | signs <<
    // 40 (q, rotations < 2^10). A pure cell's xors are its element's keys, so
    // peeling needs no other lookup: a queue entry leads to a cell, the cell
    // to its element's other two cells.
    const std::size_t lcells = rows * G;
    if (scratch->count.size() < lcells) scratch->count.resize(lcells);
    if (scratch->index_xor.size() < lcells) scratch->index_xor.resize(lcells);
    if (scratch->row_xor.size() < lcells) scratch->row_xor.resize(lcells);
    if (scratch->column_xor.size() < lcells) scratch->column_xor.resize(lcells);
    if (scratch->worklist.size() < lcells + 2) scratch->worklist.resize(lcells + 2);
    if (scratch->decoded.size() < support) scratch->decoded.resize(support);
    std::vector<W> &values = Values<W>::of(scratch);
    if (values.size() < lcells + support) values.resize(lcells + support);
    std::uint32_t *cnt = scratch->count.data();
    std::uint32_t *ixr = scratch->index_xor.data();
    std::uint64_t *rxr = scratch->row_xor.data();
    std::uint64_t *cxr = scratch->column_xor.data();
    std::uint32_t *queue = scratch->worklist.data();
    std::uint8_t *dec = scratch->decoded.data();  // 1: the element at that list position peeled
    W *val = values.data();                       // the group's cell values
    W *rec = values.data() + lcells;              // recovered values, by list position
    constexpr std::uint64_t kRowMask = (std::uint64_t{1} << 21) - 1;
    constexpr std::uint32_t kH = (1u << 21) - 1;  // row bits of a block_rows entry
    // Local cell of an element at column q of the group, in row `row`.
    const std::uint32_t rot_mask = hasher.rot_mask;  // rotation groups fit in G columns
    const auto lcell = [rot_mask](std::size_t row, std::uint32_t q, std::uint32_t o) -> std::size_t {
        return row * G + rotate(q, o, rot_mask);
    };

    std::size_t peeled_total = 0;
    for (std::size_t g = 0; g < groups; ++g) {
        const std::size_t t0 = g * G;
        const std::size_t p0 = start[g], size = start[g + 1] - p0;
        if (size == 0) continue;
        for (std::size_t r = 0; r < rows; ++r) std::memcpy(val + r * G, sketch + r * kBlock + t0, G * sizeof(W));
        std::memset(cnt, 0, lcells * sizeof(std::uint32_t));
        std::memset(ixr, 0, lcells * sizeof(std::uint32_t));
        std::memset(rxr, 0, lcells * sizeof(std::uint64_t));
        std::memset(cxr, 0, lcells * sizeof(std::uint64_t));
        std::memset(dec + p0, 0, size);
        const std::uint32_t *gelem = elem + p0;
        W *grec = rec + p0;
        std::uint8_t *gdec = dec + p0;

        // Counts and key xors.
        for (std::size_t pos = 0; pos < size; ++pos) {
            const std::uint32_t i = gelem[pos];
            const std::uint32_t *br = brow + 4 * (i >> kBlockShift);
            const std::uint32_t q = (i & kBlockMask) - static_cast<std::uint32_t>(t0);
            const std::uint32_t ik = static_cast<std::uint32_t>(pos);
            const std::uint32_t h0 = br[0] & kH, h1 = br[1] & kH, h2 = br[2] & kH;
            const std::uint64_t rk = h0 | (static_cast<std::uint64_t>(h1) << 21) | (static_cast<std::uint64_t>(h2) << 42);
            const std::uint64_t signs = (br[0] >> 31) | ((br[1] >> 31) << 1) | ((br[2] >> 31) << 2);
            const std::uint64_t ck = q | (static_cast<std::uint64_t>(br[3]) << 10) | (signs << 40);
            const std::size_t c0 = lcell(h0, q, br[3] & 1023u), c1 = lcell(m + h1, q, (br[3] >> 10) & 1023u),
                              c2 = lcell(2 * m + h2, q, (br[3] >> 20) & 1023u);
            ++cnt[c0];
            ++cnt[c1];
            ++cnt[c2];
            ixr[c0] ^= ik;
            ixr[c1] ^= ik;
            ixr[c2] ^= ik;
            rxr[c0] ^= rk;
            rxr[c1] ^= rk;
            rxr[c2] ^= rk;
            cxr[c0] ^= ck;
            cxr[c1] ^= ck;
            cxr[c2] ^= ck;
        }

        // Peeling, breadth first: queue[head .. tail). A cell enters the
        // queue at most once (pure at the start, or when its count drops to
        // 1), so lcells slots suffice, plus 2 spare: a cell is written at
        // `tail` always and kept by advancing tail only when its count drops
        // to 1. No data-dependent branches where the outcome is random
        // (signs, which of the three cells is the pure one, queueing):
        // mispredictions would dominate. kAhead entries ahead, the queued
        // cell is prefetched.
        std::size_t tail = 0;
        for (std::size_t c = 0; c < lcells; ++c) {
            queue[tail] = static_cast<std::uint32_t>(c);
            tail += cnt[c] == 1;
        }
        std::size_t peeled = 0;
        constexpr std::size_t kAhead = 8;
        for (std::size_t head = 0; head < tail; ++head) {
            if (head + kAhead < tail) {
                const std::uint32_t ca = queue[head + kAhead];
                __builtin_prefetch(cnt + ca);
                __builtin_prefetch(ixr + ca);
                __builtin_prefetch(rxr + ca);
                __builtin_prefetch(cxr + ca);
                __builtin_prefetch(val + ca);
            }
            const std::uint32_t c = queue[head];
            if (cnt[c] != 1) continue;  // emptied since it was queued
            const std::uint32_t pos = ixr[c];
            const std::uint64_t rk = rxr[c];
            const std::uint64_t ck = cxr[c];
            const std::uint32_t q = static_cast<std::uint32_t>(ck & 1023u);
            const std::size_t cj[3] = {lcell(rk & kRowMask, q, static_cast<std::uint32_t>(ck >> 10) & 1023u),
                                       lcell(m + ((rk >> 21) & kRowMask), q, static_cast<std::uint32_t>(ck >> 20) & 1023u),
                                       lcell(2 * m + (rk >> 42), q, static_cast<std::uint32_t>(ck >> 30) & 1023u)};
            const std::uint32_t jc =
                static_cast<std::uint32_t>(c == cj[1]) + 2 * static_cast<std::uint32_t>(c == cj[2]);
            const std::uint32_t ja = jc == 2 ? 0 : jc + 1, jb = jc == 0 ? 2 : jc - 1;  // the other two
            const std::uint32_t sg = static_cast<std::uint32_t>(ck >> 40);
            // + 0: an exact zero sum is +0, as a dense MPI_SUM gives it
            // (+0 * -1 would be -0).
            const W value = val[c] * sign_value<W>((sg >> jc) & 1u) + W(0);
            grec[pos] = value;
            gdec[pos] = 1;
            ++peeled;
            val[c] = W(0);  // its only element, subtracted
            cnt[c] = 0;     // (its key xors are never read again)
            const std::size_t ca = cj[ja], cb = cj[jb];
            val[ca] -= value * sign_value<W>((sg >> ja) & 1u);
            ixr[ca] ^= pos;
            rxr[ca] ^= rk;
            cxr[ca] ^= ck;
            queue[tail] = static_cast<std::uint32_t>(ca);
            tail += --cnt[ca] == 1;
            val[cb] -= value * sign_value<W>((sg >> jb) & 1u);
            ixr[cb] ^= pos;
            rxr[cb] ^= rk;
            cxr[cb] ^= ck;
            queue[tail] = static_cast<std::uint32_t>(cb);
            tail += --cnt[cb] == 1;
        }
        peeled_total += peeled;

        // Count-sketch estimates (median of the three signed residual
        // cells) for what did not peel.
        if (peeled < size) {
            for (std::size_t pos = 0; pos < size; ++pos) {
                if (gdec[pos]) continue;
                const std::uint32_t i = gelem[pos];
                const std::uint32_t *br = brow + 4 * (i >> kBlockShift);
                const std::uint32_t q = (i & kBlockMask) - static_cast<std::uint32_t>(t0);
                grec[pos] = W(0) + median3(val[lcell(br[0] & kH, q, br[3] & 1023u)] * sign_value<W>(br[0] >> 31),
                                    val[lcell(m + (br[1] & kH), q, (br[3] >> 10) & 1023u)] * sign_value<W>(br[1] >> 31),
                                    val[lcell(2 * m + (br[2] & kH), q, (br[3] >> 20) & 1023u)] *
                                        sign_value<W>(br[2] >> 31));
            }
        }
        for (std::size_t r = 0; r < rows; ++r) std::memcpy(sketch + r * kBlock + t0, val + r * G, G * sizeof(W));
    }
    info.peeled = peeled_total;
    info.estimated = support - peeled_total;

    // 4. The output, ascending: at each support position, the next value of
    // its group (out is zeroed by the caller).
    std::copy(start, start + kGroups, next);
    for_each_word(bitmap, n, [&](std::size_t w, std::uint64_t v) {
        while (v) {
            const std::size_t i = w * 64 + static_cast<std::size_t>(__builtin_ctzll(v));
            v &= v - 1;
            out[i] = rec[next[(i & kBlockMask) >> kGroupShift]++];
        }
    });
    return info;
}

// decode_groups<W, g> for g, a power of two in [8, kBlock].
template <typename W, std::size_t G>
DecodeInfo decode_dispatch(std::size_t g, const Layout &layout, const std::uint8_t *bitmap, W *sketch, W *out,
                           DecodeScratch *scratch)
{
    if constexpr (G > 8) {
        if (g < G) return decode_dispatch<W, G / 2>(g, layout, bitmap, sketch, out, scratch);
    }
    return decode_groups<W, G>(layout, bitmap, sketch, out, scratch);
}

}  // namespace

// Rotation groups of columns are independent problems (an element's three
// cells are all in its group of rotation_columns(m) columns). In the sketch
// a column's cells lie kBlock values apart, and in the output a column's
// elements too, which maps them onto a handful of cache sets and a page
// each; so the decoder works one group of G adjacent columns (whole
// rotation groups) at a time on compact copies: the group's cells as
// rows x G arrays, its support elements as a list, its recovered values in
// list order. Peeling's random accesses then stay within a cache-sized
// working set (for m > kFullRotationRows; smaller sketches are one group
// and small anyway).
//
//  1. The support positions, bucketed by column group (two passes over the
//     bitmap: count, then place; ascending within each group).
//  2. Per block: its three rows and signs (hashed once).
//  3. Per group: copy its cell values in, count its elements into its
//     cells, queue the pure cells, peel breadth first, estimate what did
//     not peel, copy the residual cell values back.
//  4. The output: zeros, then one ascending pass over the support taking
//     the next value of each position's group.
template <typename W>
DecodeInfo decode(const Layout &layout, const std::uint8_t *bitmap, W *sketch, W *out, DecodeScratch *scratch)
{
    const std::size_t n = layout.n;
    if (n == 0) return DecodeInfo{};
    std::memset(out, 0, n * sizeof(W));
    if (layout.m == 0) {  // no cells (m >= 1 is the contract): nothing to recover
        DecodeInfo info;
        info.support = info.estimated = bitmap_count(bitmap, n);
        return info;
    }
    return decode_dispatch<W, kBlock>(group_columns(layout.m, sizeof(W)), layout, bitmap, sketch, out, scratch);
}

template void encode<float>(const Layout &, const float *, const std::uint32_t *, std::size_t, float *);
template void encode<double>(const Layout &, const double *, const std::uint32_t *, std::size_t, double *);
template DecodeInfo decode<float>(const Layout &, const std::uint8_t *, float *, float *, DecodeScratch *);
template DecodeInfo decode<double>(const Layout &, const std::uint8_t *, double *, double *, DecodeScratch *);

}  // namespace cc_coll::detail::sketch
