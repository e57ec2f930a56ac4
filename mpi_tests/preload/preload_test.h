/* What the preload test programs share: a check that counts failures and
 * names the program and rank, and the mixing function their deterministic
 * inputs come from (every rank can compute every rank's values). A program
 * defines `test_name`, `rank` and `failures` before it uses CHECK. */
#ifndef CC_COLL_PRELOAD_TEST_H
#define CC_COLL_PRELOAD_TEST_H

#include <stdint.h>
#include <stdio.h>

#define CHECK(cond, ...)                                                    \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "%s: rank %d: FAIL: ", test_name, rank);        \
            fprintf(stderr, __VA_ARGS__);                                   \
            fputc('\n', stderr);                                            \
            ++failures;                                                     \
        }                                                                   \
    } while (0)

static inline uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

#endif
