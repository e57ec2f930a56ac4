// What the collectives' receivers get from their peers, built and received
// without MPI, for the unit tests and fuzz drivers of those receivers:
//
//  - TOPK: a set of P payloads as an MPI_Allgather (allreduce) or an
//    MPI_Alltoall (reduce-scatter) leaves them, built with the library's
//    own encoder (topk::encode), and the receiver's step after the exchange
//    exactly as the host collectives run it (topk::check_payloads, then
//    zero and topk::scatter_add in sender order); a reference decode
//    written independently of the library.
//  - SKETCH: a support message (bitmap + flag byte, wire/sketch_support.hpp)
//    and a sketch of integer values (so that every sum is exact and the
//    result does not depend on the order of peeling), and a reference
//    peeling decoder written from docs/algorithms.md section 3 with
//    sketch::hits as its only library call.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "cc_coll.h"
#include "compressors/sketch/count_sketch.hpp"
#include "core/dtype.hpp"
#include "core/half.hpp"
#include "fuzz_rng.hpp"
#include "wire/sketch_support.hpp"
#include "wire/topk_payload.hpp"

namespace cc_coll::detail::fuzz {

// ------------------------------------------------------------------- TOPK

// One payload of the k ascending indices idx over n elements, values from
// rng (NaN or Inf at some positions when nonfinite), in the library's
// encoding. F64 values of an odd k start 4 bytes off an 8-byte boundary:
// the payload is encoded 4 bytes into a scratch buffer so that the
// encoder's stores are aligned (a sanitizer run then reports receivers).
inline std::vector<unsigned char> topk_payload(cc_coll_dtype_t dtype, std::size_t n,
                                               const std::vector<std::uint32_t> &idx, std::uint32_t flags, Rng &rng,
                                               bool nonfinite = false)
{
    const std::size_t k = idx.size();
    const std::size_t bytes = topk::payload_bytes(k, dtype);
    std::vector<unsigned char> scratch(bytes + 8, 0);
    unsigned char *at = scratch.data() + (dtype == CC_COLL_F64 && k % 2 == 1 ? 4 : 0);
    const auto value = [&]() {
        if (nonfinite && rng.chance(20)) {
            const double special[] = {HUGE_VAL, -HUGE_VAL, std::nan("")};
            return special[rng.below(3)];
        }
        return rng.value();
    };
    if (dtype == CC_COLL_F64) {
        std::vector<double> x(n, 0.0), sent(k + 1);
        for (std::uint32_t i : idx) x[i] = value();
        topk::encode<double>(x.data(), n, idx.data(), k, flags, dtype, at, sent.data());
    } else {
        std::vector<float> x(n, 0.0f), sent(k + 1);
        for (std::uint32_t i : idx) x[i] = static_cast<float>(value());
        topk::encode<float>(x.data(), n, idx.data(), k, flags, dtype, at, sent.data());
    }
    return std::vector<unsigned char>(at, at + bytes);
}

// k distinct ascending indices below n (k <= n).
inline std::vector<std::uint32_t> random_indices(std::size_t n, std::size_t k, Rng &rng)
{
    std::vector<std::uint32_t> all(n);
    std::iota(all.begin(), all.end(), 0u);
    for (std::size_t j = 0; j < k; ++j) std::swap(all[j], all[j + rng.below(n - j)]);
    std::vector<std::uint32_t> idx(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k));
    std::sort(idx.begin(), idx.end());
    return idx;
}

// P well-formed payloads of k pairs over n elements, one after the other
// (what every rank holds after the allreduce's MPI_Allgather, or what one
// rank holds after the reduce-scatter's MPI_Alltoall). Sender `overflow`
// (none when >= P) sets kFlagNonFiniteOverflow.
inline std::vector<unsigned char> topk_payloads(cc_coll_dtype_t dtype, std::size_t n, std::size_t k, std::size_t P,
                                                Rng &rng, std::size_t overflow = ~std::size_t{0},
                                                bool nonfinite = false)
{
    const std::size_t bytes = topk::payload_bytes(k, dtype);
    std::vector<unsigned char> all(P * bytes);
    for (std::size_t r = 0; r < P; ++r) {
        const std::vector<unsigned char> one = topk_payload(
            dtype, n, random_indices(n, k, rng), r == overflow ? topk::kFlagNonFiniteOverflow : 0u, rng, nonfinite);
        std::memcpy(all.data() + r * bytes, one.data(), bytes);
    }
    return all;
}

