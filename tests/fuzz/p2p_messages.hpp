// Builders of well-formed point-to-point messages (docs/wire.md,
// "Point-to-point") for the receiver's tests and the fuzz driver: the
// header by hand from the documented fields, the TOPK payload through the
// library's own encoder (topk::encode), LOWRANK factors of the shape the
// library's resolve_shape gives.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "cc_coll.h"
#include "compressors/lowrank/powersgd.hpp"
#include "compressors/topk/topk_select.hpp"
#include "core/dtype.hpp"
#include "core/params.hpp"
#include "wire/p2p_wire.hpp"
#include "wire/topk_payload.hpp"
#include "fuzz_rng.hpp"

namespace cc_coll::detail::p2p_test {

using p2p_wire::WireHeader;

using fuzz::Rng;

inline WireHeader header(p2p_wire::Kind kind, cc_coll_dtype_t dtype, std::uint64_t count)
{
    WireHeader h{};
    h.magic = p2p_wire::kMagic;
    h.version = p2p_wire::kVersion;
    h.kind = kind;
    h.dtype = static_cast<std::uint8_t>(dtype);
    h.count = count;
    return h;
}

inline std::vector<unsigned char> with_payload(const WireHeader &h, const std::vector<unsigned char> &payload)
{
    std::vector<unsigned char> msg(sizeof h + payload.size());
    std::memcpy(msg.data(), &h, sizeof h);
    if (!payload.empty()) std::memcpy(msg.data() + sizeof h, payload.data(), payload.size());
    return msg;
}

// RAW: count elements of dtype with values from rng.
inline std::vector<unsigned char> raw_message(cc_coll_dtype_t dtype, std::size_t count, Rng &rng)
{
    std::vector<unsigned char> payload(count * dtype_size(dtype));
    for (std::size_t i = 0; i < count; ++i) {
        if (dtype == CC_COLL_F64) store_element<double>(payload.data(), i, dtype, rng.value());
        else store_element<float>(payload.data(), i, dtype, static_cast<float>(rng.value()));
    }
    WireHeader h = header(p2p_wire::kRaw, dtype, count);
    h.payload_bytes = payload.size();
    return with_payload(h, payload);
}

// TOPK: k = k_for(density, count) distinct ascending indices (all of them
// when `idx` is empty, else those given), encoded by topk::encode.
inline std::vector<unsigned char> topk_message(cc_coll_dtype_t dtype, std::size_t count, double density, Rng &rng,
                                               std::vector<std::uint32_t> idx = {})
{
    const std::size_t k = topk::k_for(density, count);
    if (idx.empty()) {
        std::vector<std::uint32_t> all(count);
        std::iota(all.begin(), all.end(), 0u);
        for (std::size_t j = 0; j < k; ++j) std::swap(all[j], all[j + rng.below(count - j)]);
        idx.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k));
        std::sort(idx.begin(), idx.end());
    }
    const std::size_t bytes = topk::payload_bytes(k, dtype);
    // topk::encode stores values with typed stores: F64 values of an odd k
    // start 4 bytes off an 8-byte boundary, so the builder encodes 4 bytes
    // into its scratch to keep them aligned (a sanitizer run then reports
    // the receiver, not the encoder).
    std::vector<unsigned char> scratch(bytes + 8, 0);
    unsigned char *at = scratch.data() + (dtype == CC_COLL_F64 && k % 2 == 1 ? 4 : 0);
    if (dtype == CC_COLL_F64) {
        std::vector<double> x(count, 0.0), sent(k + 1);
        for (double &v : x) v = rng.value();
        topk::encode<double>(x.data(), count, idx.data(), k, 0, dtype, at, sent.data());
    } else {
        std::vector<float> x(count, 0.0f), sent(k + 1);
        for (float &v : x) v = static_cast<float>(rng.value());
        topk::encode<float>(x.data(), count, idx.data(), k, 0, dtype, at, sent.data());
    }
    std::vector<unsigned char> payload(at, at + bytes);
    WireHeader h = header(p2p_wire::kTopk, dtype, count);
    h.rank_or_k = k;
    h.payload_bytes = payload.size();
    return with_payload(h, payload);
}

// LOWRANK: the shape resolve_shape gives for p, P and Q from rng in the
// work type. Empty when the shape does not resolve.
inline std::vector<unsigned char> lowrank_message(cc_coll_dtype_t dtype, std::size_t count, const CallParams &p,
                                                  Rng &rng)
{
    lowrank::Shape s;
    std::string why;
    if (!lowrank::resolve_shape(count, p.has_shape, p.rows, p.cols, p.rank, &s, &why)) return {};
    const std::size_t w = dtype == CC_COLL_F64 ? sizeof(double) : sizeof(float);
    std::vector<unsigned char> payload(s.factor_elements() * w);
    for (std::size_t i = 0; i < s.factor_elements(); ++i) {
        if (dtype == CC_COLL_F64) {
            const double v = rng.value();
            std::memcpy(payload.data() + i * w, &v, w);
        } else {
            const float v = static_cast<float>(rng.value());
            std::memcpy(payload.data() + i * w, &v, w);
        }
    }
    WireHeader h = header(p2p_wire::kLowRank, dtype, count);
    h.rows = s.rows;
    h.cols = s.cols;
    h.rank_or_k = static_cast<std::uint64_t>(s.rank);
    h.payload_bytes = payload.size();
    return with_payload(h, payload);
}

inline CallParams topk_params(double density)
{
    CallParams p;
    p.method = CC_COLL_METHOD_TOPK;
    p.density = density;
    return p;
}

inline CallParams lowrank_params(int rank, std::uint64_t rows = 0, std::uint64_t cols = 0, bool has_shape = false)
{
    CallParams p;
    p.method = CC_COLL_METHOD_LOWRANK;
    p.rank = rank;
    p.has_shape = has_shape;
    p.rows = rows;
    p.cols = cols;
    return p;
}

}  // namespace cc_coll::detail::p2p_test
