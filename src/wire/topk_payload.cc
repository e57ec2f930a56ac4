#include "wire/topk_payload.hpp"

#include <algorithm>
#include <limits>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/dtype.hpp"
#include "core/parallel.hpp"

namespace cc_coll::detail {

namespace {
// Pairs per range of a multi-threaded encode (random reads of x).
constexpr std::size_t kEncodeGrain = std::size_t{1} << 14;
}  // namespace
namespace topk {

std::size_t payload_bytes(std::size_t k, cc_coll_dtype_t dtype)
{
    // Padded to 8 bytes so that every payload in a gathered buffer starts
    // aligned and its indices can be read in place.
    const std::size_t raw = sizeof(PayloadHeader) + k * (sizeof(std::uint32_t) + dtype_size(dtype));
    return (raw + 7) & ~static_cast<std::size_t>(7);
}

template <typename W>
void encode(const W *x, std::size_t n, const std::uint32_t *idx, std::size_t k, std::uint32_t flags,
            cc_coll_dtype_t dtype, unsigned char *payload, W *sent, int threads)
{
    const PayloadHeader h{static_cast<std::uint64_t>(n), static_cast<std::uint32_t>(k), flags};
    std::memcpy(payload, &h, sizeof h);
    unsigned char *indices = payload + sizeof h;
    void *values = indices + k * sizeof(std::uint32_t);
    parallel_for(k, threads, kEncodeGrain, [&](std::size_t b, std::size_t e) {
        std::memcpy(indices + b * sizeof(std::uint32_t), idx + b, (e - b) * sizeof(std::uint32_t));
        for (std::size_t j = b; j < e; ++j) {
            store_element_unaligned<W>(values, j, dtype, x[idx[j]]);
            sent[j] = load_element_unaligned<W>(values, j, dtype);
        }
    });
}

PayloadHeader header_of(const unsigned char *payload)
{
    PayloadHeader h;
    std::memcpy(&h, payload, sizeof h);
    return h;
}

template <typename W>
std::uint32_t nonfinite_overflow(const W *x, std::size_t n, const std::uint32_t *idx, std::size_t k)
{
    if (k == 0) return 0;
    for (std::size_t j = 0; j < k; ++j)
        if (std::isfinite(x[idx[j]])) return 0;
    std::size_t nonfinite = 0;
    for (std::size_t i = 0; i < n; ++i) nonfinite += std::isfinite(x[i]) ? 0 : 1;
    return nonfinite > k ? kFlagNonFiniteOverflow : 0;
}

bool check_header(const PayloadHeader &h, std::uint64_t n, std::size_t k, Fault *fault)
{
    Field field = Field::None;
    std::uint64_t found = 0, expected = 0;
    if (h.n != n) {
        field = Field::N;
        found = h.n;
        expected = n;
    } else if (h.k != k) {
        field = Field::K;
        found = h.k;
        expected = k;
    } else if ((h.flags & ~kFlagNonFiniteOverflow) != 0) {
        field = Field::Flags;
        found = h.flags;
        expected = kFlagNonFiniteOverflow;
    } else {
        return true;
    }
    fault->field = field;
    fault->found = found;
    fault->expected = expected;
    fault->header_n = h.n;
    fault->header_k = h.k;
    fault->own_n = n;
    fault->own_k = k;
    return false;
}

bool check_indices(const unsigned char *indices, std::uint64_t n, std::size_t k, Fault *fault)
{
    std::uint32_t previous = 0;
    for (std::size_t j = 0; j < k; ++j) {
        std::uint32_t idx;
        std::memcpy(&idx, indices + j * sizeof idx, sizeof idx);
        // One branch per index on the common path: idx < n and idx > previous
        // (or j == 0).
        if (idx >= n || (idx <= previous && j > 0)) {
            fault->field = idx >= n ? Field::IndexRange : Field::IndexOrder;
            fault->position = j;
            fault->found = idx;
            fault->expected = idx >= n ? n : previous;
            fault->own_n = n;
            fault->own_k = k;
            return false;
        }
        previous = idx;
    }
    return true;
}

Verdict check_payloads(const unsigned char *records, std::size_t count, std::size_t stride, std::uint64_t n,
                       std::size_t k, Fault *fault)
{
    *fault = Fault{};
    bool overflow = false;
    for (std::size_t r = 0; r < count; ++r) {
        const PayloadHeader h = header_of(records + r * stride);
        if (!check_header(h, n, k, fault)) {
            fault->sender = r;
            return Verdict::Reject;
        }
        overflow |= (h.flags & kFlagNonFiniteOverflow) != 0;
    }
    if (overflow) return Verdict::Dense;
    for (std::size_t r = 0; r < count; ++r) {
        if (!check_indices(records + r * stride + sizeof(PayloadHeader), n, k, fault)) {
            fault->sender = r;
            return Verdict::Reject;
        }
    }
    return Verdict::Decode;
}

std::string describe(const Fault &f, const char *count_name)
{
    char text[320];
    const auto ull = [](std::uint64_t v) { return static_cast<unsigned long long>(v); };
    switch (f.field) {
    case Field::None: return std::string();
    case Field::N:
    case Field::K:
        std::snprintf(text, sizeof text,
                      "rank %zu sent %s %llu / k %llu but this rank has %s %llu / k %llu; every rank must pass "
                      "the same %s, dtype and density",
                      f.sender, count_name, ull(f.header_n), ull(f.header_k), count_name, ull(f.own_n), ull(f.own_k),
                      count_name);
        break;
    case Field::Flags:
        std::snprintf(text, sizeof text,
                      "rank %zu sent flags 0x%llx: bits other than 0x%llx (non-finite overflow) are undefined "
                      "(malformed payload or another library version)",
                      f.sender, ull(f.found), ull(f.expected));
        break;
    case Field::IndexRange:
        std::snprintf(text, sizeof text,
                      "rank %zu sent index %llu at position %zu, not below %s %llu (malformed payload)", f.sender,
                      ull(f.found), f.position, count_name, ull(f.expected));
        break;
    case Field::IndexOrder:
        std::snprintf(text, sizeof text,
                      "rank %zu sent index %llu at position %zu after index %llu (indices must be strictly "
                      "ascending; malformed payload)",
                      f.sender, ull(f.found), f.position, ull(f.expected));
        break;
    }
    return std::string(text);
}

template std::uint32_t nonfinite_overflow<float>(const float *, std::size_t, const std::uint32_t *, std::size_t);
template std::uint32_t nonfinite_overflow<double>(const double *, std::size_t, const std::uint32_t *, std::size_t);

namespace {

template <typename T>
void scatter_add_typed(const std::uint32_t *idx, const unsigned char *values, std::size_t k, T *out)
{
    for (std::size_t j = 0; j < k; ++j) {
        T v;
        std::memcpy(&v, values + j * sizeof(T), sizeof v);
        out[idx[j]] += v;
    }
}

}  // namespace

void scatter_add_range(const unsigned char *payload, cc_coll_dtype_t dtype, void *out, std::uint64_t lo,
                       std::uint64_t hi)
{
    const PayloadHeader h = header_of(payload);
    // Indices are aligned: payloads are padded to 8 bytes and the header is 16.
    const auto *idx = reinterpret_cast<const std::uint32_t *>(payload + sizeof h);
    const std::size_t first = static_cast<std::size_t>(std::lower_bound(idx, idx + h.k, lo) - idx);
    const std::size_t last = static_cast<std::size_t>(std::lower_bound(idx + first, idx + h.k, hi) - idx);
    const std::size_t k = last - first;
    const unsigned char *values = payload + sizeof h + std::size_t{h.k} * sizeof(std::uint32_t);
    const std::size_t es = dtype_size(dtype);
    idx += first;
    values += first * es;
    switch (dtype) {
    case CC_COLL_F32: scatter_add_typed(idx, values, k, static_cast<float *>(out)); break;
    case CC_COLL_F64: scatter_add_typed(idx, values, k, static_cast<double *>(out)); break;
    case CC_COLL_F16:
    case CC_COLL_BF16:
        for (std::size_t j = 0; j < k; ++j) {
            const float sum = load_element<float>(out, idx[j], dtype) + load_element<float>(values, j, dtype);
            store_element<float>(out, idx[j], dtype, sum);
        }
        break;
    }
}

void scatter_add(const unsigned char *payload, cc_coll_dtype_t dtype, void *out)
{
    scatter_add_range(payload, dtype, out, 0, std::numeric_limits<std::uint64_t>::max());
}

template void encode<float>(const float *, std::size_t, const std::uint32_t *, std::size_t, std::uint32_t,
                            cc_coll_dtype_t, unsigned char *, float *, int);
template void encode<double>(const double *, std::size_t, const std::uint32_t *, std::size_t, std::uint32_t,
                             cc_coll_dtype_t, unsigned char *, double *, int);

}  // namespace topk
}  // namespace cc_coll::detail
