/* -I: the order of the methods in a round of timed calls. */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/* The s-th method (0 .. n-1) of round r among n: row r of Williams'
 * balanced Latin square. Row 0 is 0, 1, n-1, 2, n-2, ...; row r adds r
 * (mod n); for odd n the rows n .. 2n-1 are those rows reversed. Over n
 * rounds (2n for odd n) each method runs first equally often and each
 * ordered pair of methods is adjacent equally often. */
int round_order(int n, int r, int s);

#ifdef __cplusplus
}
#endif