// The receiver's step after the exchange, as the host collectives run it
// (sparse_allgather.cc, sparse_alltoall.cc): check every payload, then,
// for Verdict::Decode only, zero out (n elements of dtype) and scatter-add
// the payloads in sender order. Nothing is written otherwise.
inline topk::Verdict receive_topk(const unsigned char *payloads, std::size_t P, std::size_t bytes, std::size_t n,
                                  std::size_t k, cc_coll_dtype_t dtype, void *out, topk::Fault *fault)
{
    const topk::Verdict v = topk::check_payloads(payloads, P, bytes, n, k, fault);
    if (v != topk::Verdict::Decode) return v;
    std::memset(out, 0, n * dtype_size(dtype));
    for (std::size_t r = 0; r < P; ++r) topk::scatter_add(payloads + r * bytes, dtype, out);
    return v;
}

// The reference decode: what the P payloads sum to, read from their
// documented layout (docs/wire.md, "The TOPK payload") with the receiver's
// k; out[index] = round(out[index] + value) in the dtype's arithmetic.
// Assumes the payloads passed the checks (indices below n).
inline std::vector<unsigned char> reference_topk_sum(const unsigned char *payloads, std::size_t P, std::size_t bytes,
                                                     std::size_t n, std::size_t k, cc_coll_dtype_t dtype)
{
    const std::size_t es = dtype_size(dtype);
    std::vector<unsigned char> out(n * es, 0);
    for (std::size_t r = 0; r < P; ++r) {
        const unsigned char *p = payloads + r * bytes;
        for (std::size_t j = 0; j < k; ++j) {
            std::uint32_t i;
            std::memcpy(&i, p + 16 + 4 * j, 4);
            const unsigned char *v = p + 16 + 4 * k + es * j;
            unsigned char *o = out.data() + es * i;
            if (dtype == CC_COLL_F64) {
                double a, b;
                std::memcpy(&a, o, 8);
                std::memcpy(&b, v, 8);
                a += b;
                std::memcpy(o, &a, 8);
            } else if (dtype == CC_COLL_F32) {
                float a, b;
                std::memcpy(&a, o, 4);
                std::memcpy(&b, v, 4);
                a += b;
                std::memcpy(o, &a, 4);
            } else {
                std::uint16_t a, b;
                std::memcpy(&a, o, 2);
                std::memcpy(&b, v, 2);
                const bool bf = dtype == CC_COLL_BF16;
                const float sum = (bf ? bf16_to_float(a) : f16_to_float(a)) + (bf ? bf16_to_float(b) : f16_to_float(b));
                a = bf ? float_to_bf16(sum) : float_to_f16(sum);
                std::memcpy(o, &a, 2);
            }
        }
    }
    return out;
}

// Whether two buffers of n elements of dtype hold the same values: the same
// bits, or NaN in both (which NaN an addition of two NaNs gives is up to
// the compiler's operand order).
inline bool same_values(const std::vector<unsigned char> &a, const std::vector<unsigned char> &b, std::size_t n,
                        cc_coll_dtype_t dtype)
{
    if (a.size() != b.size()) return false;
    const std::size_t es = dtype_size(dtype);
    for (std::size_t i = 0; i < n; ++i) {
        if (std::memcmp(a.data() + es * i, b.data() + es * i, es) == 0) continue;
        if (dtype == CC_COLL_F64) {
            if (!(std::isnan(load_element_unaligned<double>(a.data(), i, dtype)) &&
                  std::isnan(load_element_unaligned<double>(b.data(), i, dtype))))
                return false;
        } else if (!(std::isnan(load_element_unaligned<float>(a.data(), i, dtype)) &&
                     std::isnan(load_element_unaligned<float>(b.data(), i, dtype)))) {
            return false;
        }
    }
    return true;
}

