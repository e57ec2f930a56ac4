# SPDX-License-Identifier: BSD-3-Clause
"""Compressed local steps (cc_coll.torch.LocalStepsOptimizer): each rank
takes several optimizer steps on its own gradients, then the change of the
parameters since the last synchronisation is averaged through a libcc_coll
method with error feedback and applied by an outer step. docs/pytorch.md,
"Compressed local steps", is the user's page; this module is imported by
cc_coll.torch.
"""

import collections.abc
import math
import numbers
from typing import Any, Callable, Dict, Optional

import torch

from ._args import _enum_arg
from ._comm import Comm
from ._enums import Status
from ._errors import Error
from ._methods import Method, MethodCap, method_names, methods_with
from ._params import Params
from ._types import MethodLike, SparsifierLike

try:
    from torch.distributed import GradBucket
except ImportError:  # pragma: no cover - a PyTorch without torch.distributed
    GradBucket = Any  # type: ignore[misc,assignment]

#: What a DDP communication hook returns. DDP's register_comm_hook accepts
#: these annotations only (bucket: GradBucket, returning Future[Tensor]).
HookFuture = torch.futures.Future[torch.Tensor]

__all__ = ["LocalStepsOptimizer", "optimizer_hook", "LOCAL_KEY_BASE"]

#: The ef_keys of a LocalStepsOptimizer start here ("cl" in the high bytes):
#: key LOCAL_KEY_BASE + i names the residual of the i-th synchronised
#: parameter. Clear of cc_coll.torch.DEFAULT_KEY_BASE, so a CompressionState
#: may share the Comm.
LOCAL_KEY_BASE = 0x636C << 48

_STATE_FORMAT = "cc_coll.torch.LocalStepsOptimizer/1"


def _int_at_least(value, low, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError("%s must be an int >= %d, not %r" % (what, low, value))
    return int(value)


def _real_in(value, low, high, what, low_open=False):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) \
            or value > high or value < low or (low_open and value == low):
        raise ValueError("%s must be a number in %s%g, %g], not %r" % (what, "(" if low_open else "[", low, high,
                                                                        value))
    return float(value)


def _flat_view(t):
    """A 1-D numpy view of a contiguous CPU float32/float64 tensor."""
    return t.detach().view(-1).numpy()


def average_gradients(comm, params):
    """The parameters' gradients averaged exactly (method NONE, op AVG) in
    one Comm.allreduce_group, in place (a missing gradient counts as zeros):
    the dense steps of the optimizers that communicate themselves, without
    DDP."""
    grads = []
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        elif not p.grad.is_contiguous():
            p.grad = p.grad.contiguous()
        grads.append(_flat_view(p.grad))
    if grads:
        comm.allreduce_group(grads, op="avg", params=[Params(method="none") for _ in grads])


