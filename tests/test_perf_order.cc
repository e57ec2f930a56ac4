// cc_coll_perf -I: the order of the methods in each round of timed calls
// (tools/perf/order.h) is a balanced Latin square, so that no method always
// follows the same other one.
#include <gtest/gtest.h>

#include <vector>

#include "../tools/perf/order.h"

namespace {

TEST(PerfOrder, EachRoundIsAPermutation)
{
    for (int n = 1; n <= 12; ++n)
        for (int r = 0; r < 4 * n; ++r) {
            std::vector<int> seen(static_cast<std::size_t>(n), 0);
            for (int s = 0; s < n; ++s) {
                const int j = round_order(n, r, s);
                ASSERT_GE(j, 0);
                ASSERT_LT(j, n);
                ++seen[static_cast<std::size_t>(j)];
            }
            for (int c : seen) EXPECT_EQ(c, 1) << "n " << n << " round " << r;
        }
}

TEST(PerfOrder, BalancedOverACycle)
{
    for (int n = 2; n <= 12; ++n) {
        const int rows = n % 2 ? 2 * n : n;
        std::vector<int> first(static_cast<std::size_t>(n), 0);
        std::vector<std::vector<int>> after(static_cast<std::size_t>(n), std::vector<int>(static_cast<std::size_t>(n), 0));
        for (int r = 0; r < rows; ++r) {
            ++first[static_cast<std::size_t>(round_order(n, r, 0))];
            for (int s = 1; s < n; ++s)
                ++after[static_cast<std::size_t>(round_order(n, r, s - 1))][static_cast<std::size_t>(round_order(n, r, s))];
        }
        const int expect_pairs = n % 2 ? 2 : 1;
        for (int a = 0; a < n; ++a) {
            EXPECT_EQ(first[static_cast<std::size_t>(a)], rows / n) << "n " << n;
            for (int b = 0; b < n; ++b) {
                if (a == b) continue;
                EXPECT_EQ(after[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)], expect_pairs)
                    << "n " << n << ": " << b << " after " << a;
            }
        }
    }
}

TEST(PerfOrder, FourMethods)
{
    // mpi, none, topk, auto: the first rows of the sweeps' interleaving.
    const int want[4][4] = {{0, 1, 3, 2}, {1, 2, 0, 3}, {2, 3, 1, 0}, {3, 0, 2, 1}};
    for (int r = 0; r < 4; ++r)
        for (int s = 0; s < 4; ++s) EXPECT_EQ(round_order(4, r, s), want[r][s]);
}

}  // namespace
