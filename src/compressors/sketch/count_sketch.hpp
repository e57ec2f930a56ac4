// Block-hashed 3-way count sketch with a peeling decoder (docs/algorithms.md
// section 3). Knows nothing of MPI: the collectives move the bitmaps and the
// sketches.
//
// Layout. Elements are split into blocks of kBlock = 1024; the sketch has
// 3 sub-tables of m rows of kBlock cells (rows() = 3m). Block b has three
// seeded 32-bit hashes h_j(b) (murmur3), j = 0..2; hash j picks row
// j*m + (h_j(b) * m >> 32) in sub-table j, a sign +-1 from bit 0 and a
// rotation o_j(b) from bits 1.. of h_j(b). With R = rotation_columns(m)
// (all kBlock columns for m <= kFullRotationRows, kRotation = 64 beyond),
// element (b, t) adds sign_j * x to cell (row_j, t') for j = 0..2, where t'
// is t rotated by o_j(b) within its group of R columns:
// t' = (t & ~(R-1)) | ((t + o_j(b)) & (R-1)). The three cells are always
// distinct, and memory access stays contiguous along a block (a block's
// elements land in the same R-cell segments of three rows). The sketch is
// linear: sketch(a) + sketch(b) == sketch(a + b).
//
// Why the rotation: without it (R = 1) column t would be a peeling problem
// of its own with only 3m cells, and two elements of a column share all
// three cells with probability 1/m^3: for small m, lossless decoding fails
// almost always (n = 65553 at density 0.01 and load 0.75: m = 2, every
// decode left elements unpeeled). With rotation, a group of R columns is
// one problem of 3mR cells and a pair collides with probability 1/(mR)^3:
// measured 0 failures in 2000 such decodes. Groups of R columns stay
// independent problems, which the decoder uses for cache locality; R = 64
// for large m keeps a group's cells cache-sized, at a residual collision
// rate of about K^2 / (2048 m^3 R^2) pairs per decode (K support elements;
// <= ~0.7% just above kFullRotationRows at full load, falling as 1/m).
//
// Decoding needs the support (the set of non-zero positions, as a bitmap
// with bit i = bitmap[i / 8] >> (i % 8) & 1) and is the same on every rank:
// counts per cell (and the xor of the element keys in each cell) come
// from the support alone and are never sent. Peeling: a cell holding exactly
// one undecoded element gives that element's value (sign * cell); it is
// subtracted from its other cells, which may become pure in turn (a
// worklist, no repeated scans). Elements left when no pure cell remains get
// the median of their three signed cell values (the count-sketch estimate).
//
// Sizing. Column t of the sketch receives the support elements at offset t
// of every block; rows_per_table() picks m so that the fullest column's load
// (support elements / rows()) stays at or under the load factor, which keeps
// peeling complete with high probability up to ~0.8. Fully dense supports
// over few blocks are the exception: with every position set, all elements
// of a block move together, and peeling is that of a small hypergraph of
// blocks (n = 5000 or 100000 with every position set, load 0.75: about 1
// decode in 4 leaves elements to the estimate; at density 0.9, none).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

// kBlock, kRotation, rotation_columns() and the hashes themselves.
#include "compressors/sketch/count_sketch_hash.hpp"

namespace cc_coll::detail::sketch {

struct Layout {
    std::size_t n = 0;       // elements covered (a buffer or one shard)
    std::uint32_t m = 1;     // rows per sub-table, 1 .. 1398101 (32-bit cell indices)
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
// fullest column holds at most load_factor * 3m elements (capped at the
// largest m whose cells have 32-bit indices, which a load factor <= 0 or
// NaN also gives).
std::uint32_t rows_per_table(const std::uint8_t *bitmap, std::size_t n, double load_factor);

// The rule of rows_per_table on the column loads: loads[t] (kBlock entries)
// = support elements at offset t of every block. rows_per_table(bitmap, n,
// f) == rows_for_loads(loads of bitmap, f); the device computes the loads
// (sketch::cuda::column_loads) and applies this rule on the host.
std::uint32_t rows_for_loads(const std::uint32_t *loads, double load_factor);

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

// Reusable decoder memory. The decoder works one group of adjacent columns
// at a time (rotation groups are independent peeling problems) on compact
// copies of the group's cells, so its random accesses stay in cache.
struct DecodeScratch {
    std::vector<std::uint32_t> count;       // a group's cells: elements in each
    std::vector<std::uint32_t> index_xor;   // a group's cells: xor of element list positions
    std::vector<std::uint32_t> worklist;    // a group's queue of pure cells
    std::vector<std::uint8_t> decoded;      // per support element: peeled
    std::vector<std::uint64_t> row_xor;     // a group's cells: xor of element rows
    std::vector<std::uint64_t> column_xor;  // a group's cells: xor of columns, rotations, signs
    std::vector<std::uint32_t> elements;    // support positions, by column group
    std::vector<std::uint32_t> block_rows;  // per block: its three rows, sign bits
    std::vector<float> values32;            // float: a group's cells, recovered values
    std::vector<double> values64;           // double: the same
};

// Decodes `sketch` (modified: peeled values are subtracted) over the support
// in `bitmap`: out[i] for every i < n is the recovered value at support
// positions and 0 elsewhere. Never fails: overloaded sketches fall back to
// estimates for whatever does not peel.
template <typename W>
DecodeInfo decode(const Layout &layout, const std::uint8_t *bitmap, W *sketch, W *out, DecodeScratch *scratch);

}  // namespace cc_coll::detail::sketch
