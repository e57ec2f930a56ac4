// PowerSGD's step on one matrix M (rows x cols of W), in two halves around
// the sum of P over the ranks, written once over the execution backend X:
// the allreduce (allreduce/lowrank.cc) sums P between the halves, the
// point-to-point message (p2p/p2p.cc) runs them back to back.
#pragma once

#include <cstdint>

#include "cc_coll.h"
#include "compressors/lowrank/lowrank_backend.hpp"
#include "compressors/lowrank/powersgd.hpp"

namespace cc_coll::detail {

// Q: `previous` (the warm start) or a Gaussian drawn from (seed, stream),
// orthogonalised (Gram-Schmidt with `half`); then P = M Q.
template <typename X, typename W>
cc_coll_status_t powersgd_p(X &x, const W *m, const lowrank::Shape &s, const W *previous, std::uint64_t seed,
                            std::uint64_t stream, bool half, W *q, W *p)
{
    cc_coll_status_t st = lr_start_q<W>(x, previous, seed, stream, s, half, q);
    if (st == CC_COLL_OK) st = lr_multiply_mq<W>(x, m, s, q, p);
    return st;
}

// P orthogonalised; then Q = M^T P.
template <typename X, typename W>
cc_coll_status_t powersgd_q(X &x, const W *m, const lowrank::Shape &s, bool half, W *p, W *q)
{
    cc_coll_status_t st = lr_orthogonalize<W>(x, p, s.rows, s.rank, half);
    if (st == CC_COLL_OK) st = lr_multiply_mtp<W>(x, m, s, p, q);
    return st;
}

}  // namespace cc_coll::detail
