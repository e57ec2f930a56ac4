# SPDX-License-Identifier: BSD-3-Clause
"""Optimizers with compressed synchronous steps: CompressedAdam (the 1-bit
Adam / 0/1 Adam family: exact AdamW for a warm-up, then the second moment
frozen and the momentum averaged through a libcc_coll method) and DGCSGD
(Deep Gradient Compression's momentum correction, momentum factor masking,
local gradient clipping and density ramp for momentum SGD). Both keep one
optimizer step per global batch and replicas bit-identical: every value
that reaches the parameters is a result of the library's allreduce, the
same bits on every rank. They follow LocalStepsOptimizer's protocol
(cc_coll/_local_steps.py): `.comm`, averaging_gradients(step=None), the
`_ddp_hooked` flag of optimizer_hook, and its checkpoint conventions.
"""

import collections.abc
import math
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np
import torch

from ._args import _enum_arg
from ._comm import Comm
from ._methods import Method, MethodCap, method_names, methods_with
from ._params import Params, _matrix_shape
from ._local_steps import _flat_view, _int_at_least, _real_in, average_gradients
from ._types import MethodLike

__all__ = ["CompressedAdam", "ADAM_KEY_BASE", "DGCSGD", "DGC_KEY_BASE"]

#: The ef_keys of a CompressedAdam start here ("ca" in the high bytes): key
#: ADAM_KEY_BASE + i names the residual of the i-th parameter (counted over
#: the parameter groups in order).
ADAM_KEY_BASE = 0x6361 << 48
#: The ef_keys of a DGCSGD start here ("cd"): key DGC_KEY_BASE + i holds the
#: i-th parameter's accumulated velocity (DGC's v).
DGC_KEY_BASE = 0x6364 << 48

_ADAM_FORMAT = "cc_coll.torch.CompressedAdam/1"
_DGC_FORMAT = "cc_coll.torch.DGCSGD/1"
# AdamW's first-moment update as the installed PyTorch writes it, so that the
# exact steps stay bit-identical to torch.optim.AdamW(foreach=False): 1.x
# m beta1 + g (1 - beta1), from 2.0 m.lerp_(g, 1 - beta1), which rounds
# differently.
_MOMENT_BY_LERP = int(torch.__version__.split(".")[0]) >= 2


def _adamw_moment(m, g, beta1):
    if _MOMENT_BY_LERP:
        m.lerp_(g, 1 - beta1)
    else:
        m.mul_(beta1).add_(g, alpha=1 - beta1)


_MATRIX_RATE = 2.0      # min_compression_rate of the matrix (LOWRANK) calls (PyTorch's default)


def _choice(value, choices, what):
    if not isinstance(value, str) or value.strip().lower() not in choices:
        raise ValueError("%s must be one of %s, not %r" % (what, ", ".join(repr(c) for c in choices), value))
    return value.strip().lower()


def _method_arg(method, without, who):
    """The Method `method` names, one of the methods without the
    capabilities `without`."""
    m = _enum_arg(Method, method, "method")
    if not isinstance(m, Method) or m.caps & without:
        raise ValueError("method = %r: %s averages with %s" % (method, who,
                                                                 method_names(methods_with(without=without))))
    return m


def _real_at_least(value, low, what, open_low=False):
    return _real_in(value, low, math.inf, what, low_open=open_low)


