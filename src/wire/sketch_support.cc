#include "wire/sketch_support.hpp"

#include <cstdio>

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
    }
    return std::string(text);
}

}  // namespace cc_coll::detail::sketch_support
