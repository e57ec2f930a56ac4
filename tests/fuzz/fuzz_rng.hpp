// The seeded generator of the fuzz drivers and their unit tests: splitmix64,
// the same sequence on every platform, so a failing input is reproduced by
// its driver's --seed and input number. Also the drivers' command line and
// their report of a failing input.
#pragma once

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

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

// A driver's command line: [--inputs N] [--seed S] [--verbose]. False, with
// the usage on stderr, for anything else.
struct DriverArgs {
    std::uint64_t inputs = 20000;
    std::uint64_t seed = 1;
    bool verbose = false;
};

inline bool parse_driver_args(int argc, char **argv, DriverArgs *a)
{
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--inputs") == 0 && i + 1 < argc) a->inputs = std::strtoull(argv[++i], nullptr, 10);
        else if (std::strcmp(argv[i], "--seed") == 0 && i + 1 < argc) a->seed = std::strtoull(argv[++i], nullptr, 10);
        else if (std::strcmp(argv[i], "--verbose") == 0) a->verbose = true;
        else {
            std::fprintf(stderr, "usage: %s [--inputs N] [--seed S] [--verbose]\n", argv[0]);
            return false;
        }
    }
    return true;
}

// Reports a failing input (its number and the seed that reproduce it, what
// failed, the receiver's text, the first `limit` bytes in hex) and exits 1.
[[noreturn]] inline void report_failure(std::uint64_t input, std::uint64_t seed, const char *what,
                                        const char *text_name, const std::string &text, const char *bytes_name,
                                        const std::vector<unsigned char> &bytes, std::size_t limit)
{
    std::fprintf(stderr, "FAIL: input %" PRIu64 " (seed %" PRIu64 "): %s\n", input, seed, what);
    if (!text.empty()) std::fprintf(stderr, "  %s: %s\n", text_name, text.c_str());
    std::fprintf(stderr, "  %s (%zu bytes):", bytes_name, bytes.size());
    for (std::size_t i = 0; i < bytes.size() && i < limit; ++i)
        std::fprintf(stderr, "%s%02x", i % 16 == 0 ? "\n   " : " ", bytes[i]);
    std::fprintf(stderr, "\n");
    std::exit(1);
}

}  // namespace cc_coll::detail::fuzz
