#!/usr/bin/python3
"""train_lm.py: one run of the training-quality benchmark (scripts/quality.sh).

    mpirun -np <ranks> /usr/bin/python3 scripts/quality/train_lm.py --row <row> --out <file.json> [options]

Trains a small causal transformer language model on characters, data
parallel over the ranks of MPI_COMM_WORLD with PyTorch DDP on CPU, its
gradients averaged by the row's communication hook:

  ddp            DDP's default hook (dense allreduce over gloo)
  none           cc_coll.torch, method NONE (a dense average through libcc_coll)
  topk, sketch, lowrank          cc_coll.torch with that method, error feedback on
  topk-noef, sketch-noef, lowrank-noef    the same without error feedback
  half, quant, onebit (and -noef)   the dense codecs, the same way; their
                 settings (CC_COLL_QUANT_BITS, ...) through --setting
  powersgd       PyTorch's powerSGD_hook over gloo (error feedback, warm start)
  local, local-noef   compressed local steps (cc_coll.torch.LocalStepsOptimizer):
                 --local-steps inner steps per rank, then the parameters'
                 change averaged through --local-method with (without) error
                 feedback and applied by the outer step
  cadam, cadam-noef   per-step compressed Adam (cc_coll.torch.CompressedAdam):
                 exact AdamW for --freeze-step steps, then the second moment
                 frozen and the momentum averaged through --adam-method with
                 (without) error feedback, or an EF21 estimate (--adam-estimate)
  postlocal      PyTorch's PostLocalSGDOptimizer + PeriodicModelAverager:
                 local steps, parameters averaged exactly (gloo) every
                 --local-steps steps

Every rank builds the model from the same seed; DDP broadcasts it once more.
The text is split into a training part (the first 90%) and a validation part;
the training part is cut into one shard per rank, and each rank draws its
batches (random windows) from its own shard with a generator seeded by its
rank, so that runs differ only in how gradients are averaged. The global
batch is fixed: each rank gets --batch / ranks sequences.

Rank 0 writes one JSON record: the settings, the per-step training loss
(averaged over the ranks), the validation loss every --eval-every steps,
gradient bytes per step (for libcc_coll rows the communicator's bytes_wire,
this rank's payload to MPI; for ddp and powersgd the size of the allreduces
those hooks post, computed from the model the way they build them), seconds
per step, and whether every rank ends with bit-identical parameters.
"""

import argparse
import hashlib
import json
import math
import os
import platform
import sys
import time

from mpi4py import MPI

from gloo_mpi import finish, init_gloo

# The benchmark trains on the CPU. Newer PyTorch's powerSGD_hook calls
# torch.cuda.synchronize on a CPU bucket whenever a GPU is visible, which
# fails: on a GPU machine the runs see none.
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

# The library's dense codecs (no density, no rank; their own settings
# through --setting) have rows too.
CODEC_ROWS = ("half", "half-noef", "quant", "quant-noef", "onebit", "onebit-noef")
ROWS = ("ddp", "none", "topk", "topk-noef", "sketch", "sketch-noef", "lowrank", "lowrank-noef", "powersgd",
        "local", "local-noef", "postlocal", "cadam", "cadam-noef") + CODEC_ROWS
