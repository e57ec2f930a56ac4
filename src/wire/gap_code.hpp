// Ascending index lists as gap codes (docs/wire.md, "The coded TOPK
// payload"): the k - 1 gaps d_j = index_j - index_(j-1) - 1 bit-packed at one
// width or Rice-coded, whichever takes fewer bits. Shared by TOPK's coded
// payload and SKETCH's coded support message; knows nothing of either's
// header.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cc_coll::detail::gap_code {

// The codes (the value of a payload's index-code flag bits).
constexpr std::uint32_t kPacked = 1, kRice = 2;

// Bits written least significant first (w <= 32 per put) through a 64-bit
// accumulator, 4 bytes at a time; flush() writes the last bytes, the last
// one partial.
struct BitWriter {
    unsigned char *p;
    std::uint64_t bit = 0;  // bits put so far
    std::uint64_t acc = 0;
    unsigned held = 0;      // bits in acc not yet written, < 32 between puts
    void put(std::uint64_t v, unsigned w)
    {
        if (w == 0) return;
        acc |= (v & ((std::uint64_t{1} << w) - 1)) << held;
        held += w;
        bit += w;
        if (held >= 32) {
            const auto low = static_cast<std::uint32_t>(acc);
            const unsigned char bytes[4] = {static_cast<unsigned char>(low), static_cast<unsigned char>(low >> 8),
                                            static_cast<unsigned char>(low >> 16),
                                            static_cast<unsigned char>(low >> 24)};
            std::memcpy(p, bytes, sizeof bytes);
            p += 4;
            acc >>= 32;
            held -= 32;
        }
    }
    void flush()
    {
        for (; held > 0; held = held > 8 ? held - 8 : 0) {
            *p++ = static_cast<unsigned char>(acc & 0xffu);
            acc >>= 8;
        }
        acc = 0;
    }
};

// 8 bytes from p as a little-endian word.
inline std::uint64_t load_le64(const unsigned char *p)
{
    std::uint64_t word = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    std::memcpy(&word, p, sizeof word);
#else
    for (unsigned b = 0; b < 8; ++b) word |= static_cast<std::uint64_t>(p[b]) << (8 * b);
#endif
    return word;
}

// Reads what BitWriter wrote, never past `limit` bits (nor past the byte
// holding the last of them).
struct BitReader {
    const unsigned char *p;
    std::uint64_t limit;
    std::uint64_t bit = 0;
    // The bits from `bit` on, at least 57 of them valid where the stream
    // has them (64-bit load where 8 bytes remain, else byte by byte).
    std::uint64_t peek() const
    {
        const std::uint64_t byte = bit >> 3, bytes = (limit + 7) / 8;
        std::uint64_t word = 0;
        if (byte + 8 <= bytes) {
            word = load_le64(p + byte);
        } else {
            for (std::uint64_t b = byte; b < bytes; ++b) word |= static_cast<std::uint64_t>(p[b]) << (8 * (b - byte));
        }
        return word >> (bit & 7);
    }
    bool get(unsigned w, std::uint64_t *v)
    {
        if (bit + w > limit) return false;
        *v = w == 0 ? 0 : peek() & ((std::uint64_t{1} << w) - 1);
        bit += w;
        return true;
    }
    // Ones up to the next zero (consumed); false at the limit first.
    bool unary(std::uint64_t *q)
    {
        std::uint64_t count = 0;
        for (;;) {
            if (bit >= limit) return false;
            const std::uint64_t avail = std::min<std::uint64_t>(57, limit - bit);
            const std::uint64_t zeros = ~peek() & ((std::uint64_t{1} << avail) - 1);
            if (zeros == 0) {
                count += avail;
                bit += avail;
                continue;
            }
            const unsigned t = static_cast<unsigned>(__builtin_ctzll(zeros));
            count += t;
            bit += t + 1;
            *q = count;
            return true;
        }
    }
    // One Rice code of parameter r (r <= 31): the quotient in unary, then r
    // bits; *q the quotient, *rest the r bits. From one 64-bit load when the
    // code lies within it, else as unary() then get().
    bool rice(unsigned r, std::uint64_t *q, std::uint64_t *rest)
    {
        if ((bit >> 3) + 8 <= (limit + 7) / 8) {
            const std::uint64_t word = peek();
            const std::uint64_t zeros = ~word & ((std::uint64_t{1} << 57) - 1);
            if (zeros != 0) {
                const unsigned t = static_cast<unsigned>(__builtin_ctzll(zeros));
                const std::uint64_t used = std::uint64_t{t} + 1 + r;
                if (used <= 57 && bit + used <= limit) {
                    *q = t;
                    *rest = (word >> (t + 1)) & ((std::uint64_t{1} << r) - 1);
                    bit += used;
                    return true;
                }
            }
        }
        return unary(q) && get(r, rest);
    }
};

