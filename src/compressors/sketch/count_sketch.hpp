// Block-hashed 3-way count sketch with a peeling decoder (ALGORITHMS.md
// section 3). Knows nothing of MPI: the collectives move the bitmaps and the
// sketches.
//
// Layout. Elements are split into blocks of kBlock = 1024; the sketch has
// 3 sub-tables of m rows of kBlock cells (rows() = 3m). Block b has three
// seeded 32-bit hashes h_j(b) (murmur3 finalizer), j = 0..2; hash j picks
// row j*m + (h_j(b) mod m) in sub-table j and a sign +-1 from another bit
// of h_j(b). Element (b, t) adds sign_j * x to cell (row_j, t) for j = 0..2:
// the three cells are always distinct, and memory access stays contiguous
// along a block. The sketch is linear: sketch(a) + sketch(b) == sketch(a + b).
//
// Decoding needs the support (the set of non-zero positions, as a bitmap
// with bit i = bitmap[i / 8] >> (i % 8) & 1) and is the same on every rank:
// counts per cell (and the xor of the element indices in each cell) come
// from the support alone and are never sent. Peeling: a cell holding exactly
// one undecoded element gives that element's value (sign * cell); it is
// subtracted from its other cells, which may become pure in turn (a
// worklist, no repeated scans). Elements left when no pure cell remains get
// the median of their three signed cell values (the count-sketch estimate).
//
// Sizing. Column t of the sketch receives the support elements at offset t
// of every block; rows_per_table() picks m so that the fullest column's load
// (support elements / rows()) stays at or under the load factor, which keeps
// peeling complete with high probability up to ~0.8.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cc_coll::detail::sketch {

constexpr std::size_t kBlock = 1024;

struct Layout {
    std::size_t n = 0;       // elements covered (a buffer or one shard)
    std::uint32_t m = 1;     // rows per sub-table, >= 1
    std::uint64_t seed = 0;  // identical on every rank

    std::size_t rows() const { return 3 * static_cast<std::size_t>(m); }
    std::size_t cells() const { return rows() * kBlock; }
};

// Cell index (row * kBlock + t) and sign of element i under hash j.
struct Hit {
    std::uint32_t cell;
    int sign;  // +1 or -1
};
void hits(const Layout &layout, std::size_t i, Hit out[3]);

// Smallest m >= 1 such that, for the support in `bitmap` (n bits), the
// fullest column holds at most load_factor * 3m elements.
std::uint32_t rows_per_table(const std::uint8_t *bitmap, std::size_t n, double load_factor);

// Bytes of a bitmap of n bits.
inline std::size_t bitmap_bytes(std::size_t n) { return (n + 7) / 8; }
// Sets the bits of the k positions idx[0..k).
void bitmap_set(std::uint8_t *bitmap, const std::uint32_t *idx, std::size_t k);
// Number of set bits among the first n.
std::size_t bitmap_count(const std::uint8_t *bitmap, std::size_t n);

// sketch[cell_j(i)] += sign_j(i) * x[i] for each of the k positions
// idx[0..k) (ascending or not) and j = 0..2. `sketch` has layout.cells()
// elements; the caller zeroes it first.
template <typename W>
void encode(const Layout &layout, const W *x, const std::uint32_t *idx, std::size_t k, W *sketch);

struct DecodeInfo {
    std::size_t support = 0;    // elements in the support
    std::size_t peeled = 0;     // recovered exactly by peeling
    std::size_t estimated = 0;  // left to the median-of-3 estimate
};

// Reusable decoder memory.
struct DecodeScratch {
    std::vector<std::uint32_t> count;
    std::vector<std::uint32_t> index_xor;
    std::vector<std::uint32_t> worklist;
    std::vector<std::uint8_t> decoded;
};

// Decodes `sketch` (modified: peeled values are subtracted) over the support
// in `bitmap`: out[i] for every i < n is the recovered value at support
// positions and 0 elsewhere. Never fails: overloaded sketches fall back to
// estimates for whatever does not peel.
template <typename W>
DecodeInfo decode(const Layout &layout, const std::uint8_t *bitmap, W *sketch, W *out, DecodeScratch *scratch);

}  // namespace cc_coll::detail::sketch