LOCAL_ROWS = ("local", "local-noef", "postlocal")


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--row", required=True, choices=ROWS)
    ap.add_argument("--label", help="the run's name in the report (default: the row)")
    ap.add_argument("--out", help="JSON record to write (rank 0); none: print a summary only")
    ap.add_argument("--corpus", default="/usr/share/common-licenses,pydoc",
                    help="comma-separated sources: text files, folders (their files in name order) and pydoc "
                         "(Python's reference topics); the first 90%% of every document is training text, "
                         "the rest validation text")
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=32, help="global batch: sequences per step over all ranks")
    ap.add_argument("--ctx", type=int, default=64, help="sequence length")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dmodel", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--optim", choices=("adamw", "sgd"), default="adamw",
                    help="adamw (betas 0.9, --beta2, weight decay 0.01) or sgd (Nesterov momentum 0.9)")
    ap.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    ap.add_argument("--beta2", type=float, default=0.99, help="adamw: its second beta")
    ap.add_argument("--warmup", type=int, default=20, help="learning-rate warm-up steps (linear), then cosine to lr/10")
    ap.add_argument("--density", type=float, default=0.01, help="topk, sketch: kept fraction")
    ap.add_argument("--rank", type=int, default=1, help="lowrank, powersgd: the approximation rank")
    ap.add_argument("--start-iter", type=int, default=10,
                    help="compressing hooks: dense steps first (powerSGD_hook's start_powerSGD_iter)")
    ap.add_argument("--min-elements", type=int, default=4096,
                    help="topk, lowrank: LayerPolicy(min_elements): smaller gradients, and 1-D ones, go dense "
                         "(sketch compresses the whole bucket)")
    ap.add_argument("--local-steps", type=int, default=4,
                    help="local, postlocal: inner steps between synchronisations (H)")
    ap.add_argument("--local-method", choices=("none", "topk", "sketch", "lowrank"), default="topk",
                    help="local: how the parameters' change is averaged (with --density or --rank)")
    ap.add_argument("--outer-lr", type=float, default=1.0, help="local: the outer step's learning rate")
    ap.add_argument("--outer-momentum", type=float, default=0.0,
                    help="local: the outer step's Nesterov momentum (0: plain averaging)")
    ap.add_argument("--ramp-steps", type=int, default=0,
                    help="local: steps after the warm-up over which H and the density are ramped")
    ap.add_argument("--overlap", action="store_true",
                    help="local: the average travels during the next inner step")
    ap.add_argument("--exact-budget", type=float, default=None,
                    help="local, cadam: LayerPolicy.for_model(budget): biases, norms, embeddings and the output "
                         "layer exact within this fraction of the parameters (default: LayerPolicy)")
    ap.add_argument("--freeze-step", type=int, default=100,
                    help="cadam: exact AdamW steps before the second moment is frozen")
    ap.add_argument("--adam-method", choices=("none", "topk", "sketch", "lowrank"), default="topk",
                    help="cadam: how the momentum is averaged (with --density or --rank)")
    ap.add_argument("--adam-estimate", choices=("momentum", "ef21"), default="momentum",
                    help="cadam: error feedback on the momentum, or an EF21 estimate")
    ap.add_argument("--refresh", choices=("none", "exponential"), default="none",
                    help="cadam: exponential: the second moment refreshed exactly at freeze-step * 2^k (0/1 Adam)")
    ap.add_argument("--mask-zero-rows", action="store_true",
                    help="cadam: momentum masks for gradient rows that were zero through the warm-up")
    ap.add_argument("--buckets", choices=("one", "ddp"), default="one",
                    help="one: all gradients in one DDP bucket; ddp: DDP's default bucket sizes")
    ap.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE",
                    help="a libcc_coll setting for the run's communicators, e.g. QUANT_BITS=4 or "
                         "TOPK_VALUE_BITS=4 (CC_COLL_ is prefixed; repeatable)")
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--eval-windows", type=int, default=256, help="validation windows (spread over the ranks)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    a = ap.parse_args(argv)
    if a.local_steps < 1 or a.ramp_steps < 0:
        ap.error("need --local-steps >= 1 and --ramp-steps >= 0")
    if a.steps < 1 or a.batch < 1 or a.ctx < 2 or a.layers < 1 or a.dmodel % a.heads:
        ap.error("need steps >= 1, batch >= 1, ctx >= 2, layers >= 1 and dmodel a multiple of heads")
    for kv in a.setting:
        name, eq, value = kv.partition("=")
        if not eq or not name:
            ap.error("--setting takes NAME=VALUE (got %r)" % kv)
        # read when the run's communicators are created
        os.environ[name if name.startswith("CC_COLL_") else "CC_COLL_" + name] = value
    return a


def read_corpus(sources):
    """The corpus's documents: (name, text) pairs, from a comma-separated
    list of sources, each a text file, a folder (its regular files in name
    order, a symbolic link to a file already read skipped) or `pydoc` (the
    Python reference's topics that pydoc shows, one document each)."""
    docs, seen = [], set()
    for src in sources.split(","):
        if src == "pydoc":
            from pydoc_data.topics import topics
            docs.extend(("pydoc:" + k, topics[k]) for k in sorted(topics))
            continue
        if os.path.isfile(src):
            files = [src]
        elif os.path.isdir(src):
            files = [os.path.join(src, n) for n in sorted(os.listdir(src))]
        else:
            raise SystemExit("train_lm.py: corpus source %r is not a file, a folder or pydoc" % src)
        for f in files:
            real = os.path.realpath(f)
            if not os.path.isfile(real) or real in seen:
                continue
            seen.add(real)
            with open(f, encoding="utf-8", errors="replace") as fh:
                docs.append((os.path.basename(f), fh.read()))
    total = sum(len(t) for _, t in docs)
    if total < 10000:
        raise SystemExit("train_lm.py: corpus %r has %d characters, too few" % (sources, total))
    return docs