class _SelfCommunicating(torch.optim.Optimizer):
    """What CompressedAdam and DGCSGD share: the Comm, the parameter checks,
    the exact gradient average of the dense steps, the per-parameter
    compression choice, close()."""

    _who = "optimizer"

    def _setup(self, comm, policy, key_base):
        if policy is not None and not callable(policy):
            raise TypeError("policy must be None or a callable policy(param, param) -> bool, not %r" % (policy,))
        self.policy = policy
        self.key_base = _int_at_least(key_base, 0, "key_base")
        self.params = [p for g in self.param_groups for p in g["params"]]
        if self.key_base + len(self.params) > 1 << 64:
            raise ValueError("key_base = %r leaves no room for %d keys below 2**64" % (key_base, len(self.params)))
        for i, p in enumerate(self.params):
            if p.device.type != "cpu" or p.dtype not in (torch.float32, torch.float64) or not p.is_contiguous():
                raise TypeError("parameter %d: %s takes contiguous float32 or float64 CPU parameters, not %s %s%s"
                                % (i, self._who, p.device.type, p.dtype,
                                   "" if p.is_contiguous() else " (not contiguous)"))
        # Created last: every argument check above raises before this
        # collective call, alike on every rank.
        self._own_comm = not isinstance(comm, Comm)
        self.comm = Comm(comm) if self._own_comm else comm
        self._ddp_hooked = False     # optimizer_hook saw a bucket this step
        self._initialized = True

    def add_param_group(self, param_group: Dict[str, Any]) -> None:
        """torch.optim.Optimizer's, while the constructor adds its groups;
        refused afterwards (NotImplementedError): the residuals are keyed by
        parameter index, so every group goes to the constructor."""
        if getattr(self, "_initialized", False):
            raise NotImplementedError("%s: give every parameter group to the constructor (the residuals are keyed "
                                      "by parameter index)" % self._who)
        super().add_param_group(param_group)

    def _grad(self, p):
        return p.grad if p.grad is not None else torch.zeros_like(p)

    def _policy_says(self, p):
        if self.policy is not None:
            return bool(self.policy(p, p))
        return p.dim() > 1 and p.numel() > 0

    def _groups_state(self):
        return [{k: v for k, v in g.items() if k != "params"} for g in self.param_groups]

    def _check_common(self, state, fmt):
        if not isinstance(state, collections.abc.Mapping) or state.get("format") != fmt:
            raise ValueError("not a %s state dict" % fmt)
        if (state.get("rank"), state.get("size")) != (self.comm.rank, self.comm.size):
            raise ValueError("the state was saved by rank %s of %s ranks, not rank %d of %d"
                             % (state.get("rank"), state.get("size"), self.comm.rank, self.comm.size))
        groups = state["param_groups"]
        if not isinstance(groups, (list, tuple)) or len(groups) != len(self.param_groups) \
                or [int(g["n_params"]) for g in groups] != [len(g["params"]) for g in self.param_groups]:
            raise ValueError("the saved parameter groups do not match this optimizer's")
        return groups

    @staticmethod
    def _tensor_like(saved, p, what, rows=False):
        shape = (p.shape[0],) if rows else tuple(p.shape)
        if not isinstance(saved, torch.Tensor) or tuple(saved.shape) != shape:
            raise ValueError("%s does not match its parameter's shape %s" % (what, shape))
        return saved.detach().clone().to(torch.bool if rows else p.dtype).contiguous()

    def _restore_groups(self, groups):
        for g, saved in zip(self.param_groups, groups):
            for k, v in saved.items():
                if k not in ("params", "n_params"):
                    g[k] = v

    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        """One optimizer step: the subclass's exact step on the steps that
        average the gradients exactly (averaging_gradients(); without DDP's
        optimizer_hook the gradients are averaged here first), its
        compressed step otherwise."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if self.averaging_gradients():
            if not self._ddp_hooked:
                average_gradients(self.comm, self.params)
            self._exact_step(self.steps)
        else:
            self._compressed_step(self.steps)
        self._ddp_hooked = False
        self.steps += 1
        return loss

    def close(self) -> None:
        """Close the Comm the optimizer created (one it was given stays open)."""
        if self._own_comm:
            self.comm.close()


class CompressedAdam(_SelfCommunicating):
    """AdamW (decoupled weight decay) with compressed momentum after a
    warm-up, in the spirit of 1-bit Adam and 0/1 Adam, with synchronous
    semantics (one optimizer step per global batch):

        opt = CompressedAdam(model.parameters(), cc_coll.Comm(MPI.COMM_WORLD), lr=1e-3,
                             freeze_step=100, method="topk", density=0.05)
        ddp.register_comm_hook(opt, optimizer_hook)   # with DDP; without it, nothing
        for x, y in data:
            opt.zero_grad(); loss_fn(ddp(x), y).backward(); opt.step()

    Phases, counted in calls of step() (step s is the (s+1)-th call):
    - s < freeze_step (the warm-up): the gradients are averaged exactly
      (method NONE, op AVG; by optimizer_hook under DDP, else by step()
      itself) and AdamW steps on them: bit-identical to
      torch.optim.AdamW(foreach=False) with the same hyperparameters;
    - at freeze_step the second moment v is frozen: the steps after use
      v_hat = v / (1 - beta2**n), n the number of updates v has had (the
      bias-corrected value at the freeze);
    - s >= freeze_step: each rank forms its local momentum
      u_i = beta1 m + (1 - beta1) g_i from its own, unaveraged gradient,
      and m becomes the average of the u_i through `method`, with the
      library's error feedback (residual per parameter, ef_key key_base +
      parameter index; one Comm.allreduce_group over all parameters per
      step; 1-D parameters and those `policy` rejects go exactly, method
      NONE); then p <- p (1 - lr wd) - lr m_hat / (sqrt(v_hat) + eps),
      m_hat = m / (1 - beta1**(s+1)) as AdamW's. m is a result of the
      allreduce, the same on every rank, so replicas stay bit-identical.

    refresh="exponential" (0/1 Adam): the steps s = freeze_step 2**k
    (k >= 1) are dense: averaging_gradients() is True for them (so
    optimizer_hook averages under DDP), v is updated from the exact average
    (v = beta2 v + (1 - beta2) g**2, its update count n grows by one) and
    frozen again, and the step is the warm-up's exact AdamW step (m from the
    exact average too). The library residuals carry over such a step.

    mask_zero_rows=True (DeepSpeed 1-bit Adam v2's momentum masks): for a
    parameter of two or more dimensions (rows along dim 0), the rows whose
    exact averaged gradient was zero at every warm-up step (unused embedding
    rows) hold m, the local momentum sent, and therefore the residual, at
    zero after the freeze (refresh steps included: their m is masked too).
    The mask comes from exact averages, identical on every rank.

    estimate="ef21" (EF21-style: a dense estimate without EF's bursts):
    instead of the library's error feedback each rank keeps a local
    estimate h_i and all ranks a global estimate H (both 0 at the freeze,
    H identical everywhere). Per step: c_i = C(u_i - h_i), h_i += c_i,
    H += mean_i(c_i) (the allreduce's result), m = H. The library returns
    only the mean, so c_i is read back through error feedback: before the
    call the tensor's residual is dropped (Comm.ef_reset under its ef_key),
    the call runs with ef=True on that fresh residual, and afterwards
    Comm.ef_residual gives e = (u_i - h_i) - c_i (for float32 and float64
    exactly: TOPK leaves e zero at the kept indices and the input
    elsewhere, SKETCH likewise), so c_i = (u_i - h_i) - e. The residual
    stays until the next step (h_i + e = u_i). LOWRANK is the exception: its
    c_i is the global approximation M^, the same on every rank and equal to
    the result, so it runs with ef=False (keeping warm start) and
    c_i = the result. A refresh step sets h_i = H = m (its exact m). The
    argument ef is not used with ef21.

    params       -- parameters or parameter groups (lr, betas, eps,
                    weight_decay may be set per group); contiguous float32
                    or float64 CPU tensors
    comm         -- a cc_coll.Comm, or an mpi4py communicator (the
                    optimizer creates a Comm and close() closes it)
    freeze_step  -- warm-up steps (int >= 1)
    method       -- "none" (exact throughout), "topk", "sketch", "lowrank"
    density      -- TOPK and SKETCH: the kept fraction, (0, 1]
    rank         -- LOWRANK: the rank; parameters are viewed as
                    (rows, numel // rows), warm start on, start_iter 0,
                    min_compression_rate 2; a matrix that this rate test
                    rejects goes exactly (method NONE)
    ef           -- the library's error feedback (estimate "momentum")
    policy       -- None (parameters of 2+ dimensions compressed) or a
                    callable policy(param, param) -> bool (LayerPolicy and LayerPolicy.for_model fit)
    seed         -- SKETCH's hash seed, LOWRANK's initial-Q seed (None: the
                    communicator's configuration)
    key_base     -- where the ef_keys start (ADAM_KEY_BASE)

    Counters: steps (step() calls), v_updates (updates v has had).
    state_dict()/load_state_dict() save and restore m, v, masks, h, H, the
    counters and the communicator's compression state so that a resumed
    run is bit-identical. Every rank must construct it alike and call
    step() the same number of times.
    """

    _who = "CompressedAdam"

    def __init__(self, params: Any, comm: Any, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, freeze_step: int = 100, method: MethodLike = "topk",
                 density: float = 0.05, rank: int = 4, ef: bool = True, refresh: str = "none",
                 policy: Optional[Callable[..., bool]] = None, mask_zero_rows: bool = False,
                 estimate: str = "momentum", key_base: int = ADAM_KEY_BASE, seed: Optional[int] = None) -> None:
        self.method = _method_arg(method, MethodCap.SELECTS, "CompressedAdam")
        self.freeze_step = _int_at_least(freeze_step, 1, "freeze_step")
        self.density = _real_in(density, 0.0, 1.0, "density", low_open=True)
        self.rank = _int_at_least(rank, 1, "rank")
        self.refresh = _choice(refresh, ("none", "exponential"), "refresh")
        self.estimate = _choice(estimate, ("momentum", "ef21"), "estimate")
        self.mask_zero_rows = bool(mask_zero_rows)
        self.ef = bool(ef)
        defaults = self._hyper(dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        super().__init__(params, defaults)
        for i, g in enumerate(self.param_groups):
            self._hyper(g, "param_groups[%d]: " % i)
        fields = dict(method=self.method, ef=self.ef, seed=seed)
        if self.method.caps & MethodCap.MATRIX:
            fields.update(start_iter=0, warm_start=True, min_compression_rate=_MATRIX_RATE)
        self._base_params = Params(**fields)   # checks seed's type
        self._setup(comm, policy, key_base)
        self._compress = [self._compressible(p) for p in self.params]
        self._group_of = [g for g in self.param_groups for _ in g["params"]]
        for i, p in enumerate(self.params):
            st = self.state[p]
            st["exp_avg"] = torch.zeros_like(p)
            st["exp_avg_sq"] = torch.zeros_like(p)
            if self.mask_zero_rows and p.dim() > 1:
                st["rows_seen"] = torch.zeros(p.shape[0], dtype=torch.bool)
            if self.estimate == "ef21" and self._compress[i]:
                st["h"] = torch.zeros_like(p)
                st["H"] = torch.zeros_like(p)
        self._work = [torch.empty_like(p) if self.estimate == "ef21" and c else None
                      for p, c in zip(self.params, self._compress)]
        self._out = [torch.empty_like(p) if self.estimate == "ef21" and c else None
                     for p, c in zip(self.params, self._compress)]
        self.steps = 0
        self.v_updates = 0

    @staticmethod
    def _hyper(g, where=""):
        g["lr"] = _real_at_least(g["lr"], 0.0, where + "lr")
        betas = g["betas"]
        if isinstance(betas, (str, bytes)) or not isinstance(betas, collections.abc.Sequence) or len(betas) != 2:
            raise ValueError("%sbetas must be a pair (beta1, beta2), not %r" % (where, betas))
        b = tuple(_real_in(x, 0.0, 1.0, where + "betas[%d]" % j) for j, x in enumerate(betas))
        if b[0] >= 1.0 or b[1] >= 1.0:
            raise ValueError("%sbetas must lie in [0, 1), not %r" % (where, betas))
        g["betas"] = b
        g["eps"] = _real_at_least(g["eps"], 0.0, where + "eps")
        g["weight_decay"] = _real_at_least(g["weight_decay"], 0.0, where + "weight_decay")
        return g

    def _compressible(self, p):
        if self.method == Method.NONE or p.numel() == 0 or not self._policy_says(p):
            return False
        if self.method.caps & MethodCap.MATRIX:
            if p.dim() < 2:
                return False
            rows, cols, r = _matrix_shape(p.numel(), (p.shape[0], p.numel() // p.shape[0]), self.rank)
            return (rows + cols) * r * _MATRIX_RATE < rows * cols
        return True

    # -- schedule -----------------------------------------------------------

    def is_refresh(self, step: int) -> bool:
        """Whether step `step` (after the warm-up) is a refresh step of
        refresh="exponential": freeze_step * 2**k, k >= 1."""
        if self.refresh != "exponential" or step < 2 * self.freeze_step or step % self.freeze_step:
            return False
        q = step // self.freeze_step
        return q & (q - 1) == 0

    def averaging_gradients(self, step: Optional[int] = None) -> bool:
        """Whether step `step` (default: the coming one) averages the
        gradients exactly: the warm-up's steps and the refresh steps."""
        s = self.steps if step is None else step
        return s < self.freeze_step or self.is_refresh(s)

    @property
    def frozen(self) -> bool:
        """Whether v is frozen (the warm-up is over)."""
        return self.steps >= self.freeze_step

    def _key(self, i):
        return self.key_base + i

    def _row_mask(self, i, p):
        """The rows to hold at zero (a bool (rows,) tensor), or None."""
        if not self.mask_zero_rows or p.dim() < 2:
            return None
        return ~self.state[p]["rows_seen"]

    @staticmethod
    def _apply_mask(t, mask):
        if mask is not None:
            t.view(t.shape[0], -1).masked_fill_(mask.unsqueeze(1), 0)

    # -- the step ------------------------------------------------------------

    def _update(self, p, m, v, group, step):
        """AdamW's parameter update (torch 1.13's _single_tensor_adamw)
        with v's bias correction from its update count."""
        lr, eps = group["lr"], group["eps"]
        beta1, beta2 = group["betas"]
        bias_correction1 = 1 - beta1 ** float(step + 1)
        bias_correction2 = 1 - beta2 ** float(self.v_updates)
        denom = (v.sqrt() / math.sqrt(bias_correction2)).add_(eps)
        p.addcdiv_(m, denom, value=-(lr / bias_correction1))

    def _exact_step(self, s):
        self.v_updates += 1
        warmup = s < self.freeze_step
        for i, p in enumerate(self.params):
            group = self._group_of[i]
            st = self.state[p]
            g = self._grad(p)
            m, v = st["exp_avg"], st["exp_avg_sq"]
            beta1, beta2 = group["betas"]
            p.mul_(1 - group["lr"] * group["weight_decay"])
            _adamw_moment(m, g, beta1)
            v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
            if "rows_seen" in st:
                if warmup:
                    st["rows_seen"] |= (g.reshape(g.shape[0], -1) != 0).any(dim=1)
                else:
                    self._apply_mask(m, self._row_mask(i, p))
            if not warmup and "H" in st:
                st["h"].copy_(m)
                st["H"].copy_(m)
            self._update(p, m, v, group, s)

    def _compressed_step(self, s):
        ef21 = self.estimate == "ef21"
        arrays, outs, plist = [], [], []
        for i, p in enumerate(self.params):
            group = self._group_of[i]
            beta1 = group["betas"][0]
            st = self.state[p]
            g = self._grad(p)
            mask = self._row_mask(i, p)
            if ef21 and self._compress[i]:
                x = self._work[i]                         # u_i - h_i
                torch.mul(st["exp_avg"], beta1, out=x)
                x.add_(g, alpha=1 - beta1)
                self._apply_mask(x, mask)
                x.sub_(st["h"])
                arrays.append(_flat_view(x))
                outs.append(_flat_view(self._out[i]))
                if self.method.caps & MethodCap.MATRIX:
                    plist.append(self._method_params(i, p, ef=False))
                else:
                    self.comm.ef_reset(arrays[-1], ef_key=self._key(i))
                    plist.append(self._method_params(i, p, ef=True))
            else:
                m = st["exp_avg"]                          # u_i, averaged in place into m
                m.mul_(beta1).add_(g, alpha=1 - beta1)
                self._apply_mask(m, mask)
                arrays.append(_flat_view(m))
                outs.append(None)
                plist.append(self._method_params(i, p) if self._compress[i] else Params(method="none"))
        if arrays:
            self.comm.allreduce_group(arrays, recvbufs=outs, op="avg", params=plist)
        for i, p in enumerate(self.params):
            st = self.state[p]
            mask = self._row_mask(i, p)
            m = st["exp_avg"]
            if ef21 and self._compress[i]:
                x, out = self._work[i], self._out[i]
                if self.method.caps & MethodCap.MATRIX:
                    c = out
                else:
                    e = self.comm.ef_residual(arrays[i], ef_key=self._key(i))
                    c = x.sub_(torch.from_numpy(e).view(p.shape).to(p.dtype))
                st["h"].add_(c)
                st["H"].add_(out)
                self._apply_mask(st["H"], mask)
                m.copy_(st["H"])
            else:
                self._apply_mask(m, mask)
            group = self._group_of[i]
            p.mul_(1 - group["lr"] * group["weight_decay"])
            self._update(p, m, st["exp_avg_sq"], group, s)

    def _method_params(self, i, p, ef=None):
        fields = dict(ef_key=self._key(i))
        if ef is not None:
            fields["ef"] = ef
        if self.method.caps & MethodCap.MATRIX:
            fields.update(rank=self.rank, shape=(p.shape[0], p.numel() // p.shape[0]))
        else:
            fields["density"] = self.density
        return self._base_params.replace(**fields)

    # -- checkpoints ----------------------------------------------------------

    def state_dict(self) -> Dict[str, Any]:
        """This rank's state: the hyperparameters of the groups, per
        parameter (by index) m, v, the warm-up's row record, h and H, the
        counters, and the Comm's compression state (the residuals)."""
        state = {}
        for i, p in enumerate(self.params):
            st = self.state[p]
            state[i] = {k: st[k].clone() for k in ("exp_avg", "exp_avg_sq", "rows_seen", "h", "H") if k in st}
        groups = self._groups_state()
        for g, pg in zip(groups, self.param_groups):
            g["n_params"] = len(pg["params"])
        return {
            "format": _ADAM_FORMAT,
            "config": {"method": self.method.name.lower(), "estimate": self.estimate,
                       "mask_zero_rows": self.mask_zero_rows, "freeze_step": self.freeze_step,
                       "refresh": self.refresh, "compress": list(self._compress)},
            "param_groups": groups,
            "state": state,
            "steps": self.steps, "v_updates": self.v_updates, "frozen": self.frozen,
            "rank": self.comm.rank, "size": self.comm.size,
            "comm_state": self.comm.state_export(),
        }

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restore what state_dict() saved on this rank: all or nothing (a
        dict of another format, configuration or shape raises ValueError, a
        corrupt compression state the Comm's Error, and nothing changes)."""
        try:
            groups = self._check_common(state, _ADAM_FORMAT)
            config = state["config"]
            mine = {"method": self.method.name.lower(), "estimate": self.estimate,
                    "mask_zero_rows": self.mask_zero_rows, "compress": list(self._compress)}
            for k, v in mine.items():
                if config[k] != v:
                    raise ValueError("the state was saved with %s = %r, this optimizer has %r" % (k, config[k], v))
            steps, v_updates = int(state["steps"]), int(state["v_updates"])
            if steps < 0 or not 0 <= v_updates <= steps:
                raise ValueError("steps %d and v_updates %d are inconsistent" % (steps, v_updates))
            saved = state["state"]
            new = []
            for i, p in enumerate(self.params):
                entry, st = saved[i], self.state[p]
                if set(entry) != {k for k in ("exp_avg", "exp_avg_sq", "rows_seen", "h", "H") if k in st}:
                    raise ValueError("parameter %d: the saved entries %s do not match" % (i, sorted(entry)))
                new.append({k: self._tensor_like(t, p, "parameter %d's %s" % (i, k), rows=(k == "rows_seen"))
                            for k, t in entry.items()})
            blob = state["comm_state"]
        except (KeyError, TypeError, AttributeError, IndexError) as exc:
            raise ValueError("malformed %s state dict: %s" % (_ADAM_FORMAT, exc)) from exc
        self.comm.state_import(blob)   # raises, changing nothing, on a bad blob
        self._restore_groups(groups)
        for p, entry in zip(self.params, new):
            self.state[p].update(entry)
        self.steps, self.v_updates = steps, v_updates

    def __repr__(self):
        return "<cc_coll.torch.CompressedAdam %s %s freeze_step=%d%s step %d>" % (
            self.method.name.lower(), self.estimate, self.freeze_step,
            " refresh=exponential" if self.refresh == "exponential" else "", self.steps)


class DGCSGD(_SelfCommunicating):
    """Momentum SGD with Deep Gradient Compression's corrections (Lin et
    al., arXiv 1712.01887), synchronous (one step per global batch):

    - momentum correction: each rank keeps its local velocity
      u_i = momentum u_i + g_i and accumulates v_i += u_i (Nesterov:
      v_i += g_i + momentum u_i); v_i is what is sent, through TOPK or
      SKETCH. The library holds v_i: the call runs with ef=True under the
      parameter's ef_key (key_base + index) on the input u_i, so the
      library forms g' = u_i + e = v_i and keeps e = v_i - sent, which is
      DGC's accumulation after the sent coordinates are cleared. What was
      sent is read back as (u_i + e_before) - e_after (exact for float32
      and float64: e_after is zero at the kept indices, g' elsewhere);
    - momentum factor masking: u_i is zeroed at the coordinates where a
      nonzero value was sent (the residual there is already zero);
    - local gradient clipping: each rank scales its own gradient to a
      total norm of at most clip_norm / sqrt(ranks) before it enters the
      velocity (as torch.nn.utils.clip_grad_norm_, over all parameters);
      weight decay (weight_decay p) is added after clipping;
    - warm-up and density ramp: the first warmup_steps steps are exact
      momentum SGD on the exactly averaged gradient (torch.optim.SGD's
      update; clip_norm, if any, applies to the average), the velocity then
      the same on every rank; over the ramp_steps steps after them the
      density falls geometrically from ramp_density to density.

    Parameters of one dimension and those `policy` rejects are averaged
    exactly (method NONE): their update is the average of the u_i (or
    Nesterov's term), without accumulation or masking. Every step
    p -= lr * (the average of what was sent), the same on every rank.

    params, comm -- as CompressedAdam's (lr, momentum, weight_decay,
                    nesterov may be set per group)
    method       -- "none", "topk" or "sketch"
    density      -- the kept fraction after the ramp, (0, 1]
    clip_norm    -- None or the global clipping norm (> 0)
    warmup_steps, ramp_steps -- ints >= 0
    ramp_density -- the ramp's starting density, (0, 1]
    key_base     -- where the ef_keys start (DGC_KEY_BASE)

    Counters: steps. state_dict()/load_state_dict() as CompressedAdam's
    (format "cc_coll.torch.DGCSGD/1"); v_i travels in the Comm's state.
    """

    _who = "DGCSGD"

    def __init__(self, params: Any, comm: Any, lr: float, momentum: float = 0.9, weight_decay: float = 0.0,
                 nesterov: bool = False, method: MethodLike = "topk", density: float = 0.01,
                 clip_norm: Optional[float] = None, warmup_steps: int = 0, ramp_steps: int = 0,
                 ramp_density: float = 0.25, policy: Optional[Callable[..., bool]] = None,
                 key_base: int = DGC_KEY_BASE) -> None:
        self.method = _method_arg(method, MethodCap.SELECTS | MethodCap.MATRIX, "DGCSGD")
        self.density = _real_in(density, 0.0, 1.0, "density", low_open=True)
        self.ramp_density = _real_in(ramp_density, 0.0, 1.0, "ramp_density", low_open=True)
        self.warmup_steps = _int_at_least(warmup_steps, 0, "warmup_steps")
        self.ramp_steps = _int_at_least(ramp_steps, 0, "ramp_steps")
        self.clip_norm = None if clip_norm is None else _real_at_least(clip_norm, 0.0, "clip_norm", open_low=True)
        defaults = self._hyper(dict(lr=lr, momentum=momentum, weight_decay=weight_decay, nesterov=nesterov))
        super().__init__(params, defaults)
        for i, g in enumerate(self.param_groups):
            self._hyper(g, "param_groups[%d]: " % i)
        self._setup(comm, policy, key_base)
        self._compress = [self.method != Method.NONE and p.numel() > 0 and self._policy_says(p) for p in self.params]
        self._group_of = [g for g in self.param_groups for _ in g["params"]]
        for p in self.params:
            self.state[p]["momentum_buffer"] = torch.zeros_like(p)
        self._x = [torch.empty_like(p) for p in self.params]
        self._out = [torch.empty_like(p) for p in self.params]
        self._accum = [None] * len(self.params)   # cached residuals (v_i) after the last call
        self.steps = 0
        # What this rank sent at the last compressed step, per compressed
        # parameter: a view of a scratch buffer, valid until the next step().
        self.last_sent = [None] * len(self.params)

    @staticmethod
    def _hyper(g, where=""):
        g["lr"] = _real_at_least(g["lr"], 0.0, where + "lr")
        g["momentum"] = _real_in(g["momentum"], 0.0, 1.0, where + "momentum")
        g["weight_decay"] = _real_at_least(g["weight_decay"], 0.0, where + "weight_decay")
        if not isinstance(g["nesterov"], (bool, np.bool_)):
            raise TypeError("%snesterov must be True or False, not %r" % (where, g["nesterov"]))
        g["nesterov"] = bool(g["nesterov"])
        if g["nesterov"] and g["momentum"] == 0:
            raise ValueError("%snesterov needs a momentum > 0" % where)
        return g

    def averaging_gradients(self, step: Optional[int] = None) -> bool:
        """Whether step `step` (default: the coming one) averages the
        gradients exactly: the warm-up's steps."""
        return (self.steps if step is None else step) < self.warmup_steps

    def density_at(self, step: int) -> float:
        """TOPK's and SKETCH's density at step `step`: ramp_density at the
        end of the warm-up, falling geometrically to density over
        ramp_steps."""
        if self.ramp_steps == 0:
            return self.density
        p = min(1.0, max(0.0, (step - self.warmup_steps) / self.ramp_steps))
        if p >= 1.0:
            return self.density
        return min(1.0, self.ramp_density ** (1.0 - p) * self.density ** p)

    def _clip_coef(self, grads, max_norm):
        if max_norm is None or not grads:
            return 1.0
        total = torch.norm(torch.stack([torch.norm(g.detach(), 2.0).to(torch.float64) for g in grads]), 2.0)
        coef = max_norm / (float(total) + 1e-6)
        return coef if coef < 1.0 else 1.0

    def _direction(self, i, p, g, coef):
        """u_i updated in place from the (clipped) gradient; returns what
        enters the average (u_i, or Nesterov's g + momentum u_i) in the
        scratch buffer."""
        group = self._group_of[i]
        d = self._x[i]
        if coef != 1.0:
            torch.mul(g, coef, out=d)
        else:
            d.copy_(g)
        if group["weight_decay"] != 0:
            d.add_(p, alpha=group["weight_decay"])
        u = self.state[p]["momentum_buffer"]
        u.mul_(group["momentum"]).add_(d)
        if group["nesterov"]:
            d.add_(u, alpha=group["momentum"])
        else:
            d.copy_(u)
        return d

    def _exact_step(self, s):
        grads = [self._grad(p) for p in self.params]
        coef = self._clip_coef(grads, self.clip_norm)
        for i, (p, g) in enumerate(zip(self.params, grads)):
            d = self._direction(i, p, g, coef)
            p.add_(d, alpha=-self._group_of[i]["lr"])

    def _residual(self, i, p, flat):
        e = self.comm.ef_residual(flat, ef_key=self.key_base + i)
        return torch.from_numpy(e).view(p.shape).to(p.dtype)

    def _compressed_step(self, s):
        density = self.density_at(s)
        grads = [self._grad(p) for p in self.params]
        threshold = None if self.clip_norm is None else self.clip_norm / math.sqrt(self.comm.size)
        coef = self._clip_coef(grads, threshold)
        arrays, outs, plist = [], [], []
        for i, (p, g) in enumerate(zip(self.params, grads)):
            d = self._direction(i, p, g, coef)
            arrays.append(_flat_view(d))
            outs.append(_flat_view(self._out[i]))
            if self._compress[i]:
                if self._accum[i] is None:
                    self._accum[i] = self._residual(i, p, arrays[-1])
                plist.append(Params(method=self.method, density=density, ef=True, ef_key=self.key_base + i))
            else:
                plist.append(Params(method="none"))
        if arrays:
            self.comm.allreduce_group(arrays, recvbufs=outs, op="avg", params=plist)
        for i, p in enumerate(self.params):
            if self._compress[i]:
                e_new = self._residual(i, p, arrays[i])
                sent = self._x[i].add_(self._accum[i]).sub_(e_new)   # (u_i + v_before) - v_after
                self.state[p]["momentum_buffer"].masked_fill_(sent != 0, 0)
                self._accum[i] = e_new
                self.last_sent[i] = sent
            p.add_(self._out[i], alpha=-self._group_of[i]["lr"])

    # -- checkpoints ----------------------------------------------------------

    def state_dict(self) -> Dict[str, Any]:
        """This rank's state: the groups' hyperparameters, the velocities
        u_i, the step counter and the Comm's compression state (which
        holds the accumulations v_i)."""
        groups = self._groups_state()
        for g, pg in zip(groups, self.param_groups):
            g["n_params"] = len(pg["params"])
        return {
            "format": _DGC_FORMAT,
            "config": {"method": self.method.name.lower(), "compress": list(self._compress)},
            "param_groups": groups,
            "state": {i: {"momentum_buffer": self.state[p]["momentum_buffer"].clone()}
                      for i, p in enumerate(self.params)},
            "steps": self.steps,
            "rank": self.comm.rank, "size": self.comm.size,
            "comm_state": self.comm.state_export(),
        }

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restore what state_dict() saved on this rank: all or nothing, as
        CompressedAdam.load_state_dict."""
        try:
            groups = self._check_common(state, _DGC_FORMAT)
            config = state["config"]
            if config["method"] != self.method.name.lower() or list(config["compress"]) != self._compress:
                raise ValueError("the state was saved with another method or compression policy")
            steps = int(state["steps"])
            if steps < 0:
                raise ValueError("steps = %d" % steps)
            bufs = [self._tensor_like(state["state"][i]["momentum_buffer"], p, "parameter %d's momentum_buffer" % i)
                    for i, p in enumerate(self.params)]
            blob = state["comm_state"]
        except (KeyError, TypeError, AttributeError, IndexError) as exc:
            raise ValueError("malformed %s state dict: %s" % (_DGC_FORMAT, exc)) from exc
        self.comm.state_import(blob)
        self._restore_groups(groups)
        for p, b in zip(self.params, bufs):
            self.state[p]["momentum_buffer"] = b
        self._accum = [None] * len(self.params)
        self.last_sent = [None] * len(self.params)
        self.steps = steps

    def __repr__(self):
        return "<cc_coll.torch.DGCSGD %s density=%g step %d>" % (self.method.name.lower(), self.density, self.steps)