class LocalStepsOptimizer(torch.optim.Optimizer):
    """Local steps with compressed averaging of the parameters' change, in
    the spirit of DiLoCo and PyTorch's PostLocalSGDOptimizer:

        opt = LocalStepsOptimizer(torch.optim.AdamW(model.parameters(), lr=3e-3),
                                  cc_coll.Comm(MPI.COMM_WORLD), model=model,
                                  local_steps=4, method="topk", density=0.05)
        ddp.register_comm_hook(opt, optimizer_hook)   # with DDP; without it, nothing
        for x, y in data:
            opt.zero_grad(); loss_fn(ddp(x), y).backward(); opt.step()
        opt.synchronize()                                 # replicas equal at the end

    Phases, counted in calls of step():
    - the first `warmup_steps` steps are synchronous: the gradients are
      averaged exactly (method NONE, op AVG) before the inner step, by
      optimizer_hook under DDP or by step() itself without DDP;
    - then each rank steps its inner optimizer on its own gradients, and
      every H steps the change of every parameter since the last
      synchronisation (its delta) is averaged through `method` with error
      feedback (residual per parameter, ef_key LOCAL_KEY_BASE + index, in
      one Comm.iallreduce_group with the float buffers averaged exactly)
      and applied by the outer step: anchor += outer_lr * (avg + momentum
      term), parameters = anchor, the same bits on every rank;
    - over the `ramp_steps` steps after the warm-up, H grows geometrically
      from 1 to local_steps and TOPK's and SKETCH's density falls
      geometrically from `ramp_density` to `density`: ramped, not
      switched.

    optim          -- the inner optimizer (any torch.optim.Optimizer) over
                      the parameters to synchronise
    comm           -- a cc_coll.Comm (or an mpi4py communicator: the
                      optimizer creates a Comm and close() closes it) over
                      the ranks that train the replicas
    model          -- None, or the module (or DDP module): its floating
                      buffers are averaged exactly at every synchronisation
    local_steps    -- H, the inner steps between synchronisations (>= 1)
    method         -- how the deltas are averaged: "none" (exact), "topk",
                      "sketch" or "lowrank" (Method or its name)
    density, rank, ef, sparsifier, load_factor, seed, min_compression_rate
                   -- the method's parameters, as in cc_coll.Params
    policy         -- None (every parameter of two or more dimensions is
                      compressed, 1-D ones go exactly) or a callable
                      policy(param, param) -> bool, as CompressionState's
                      (cc_coll.torch.LayerPolicy and LayerPolicy.for_model fit)
    warmup_steps   -- synchronous steps first (>= 0)
    ramp_steps     -- steps over which H and the density are ramped (>= 0)
    ramp_density   -- TOPK, SKETCH: the density the ramp starts from
                      (default min(1, 8 * density))
    outer_lr       -- the outer step's learning rate (1: plain averaging)
    outer_momentum -- the outer step's momentum (0: none); with
                      nesterov=True (the default) a Nesterov step, as DiLoCo's
                      outer optimizer
    overlap        -- False: step() waits for the average at the
                      synchronisation, so the replicas leave it bit-identical.
                      True: the average travels while the next inner step's
                      forward and backward run, and is applied at the next
                      step() with each rank's local progress since it was
                      posted kept on top (the anchors stay bit-identical;
                      the parameters differ by that progress until
                      synchronize())
    key_base       -- where the residuals' ef_keys start (LOCAL_KEY_BASE)

    Counters: steps (step() calls), syncs (synchronisations applied).
    state_dict() holds the inner optimizer's state, the anchors, the outer
    momentum, the counters and the communicator's compression state;
    load_state_dict() restores them so that a resumed run is bit-identical.
    Every rank must construct it alike and call step() the same number of
    times.
    """

    def __init__(self, optim: torch.optim.Optimizer, comm: Any, model: Optional[torch.nn.Module] = None,
                 local_steps: int = 4, method: MethodLike = "topk", density: float = 0.05, rank: int = 4,
                 ef: bool = True, policy: Optional[Callable[..., bool]] = None, warmup_steps: int = 0,
                 ramp_steps: int = 0, ramp_density: Optional[float] = None, outer_lr: float = 1.0,
                 outer_momentum: float = 0.0, nesterov: bool = True, overlap: bool = False,
                 sparsifier: Optional[SparsifierLike] = None, load_factor: Optional[float] = None,
                 seed: Optional[int] = None, min_compression_rate: float = 2.0,
                 key_base: int = LOCAL_KEY_BASE) -> None:
        if not isinstance(optim, torch.optim.Optimizer):
            raise TypeError("optim must be a torch.optim.Optimizer, not %s" % type(optim).__name__)
        self.optim = optim
        self._own_comm = not isinstance(comm, Comm)
        self.comm = Comm(comm) if self._own_comm else comm
        self.method = _enum_arg(Method, method, "method")
        if not isinstance(self.method, Method) or self.method.caps & MethodCap.SELECTS:
            raise ValueError("method = %r: LocalStepsOptimizer averages with %s"
                             % (method, method_names(methods_with(without=MethodCap.SELECTS))))
        self.local_steps = _int_at_least(local_steps, 1, "local_steps")
        self.warmup_steps = _int_at_least(warmup_steps, 0, "warmup_steps")
        self.ramp_steps = _int_at_least(ramp_steps, 0, "ramp_steps")
        self.density = _real_in(density, 0.0, 1.0, "density", low_open=True)
        self.ramp_density = (min(1.0, 8 * self.density) if ramp_density is None
                             else _real_in(ramp_density, 0.0, 1.0, "ramp_density", low_open=True))
        self.rank = _int_at_least(rank, 1, "rank")
        self.outer_lr = _real_in(outer_lr, 0.0, 16.0, "outer_lr", low_open=True)
        self.outer_momentum = _real_in(outer_momentum, 0.0, 0.9999, "outer_momentum")
        self.nesterov = bool(nesterov)
        self.overlap = bool(overlap)
        self.ef = bool(ef)
        if policy is not None and not callable(policy):
            raise TypeError("policy must be None or a callable policy(param) -> bool, not %r" % (policy,))
        self.policy = policy
        self.key_base = _int_at_least(key_base, 0, "key_base")
        self._base_params = Params(method=self.method, ef=self.ef, sparsifier=sparsifier, load_factor=load_factor,
                                   seed=seed, min_compression_rate=min_compression_rate,
                                   start_iter=0 if self.method.caps & MethodCap.MATRIX else None,
                                   warm_start=True if self.method.caps & MethodCap.MATRIX else None)
        # torch.optim.Optimizer's interface over the inner optimizer's state
        # (as PostLocalSGDOptimizer does): LR schedulers see its groups.
        self.param_groups = optim.param_groups
        self.defaults = optim.defaults
        self.state = optim.state
        self.params = [p for g in optim.param_groups for p in g["params"]]
        if len({id(p) for p in self.params}) != len(self.params):
            raise ValueError("a parameter appears twice in the inner optimizer's groups")
        for i, p in enumerate(self.params):
            if p.device.type != "cpu" or p.dtype not in (torch.float32, torch.float64) or not p.is_contiguous():
                raise TypeError("parameter %d: LocalStepsOptimizer takes contiguous float32 or float64 CPU "
                                "parameters, not %s %s" % (i, p.device.type, p.dtype))
        self.model = model
        self.buffers = []
        if model is not None:
            self.buffers = [b for b in model.buffers() if b.dtype in (torch.float32, torch.float64)
                            and b.device.type == "cpu" and b.is_contiguous()]
        self._compress = [self._compressible(p) for p in self.params]
        self.anchor = None         # the parameters at the last synchronisation
        self.outer_buf = None      # the outer momentum
        self._delta = [torch.empty_like(p) for p in self.params]
        self._buf_avg = [torch.empty_like(b) for b in self.buffers]
        self._pending = None       # (request, snapshot) of a posted average (overlap)
        self.steps = 0
        self.syncs = 0
        self._since = 0            # inner steps since the last synchronisation
        self._ddp_hooked = False   # optimizer_hook saw a bucket this step
        self._exact = True         # the parameters are the anchor, the same on every rank

    # -- schedule -----------------------------------------------------------

    def _compressible(self, p):
        if self.method == Method.NONE:
            return False
        if self.policy is not None:
            return bool(self.policy(p, p))
        return p.dim() > 1 and p.numel() > 0

    def averaging_gradients(self, step: Optional[int] = None) -> bool:
        """Whether step `step` (default: the coming one) averages the
        gradients exactly: the warm-up's steps."""
        return (self.steps if step is None else step) < self.warmup_steps

    def _progress(self, step):
        if self.ramp_steps == 0:
            return 1.0
        return min(1.0, (step - self.warmup_steps) / self.ramp_steps)

    def local_steps_at(self, step: int) -> int:
        """H for a synchronisation at step `step` (the ramp's value)."""
        return max(1, int(round(self.local_steps ** self._progress(step))))

    def density_at(self, step: int) -> float:
        """TOPK's and SKETCH's density at step `step` (the ramp's value)."""
        p = self._progress(step)
        if p >= 1.0:
            return self.density
        return min(1.0, self.ramp_density ** (1.0 - p) * self.density ** p)

    # -- the step ------------------------------------------------------------

    def zero_grad(self, set_to_none: bool = True) -> None:
        """The inner optimizer's zero_grad."""
        self.optim.zero_grad(set_to_none=set_to_none)

    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        """One inner step, with the warm-up's gradient average before it and
        a synchronisation after it when H inner steps have passed."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if self._pending is not None:
            self._finish_pending()
        if self.averaging_gradients():
            if not self._ddp_hooked:
                average_gradients(self.comm, self.params)
            self.optim.step()
        else:
            if self.anchor is None:   # the first local step: the replicas are equal now
                self._set_anchor()
            self.optim.step()
            self._since += 1
            self._exact = False
            if self._since >= self.local_steps_at(self.steps):
                self._post_sync(self.steps, keep_local=self.overlap)
                if not self.overlap:
                    self._finish_pending()
        self._ddp_hooked = False
        self.steps += 1
        return loss

    def _set_anchor(self):
        self.anchor = [p.detach().clone() for p in self.params]
        if self.outer_momentum > 0 and self.outer_buf is None:
            self.outer_buf = [torch.zeros_like(p) for p in self.params]

    def _post_sync(self, step, keep_local):
        density = self.density_at(step)
        arrays, plist = [], []
        for i, (p, a, d) in enumerate(zip(self.params, self.anchor, self._delta)):
            torch.sub(p.detach(), a, out=d)
            arrays.append(_flat_view(d))
            if self._compress[i]:
                fields = dict(ef_key=self.key_base + i)
                if self.method.caps & MethodCap.MATRIX:
                    fields.update(rank=self.rank, shape=(p.shape[0], p.numel() // p.shape[0]))
                else:
                    fields["density"] = density
                plist.append(self._base_params.replace(**fields))
            else:
                plist.append(Params(method="none"))
        for b, avg in zip(self.buffers, self._buf_avg):
            avg.copy_(b)
            arrays.append(_flat_view(avg))
            plist.append(Params(method="none"))
        request = self.comm.iallreduce_group(arrays, op="avg", params=plist) if arrays else None
        snapshot = [p.detach().clone() for p in self.params] if keep_local else None
        self._pending = (request, snapshot)
        self._since = 0

    def _finish_pending(self):
        request, snapshot = self._pending
        self._pending = None
        if request is not None:
            request.wait()
            request.free()
        for i, (a, d) in enumerate(zip(self.anchor, self._delta)):
            if self.outer_buf is not None:
                m = self.outer_buf[i]
                m.mul_(self.outer_momentum).add_(d)
                if self.nesterov:
                    d.add_(m, alpha=self.outer_momentum)
                else:
                    d.copy_(m)
            a.add_(d, alpha=self.outer_lr)
        for p, a, i in zip(self.params, self.anchor, range(len(self.params))):
            if snapshot is None:
                p.detach().copy_(a)
            else:   # keep the local progress made while the average travelled
                p.detach().add_(a).sub_(snapshot[i])
        for b, avg in zip(self.buffers, self._buf_avg):
            b.copy_(avg)
        self._exact = snapshot is None
        self.syncs += 1

    @torch.no_grad()
    def synchronize(self) -> None:
        """Finish an average in flight and, unless the replicas have just
        been synchronised without overlap, synchronise now (a collective:
        every rank calls it): afterwards every rank holds the same
        parameters, bit for bit. Call it before evaluating or saving a
        model trained with overlap, and at the end of training."""
        if self._pending is not None:
            self._finish_pending()
        if self.anchor is None or self._exact:
            return
        self._post_sync(self.steps, keep_local=False)
        self._finish_pending()

    @property
    def in_flight(self) -> bool:
        """Whether an average is in flight (overlap)."""
        return self._pending is not None

    # -- checkpoints ----------------------------------------------------------

    def state_dict(self) -> Dict[str, Any]:
        """This rank's state: the inner optimizer's, the anchors and outer
        momentum, the counters, and the Comm's compression state (the
        residuals). No average may be in flight: call synchronize() first
        with overlap (Error(INVALID_ARG) otherwise)."""
        if self._pending is not None:
            raise Error(Status.INVALID_ARG, "LocalStepsOptimizer.state_dict: an average is in flight; call "
                        "synchronize() first")
        return {
            "format": _STATE_FORMAT,
            "inner": self.optim.state_dict(),
            "anchor": None if self.anchor is None else [a.clone() for a in self.anchor],
            "outer_buf": None if self.outer_buf is None else [m.clone() for m in self.outer_buf],
            "steps": self.steps, "syncs": self.syncs, "since": self._since, "exact": self._exact,
            "rank": self.comm.rank, "size": self.comm.size,
            "comm_state": self.comm.state_export(),
        }

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restore what state_dict() saved on this rank: all or nothing (a
        dict of another format or shape raises ValueError, a corrupt
        compression state the Comm's Error, and nothing changes)."""
        if not isinstance(state, collections.abc.Mapping) or state.get("format") != _STATE_FORMAT:
            raise ValueError("not a %s state dict" % _STATE_FORMAT)
        if self._pending is not None:
            raise Error(Status.INVALID_ARG, "LocalStepsOptimizer.load_state_dict: an average is in flight")
        try:
            anchor, outer = state["anchor"], state["outer_buf"]
            steps, syncs, since = int(state["steps"]), int(state["syncs"]), int(state["since"])
            blob = state["comm_state"]
            for name, saved in (("anchor", anchor), ("outer_buf", outer)):
                if saved is not None and [tuple(t.shape) for t in saved] != [tuple(p.shape) for p in self.params]:
                    raise ValueError("%s does not match the parameters' shapes" % name)
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError("malformed %s state dict: %s" % (_STATE_FORMAT, exc)) from exc
        if (state.get("rank"), state.get("size")) != (self.comm.rank, self.comm.size):
            raise ValueError("the state was saved by rank %s of %s ranks, not rank %d of %d"
                             % (state.get("rank"), state.get("size"), self.comm.rank, self.comm.size))
        self.comm.state_import(blob)   # raises, changing nothing, on a bad blob
        self.optim.load_state_dict(state["inner"])
        self.param_groups = self.optim.param_groups
        self.state = self.optim.state
        self.anchor = None if anchor is None else [a.clone().to(p.dtype) for a, p in zip(anchor, self.params)]
        self.outer_buf = None if outer is None else [m.clone().to(p.dtype) for m, p in zip(outer, self.params)]
        if self.outer_momentum > 0 and self.anchor is not None and self.outer_buf is None:
            self.outer_buf = [torch.zeros_like(p) for p in self.params]
        self.steps, self.syncs, self._since = steps, syncs, since
        self._exact = bool(state.get("exact", since == 0))

    # torch.optim.Optimizer's hooks that do not apply to a wrapper
    def add_param_group(self, param_group: Dict[str, Any]) -> None:
        """Refused (NotImplementedError): give the inner optimizer all its
        parameter groups before wrapping it."""
        raise NotImplementedError("LocalStepsOptimizer: add parameter groups to the inner optimizer before "
                                  "wrapping it")

    def close(self) -> None:
        """Wait for an average in flight and close the Comm the optimizer
        created (one it was given stays open)."""
        if self._pending is not None and self._pending[0] is not None:
            self._pending[0].wait()
            self._pending[0].free()
        self._pending = None
        if self._own_comm:
            self.comm.close()

    def __repr__(self):
        return "<cc_coll.torch.LocalStepsOptimizer %s H=%d step %d syncs %d>" % (
            self.method.name.lower(), self.local_steps, self.steps, self.syncs)