def main(argv):
    a = parse_args(argv)
    world = MPI.COMM_WORLD
    rank, size = world.rank, world.size
    if a.batch % size:
        raise SystemExit("train_lm.py: --batch %d is not a multiple of the %d ranks" % (a.batch, size))

    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(a.threads)
    docs = read_corpus(a.corpus)
    text = "".join(t for _, t in docs)
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    cut = [int(0.9 * len(t)) for _, t in docs]
    encode = lambda t: torch.tensor([stoi[c] for c in t], dtype=torch.long)  # noqa: E731
    train = encode("\n".join(t[:k] for (_, t), k in zip(docs, cut)))
    val = encode("\n".join(t[k:] for (_, t), k in zip(docs, cut)))
    n_train = len(train)
    shard_len = n_train // size
    shard = train[rank * shard_len:(rank + 1) * shard_len]
    if shard_len <= a.ctx + 1 or len(val) <= a.ctx + 1:
        raise SystemExit("train_lm.py: the corpus is too small for %d ranks at ctx %d" % (size, a.ctx))

    class Block(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.ln1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.ln2 = nn.LayerNorm(d)
            self.fc = nn.Linear(d, 4 * d)
            self.out = nn.Linear(4 * d, d)

        def forward(self, x, mask):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
            q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.heads))
            att = att.masked_fill(mask[:t, :t], float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, c)
            x = x + self.proj(y)
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class CharLM(nn.Module):
        def __init__(self, vocab, d, heads, layers, ctx):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(ctx, d)
            self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)
            # a plain attribute, not a buffer: gloo cannot broadcast bool tensors
            self.mask = torch.triu(torch.ones(ctx, ctx, dtype=torch.bool), diagonal=1)

        def forward(self, idx):
            t = idx.shape[1]
            x = self.tok(idx) + self.pos(torch.arange(t))
            for blk in self.blocks:
                x = blk(x, self.mask)
            return self.head(self.ln(x))

    torch.manual_seed(a.seed)
    net = CharLM(len(chars), a.dmodel, a.heads, a.layers, a.ctx)
    n_params = sum(p.numel() for p in net.parameters())

    def dense_bytes_of(module):
        return sum(p.numel() * p.element_size() for p in module.parameters())

    # DDP's process group (its broadcasts; the ddp and powersgd rows' gradient
    # traffic): gloo, rendezvous through a file in a folder rank 0 names.
    rdv = init_gloo("cc_quality_")
    if a.buckets == "one":
        # DDP caps its first bucket at dist._DEFAULT_FIRST_BUCKET_BYTES (1 MiB)
        # and the others at bucket_cap_mb; both are raised over the model's size.
        dist._DEFAULT_FIRST_BUCKET_BYTES = 8 * dense_bytes_of(net)
        model = DDP(net, bucket_cap_mb=8 * dense_bytes_of(net) / 2**20)
    else:
        model = DDP(net)

    comm = state = None
    dense_bytes = 4 * n_params
    analytic_bytes = None  # per compressed step, for the rows libcc_coll does not count
    if a.row == "ddp":
        analytic_bytes = dense_bytes
    elif a.row == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
        state = psgd.PowerSGDState(process_group=None, matrix_approximation_rank=a.rank,
                                   start_powerSGD_iter=a.start_iter, min_compression_rate=2,
                                   use_error_feedback=True, warm_start=True, random_seed=a.seed)
        model.register_comm_hook(state, psgd.powerSGD_hook)
        elements = 0
        for p in net.parameters():
            if p.dim() > 1:
                rows, cols = p.shape[0], p.numel() // p.shape[0]
                if (rows + cols) * a.rank * 2 < rows * cols:
                    elements += (rows + cols) * a.rank
                    continue
            elements += p.numel()
        analytic_bytes = 4 * elements
    elif a.row == "postlocal":
        from torch.distributed.algorithms.ddp_comm_hooks import post_localSGD_hook as plh
        # gradients averaged by DDP during the warm-up, local afterwards
        plstate = plh.PostLocalSGDState(process_group=None, subgroup=None, start_localSGD_iter=a.start_iter,
                                        post_local_gradient_allreduce=False)
        model.register_comm_hook(plstate, plh.post_localSGD_hook)
    elif a.row in ("local", "local-noef", "cadam", "cadam-noef"):
        import cc_coll
        import cc_coll.torch as cct
        comm = cc_coll.Comm(world)
    else:
        import cc_coll
        import cc_coll.torch as cct
        comm = cc_coll.Comm(world)
        method = a.row.split("-")[0]
        kw = dict(method=method, model=net, start_iter=a.start_iter, ef=not a.row.endswith("-noef"))
        if method == "topk":
            kw.update(density=a.density, policy=cct.LayerPolicy(min_elements=a.min_elements))
        elif method == "sketch":
            # the whole bucket as one tensor: a sketch has at least 3 x 1024
            # cells, so per-gradient sketches of this model's tensors would
            # fall back to dense (docs/quality/benchmark.md)
            kw.update(density=a.density)
        elif method == "lowrank":
            kw.update(rank=a.rank, policy=cct.LayerPolicy(min_elements=a.min_elements))
        state = cct.CompressionState(comm, **kw)
        model.register_comm_hook(state, cct.compression_hook)

    if a.optim == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, a.beta2), weight_decay=0.01)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, nesterov=True)
    finish_sync = None   # the local rows' last synchronisation, before the final evaluation
    if a.row in ("local", "local-noef", "cadam", "cadam-noef"):
        policy = (cct.LayerPolicy(min_elements=a.min_elements) if a.exact_budget is None
                  else cct.LayerPolicy.for_model(net, budget=a.exact_budget, min_elements=a.min_elements))
    if a.row == "postlocal":
        from torch.distributed.algorithms.model_averaging import averagers
        from torch.distributed.algorithms.model_averaging import utils as avg_utils
        from torch.distributed.optim import PostLocalSGDOptimizer
        opt = PostLocalSGDOptimizer(opt, averagers.PeriodicModelAverager(period=a.local_steps,
                                                                         warmup_steps=a.start_iter))
        # PeriodicModelAverager averages after the steps s >= warm-up with
        # (s - warm-up) % H == 0: the warm-up's steps average the gradients
        # (DDP), the others send nothing
        analytic = [dense_bytes if s < a.start_iter or (s - a.start_iter) % a.local_steps == 0 else 0
                    for s in range(a.steps)]

        def finish_sync():
            if (a.steps - 1 - a.start_iter) % a.local_steps != 0:   # the last step did not average
                avg_utils.average_parameters(iter(net.parameters()), dist.group.WORLD)
                analytic[-1] += dense_bytes
    elif a.row in ("local", "local-noef"):
        opt = cct.LocalStepsOptimizer(opt, comm, model=net, local_steps=a.local_steps, method=a.local_method,
                                      density=a.density, rank=a.rank, ef=a.row == "local",
                                      policy=policy, warmup_steps=a.start_iter, ramp_steps=a.ramp_steps,
                                      outer_lr=a.outer_lr, outer_momentum=a.outer_momentum, overlap=a.overlap,
                                      seed=a.seed)
        model.register_comm_hook(opt, cct.optimizer_hook)
        finish_sync = opt.synchronize
    elif a.row in ("cadam", "cadam-noef"):
        if a.optim != "adamw":
            raise SystemExit("train_lm.py: --row %s is Adam: --optim adamw" % a.row)
        opt = cct.CompressedAdam(model.parameters(), comm, lr=a.lr, betas=(0.9, a.beta2), weight_decay=0.01,
                                 freeze_step=a.freeze_step, method=a.adam_method, density=a.density, rank=a.rank,
                                 ef=a.row == "cadam", refresh=a.refresh, estimate=a.adam_estimate,
                                 mask_zero_rows=a.mask_zero_rows, policy=policy, seed=a.seed)
        model.register_comm_hook(opt, cct.optimizer_hook)

    def lr_at(step):
        if step < a.warmup:
            return a.lr * (step + 1) / a.warmup
        frac = (step - a.warmup) / max(1, a.steps - a.warmup)
        return a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))

    per_rank = a.batch // size
    gen = torch.Generator().manual_seed(1000 + a.seed * 64 + rank)
    starts = torch.linspace(0, len(val) - a.ctx - 2, a.eval_windows).long()
    mine = starts[rank::size]
    val_x = torch.stack([val[s:s + a.ctx] for s in mine.tolist()]) if len(mine) else None
    val_y = torch.stack([val[s + 1:s + 1 + a.ctx] for s in mine.tolist()]) if len(mine) else None

    def evaluate():
        # the local rows between synchronisations: the last synchronised
        # model (LocalStepsOptimizer's anchor, the same on every rank), not
        # each rank's own replica
        anchor = getattr(opt, "anchor", None)
        saved = None
        if anchor is not None and not opt._exact:
            saved = [p.detach().clone() for p in net.parameters()]
            with torch.no_grad():
                for p, q in zip(net.parameters(), anchor):
                    p.copy_(q)
        total = 0.0
        if val_x is not None:
            with torch.no_grad():
                logits = net(val_x)
                total = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), val_y.reshape(-1),
                                        reduction="sum").item()
        if saved is not None:
            with torch.no_grad():
                for p, q in zip(net.parameters(), saved):
                    p.copy_(q)
        return world.allreduce(total) / (a.eval_windows * a.ctx)

    load_before = os.getloadavg()
    train_loss, step_time, wire, val_curve = [], [], [], []
    t_run = time.perf_counter()
    for step in range(a.steps):
        if step % a.eval_every == 0:
            val_curve.append((step, evaluate()))
        ix = torch.randint(0, shard_len - a.ctx - 1, (per_rank,), generator=gen)
        x = torch.stack([shard[i:i + a.ctx] for i in ix.tolist()])
        y = torch.stack([shard[i + 1:i + 1 + a.ctx] for i in ix.tolist()])
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        step_time.append(time.perf_counter() - t0)
        train_loss.append(loss.item())
        if comm is not None:
            wire.append(comm.stats().bytes_wire)
    if finish_sync is not None:
        finish_sync()
        if comm is not None:
            wire[-1] = comm.stats().bytes_wire
    val_curve.append((a.steps, evaluate()))
    wall = time.perf_counter() - t_run
    load_after = os.getloadavg()

    # Per-step training loss averaged over the ranks; parameters compared
    # bit for bit.
    all_losses = world.gather(train_loss, root=0)
    digest = hashlib.sha256(b"".join(p.detach().contiguous().numpy().tobytes()
                                     for p in net.parameters())).hexdigest()
    digests = world.gather(digest, root=0)
    times = world.gather(step_time, root=0)

    if comm is not None:
        per_step = [wire[0]] + [wire[i] - wire[i - 1] for i in range(1, len(wire))]
    elif a.row == "postlocal":
        per_step = analytic
    else:
        per_step = [dense_bytes if i < a.start_iter or a.row == "ddp" else analytic_bytes
                    for i in range(a.steps)]
    # the steady state: after the dense warm-up (cadam's: its freeze step)
    dense_steps = a.freeze_step if a.row.startswith("cadam") else a.start_iter
    steady = per_step[dense_steps:] if a.row != "ddp" and a.steps > dense_steps else per_step
    if rank == 0:
        mean_loss = [sum(v) / size for v in zip(*all_losses)]
        # a step's time: the slowest rank's
        slowest = [max(v) for v in zip(*times)]
        timed = sorted(slowest[min(dense_steps + 2, len(slowest) - 1):])
        # training seconds (the slowest rank's steps, evaluations left out)
        # before each evaluation: the x axis of loss against time
        elapsed = [0.0]
        for t in slowest:
            elapsed.append(elapsed[-1] + t)
        tail = max(1, min(20, a.steps // 10))
        rec = {
            "row": a.row, "label": a.label or a.row, "ranks": size,
            "settings": {k: v for k, v in vars(a).items() if k not in ("out", "label")},
            "corpus": {"documents": len(docs), "characters": len(text), "vocab": len(chars),
                       "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
                       "train_chars": n_train, "val_chars": len(val)},
            "params": n_params, "train_loss": mean_loss, "val_loss": val_curve,
            "val_time": [elapsed[min(step, len(slowest))] for step, _ in val_curve],
            "final_train": sum(mean_loss[-tail:]) / tail, "final_val": val_curve[-1][1],
            "bytes_per_step": per_step, "dense_bytes_per_step": dense_bytes,
            "steady_bytes_per_step": sum(steady) / len(steady),
            "run_bytes_per_step": sum(per_step) / len(per_step),
            "sec_per_step_median": timed[len(timed) // 2], "sec_per_step_mean": sum(timed) / len(timed),
            "wall": wall, "identical": len(set(digests)) == 1, "digests": digests,
            "load_before": load_before, "load_after": load_after,
            "torch": torch.__version__, "python": platform.python_version(), "machine": platform.machine(),
            "cpus": os.cpu_count(),
        }
        rec["ratio_steady"] = dense_bytes / rec["steady_bytes_per_step"]
        rec["ratio_run"] = dense_bytes / rec["run_bytes_per_step"]
        if a.out:
            with open(a.out, "w") as fh:
                json.dump(rec, fh)
        print("train_lm.py: %-20s %d ranks  %d params  val %.4f  train %.4f  %.1fx (%.1fx over the run)  "
              "%.3f s/step  identical %s  load %.2f->%.2f" % (
                  rec["label"], size, n_params, rec["final_val"], rec["final_train"], rec["ratio_steady"],
                  rec["ratio_run"], rec["sec_per_step_median"], rec["identical"], load_before[0], load_after[0]))
        sys.stdout.flush()

    finish(rdv, comm)


if __name__ == "__main__":
    main(sys.argv[1:])