// ----------------------------------------------------------------- SKETCH

// A support message of n bits (n >= 1) with the bits of `support` set and
// the flag byte, in a buffer of exactly message_bytes(n).
inline std::vector<unsigned char> support_message(std::size_t n, const std::vector<std::uint32_t> &support,
                                                  unsigned char flag)
{
    std::vector<unsigned char> msg(sketch_support::message_bytes(n), 0);
    for (std::uint32_t i : support) msg[i / 8] |= static_cast<unsigned char>(1u << (i % 8));
    msg[sketch_support::flag_offset(n)] = flag;
    return msg;
}

// The support positions (bits below n) of a bitmap, ascending.
inline std::vector<std::uint32_t> support_of(const unsigned char *bitmap, std::size_t n)
{
    std::vector<std::uint32_t> s;
    for (std::size_t i = 0; i < n; ++i)
        if ((bitmap[i / 8] >> (i % 8)) & 1u) s.push_back(static_cast<std::uint32_t>(i));
    return s;
}

// The reference decode of a sketch over the support in `bitmap` (bits below
// n): cell counts from the support, then peeling to exhaustion (the set of
// elements peeled does not depend on the order), then the median of the
// three signed residual cells for the rest. Values are exact while every
// cell and value is an integer below 2^24 in magnitude; `peeled` and
// `support` are exact whatever the values.
struct ReferenceDecode {
    std::vector<double> out;  // n values, 0 off the support
    std::size_t support = 0;
    std::size_t peeled = 0;
};

template <typename W>
ReferenceDecode reference_sketch_decode(const sketch::Layout &layout, const unsigned char *bitmap,
                                        const std::vector<W> &cells)
{
    ReferenceDecode r;
    const std::size_t n = layout.n;
    r.out.assign(n, 0.0);
    const std::vector<std::uint32_t> s = support_of(bitmap, n);
    r.support = s.size();
    std::vector<sketch::Hit> hit(3 * s.size());
    std::vector<std::uint32_t> count(layout.cells(), 0);
    for (std::size_t e = 0; e < s.size(); ++e) {
        sketch::hits(layout, s[e], &hit[3 * e]);
        for (int j = 0; j < 3; ++j) ++count[hit[3 * e + j].cell];
    }
    std::vector<W> val(cells);
    std::vector<std::uint8_t> done(s.size(), 0);
    // Elements by cell, for finding a pure cell's element.
    std::vector<std::vector<std::uint32_t>> in_cell(layout.cells());
    for (std::size_t e = 0; e < s.size(); ++e)
        for (int j = 0; j < 3; ++j) in_cell[hit[3 * e + j].cell].push_back(static_cast<std::uint32_t>(e));
    for (bool progress = true; progress;) {
        progress = false;
        for (std::size_t c = 0; c < layout.cells(); ++c) {
            if (count[c] != 1) continue;
            std::size_t e = 0;
            int jc = -1;
            for (std::uint32_t cand : in_cell[c])
                if (!done[cand]) {
                    e = cand;
                    for (int j = 0; j < 3; ++j)
                        if (hit[3 * e + j].cell == c) jc = j;
                }
            const W v = val[c] * static_cast<W>(hit[3 * e + jc].sign) + W(0);
            r.out[s[e]] = static_cast<double>(v);
            done[e] = 1;
            ++r.peeled;
            for (int j = 0; j < 3; ++j) {
                const sketch::Hit &h = hit[3 * e + j];
                val[h.cell] -= v * static_cast<W>(h.sign);
                --count[h.cell];
            }
            progress = true;
        }
    }
    for (std::size_t e = 0; e < s.size(); ++e) {
        if (done[e]) continue;
        W v[3];
        for (int j = 0; j < 3; ++j) v[j] = val[hit[3 * e + j].cell] * static_cast<W>(hit[3 * e + j].sign);
        // The middle value (compared only where all three are finite).
        const W lo = std::min(v[0], v[1]), hi = std::max(v[0], v[1]);
        r.out[s[e]] = static_cast<double>(std::max(lo, std::min(hi, v[2])) + W(0));
    }
    return r;
}

}  // namespace cc_coll::detail::fuzz