def optimizer_hook(optimizer: Any, bucket: GradBucket) -> HookFuture:
    """DDP's communication hook for the optimizers of cc_coll.torch that
    communicate themselves (LocalStepsOptimizer, CompressedAdam):
    ddp.register_comm_hook(opt, optimizer_hook). Where
    optimizer.averaging_gradients() says so (the warm-up's steps) the
    bucket is averaged exactly through optimizer.comm (method NONE, op
    AVG, without blocking); otherwise it is returned as it is, each rank's
    own gradient, for the optimizer to communicate what it chooses. It
    sets optimizer._ddp_hooked, which tells step() that DDP averaged the
    gradients already."""
    buffer = bucket.buffer()
    optimizer._ddp_hooked = True
    fut = torch.futures.Future()
    if not optimizer.averaging_gradients():
        fut.set_result(buffer)
        return fut
    if buffer.device.type != "cpu" or buffer.dtype not in (torch.float32, torch.float64):
        raise TypeError("optimizer_hook: the bucket is a %s %s tensor; it takes float32 and float64 CPU buckets"
                        % (buffer.device.type, buffer.dtype))
    request = optimizer.comm.iallreduce(_flat_view(buffer), op="avg", method="none")

    def finish(f):
        f.value()
        request.free()
        return buffer

    return request.to_torch_future().then(finish)
