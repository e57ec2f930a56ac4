#include "wire/topk_payload.hpp"

#include <algorithm>
#include <limits>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/dtype.hpp"
#include "core/parallel.hpp"
#include "wire/gap_code.hpp"

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

std::uint32_t value_code(unsigned value_bits)
{
    switch (value_bits) {
    case 16: return 1u << kValueShift;
    case 8: return 2u << kValueShift;
    case 4: return 3u << kValueShift;
    default: return 0;
    }
}

namespace {
unsigned value_bits_of(std::uint32_t flags)
{
    static const unsigned bits[] = {0, 16, 8, 4};
    return bits[(flags & kValueMask) >> kValueShift];
}
}  // namespace

bool check_header(const PayloadHeader &h, std::uint64_t n, std::size_t k, Fault *fault, const Format &fmt)
{
    Field field = Field::None;
    std::uint64_t found = 0, expected = 0;
    const bool coded = fmt.coded || fmt.value_bits != 0;
    const std::uint32_t defined = coded ? (kFlagNonFiniteOverflow | kValueMask | kIndexMask | kParamMask)
                                        : kFlagNonFiniteOverflow;
    const std::uint32_t index_code = (h.flags & kIndexMask) >> kIndexShift;
    const std::uint32_t param = (h.flags & kParamMask) >> kParamShift;
    if (h.n != n) {
        field = Field::N;
        found = h.n;
        expected = n;
    } else if (h.k != k) {
        field = Field::K;
        found = h.k;
        expected = k;
    } else if ((h.flags & ~defined) != 0) {
        field = Field::Flags;
        found = h.flags;
        expected = defined;
    } else if (coded && ((h.flags & kValueMask) != value_code(fmt.value_bits) ||
                         (index_code != kIndexPacked && index_code != kIndexRice) ||
                         param > (index_code == kIndexPacked ? 32u : 31u))) {
        field = Field::Format;
        found = h.flags;
        expected = value_code(fmt.value_bits);
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
                       std::size_t k, Fault *fault, const Format &fmt, cc_coll_dtype_t dtype)
{
    *fault = Fault{};
    bool overflow = false;
    for (std::size_t r = 0; r < count; ++r) {
        const PayloadHeader h = header_of(records + r * stride);
        if (!check_header(h, n, k, fault, fmt)) {
            fault->sender = r;
            return Verdict::Reject;
        }
        overflow |= (h.flags & kFlagNonFiniteOverflow) != 0;
    }
    if (overflow) return Verdict::Dense;
    const bool coded = fmt.coded || fmt.value_bits != 0;
    for (std::size_t r = 0; r < count; ++r) {
        const bool ok = coded ? check_coded(records + r * stride, stride, n, k, dtype, fault)
                              : check_indices(records + r * stride + sizeof(PayloadHeader), n, k, fault);
        if (!ok) {
            fault->sender = r;
            return Verdict::Reject;
        }
    }
    return Verdict::Decode;
}

// --- The coded layout -------------------------------------------------------

namespace {

constexpr std::size_t kCodedPrefix = sizeof(PayloadHeader) + sizeof(CodedSection);

using gap_code::BitReader;
using gap_code::BitWriter;

std::size_t value_section_bytes(std::size_t k, cc_coll_dtype_t dtype, unsigned value_bits)
{
    return value_bits == 0 ? k * dtype_size(dtype) : (k * value_bits + 7) / 8;
}

// Decodes the k indices of a coded payload whose header passed check_header,
// calling each(j, index); on a fault (stream too short or too long, index
// not below n, payload larger than `record`) fills *fault and returns false.
template <typename F>
bool decode_indices(const unsigned char *payload, std::size_t record, std::uint64_t n, std::size_t k, Fault *fault,
                    F &&each)
{
    const PayloadHeader h = header_of(payload);
    CodedSection cs{};
    fault->own_n = n;
    fault->own_k = k;
    if (record < kCodedPrefix) {
        fault->field = Field::IndexBytes;
        fault->found = 0;
        fault->expected = record;
        return false;
    }
    std::memcpy(&cs, payload + sizeof h, sizeof cs);
    const gap_code::Choice c{(h.flags & kIndexMask) >> kIndexShift, (h.flags & kParamMask) >> kParamShift};
    const std::uint64_t room = record - kCodedPrefix;
    if (cs.index_bytes > room) {
        fault->field = Field::IndexBytes;
        fault->found = cs.index_bytes;
        fault->expected = room;
        return false;
    }
    gap_code::Error err;
    if (gap_code::read(payload + kCodedPrefix, cs.index_bytes, c, cs.first, k, n, &err, each)) return true;
    if (err.kind == gap_code::Error::Bytes) {
        fault->field = Field::IndexBytes;
        fault->found = cs.index_bytes;
        fault->expected = err.expected;
    } else {
        fault->field = Field::IndexRange;
        fault->position = err.position;
        fault->found = err.found;
        fault->expected = n;
    }
    return false;
}

}  // namespace

std::size_t coded_capacity(std::size_t k, cc_coll_dtype_t dtype, const Format &fmt)
{
    const std::size_t gaps = k > 0 ? k - 1 : 0;
    const std::size_t raw = kCodedPrefix + gaps * 4 + value_section_bytes(k, dtype, fmt.value_bits);
    return (raw + 7) & ~static_cast<std::size_t>(7);
}

template <typename W>
std::size_t encode_coded(const W *x, std::size_t n, const std::uint32_t *idx, std::size_t k, std::uint32_t flags,
                         cc_coll_dtype_t dtype, const Format &fmt, unsigned char *payload, W *sent)
{
    // Values: the step and the levels (or the dtype's elements); the kept
    // values are gathered once, into sent.
    double step = 0.0;
    if (fmt.value_bits != 0) {
        double top = 0.0;
        for (std::size_t j = 0; j < k; ++j) {
            sent[j] = x[idx[j]];
            const double v = static_cast<double>(sent[j]);
            if (!std::isfinite(v)) flags |= kFlagNonFiniteOverflow;
            else top = std::max(top, std::fabs(v));
        }
        if ((flags & kFlagNonFiniteOverflow) == 0) step = top / static_cast<double>(value_levels(fmt.value_bits));
    }
    // Indices: the gaps' code (gap_code::choose: packed or Rice, the smaller).
    const gap_code::Choice code = gap_code::choose(idx, k);
    flags |= value_code(fmt.value_bits) | (code.code << kIndexShift) | (code.param << kParamShift);
    const PayloadHeader h{static_cast<std::uint64_t>(n), static_cast<std::uint32_t>(k), flags};
    std::memcpy(payload, &h, sizeof h);
    const std::size_t index_bytes = gap_code::write(idx, k, code, payload + kCodedPrefix);
    const CodedSection cs{static_cast<std::uint32_t>(index_bytes), k > 0 ? idx[0] : 0u, step};
    std::memcpy(payload + sizeof h, &cs, sizeof cs);
    unsigned char *values = payload + kCodedPrefix + cs.index_bytes;
    if (fmt.value_bits == 0) {
        for (std::size_t j = 0; j < k; ++j) {
            store_element_unaligned<W>(values, j, dtype, x[idx[j]]);
            sent[j] = load_element_unaligned<W>(values, j, dtype);
        }
    } else {
        const std::int32_t L = value_levels(fmt.value_bits);
        BitWriter vw{values};
        for (std::size_t j = 0; j < k; ++j) {
            std::int32_t q = 0;
            if (step > 0.0) {
                // Rounded to nearest, ties to even: |v / step| <= L + 1 < 2^51,
                // so adding and taking away 1.5 x 2^52 rounds it (default
                // rounding mode; no call to the math library).
                constexpr double kRound = 6755399441055744.0;
                const double v = std::max<double>(-L, std::min<double>(L, static_cast<double>(sent[j]) / step));
                const double shifted = v + kRound;
                q = static_cast<std::int32_t>(shifted - kRound);
            }
            vw.put(static_cast<std::uint32_t>(q) & ((1u << fmt.value_bits) - 1), fmt.value_bits);
            sent[j] = level_value<W>(q, step);
        }
        vw.flush();
    }
    const std::size_t raw = kCodedPrefix + cs.index_bytes + value_section_bytes(k, dtype, fmt.value_bits);
    return (raw + 7) & ~static_cast<std::size_t>(7);
}

bool check_coded(const unsigned char *payload, std::size_t record, std::uint64_t n, std::size_t k,
                 cc_coll_dtype_t dtype, Fault *fault)
{
    const PayloadHeader h = header_of(payload);
    if (!decode_indices(payload, record, n, k, fault, [](std::size_t, std::uint64_t) {})) return false;
    CodedSection cs;
    std::memcpy(&cs, payload + sizeof h, sizeof cs);
    // The values must fit the record after the index stream.
    const std::uint64_t room = record - kCodedPrefix;
    const std::uint64_t need = std::uint64_t{cs.index_bytes} + value_section_bytes(k, dtype, value_bits_of(h.flags));
    if (need > room) {
        fault->field = Field::IndexBytes;
        fault->found = cs.index_bytes;
        fault->expected = room - value_section_bytes(k, dtype, value_bits_of(h.flags));
        fault->own_n = n;
        fault->own_k = k;
        return false;
    }
    return true;
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
    case Field::Format:
        std::snprintf(text, sizeof text,
                      "rank %zu sent flags 0x%llx: its value or index format (bits 1-4, 0x%llx, width or "
                      "parameter in bits 8-15) is not this rank's (value bits 0x%llx with delta-coded "
                      "indices); every rank must use the same CC_COLL_TOPK_VALUE_BITS and "
                      "CC_COLL_TOPK_INDEX_CODING",
                      f.sender, ull(f.found), ull(f.found & (kValueMask | kIndexMask)), ull(f.expected));
        break;
    case Field::IndexBytes:
        std::snprintf(text, sizeof text,
                      "rank %zu sent a coded payload whose index stream is %llu bytes but its codes and values "
                      "take %llu (truncated or over-long; malformed payload)",
                      f.sender, ull(f.found), ull(f.expected));
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

namespace {

// scatter_add_range of a coded payload (checked: decode_indices cannot fail):
// one pass, each index decoded and its value read and added at once.
template <typename T>
void add_levels(const unsigned char *payload, const PayloadHeader &h, const unsigned char *values, unsigned bits,
                double step, T *out, std::uint64_t lo, std::uint64_t hi)
{
    BitReader vr{values, std::uint64_t{h.k} * bits};
    const std::int32_t sign = std::int32_t{1} << (bits - 1);
    Fault unused;
    decode_indices(payload, std::numeric_limits<std::size_t>::max(), h.n, h.k, &unused,
                   [&](std::size_t, std::uint64_t i) {
                       std::uint64_t u = 0;
                       vr.get(bits, &u);  // levels are read in order, every j
                       if (i < lo || i >= hi) return;
                       const std::int32_t q = (static_cast<std::int32_t>(u) ^ sign) - sign;
                       out[i] += level_value<T>(q, step);
                   });
}

void scatter_add_coded(const unsigned char *payload, cc_coll_dtype_t dtype, void *out, std::uint64_t lo,
                       std::uint64_t hi)
{
    const PayloadHeader h = header_of(payload);
    CodedSection cs;
    std::memcpy(&cs, payload + sizeof h, sizeof cs);
    const unsigned bits = value_bits_of(h.flags);
    const unsigned char *values = payload + kCodedPrefix + cs.index_bytes;
    if (bits != 0 && dtype == CC_COLL_F64) {
        add_levels(payload, h, values, bits, cs.step, static_cast<double *>(out), lo, hi);
        return;
    }
    if (bits != 0 && dtype == CC_COLL_F32) {
        add_levels(payload, h, values, bits, cs.step, static_cast<float *>(out), lo, hi);
        return;
    }
    BitReader vr{values, std::uint64_t{h.k} * bits};
    const std::int32_t sign = bits == 0 ? 0 : std::int32_t{1} << (bits - 1);
    Fault unused;
    decode_indices(payload, std::numeric_limits<std::size_t>::max(), h.n, h.k, &unused, [&](std::size_t j,
                                                                                          std::uint64_t i) {
        std::uint64_t u = 0;
        if (bits != 0) vr.get(bits, &u);  // levels are read in order, every j
        if (i < lo || i >= hi) return;
        if (bits == 0) {
            if (dtype == CC_COLL_F64)
                static_cast<double *>(out)[i] += load_element_unaligned<double>(values, j, dtype);
            else if (dtype == CC_COLL_F32)
                static_cast<float *>(out)[i] += load_element_unaligned<float>(values, j, dtype);
            else
                store_element<float>(out, i, dtype,
                                     load_element<float>(out, i, dtype) + load_element_unaligned<float>(values, j, dtype));
            return;
        }
        const std::int32_t q = (static_cast<std::int32_t>(u) ^ sign) - sign;
        store_element<float>(out, i, dtype, load_element<float>(out, i, dtype) + level_value<float>(q, cs.step));
    });
}

}  // namespace

template <typename W>
void decode_pairs(const unsigned char *payload, cc_coll_dtype_t dtype, std::uint32_t *idx, W *val)
{
    const PayloadHeader h = header_of(payload);
    const std::size_t k = h.k;
    if (!is_coded(h.flags)) {
        const unsigned char *values = payload + sizeof h + k * sizeof(std::uint32_t);
        std::memcpy(idx, payload + sizeof h, k * sizeof(std::uint32_t));
        for (std::size_t j = 0; j < k; ++j) val[j] = load_element_unaligned<W>(values, j, dtype);
        return;
    }
    CodedSection cs;
    std::memcpy(&cs, payload + sizeof h, sizeof cs);
    Fault unused;
    decode_indices(payload, std::numeric_limits<std::size_t>::max(), h.n, k, &unused,
                   [&](std::size_t j, std::uint64_t i) { idx[j] = static_cast<std::uint32_t>(i); });
    const unsigned bits = value_bits_of(h.flags);
    const unsigned char *values = payload + kCodedPrefix + cs.index_bytes;
    if (bits == 0) {
        for (std::size_t j = 0; j < k; ++j) val[j] = load_element_unaligned<W>(values, j, dtype);
        return;
    }
    BitReader vr{values, std::uint64_t{k} * bits};
    const std::int32_t sign = std::int32_t{1} << (bits - 1);
    for (std::size_t j = 0; j < k; ++j) {
        std::uint64_t u = 0;
        vr.get(bits, &u);
        val[j] = level_value<W>((static_cast<std::int32_t>(u) ^ sign) - sign, cs.step);
    }
}

void scatter_add_range(const unsigned char *payload, cc_coll_dtype_t dtype, void *out, std::uint64_t lo,
                       std::uint64_t hi)
{
    const PayloadHeader h = header_of(payload);
    if (is_coded(h.flags)) {
        scatter_add_coded(payload, dtype, out, lo, hi);
        return;
    }
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
template void decode_pairs<float>(const unsigned char *, cc_coll_dtype_t, std::uint32_t *, float *);
template void decode_pairs<double>(const unsigned char *, cc_coll_dtype_t, std::uint32_t *, double *);
template std::size_t encode_coded<float>(const float *, std::size_t, const std::uint32_t *, std::size_t,
                                         std::uint32_t, cc_coll_dtype_t, const Format &, unsigned char *, float *);
template std::size_t encode_coded<double>(const double *, std::size_t, const std::uint32_t *, std::size_t,
                                          std::uint32_t, cc_coll_dtype_t, const Format &, unsigned char *, double *);

}  // namespace topk
}  // namespace cc_coll::detail
