#include "wire/sketch_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "wire/gap_code.hpp"

namespace cc_coll::detail::sketch_support {

bool check_tail(const unsigned char *tail, std::size_t n, Fault *fault)
{
    *fault = Fault{};
    fault->n = n;
    const unsigned used = static_cast<unsigned>(n % 8);  // bits of the last byte below n; 0: all eight
    const unsigned mask = used == 0 ? 0xffu : (1u << used) - 1u;
    if ((tail[0] & ~mask) != 0) {
        fault->field = Field::PaddingBits;
        fault->found = tail[0];
        fault->expected = mask;
        return false;
    }
    if (tail[1] > 1) {
        fault->field = Field::Flag;
        fault->found = tail[1];
        fault->expected = 1;
        return false;
    }
    return true;
}

bool check_rows(std::uint64_t m, Fault *fault)
{
    *fault = Fault{};
    if (m >= 1 && m <= sketch::kMaxRowsPerTable) return true;
    fault->field = Field::Rows;
    fault->found = m;
    fault->expected = sketch::kMaxRowsPerTable;
    return false;
}

namespace {

struct CodedHeader {
    std::uint64_t n;
    std::uint32_t count;
    std::uint32_t flags;
    std::uint32_t index_bytes;
    std::uint32_t first;
};
static_assert(sizeof(CodedHeader) == kCodedHeaderBytes, "coded support header must be 24 bytes");

CodedHeader header_of(const unsigned char *msg)
{
    CodedHeader h;
    std::memcpy(&h, msg, sizeof h);
    return h;
}

gap_code::Choice choice_of(std::uint32_t flags)
{
    return gap_code::Choice{(flags & kCodedCodeMask) >> kCodedCodeShift, (flags & kCodedParamMask) >> kCodedParamShift};
}

}  // namespace

double coded_estimate(std::size_t n, double kept)
{
    if (kept < 1.0) return static_cast<double>(kCodedHeaderBytes) + 4.0;
    const double gap_bits = std::max(1.0, std::log2(static_cast<double>(n) / kept) + 2.0);
    return static_cast<double>(kCodedHeaderBytes) + 4.0 + kept * gap_bits / 8.0;
}

std::size_t encode_coded(const std::uint32_t *idx, std::size_t count, std::size_t n, bool nonfinite,
                         unsigned char *out)
{
    const gap_code::Choice c = gap_code::choose(idx, count);
    const std::size_t bytes = gap_code::write(idx, count, c, out + kCodedHeaderBytes);
    const CodedHeader h{static_cast<std::uint64_t>(n), static_cast<std::uint32_t>(count),
                        (nonfinite ? kCodedFlagNonFinite : 0u) | (c.code << kCodedCodeShift) |
                            (c.param << kCodedParamShift),
                        static_cast<std::uint32_t>(bytes), count > 0 ? idx[0] : 0u};
    std::memcpy(out, &h, sizeof h);
    return (kCodedHeaderBytes + bytes + 7) / 8 * 8;
}

bool check_coded(const unsigned char *msg, std::size_t record, std::size_t n, std::size_t sender, Fault *fault)
{
    *fault = Fault{};
    fault->n = n;
    fault->sender = sender;
    const auto bad = [&](Field f, std::uint64_t found, std::uint64_t expected) {
        fault->field = f;
        fault->found = found;
        fault->expected = expected;
        return false;
    };
    if (record < kCodedHeaderBytes) return bad(Field::CodedBytes, 0, kCodedHeaderBytes);
    const CodedHeader h = header_of(msg);
    if (h.n != n) return bad(Field::CodedN, h.n, n);
    if (h.count > n) return bad(Field::CodedCount, h.count, n);
    const gap_code::Choice c = choice_of(h.flags);
    const std::uint32_t known = kCodedFlagNonFinite | kCodedCodeMask | kCodedParamMask;
    if ((h.flags & ~known) != 0 || (c.code != gap_code::kPacked && c.code != gap_code::kRice) ||
        c.param > (c.code == gap_code::kPacked ? 32u : 31u))
        return bad(Field::CodedFlags, h.flags, known);
    if (h.index_bytes > record - kCodedHeaderBytes)
        return bad(Field::CodedBytes, h.index_bytes, record - kCodedHeaderBytes);
    gap_code::Error err;
    if (gap_code::read(msg + kCodedHeaderBytes, h.index_bytes, c, h.first, h.count, n, &err,
                       [](std::size_t, std::uint64_t) {}))
        return true;
    if (err.kind == gap_code::Error::Bytes) return bad(Field::CodedBytes, h.index_bytes, err.expected);
    fault->position = err.position;
    return bad(Field::CodedIndex, err.found, n);
}

bool or_coded(const unsigned char *msg, unsigned char *bitmap)
{
    const CodedHeader h = header_of(msg);
    gap_code::Error unused;
    gap_code::read(msg + kCodedHeaderBytes, h.index_bytes, choice_of(h.flags), h.first, h.count, h.n, &unused,
                   [&](std::size_t, std::uint64_t i) { bitmap[i / 8] |= static_cast<unsigned char>(1u << (i % 8)); });
    return (h.flags & kCodedFlagNonFinite) != 0;
}

std::string describe(const Fault &f)
{
    char text[320];
    const auto ull = [](std::uint64_t v) { return static_cast<unsigned long long>(v); };
    switch (f.field) {
    case Field::None: return std::string();
    case Field::PaddingBits:
        std::snprintf(text, sizeof text,
                      "the OR of the ranks' support messages of %zu elements has last bitmap byte 0x%02llx, "
                      "with bits set at or beyond element %zu (mask 0x%02llx): a rank sent a malformed support "
                      "message",
                      f.n, ull(f.found), f.n, ull(f.expected));
        break;
    case Field::Flag:
        std::snprintf(text, sizeof text,
                      "the OR of the ranks' support messages of %zu elements has flag byte 0x%02llx, not 0 or 1: "
                      "a rank sent a malformed support message",
                      f.n, ull(f.found));
        break;
    case Field::Rows:
        if (f.found == kRowsMalformed)
            std::snprintf(text, sizeof text,
                          "a rank found the support message of its shard malformed (rows per table 0x%llx): "
                          "a rank sent a malformed support message",
                          ull(f.found));
        else
            std::snprintf(text, sizeof text,
                          "the largest rows per table of any rank is %llu, outside [1, %llu]: a rank sent a "
                          "malformed rows value",
                          ull(f.found), ull(f.expected));
        break;
    case Field::CodedN:
        std::snprintf(text, sizeof text,
                      "rank %zu sent a coded support message of count %llu but this rank has count %llu; every rank "
                      "must pass the same count",
                      f.sender, ull(f.found), ull(f.expected));
        break;
    case Field::CodedCount:
        std::snprintf(text, sizeof text,
                      "rank %zu sent a coded support message of %llu indices, more than count %llu (malformed "
                      "support message)",
                      f.sender, ull(f.found), ull(f.expected));
        break;
    case Field::CodedFlags:
        std::snprintf(text, sizeof text,
                      "rank %zu sent a coded support message with flags 0x%llx: only bit 0, a gap code of 1 or 2 "
                      "(bits 3-4) and its parameter (bits 8-15, at most 32 or 31) are defined (malformed support "
                      "message)",
                      f.sender, ull(f.found));
        break;
    case Field::CodedBytes:
        std::snprintf(text, sizeof text,
                      "rank %zu sent a coded support message whose index stream is %llu bytes but its codes take "
                      "%llu, or its record allows no more (truncated or over-long; malformed support message)",
                      f.sender, ull(f.found), ull(f.expected));
        break;
    case Field::CodedIndex:
        std::snprintf(text, sizeof text,
                      "rank %zu sent support index %llu at position %zu, not below count %llu (malformed support "
                      "message)",
                      f.sender, ull(f.found), f.position, ull(f.expected));
        break;
    }
    return std::string(text);
}

}  // namespace cc_coll::detail::sketch_support
