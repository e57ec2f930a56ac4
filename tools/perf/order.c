/* -I: the order of the methods in a round of timed calls. */
#include "order.h"

int round_order(int n, int r, int s)
{
    if (n % 2 == 1 && (r / n) % 2 == 1) s = n - 1 - s;
    const int base = s == 0 ? 0 : s % 2 == 1 ? (s + 1) / 2 : n - s / 2;
    return (base + r) % n;
}
