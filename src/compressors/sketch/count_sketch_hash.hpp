// The count sketch's hashing and its decoder's per-cell steps as host and
// device code (CC_COLL_HD), shared by count_sketch.cc and the kernels of
// count_sketch_cuda.cu: a sketch encoded on the device sums with one encoded
// on the host, and both decoders peel the same set of elements. The layout
// itself is described at the top of count_sketch.hpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/half.hpp"  // CC_COLL_HD

namespace cc_coll::detail::sketch {

constexpr std::size_t kBlock = 1024;
constexpr std::uint32_t kBlockShift = 10;  // kBlock == 1 << kBlockShift
static_assert(kBlock == (std::size_t{1} << kBlockShift), "kBlock must be 1 << kBlockShift");
constexpr std::uint32_t kBlockMask = static_cast<std::uint32_t>(kBlock - 1);
// Columns per rotation group (see Layout): kRotation when m > kFullRotationRows,
// all of a block's kBlock columns otherwise.
constexpr std::size_t kRotation = 64;
constexpr std::uint32_t kFullRotationRows = 96;
static_assert(kRotation >= 1 && kBlock % kRotation == 0 && (kRotation & (kRotation - 1)) == 0,
              "kRotation: a power of two dividing kBlock");
CC_COLL_HD inline std::size_t rotation_columns(std::uint32_t m) { return m > kFullRotationRows ? kRotation : kBlock; }

// Rows per sub-table are 1 .. kMaxRowsPerTable: cell indices (3 m kBlock)
// are 32-bit, and the host decoder packs three rows into 21 bits each.
constexpr std::uint32_t kMaxRowsPerTable = static_cast<std::uint32_t>((0xffffffffu / 3) / kBlock);
static_assert(kMaxRowsPerTable < (1u << 21), "rows must fit 21 bits");

// Column t rotated by o within its group of mask + 1 columns.
CC_COLL_HD inline std::uint32_t rotate(std::uint32_t t, std::uint32_t o, std::uint32_t mask)
{
    return (t & ~mask) | ((t + o) & mask);
}

// MurmurHash3 (x86, 32-bit) finalizer.
CC_COLL_HD inline std::uint32_t fmix32(std::uint32_t h)
{
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

CC_COLL_HD inline std::uint32_t rotl32(std::uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

// MurmurHash3_x86_32 of the 4-byte key `key` with seed `seed`.
CC_COLL_HD inline std::uint32_t murmur3_u32(std::uint32_t key, std::uint32_t seed)
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
CC_COLL_HD inline std::uint64_t splitmix64(std::uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// Block b's three rows, signs and rotations.
struct BlockHash {
    std::uint32_t base[3];  // first cell of its row in sub-table j: row * kBlock
    std::uint32_t neg[3];   // sign bit of hash j (1: negative)
    std::uint32_t rot[3];   // column rotation of hash j
};

// The three hashes of a layout (seed, m): a plain value, passed to kernels
// by value.
struct Hasher {
    std::uint32_t seed[3];
    std::uint32_t m;
    std::uint32_t rot_mask;  // rotation_columns(m) - 1

    Hasher() = default;
    CC_COLL_HD Hasher(std::uint64_t layout_seed, std::uint32_t rows_per_table)
        : m(rows_per_table), rot_mask(static_cast<std::uint32_t>(rotation_columns(rows_per_table) - 1))
    {
        for (std::uint32_t j = 0; j < 3; ++j)
            seed[j] = static_cast<std::uint32_t>(splitmix64(layout_seed ^ (0x632be59bd9b4e019ull * (j + 1))) >> 32);
    }

    // Hash j of block b picks row j*m + (h * m >> 32), its sign from bit 0
    // of h and its rotation from bits 1.. of h.
    CC_COLL_HD BlockHash block(std::uint32_t b) const
    {
        BlockHash out;
        for (std::uint32_t j = 0; j < 3; ++j) {
            const std::uint32_t h = murmur3_u32(b, seed[j]);
            const std::uint32_t row = j * m + static_cast<std::uint32_t>((static_cast<std::uint64_t>(h) * m) >> 32);
            out.base[j] = row << kBlockShift;
            out.neg[j] = h & 1u;
            out.rot[j] = (h >> 1) & rot_mask;
        }
        return out;
    }

    // Cell of column t (0 .. kBlock-1) of a block under its hash j.
    CC_COLL_HD std::uint32_t cell(const BlockHash &h, std::uint32_t j, std::uint32_t t) const
    {
        return h.base[j] + rotate(t, h.rot[j], rot_mask);
    }
};

// Cells and sign bits of element i (< 2^42) under hashes 0..2.
struct ElementHits {
    std::uint32_t cell[3];
    std::uint32_t neg[3];
};
CC_COLL_HD inline ElementHits element_hits(const Hasher &hasher, std::uint64_t i)
{
    const BlockHash h = hasher.block(static_cast<std::uint32_t>(i >> kBlockShift));
    const std::uint32_t t = static_cast<std::uint32_t>(i) & kBlockMask;
    ElementHits out;
    for (std::uint32_t j = 0; j < 3; ++j) {
        out.cell[j] = hasher.cell(h, j, t);
        out.neg[j] = h.neg[j];
    }
    return out;
}

// Bits 32w .. 32w+31 of an n-bit bitmap stored as bytes (bit i = byte i / 8,
// bit i % 8) as one 32-bit word (bit i - 32w), bits at or beyond n cleared;
// w < (n + 31) / 32. Only its bitmap_bytes(n) bytes are read: on the device
// as one 32-bit load where the bitmap is 4-byte aligned and the word lies
// inside them (the device is little-endian), byte by byte otherwise.
CC_COLL_HD inline std::uint32_t bitmap_word32(const std::uint8_t *bitmap, std::size_t n, std::size_t w)
{
    const std::size_t bytes = (n + 7) / 8, off = 4 * w;
    std::uint32_t v = 0;
#ifdef __CUDA_ARCH__
    if (off + 4 <= bytes && (reinterpret_cast<std::uintptr_t>(bitmap) & 3u) == 0) {
        v = __ldg(reinterpret_cast<const unsigned int *>(bitmap + off));
    } else
#endif
    {
        for (std::size_t b = 0; b < 4 && off + b < bytes; ++b) v |= static_cast<std::uint32_t>(bitmap[off + b]) << (8 * b);
    }
    const std::size_t valid = n - 32 * w;
    if (valid < 32) v &= (1u << valid) - 1u;
    return v;
}

// v with the sign of bit `neg` applied (1: negated); exact, as v * -1 is.
template <typename W>
CC_COLL_HD inline W apply_sign(W v, std::uint32_t neg)
{
    return neg ? -v : v;
}

// Median of three with the comparisons of std::min / std::max (b < a picks
// b, a < b picks b), so host and device agree on every input.
template <typename W>
CC_COLL_HD inline W median3(W a, W b, W c)
{
    const W lo = b < a ? b : a;
    const W hi = a < b ? b : a;
    const W hc = c < hi ? c : hi;
    return lo < hc ? hc : lo;
}

// ------------------------------------------------------------------------
// Peeling in rounds: the device decoder's per-element and per-cell steps.
// The device runs each step on many threads at once with Ops = atomics; the
// host test of the device decoder runs the same steps one after the other
// with plain memory operations. Per cell: count = support elements not yet
// peeled, key = xor of their indices (a cell with count 1 names its element),
// value = the sketch cell, owner = a bid of the subtraction passes (below).
//
// A round is a claim pass, a peel pass and subtraction passes over its
// worklist of cells that became pure (the cells whose count dropped to 1 in
// the previous round, or pure at the start), and the result of a round is
// a function of the sketch alone, not of the order in which threads run:
//  - claim_cell: an element pure in several of the round's cells is claimed
//    by the one of the lowest hash j (the lowest cell index). Claiming only
//    reads counts and keys (and writes the claimed cell's own count, from 1
//    to kClaimed, which the other cells of its element read as pure all the
//    same), so no decision depends on another claim.
//  - peel_cell: a claimed cell gives its element's value (sign * cell) and
//    takes the element out of its other two cells' counts and keys at once
//    (integer atomics: any order gives the same counts, and each cell whose
//    count drops from 2 to 1 is queued for the next round exactly once); the
//    two subtractions of the value are left pending in the claimed cell's
//    count (kPending | a bit per hash j still to subtract), and bid for.
//  - subtract_cell, then bid_cell, until nothing is pending: of the pending
//    subtractions into a cell, the one of the lowest claimed cell (its bid,
//    an atomic min in owner) subtracts, plainly, and clears the bid. So one
//    subtraction per cell per pass, and into each cell in ascending order of
//    the claimed cells: the float rounding is fixed. The passes of a round
//    are as many as the most subtractions one cell receives in the round.
// The first round claims and subtracts as the host decoder does (it peels
// its first queue in ascending cell order); later rounds may round
// differently from the host in the last bits.
//
// Ops: static add(std::uint32_t *, std::uint32_t),
// bit_xor(std::uint32_t *, std::uint32_t), bit_or(std::uint32_t *,
// std::uint32_t), decrement(std::uint32_t *) returning the value before,
// min(std::uint32_t *, std::uint32_t).

// Marks a claimed cell between the claim and peel passes of a round. Counts
// never come near it (at most the support elements of one column).
constexpr std::uint32_t kClaimed = 0xffffffffu;
// A peeled cell while its element's subtractions are pending: kPending | bit
// j for each hash j whose cell is still to be subtracted from.
constexpr std::uint32_t kPending = 0xfffffff0u;
// No cell: cell indices are below 3 * m * kBlock < 2^32 - 1. Also the owner
// of a cell without bids.
constexpr std::uint32_t kNoCell = 0xffffffffu;

template <typename W>
struct PeelState {
    Hasher hasher;
    W *value;                // the sketch's cells, peeled values subtracted
    std::uint32_t *count;    // per cell: elements not yet peeled (kClaimed, kPending: see above)
    std::uint32_t *key;      // per cell: xor of their element indices
    std::uint32_t *owner;    // per cell: lowest bidding claimed cell, kNoCell between passes
    std::uint32_t *decoded;  // bit i (word i / 32, bit i % 32): element i peeled
    W *out;                  // recovered values by element
};

// Support element i (block hash h, column t) enters its three cells.
template <typename Ops, typename W>
CC_COLL_HD inline void count_element(const PeelState<W> &s, const BlockHash &h, std::uint32_t i)
{
    const std::uint32_t t = i & kBlockMask;
    for (std::uint32_t j = 0; j < 3; ++j) {
        const std::uint32_t c = s.hasher.cell(h, j, t);
        Ops::add(s.count + c, 1u);
        Ops::bit_xor(s.key + c, i);
    }
}

// Claim pass, worklist entry c: a pure cell claims its element unless the
// element is pure in a cell of a lower hash j too (count 1, or kClaimed once
// that cell has claimed it: a count of 1 at the start of a round means the
// round's worklist holds the cell). Marks the claimed cell kClaimed and the
// element decoded. Returns whether it claimed.
template <typename Ops, typename W>
CC_COLL_HD inline bool claim_cell(const PeelState<W> &s, std::uint32_t c)
{
    if (s.count[c] != 1) return false;  // emptied since it was queued
    const std::uint32_t i = s.key[c];
    const ElementHits e = element_hits(s.hasher, i);
    for (std::uint32_t j = 0; j < 3 && e.cell[j] != c; ++j) {  // the cells of lower hashes
        const std::uint32_t other = s.count[e.cell[j]];
        if (other == 1 || other == kClaimed) return false;
    }
    Ops::bit_or(s.decoded + (i >> 5), 1u << (i & 31u));
    s.count[c] = kClaimed;
    return true;
}

// Peel pass, worklist entry c: a claimed cell gives its element's value
// (sign * cell) and empties; the element leaves the counts and keys of its
// other two cells, which go to next[0], next[1] when their count drops to 1
// (kNoCell otherwise), and bids for their subtractions. Only the claiming
// entry touches a claimed cell, its element being the only one left in it.
template <typename Ops, typename W>
CC_COLL_HD inline void peel_cell(const PeelState<W> &s, std::uint32_t c, std::uint32_t next[2])
{
    next[0] = next[1] = kNoCell;
    if (s.count[c] != kClaimed) return;
    const std::uint32_t i = s.key[c];
    const ElementHits e = element_hits(s.hasher, i);
    const std::uint32_t jc = static_cast<std::uint32_t>(c == e.cell[1]) + 2 * static_cast<std::uint32_t>(c == e.cell[2]);
    // + 0: an exact zero sum is +0, as a dense MPI_SUM gives it.
    const W v = apply_sign(s.value[c], e.neg[jc]) + W(0);
    s.out[i] = v;
    s.value[c] = W(0);
    s.count[c] = kPending | (7u & ~(1u << jc));  // the key stays i until the subtractions are done
    const std::uint32_t others[2] = {jc == 2 ? 0u : jc + 1, jc == 0 ? 2u : jc - 1};
    for (std::uint32_t k = 0; k < 2; ++k) {
        const std::uint32_t cj = e.cell[others[k]];
        Ops::bit_xor(s.key + cj, i);
        if (Ops::decrement(s.count + cj) == 2) next[k] = cj;
        Ops::min(s.owner + cj, c);
    }
}

// Subtraction pass, worklist entry c: a peeled cell subtracts its element's
// value from each pending cell whose bid it won, and clears the bid (the
// other bidders read another owner or kNoCell, and bid again in the next
// bid pass). Returns whether subtractions are left to it; once none are,
// the cell is empty (count and key 0).
template <typename W>
CC_COLL_HD inline bool subtract_cell(const PeelState<W> &s, std::uint32_t c)
{
    const std::uint32_t state = s.count[c];
    if (state < kPending || state == kClaimed) return false;  // not peeled this round
    const std::uint32_t i = s.key[c];
    const ElementHits e = element_hits(s.hasher, i);
    const W v = s.out[i];
    std::uint32_t pending = state & 7u;
    for (std::uint32_t j = 0; j < 3; ++j) {
        const std::uint32_t cj = e.cell[j];
        if (!((pending >> j) & 1u) || s.owner[cj] != c) continue;
        s.value[cj] -= apply_sign(v, e.neg[j]);
        s.owner[cj] = kNoCell;
        pending &= ~(1u << j);
    }
    s.count[c] = pending ? kPending | pending : 0u;
    if (!pending) s.key[c] = 0;
    return pending != 0;
}

// Bid pass, worklist entry c: a peeled cell with subtractions left bids for
// their cells again.
template <typename Ops, typename W>
CC_COLL_HD inline void bid_cell(const PeelState<W> &s, std::uint32_t c)
{
    const std::uint32_t state = s.count[c];
    if (state < kPending || state == kClaimed) return;
    const ElementHits e = element_hits(s.hasher, s.key[c]);
    for (std::uint32_t j = 0; j < 3; ++j)
        if ((state >> j) & 1u) Ops::min(s.owner + e.cell[j], c);
}

// Support element i that did not peel: the median of its three signed
// residual cells (the count-sketch estimate).
template <typename W>
CC_COLL_HD inline W estimate_element(const PeelState<W> &s, std::uint64_t i)
{
    const ElementHits e = element_hits(s.hasher, i);
    return W(0) + median3(apply_sign(s.value[e.cell[0]], e.neg[0]), apply_sign(s.value[e.cell[1]], e.neg[1]),
                          apply_sign(s.value[e.cell[2]], e.neg[2]));
}

}  // namespace cc_coll::detail::sketch
