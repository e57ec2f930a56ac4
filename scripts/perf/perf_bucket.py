"""One DDP bucket of GPT-2-small layer shapes through every method
(docs/performance.md, "A GPT-2-small bucket"), run under mpirun:

    mpirun -np N python3 scripts/perf/perf_bucket.py OUT.json [--iters K]

The bucket is one GPT-2-small transformer block's gradients, the tensors a
DDP bucket of about 25 MiB holds: the attention's c_attn weight 768 x 2304
and bias, c_proj 768 x 768 and bias, the MLP's c_fc 768 x 3072 and bias,
c_proj 3072 x 768 and bias, and two layer norms' weights and biases
(7,087,872 float32 values, 27.0 MiB). Rows are:

  mpi         MPI_Allreduce of the flat bucket (mpi4py): what a dense DDP
              allreduce of the bucket moves
  none, topk, sketch
              cc_coll_allreduce_group of the 12 tensors with that method
  lowrank rR  cc_coll_allreduce_group with LOWRANK at rank R = 1, 4, 16:
              the four matrices compressed (one P and one Q allreduce for
              all of them), the eight vectors in one plain allreduce
  auto        the group with method AUTO (CC_COLL_AUTO_METHOD decides
              the lossy method; the cost model decides per call)

Each row: one warm-up call, then K timed calls (the slowest rank's time of
each, averaged), the library's own split of a call (compress, communicate,
decompress summed over the bucket's tensors; the slowest rank's) and the
bytes this rank handed to MPI per call. Gradients are normal random
values, drawn anew before each call (not timed), with error feedback on.
"""
import argparse
import json
import sys
import time

import numpy as np
from mpi4py import MPI

import cc_coll

GPT2_BLOCK = [  # (name, shape) of one GPT-2-small transformer block
    ("ln_1.weight", (768,)), ("ln_1.bias", (768,)),
    ("attn.c_attn.weight", (768, 2304)), ("attn.c_attn.bias", (2304,)),
    ("attn.c_proj.weight", (768, 768)), ("attn.c_proj.bias", (768,)),
    ("ln_2.weight", (768,)), ("ln_2.bias", (768,)),
    ("mlp.c_fc.weight", (768, 3072)), ("mlp.c_fc.bias", (3072,)),
    ("mlp.c_proj.weight", (3072, 768)), ("mlp.c_proj.bias", (768,)),
]

ROWS = [("none", dict(method="none")), ("topk", dict(method="topk", density=0.01)),
        ("sketch", dict(method="sketch", density=0.01)),
        ("lowrank r1", dict(method="lowrank", rank=1, start_iter=0)),
        ("lowrank r4", dict(method="lowrank", rank=4, start_iter=0)),
        ("lowrank r16", dict(method="lowrank", rank=16, start_iter=0)),
        ("auto", dict(method="auto", density=0.01))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--iters", type=int, default=5)
    args = ap.parse_args()
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    rng = np.random.default_rng(1234 + rank)
    comm = cc_coll.Comm(world)
    count = sum(int(np.prod(s)) for _, s in GPT2_BLOCK)
    results = []

    def timed(prepare, fn):
        """The mean of the slowest rank's times of `iters` calls of fn, each
        after prepare() (new gradients, not timed) and a barrier."""
        times = []
        for _ in range(args.iters):
            prepare()
            world.Barrier()
            t0 = time.perf_counter()
            fn()
            t = time.perf_counter() - t0
            times.append(world.allreduce(t, op=MPI.MAX))
        return sum(times) / len(times)

    flat = np.empty(count, dtype=np.float32)

    def fill_flat():
        flat[:] = rng.standard_normal(count, dtype=np.float32)

    def dense():
        world.Allreduce(MPI.IN_PLACE, flat, op=MPI.SUM)

    fill_flat()
    dense()  # warm-up
    t_mpi = timed(fill_flat, dense)
    results.append(dict(row="mpi", time_us=t_mpi * 1e6, wire_bytes=4 * count))

    for row, fields in ROWS:
        tensors = [np.empty(s, dtype=np.float32) for _, s in GPT2_BLOCK]
        params = cc_coll.Params(**fields)

        def fill():
            for t in tensors:
                t[...] = rng.standard_normal(t.shape, dtype=np.float32)

        def group():
            comm.allreduce_group(tensors, params=params)

        fill()
        group()  # warm-up: creates the residuals (and LOWRANK's Q)
        comm.reset_stats()
        t = timed(fill, group)
        s = comm.stats()
        split = np.array([s.time_compress, s.time_communicate, s.time_decompress]) / args.iters
        world.Allreduce(MPI.IN_PLACE, split, op=MPI.MAX)
        entry = dict(row=row, time_us=t * 1e6, speedup=t_mpi / t, wire_bytes=s.bytes_wire / args.iters,
                     compress_us=split[0] * 1e6, communicate_us=split[1] * 1e6, decompress_us=split[2] * 1e6)
        if fields["method"] == "auto":
            entry["auto_lossy_share"] = s.auto_lossy_calls / max(s.auto_calls, 1)
            entry["auto_predicted_us"] = s.auto_predicted / max(s.auto_calls, 1) * 1e6
        results.append(entry)
        comm.ef_reset_all()
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump(dict(ranks=size, elements=count, bytes=4 * count, iters=args.iters,
                           tensors=[dict(name=n, shape=list(s)) for n, s in GPT2_BLOCK],
                           version=cc_coll.version(), results=results), f, indent=1)
    comm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