inline unsigned bit_width(std::uint64_t v)
{
    unsigned w = 0;
    while (v != 0) {
        ++w;
        v >>= 1;
    }
    return w;
}

// The code of k ascending indices: packed at the largest gap's width, or
// Rice with r within one of floor(log2(mean gap)), whichever takes fewer
// bits (packed on a tie).
struct Choice {
    std::uint32_t code = kPacked;
    unsigned param = 0;  // the packed width (0-32) or the Rice parameter (0-31)
};
inline Choice choose(const std::uint32_t *idx, std::size_t k)
{
    const std::size_t gaps = k > 0 ? k - 1 : 0;
    std::uint64_t max_gap = 0, sum = 0;
    for (std::size_t j = 1; j < k; ++j) {
        const std::uint64_t g = std::uint64_t{idx[j]} - idx[j - 1] - 1;
        max_gap = std::max(max_gap, g);
        sum += g;
    }
    Choice c{kPacked, bit_width(max_gap)};
    std::uint64_t best = std::uint64_t{gaps} * c.param;
    if (gaps > 0) {
        const int r0 = static_cast<int>(bit_width(sum / gaps)) - 1;
        for (int r = std::max(0, r0 - 1); r <= std::min(31, r0 + 1); ++r) {
            std::uint64_t bits = std::uint64_t{gaps} * (1u + static_cast<unsigned>(r));
            for (std::size_t j = 1; j < k && bits < best; ++j) bits += (std::uint64_t{idx[j]} - idx[j - 1] - 1) >> r;
            if (bits < best) {
                best = bits;
                c = Choice{kRice, static_cast<unsigned>(r)};
            }
        }
    }
    return c;
}

// Writes the k - 1 gaps of idx in code c at out; returns the stream's bytes.
// The largest stream: 4 (k - 1) bytes (packed at width 32).
inline std::size_t write(const std::uint32_t *idx, std::size_t k, Choice c, unsigned char *out)
{
    BitWriter w{out};
    for (std::size_t j = 1; j < k; ++j) {
        const std::uint64_t g = std::uint64_t{idx[j]} - idx[j - 1] - 1;
        if (c.code == kPacked) {
            w.put(g, c.param);
        } else {
            for (std::uint64_t q = g >> c.param; q > 0;) {
                const unsigned ones = static_cast<unsigned>(std::min<std::uint64_t>(q, 32));
                w.put((std::uint64_t{1} << ones) - 1, ones);
                q -= ones;
            }
            w.put(0, 1);
            w.put(g & ((std::uint64_t{1} << c.param) - 1), c.param);
        }
    }
    w.flush();
    return static_cast<std::size_t>((w.bit + 7) / 8);
}

// What read() found wrong.
struct Error {
    enum Kind { None, Bytes, Range } kind = None;
    std::size_t position = 0;  // Range: the index's position j
    std::uint64_t found = 0;   // Range: the index; Bytes: the stream's stated bytes
    std::uint64_t expected = 0;  // Bytes: the bytes the codes take
};

// Decodes the k indices of a stream of `bytes` bytes (code c, first index
// `first`), calling each(j, index) in order; false with *err set when the
// stream is too short or too long for its codes, or an index is not below
// n. The caller has checked that the stream lies within its record.
template <typename F>
bool read(const unsigned char *stream, std::uint64_t bytes, Choice c, std::uint64_t first, std::size_t k,
          std::uint64_t n, Error *err, F &&each)
{
    const std::uint64_t gaps = k > 0 ? k - 1 : 0;
    const auto bytes_fault = [&](std::uint64_t expected) {
        err->kind = Error::Bytes;
        err->found = bytes;
        err->expected = expected;
        return false;
    };
    const auto range_fault = [&](std::size_t j, std::uint64_t found) {
        err->kind = Error::Range;
        err->position = j;
        err->found = found;
        return false;
    };
    if (c.code == kPacked && bytes != (gaps * c.param + 7) / 8) return bytes_fault((gaps * c.param + 7) / 8);
    if (k == 0) return bytes == 0 ? true : bytes_fault(0);
    std::uint64_t index = first;
    if (index >= n) return range_fault(0, index);
    each(std::size_t{0}, index);
    BitReader in{stream, bytes * 8};
    for (std::size_t j = 1; j < k; ++j) {
        std::uint64_t gap = 0;
        if (c.code == kPacked) {
            in.get(c.param, &gap);  // the length was checked above
        } else {
            std::uint64_t q = 0, rest = 0;
            if (!in.rice(c.param, &q, &rest)) return bytes_fault(bytes + 1);
            if (q > 0xffffffffull) return range_fault(j, n);
            gap = (q << c.param) | rest;
        }
        index += gap + 1;
        if (index >= n) return range_fault(j, index);
        each(j, index);
    }
    if (c.code == kRice && (in.bit + 7) / 8 != bytes) return bytes_fault((in.bit + 7) / 8);
    return true;
}

}  // namespace cc_coll::detail::gap_code
