// The seeded generator of the fuzz drivers and their unit tests: splitmix64,
// the same sequence on every platform, so a failing input is reproduced by
// its driver's --seed and input number.
#pragma once

#include <cstdint>

namespace cc_coll::detail::fuzz {

struct Rng {
    std::uint64_t state;
    explicit Rng(std::uint64_t seed) : state(seed) {}
    std::uint64_t next()
    {
        std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : next() % n; }
    bool chance(unsigned percent) { return below(100) < percent; }
    double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
    // A finite, non-zero value in (-4, 4).
    double value()
    {
        const double v = 8.0 * uniform() - 4.0;
        return v == 0.0 ? 0.5 : v;
    }
};

}  // namespace cc_coll::detail::fuzz
