# SPDX-License-Identifier: BSD-3-Clause
"""cc_coll.torch: PyTorch DDP communication hooks over libcc_coll.

    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from mpi4py import MPI
    import cc_coll
    import cc_coll.torch as cct

    dist.init_process_group("gloo", ...)        # DDP's own traffic (broadcasts)
    model = DDP(net)
    state = cct.CompressionState(cc_coll.Comm(MPI.COMM_WORLD), method="lowrank", rank=4)
    model.register_comm_hook(state, cct.compression_hook)

Each hook call posts the library's non-blocking collective (Comm.iallreduce
or Comm.iallreduce_group) on the bucket's gradients and returns a
torch.futures.Future, completed from a helper thread once the request
completes (Request.to_torch_future), whose value is the bucket buffer holding
the average: the backward pass goes on while the library compresses and
communicates. The gradients travel through numpy views of CPU buckets, and
through cc_coll.DeviceArray views of CUDA buckets (the library's device
path, no host copy). See docs/pytorch.md.

Optimizers that communicate themselves live beside the hooks, with
optimizer_hook for DDP: LocalStepsOptimizer (compressed local steps,
cc_coll/_local_steps.py), CompressedAdam (1-bit / 0/1 Adam's frozen
variance with compressed momentum, or an EF21 estimate) and DGCSGD (Deep
Gradient Compression's corrections for momentum SGD), both in
cc_coll/_compressed_adam.py.

This module and the modules it imports are the only ones of the package that
import PyTorch; `import cc_coll` works without it.
"""

import collections
import collections.abc
import logging
import numbers
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

try:
    import torch
except ImportError as _exc:  # pragma: no cover - depends on the installation
    raise ImportError("cc_coll.torch needs PyTorch (torch, torch.distributed), which cannot be imported: %s"
                      % _exc) from _exc

from ._args import _enum_arg
from ._arrays import DeviceArray
from ._comm import Comm
from ._enums import Dtype, Status
from ._errors import Error
from ._methods import Method, MethodCap, may_view_as_matrix, method_names
from ._params import Params
from ._local_steps import LOCAL_KEY_BASE, GradBucket, HookFuture, LocalStepsOptimizer, optimizer_hook
from ._compressed_adam import ADAM_KEY_BASE, DGC_KEY_BASE, DGCSGD, CompressedAdam

__all__ = ["CompressionState", "LayerPolicy", "BucketEntry", "compression_hook", "allreduce_hook",
           "reduce_scatter_hook", "DEFAULT_KEY_BASE", "LocalStepsOptimizer", "optimizer_hook", "LOCAL_KEY_BASE",
           "CompressedAdam", "DGCSGD", "ADAM_KEY_BASE", "DGC_KEY_BASE"]

#: The ef_keys of a CompressionState start here (the high bytes are "cc"), so
#: that they stay clear of small keys an application picks itself. Give two
#: states that share a Comm different key bases.
DEFAULT_KEY_BASE = 0x6363 << 48

# ef_key = key_base + generation << 40 + bucket index << 20 + position, where
# position 0 names the whole bucket (TOPK, SKETCH without a policy) and p + 1
# the bucket's p-th gradient; with a model, a gradient's key is instead
# key_base + _PARAM_GEN << 40 + its parameter's index in model.parameters(),
# and reduce_scatter_hook's key k is key_base + _SHARD_GEN << 40 + k.
_GEN_BITS, _INDEX_BITS, _POS_BITS = 8, 20, 20
_PARAM_GEN = (1 << _GEN_BITS) - 1
_SHARD_GEN = _PARAM_GEN - 1

_STATE_FORMAT = "cc_coll.torch.CompressionState/1"

#: The logger of CompressionState(log_every=N): one INFO record every N steps.
logger = logging.getLogger("cc_coll.torch")


class _Default:
    """The default of a parameter that has a PyTorch spelling too: its value,
    shown as the value itself (help() reads rank=1), and a marker that the
    caller did not pass it."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return repr(self.value)


# CompressionState's parameters that PowerSGDState spells otherwise:
# PyTorch's name -> this state's. (min_compression_rate and warm_start have
# the same name in both.)
TORCH_ALIASES = {
    "matrix_approximation_rank": "rank",
    "start_powerSGD_iter": "start_iter",
    "use_error_feedback": "ef",
}


def _resolve(ours: str, value: Any, theirs: str, alias: Any) -> Tuple[Any, str]:
    """(value, the name it was given under) of parameter `ours` given as
    `value` (a _Default when not passed) and under PyTorch's name `theirs` as
    `alias` (None when not passed): either, or both when they agree;
    ValueError when they differ."""
    if alias is None:
        return (value.value if isinstance(value, _Default) else value), ours
    if not isinstance(value, _Default) and value != alias:
        raise ValueError("CompressionState: %s=%r and %s=%r (PyTorch's name for %s) disagree; give one of them"
                         % (ours, value, theirs, alias, ours))
    return alias, theirs


def _flat_method(method):
    """Whether compression_hook compresses `method` on the flat bucket (a
    lossy method that neither views a tensor as a matrix nor selects),
    rather than gradient by gradient."""
    return not method.caps & (MethodCap.MATRIX | MethodCap.SELECTS)

#: One tensor of a bucket as the hook last sent it (CompressionState.layout):
#: its ef_key (None when it is sent densely: no residual), its offset and
#: element count in the bucket buffer, the shape of the gradient (None for
#: the whole bucket), the Method it went with, and `segments`: the (offset,
#: count) ranges of the bucket buffer in the order the tensor holds them
#: (one range, (offset, count), except for a whole bucket sent in the
#: model's parameter order; its residual is in that order).
BucketEntry = collections.namedtuple("BucketEntry", "ef_key offset count shape method segments")


class LayerPolicy:
    """A layer-selective rule (in the spirit of TAGC's selective
    compression): which gradients of a bucket are compressed and which are
    sent densely.

    LayerPolicy(min_elements=4096, compress_1d=False): a gradient is
    compressed when it has at least `min_elements` elements and, unless
    compress_1d is True, two or more dimensions (biases and norm weights go
    densely: small, and what compressing them saves is not worth their
    error). Called as policy(grad, param) -> bool, like any policy a
    CompressionState takes. LayerPolicy.for_model(model, budget) adds the
    model's embeddings, norms and output layer, kept exact within a byte
    budget.
    """

    def __init__(self, min_elements: int = 4096, compress_1d: bool = False) -> None:
        if isinstance(min_elements, bool) or not isinstance(min_elements, numbers.Integral) or min_elements < 0:
            raise ValueError("min_elements must be an int >= 0, not %r" % (min_elements,))
        self.min_elements = int(min_elements)
        self.compress_1d = bool(compress_1d)
        self.exact_params = None    # for_model: the ids of the parameters kept exact
        self.exact_fraction = 0.0

    def __call__(self, grad: "torch.Tensor", param: Optional["torch.Tensor"] = None) -> bool:
        if self.exact_params is not None and param is not None and id(param) in self.exact_params:
            return False
        return grad.numel() >= self.min_elements and (self.compress_1d or grad.dim() > 1)

    def __repr__(self):
        if self.exact_params is not None:
            return "LayerPolicy(min_elements=%d, compress_1d=%s, %d parameters exact: %.2f%% of the elements)" % (
                self.min_elements, self.compress_1d, len(self.exact_params), 100 * self.exact_fraction)
        return "LayerPolicy(min_elements=%d, compress_1d=%s)" % (self.min_elements, self.compress_1d)

    #: LayerPolicy.for_model's kinds of parameters, in the order it keeps them exact
    EXACT_KINDS = ("bias", "norm", "embedding", "output")

    @classmethod
    def for_model(cls, model: "torch.nn.Module", budget: float = 0.02, exact: Sequence[str] = EXACT_KINDS,
                  min_elements: int = 4096, compress_1d: bool = False) -> "LayerPolicy":
        """A LayerPolicy that also keeps the model's sensitive parameters
        exact (sent densely) within a byte budget: the kinds named in
        `exact`, taken in the order of LayerPolicy.EXACT_KINDS --
        "bias" (every 1-D parameter: biases, norm weights), "norm" (the
        parameters of LayerNorm, GroupNorm and BatchNorm modules),
        "embedding" (nn.Embedding weights), "output" (the weight of the
        model's last nn.Linear, the output layer of a language model) --
        each parameter kept exact while the exact parameters hold at most
        `budget` (a fraction in [0, 1]) of the model's elements; a
        parameter that would pass the budget is compressed instead.
        exact_params (ids) and exact_fraction (the elements kept exact,
        over the model's) say what it chose; every rank must build it from
        the same model."""
        if isinstance(budget, bool) or not isinstance(budget, numbers.Real) or not 0 <= budget <= 1:
            raise ValueError("budget must be a fraction in [0, 1], not %r" % (budget,))
        unknown = [k for k in exact if k not in cls.EXACT_KINDS]
        if isinstance(exact, str) or unknown:
            raise ValueError("exact must be a sequence of %s, not %r" % (", ".join(cls.EXACT_KINDS), exact))
        policy = cls(min_elements=min_elements, compress_1d=compress_1d)
        params = list(model.parameters())
        total = sum(p.numel() for p in params)
        norms = (torch.nn.LayerNorm, torch.nn.GroupNorm, torch.nn.modules.batchnorm._NormBase)
        kinds = {"bias": [p for p in params if p.dim() <= 1],
                 "norm": [p for m in model.modules() if isinstance(m, norms) for p in m.parameters(recurse=False)],
                 "embedding": [m.weight for m in model.modules() if isinstance(m, torch.nn.Embedding)],
                 "output": [m.weight for m in model.modules() if isinstance(m, torch.nn.Linear)][-1:]}
        chosen, used = set(), 0
        for kind in cls.EXACT_KINDS:
            if kind not in exact:
                continue
            for p in kinds[kind]:
                if id(p) in chosen:
                    continue
                if used + p.numel() <= budget * total:
                    chosen.add(id(p))
                    used += p.numel()
        policy.exact_params = frozenset(chosen)
        policy.exact_fraction = used / total if total else 0.0
        return policy


class CompressionState:
    """The state of compression_hook: the communicator, the method and its
    parameters, and the hook's own counters.

    comm      -- a cc_coll.Comm (or an mpi4py communicator, for which the
                 state creates a Comm of its own; close() closes it). It must
                 span the ranks of DDP's process group, in the same order
    method    -- Method or its name: "none" (a plain average), "topk",
                 "sketch", "lowrank" (PowerSGD) or "auto" (per gradient,
                 NONE or the communicator's lossy method, whichever the
                 library's cost model predicts faster; gradients of two or
                 more dimensions get their matrix view, as for LOWRANK)
    density   -- TOPK and SKETCH: the kept fraction, (0, 1]
    rank      -- LOWRANK: the target rank r
    start_iter -- the hook's first start_iter steps average every bucket
                 densely (powerSGD_hook's start_powerSGD_iter): DDP
                 rebuilds its buckets after its first step, so error
                 feedback and warm start should begin later (the default, 2,
                 is the least PyTorch accepts for PowerSGD with either on)
    min_compression_rate -- LOWRANK: compress a matrix only when
                 (rows + cols) * r * rate < rows * cols
    warm_start -- LOWRANK: start each step's power iteration from the
                 previous step's Q
    ef        -- error feedback on (True) or off
    policy    -- None, or a callable policy(grad, param) -> bool deciding
                 per gradient of a bucket whether it is compressed (True) or
                 sent densely (False); it must decide alike on every rank.
                 LayerPolicy() is a ready-made rule. None: TOPK and SKETCH
                 compress the flat bucket as one tensor; LOWRANK compresses
                 every gradient of two or more dimensions (powerSGD_hook's
                 rule, the compression-rate test included)
    sparsifier, load_factor, seed -- SKETCH's (and seed: LOWRANK's initial
                 Q) parameters; None leaves them to the communicator's
                 configuration (the CC_COLL_* environment)
    key_base  -- where this state's ef_keys start (DEFAULT_KEY_BASE)
    ramp_steps, ramp_density, ramp_rank -- a warm-up ramp instead of a
                 switch: over the ramp_steps steps after start_iter the
                 density goes geometrically from ramp_density (default
                 min(1, 8 density)) to density and LOWRANK's rank from
                 ramp_rank (default 4 rank) to rank; 0 (the default): no ramp
    model     -- None, or the module DDP wraps (or the DDP module): names
                 the residuals by parameter instead of by bucket position,
                 so that they survive DDP's rebuilding of its buckets and a
                 restart (see "Checkpoints" in docs/pytorch.md). Each
                 gradient compressed on its own gets the key of its
                 parameter's index in model.parameters(), and a whole
                 bucket is compressed in the model's parameter order (a
                 copy when DDP's bucket holds them in another order)

    log_every -- N > 0: every N steps (when a step's last bucket is
                 posted), rank 0 logs the communicator's statistics since
                 its previous record (Comm.stats(): requests still in flight
                 count in the next) to the logger "cc_coll.torch" at INFO:
                 calls, bytes on the wire and uncompressed, their ratio, the
                 seconds compressing, communicating and decompressing, and
                 for AUTO how many calls it compressed. 0 (the default): no
                 logging

    PyTorch's PowerSGDState names: matrix_approximation_rank (rank),
    start_powerSGD_iter (start_iter), use_error_feedback (ef),
    min_compression_rate and warm_start are accepted for the same settings
    (keywords; giving both spellings with different values is a
    ValueError).

    Counters: iter (the steps the hook has seen, counted at each step's
    last bucket, as powerSGD_hook counts them). state_dict() and
    load_state_dict() save and restore them with the communicator's whole
    compression state.
    """

    def __init__(self, comm: Any, method: Union[Method, int, str] = "topk", density: float = 0.01,
                 rank: int = _Default(1), start_iter: int = _Default(2),  # type: ignore[assignment]
                 min_compression_rate: float = 2.0, warm_start: bool = True,
                 ef: bool = _Default(True),  # type: ignore[assignment]
                 policy: Optional[Callable[..., bool]] = None, sparsifier: Any = None,
                 load_factor: Optional[float] = None, seed: Optional[int] = None, key_base: int = DEFAULT_KEY_BASE,
                 model: Optional["torch.nn.Module"] = None, ramp_steps: int = 0, ramp_density: Optional[float] = None,
                 ramp_rank: Optional[int] = None, *, log_every: int = 0,
                 matrix_approximation_rank: Optional[int] = None, start_powerSGD_iter: Optional[int] = None,
                 use_error_feedback: Optional[bool] = None) -> None:
        rank, rank_name = _resolve("rank", rank, "matrix_approximation_rank", matrix_approximation_rank)
        start_iter, start_name = _resolve("start_iter", start_iter, "start_powerSGD_iter", start_powerSGD_iter)
        ef, _ = _resolve("ef", ef, "use_error_feedback", use_error_feedback)
        if isinstance(log_every, bool) or not isinstance(log_every, numbers.Integral) or log_every < 0:
            raise ValueError("log_every must be an int >= 0 (0: no logging), not %r" % (log_every,))
        self._own_comm = not isinstance(comm, Comm)
        self.comm = Comm(comm) if self._own_comm else comm
        self.method = _enum_arg(Method, method, "method")
        if not isinstance(self.method, Method):
            raise ValueError("method = %r: the hook supports %s" % (method, method_names(Method)))
        self.log_every = int(log_every)
        self._logged: Optional[Any] = None  # the Stats of the last log record
        if isinstance(ramp_steps, bool) or not isinstance(ramp_steps, numbers.Integral) or ramp_steps < 0:
            raise ValueError("ramp_steps must be an int >= 0, not %r" % (ramp_steps,))
        for name, value in (("density", density), ("ramp_density", ramp_density)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Real)
                                      or not 0 < value <= 1):
                raise ValueError("%s must be a number in (0, 1], not %r" % (name, value))
        for name, value in ((rank_name, rank), ("ramp_rank", ramp_rank)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral)
                                      or value < 1):
                raise ValueError("%s must be an int >= 1, not %r" % (name, value))
        self.ramp_steps = int(ramp_steps)
        self.ramp_density = min(1.0, 8 * density) if ramp_density is None else float(ramp_density)
        self.ramp_rank = 4 * rank if ramp_rank is None else int(ramp_rank)
        if policy is not None and not callable(policy):
            raise TypeError("policy must be None or a callable policy(grad, param) -> bool, not %r" % (policy,))
        if isinstance(start_iter, bool) or not isinstance(start_iter, numbers.Integral) or start_iter < 0:
            raise ValueError("%s must be an int >= 0, not %r" % (start_name, start_iter))
        if isinstance(key_base, bool) or not isinstance(key_base, numbers.Integral) \
                or not 0 <= key_base < (1 << 64) - (1 << (_GEN_BITS + _INDEX_BITS + _POS_BITS)):
            raise ValueError("key_base = %r leaves no room for the hook's keys below 2**64" % (key_base,))
        self.density = density
        self.rank = rank
        self.start_iter = int(start_iter)
        self.min_compression_rate = min_compression_rate
        self.warm_start = warm_start
        self.ef = ef
        self.policy = policy
        self.sparsifier = sparsifier
        self.load_factor = load_factor
        self.seed = seed
        self.key_base = int(key_base)
        self.model = model
        self._param_index = None
        if model is not None:
            self._param_index = {id(p): i for i, p in enumerate(model.parameters())}
            if len(self._param_index) >= 1 << (_INDEX_BITS + _POS_BITS):
                raise ValueError("the model has too many parameters for the hook's key space")
        # The fields of every compressed call; Params checks their types now.
        self._method_params = self._compressed_params()
        self.iter = 0
        # bucket index -> [generation, signature, [BucketEntry]] of its last call
        self._buckets = {}
        # BucketEntry of tensors whose bucket changed: residuals to drop
        # once no request of this state is in flight
        self._stale = []
        self._inflight = 0
        self._lock = threading.Lock()

    # -- parameters ---------------------------------------------------------

    def _ramp(self, step, start, end):
        """The ramp's value at step `step`: geometric from `start` (at
        start_iter) to `end` (ramp_steps later)."""
        done = (step - self.start_iter) / self.ramp_steps if self.ramp_steps else 1.0
        if done >= 1.0:
            return end
        done = max(0.0, done)
        return start ** (1.0 - done) * end ** done

    def density_at(self, step: int) -> float:
        """TOPK's, SKETCH's and AUTO's density at step `step` (counted as
        iter counts them, from 0): the ramp's value."""
        return min(1.0, self._ramp(step, self.ramp_density, self.density))

    def rank_at(self, step: int) -> int:
        """LOWRANK's (and AUTO's) rank at step `step`: the ramp's value."""
        return max(1, int(round(self._ramp(step, self.ramp_rank, self.rank))))

    def _params_at(self, step, **fields):
        """The compressed call's Params at step `step`: the ramp's density
        or rank, and `fields`."""
        if self.ramp_steps:
            if not self.method.caps & MethodCap.MATRIX:
                fields.setdefault("density", self.density_at(step))
            if may_view_as_matrix(self.method):
                fields.setdefault("rank", self.rank_at(step))
        return self._method_params.replace(**fields)

    def _compressed_params(self):
        m = self.method
        if m == Method.NONE:
            return Params(method="none")
        if m.caps & MethodCap.SELECTS:
            # NONE or the communicator's lossy method, per call (docs/api.md,
            # "AUTO"); every method's fields, for whichever it picks
            return Params(method=m, density=self.density, rank=self.rank, start_iter=0,
                          min_compression_rate=self.min_compression_rate, warm_start=self.warm_start, ef=self.ef,
                          sparsifier=self.sparsifier, load_factor=self.load_factor, seed=self.seed)
        if m.caps & MethodCap.MATRIX:
            # start_iter is the hook's (it counts steps, as powerSGD_hook
            # does); the library compresses from the tensor's first call.
            return Params(method=m, rank=self.rank, start_iter=0,
                          min_compression_rate=self.min_compression_rate, warm_start=self.warm_start,
                          ef=self.ef, seed=self.seed)
        return Params(method=m, density=self.density, ef=self.ef, sparsifier=self.sparsifier,
                      load_factor=self.load_factor, seed=self.seed)

    def ef_key(self, bucket_index: int, position: Optional[int] = None, generation: Optional[int] = None) -> int:
        """The ef_key of bucket `bucket_index`'s whole buffer (position None)
        or of its gradient number `position`, in the bucket's current
        generation (the number of times its layout changed) unless given."""
        if generation is None:
            generation = self._buckets.get(bucket_index, [0])[0]
        pos = 0 if position is None else position + 1
        if not 0 <= bucket_index < (1 << _INDEX_BITS) or not 0 <= pos < (1 << _POS_BITS):
            raise ValueError("bucket %d, gradient %s: beyond the hook's key space" % (bucket_index, position))
        return (self.key_base + ((generation % (1 << _GEN_BITS)) << (_INDEX_BITS + _POS_BITS))
                + (bucket_index << _POS_BITS) + pos)

    def param_key(self, param_index: int) -> int:
        """The ef_key of the gradient of parameter number `param_index` of
        the model (with a model: those compressed gradient by gradient)."""
        if not 0 <= param_index < (1 << (_INDEX_BITS + _POS_BITS)):
            raise ValueError("parameter %d: beyond the hook's key space" % param_index)
        return self.key_base + (_PARAM_GEN << (_INDEX_BITS + _POS_BITS)) + param_index

    def shard_key(self, key: int) -> int:
        """The ef_key of reduce_scatter_hook's flat gradient number `key`."""
        if isinstance(key, bool) or not isinstance(key, numbers.Integral) \
                or not 0 <= key < (1 << (_INDEX_BITS + _POS_BITS)):
            raise ValueError("key = %r: reduce_scatter_hook's keys are ints in [0, 2**40)" % (key,))
        return self.key_base + (_SHARD_GEN << (_INDEX_BITS + _POS_BITS)) + int(key)

    def _is_bucket_key(self, key):
        return ((key - self.key_base) >> (_INDEX_BITS + _POS_BITS)) not in (_PARAM_GEN, _SHARD_GEN)

    def _index_of(self, param):
        try:
            return self._param_index[id(param)]
        except KeyError:
            raise ValueError("a parameter of the bucket (shape %s) is not one of the model given to "
                             "CompressionState" % (tuple(param.shape),)) from None

    def layout(self, bucket_index: int) -> Optional[List[BucketEntry]]:
        """The BucketEntry list of the bucket's last call: how its tensors
        were sent, under which ef_keys (Comm.ef_residual reads their
        residuals), or None for a bucket not seen yet."""
        b = self._buckets.get(bucket_index)
        return list(b[2]) if b is not None else None

    def _track(self, bucket_index, signature):
        """The bucket's generation, a new one when its layout changed (DDP
        rebuilt its buckets): the old keys' residuals no longer fit."""
        b = self._buckets.get(bucket_index)
        if b is None:
            self._buckets[bucket_index] = b = [0, signature, []]
        elif b[1] != signature:
            self._stale.extend(e for e in b[2] if e.ef_key is not None and self._is_bucket_key(e.ef_key))
            b[0] = (b[0] + 1) % _SHARD_GEN
            b[1] = signature
            b[2] = []
        return b

    def _drop_stale(self):
        with self._lock:
            if self._inflight or not self._stale:
                return
            stale, self._stale = self._stale, []
        for e in stale:
            probe = np.empty(1, dtype=np.float32)  # the key alone names the residual
            try:
                self.comm.ef_reset(probe, ef_key=e.ef_key)
            except Error as exc:
                if exc.status != Status.INVALID_ARG:  # requests of others in flight: later
                    raise
                with self._lock:
                    self._stale.append(e)

    # -- steps and their log ----------------------------------------------

    def _end_step(self) -> None:
        """A step's last bucket was posted: count the step, and log the
        statistics of the last log_every steps when due."""
        self.iter += 1
        if self.log_every and self.iter % self.log_every == 0 and self.comm.rank == 0:
            self._log()

    def _log(self) -> None:
        now = self.comm.stats()
        last = self._logged
        self._logged = now
        if last is not None:
            now_d = now.as_dict()
            delta = type(now)(**{k: v - getattr(last, k) for k, v in now_d.items()})
        else:
            delta = now
        text = ("step %d (%s, last %d steps): %d calls, %d bytes on the wire of %d (%.1fx less), "
                "%.3f s compressing, %.3f s communicating, %.3f s decompressing"
                % (self.iter, self.method.name.lower(), self.log_every, delta.calls, delta.bytes_wire,
                   delta.bytes_uncompressed, delta.ratio, delta.time_compress, delta.time_communicate,
                   delta.time_decompress))
        if self.method.caps & MethodCap.SELECTS:
            text += ", %s compressed %d of %d calls" % (self.method.name, delta.auto_lossy_calls, delta.auto_calls)
        logger.info(text)

    # -- in-flight bookkeeping -------------------------------------------

    def _post(self, post, buffer, after=None):
        """Run post() (which posts a request) and return the future of its
        completion whose value is `buffer`, after() run first."""
        with self._lock:
            self._inflight += 1
        try:
            request = post()
        except BaseException:
            with self._lock:
                self._inflight -= 1
            raise

        def finish(fut):
            with self._lock:
                self._inflight -= 1
            fut.value()  # raises the request's Error
            request.free()
            if after is not None:
                after()
            return buffer

        return request.to_torch_future().then(finish)

    @property
    def inflight(self) -> int:
        """Requests posted by the hook and not yet completed."""
        with self._lock:
            return self._inflight

    # -- checkpoints --------------------------------------------------------

    def state_dict(self) -> Dict[str, Any]:
        """This rank's hook state for a training checkpoint: the counters
        and the communicator's whole compression state
        (Comm.state_export(): residuals, LOWRANK factors and call counts).
        Call it between steps (no request in flight; Error(INVALID_ARG)
        otherwise). Every rank saves its own."""
        if self.inflight:
            raise Error(Status.INVALID_ARG, "CompressionState.state_dict: %d requests of the hook are in flight; "
                        "save between steps" % self.inflight)
        return {
            "format": _STATE_FORMAT,
            "iter": self.iter,
            "buckets": {i: (b[0], b[1], [tuple(e) for e in b[2]]) for i, b in self._buckets.items()},
            "stale": [tuple(e) for e in self._stale],
            "rank": self.comm.rank,
            "size": self.comm.size,
            "comm_state": self.comm.state_export(),
        }

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restore what state_dict() saved on this rank, all or nothing: a
        dict of another format raises ValueError, a compression state that
        is corrupt or of another rank or communicator size raises the
        cc_coll.Error of Comm.state_import, and the state stays as it was."""
        if not isinstance(state, collections.abc.Mapping) or state.get("format") != _STATE_FORMAT:
            raise ValueError("not a %s state dict" % _STATE_FORMAT)
        try:
            iteration = int(state["iter"])
            buckets = {int(i): [int(g), tuple(sig), [BucketEntry(*e) for e in entries]]
                       for i, (g, sig, entries) in state["buckets"].items()}
            stale = [BucketEntry(*e) for e in state["stale"]]
            blob = state["comm_state"]
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError("malformed %s state dict: %s" % (_STATE_FORMAT, exc)) from exc
        if self.inflight:
            raise Error(Status.INVALID_ARG, "CompressionState.load_state_dict: %d requests of the hook are in "
                        "flight" % self.inflight)
        self.comm.state_import(blob)  # raises, changing nothing, on a bad blob
        self.iter = iteration
        self._buckets = buckets
        self._stale = stale

    def close(self) -> None:
        """Close the Comm the state created (one it was given stays open)."""
        if self._own_comm:
            self.comm.close()

    def __repr__(self):
        return "<cc_coll.torch.CompressionState %s iter %d>" % (self.method.name.lower(), self.iter)


def _numpy_view(t, what):
    """An array sharing `t`'s memory and its Dtype: a numpy array for a CPU
    tensor, a cc_coll.DeviceArray for a CUDA tensor (the library's device
    path, no host copy; the library must be built with CUDA)."""
    if t.device.type not in ("cpu", "cuda"):
        raise TypeError("%s is a %s tensor: the hooks take CPU and CUDA tensors (docs/pytorch.md)"
                        % (what, t.device.type))
    t = t.detach()
    if t.dtype not in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        raise TypeError("%s has dtype %s; the hook takes float32, float64, float16 and bfloat16" % (what, t.dtype))
    if t.device.type == "cuda":
        if t.dtype == torch.bfloat16:
            d = DeviceArray(t.view(torch.int16))
            d.dtype = np.dtype(np.uint16)  # the bit patterns, as Dtype.BF16 takes them
            return d, Dtype.BF16
        return DeviceArray(t), None
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16), Dtype.BF16
    return t.numpy(), None


def _offsets(buffer, grads):
    """Each gradient's offset in the flat bucket buffer (they are views of it)."""
    base, item, total = buffer.data_ptr(), buffer.element_size(), buffer.numel()
    out = []
    for i, g in enumerate(grads):
        delta = g.data_ptr() - base
        if delta % item or not 0 <= delta // item <= total - g.numel():
            raise ValueError("gradient %d of the bucket is not a view of its buffer" % i)
        out.append(delta // item)
    return out


def allreduce_hook(state: Any, bucket: GradBucket) -> HookFuture:
    """The bucket buffer averaged (method NONE, op AVG) through the library,
    whatever state.method says: what DDP's default allreduce does. A
    CompressionState (or anything with a `comm`) is the state."""
    buffer = bucket.buffer()
    array, dtype = _numpy_view(buffer, "the bucket buffer")
    if isinstance(state, CompressionState):
        state._drop_stale()
        if bucket.is_last():
            state._end_step()
        return state._post(lambda: state.comm.iallreduce(array, op="avg", method="none", dtype=dtype), buffer)
    request = state.comm.iallreduce(array, op="avg", method="none", dtype=dtype)
    return request.to_torch_future().then(lambda fut: (fut.value(), buffer)[1])


def compression_hook(state: CompressionState, bucket: GradBucket) -> HookFuture:
    """A DDP communication hook (model.register_comm_hook(state,
    compression_hook)) compressing with the CompressionState's method.

    - The first state.start_iter steps, and method NONE: the bucket buffer
      averaged densely (one Comm.iallreduce, op AVG).
    - TOPK, SKETCH without a policy: the flat bucket buffer compressed as
      one tensor (one Comm.iallreduce), error feedback under the bucket's
      ef_key (state.ef_key(bucket.index())). With a model, the buffer goes
      in the model's parameter order (a copy where DDP's order differs).
    - TOPK, SKETCH with a policy: one Comm.iallreduce_group over the
      bucket's gradients, those the policy picks compressed one by one under
      their own ef_keys, the others NONE.
    - LOWRANK: one Comm.iallreduce_group over the bucket's gradients
      (bucket.gradients()): those of two or more dimensions (that the policy
      picks) as LOWRANK matrices (shape[0], rest) with rank, warm start,
      min_compression_rate and error feedback under their own ef_keys, the
      1-D ones (and those the policy leaves) densely in the same group, as
      powerSGD_hook does.

    A gradient's own ef_key is its parameter's (state.param_key) with a
    model, else its bucket's and position's (state.ef_key(index, position)).
    The gradients are averaged in place in the bucket buffer, which is the
    value of the returned future.
    """
    buffer = bucket.buffer()
    array, dtype = _numpy_view(buffer, "the bucket buffer")
    flat = array.reshape(-1)
    index = bucket.index()
    state._drop_stale()
    step = state.iter
    method = state.method if step >= state.start_iter else Method.NONE
    if bucket.is_last():
        state._end_step()
    comm = state.comm
    grads = bucket.gradients()
    shapes = tuple(tuple(g.shape) for g in grads)
    whole = ((0, flat.size),)

    if method == Method.NONE:
        b = state._track(index, (str(buffer.dtype), flat.size, shapes))
        b[2] = [BucketEntry(None, 0, flat.size, None, Method.NONE, whole)]
        return state._post(lambda: comm.iallreduce(array, op="avg", method="none", dtype=dtype), buffer)

    offsets = _offsets(buffer, grads)
    pindex = None
    if state._param_index is not None:
        pindex = [state._index_of(p) for p in bucket.parameters()]

    if state.policy is None and _flat_method(method):
        if pindex is None:
            signature, order = (str(buffer.dtype), flat.size, shapes), None
        else:
            signature = (str(buffer.dtype), tuple(sorted(pindex)))
            order = sorted(range(len(grads)), key=pindex.__getitem__)
            if [offsets[j] for j in order] == sorted(offsets) and all(
                    offsets[a] + grads[a].numel() == offsets[c] for a, c in zip(order, order[1:])):
                order = None  # the buffer is in the model's order already
        b = state._track(index, signature)
        key = state.ef_key(index)
        params = state._params_at(step, ef_key=key)
        if order is None:
            b[2] = [BucketEntry(key, 0, flat.size, None, method, ((0, flat.size),))]
            return state._post(lambda: comm.iallreduce(array, op="avg", dtype=dtype, params=params), buffer)
        segments = tuple((offsets[j], grads[j].numel()) for j in order)
        b[2] = [BucketEntry(key, 0, flat.size, None, method, segments)]
        tflat = buffer.detach().view(-1)
        tscratch = torch.cat([tflat[o:o + n] for o, n in segments])
        scratch, _ = _numpy_view(tscratch, "the bucket buffer")

        def scatter():
            at = 0
            for o, n in segments:
                tflat[o:o + n].copy_(tscratch[at:at + n])
                at += n

        return state._post(lambda: comm.iallreduce(scratch, op="avg", dtype=dtype, params=params), buffer,
                           after=scatter)

    params_of = bucket.parameters() if state.policy is not None else [None] * len(grads)
    b = state._track(index, (str(buffer.dtype), flat.size, shapes) if pindex is None
                     else (str(buffer.dtype), tuple(pindex)))
    sendbufs, plist, entries = [], [], []
    for pos, (g, p, off) in enumerate(zip(grads, params_of, offsets)):
        n = g.numel()
        compress = bool(state.policy(g, p)) if state.policy is not None else True
        if method.caps & MethodCap.MATRIX:
            compress = compress and g.dim() > 1 and n > 0
        if compress:
            key = state.ef_key(index, pos) if pindex is None else state.param_key(pindex[pos])
            fields = dict(ef_key=key)
            if method.caps & MethodCap.MATRIX or (may_view_as_matrix(method) and g.dim() > 1 and n > 0):
                fields["shape"] = (g.shape[0], n // g.shape[0])
            plist.append(state._params_at(step, **fields))
            entries.append(BucketEntry(key, off, n, tuple(g.shape), method, ((off, n),)))
        else:
            plist.append(Params(method="none"))
            entries.append(BucketEntry(None, off, n, tuple(g.shape), Method.NONE, ((off, n),)))
        sendbufs.append(flat[off:off + n])
    b[2] = entries
    return state._post(lambda: comm.iallreduce_group(sendbufs, op="avg", params=plist, dtype=dtype), buffer)


def reduce_scatter_hook(state: CompressionState, grad: "torch.Tensor", output: Optional["torch.Tensor"] = None,
                        key: int = 0) -> HookFuture:
    """Sharded data parallelism: average a flat gradient over the ranks into
    this rank's shard, compressed with the state's method (NONE, TOPK or
    SKETCH, error feedback as the state says), without blocking.

    grad   -- a 1-D CPU or CUDA tensor (float32, float64, float16, bfloat16) of
              P x s elements, P = state.comm.size: P shards of s, in rank
              order, as a sharded optimizer (or FSDP's FULL_SHARD) lays out a
              padded flat gradient. Like DDP's bucket it belongs to the
              request until the future completes
    output -- None, or a 1-D tensor of s elements and grad's dtype, not
              overlapping grad: where this rank's shard of the average goes
              (None: grad[rank * s:(rank + 1) * s]'s values land in grad's
              first s elements, as Comm.reduce_scatter in place)
    key    -- names the gradient's error-feedback residual
              (state.shard_key(key)): one key per flat gradient

    Returns a torch.futures.Future whose value is the shard (output, or
    grad[:s]) once the library's cc_coll_ireduce_scatter completes. The
    first state.start_iter steps (state.iter, which the DDP hooks count;
    count it yourself here: state.iter += 1 per step) are dense. LOWRANK
    has no reduce-scatter in the library: ValueError.

    PyTorch 1.13's FSDP hook contract does not fit (docs/pytorch.md, "FSDP"):
    this is the same reduction for a user-written sharded step.
    """
    ef_key = state.shard_key(key)
    method = state.method if state.iter >= state.start_iter else Method.NONE
    if not state.method.caps & MethodCap.REDUCE_SCATTER:
        raise ValueError("reduce_scatter_hook: %s has no reduce-scatter in libcc_coll; use %s"
                         % (state.method.name, method_names(m for m in Method if m.caps & MethodCap.REDUCE_SCATTER
                                                            and not m.caps & MethodCap.SELECTS)))
    if not isinstance(grad, torch.Tensor) or grad.dim() != 1 or not grad.is_contiguous():
        raise ValueError("reduce_scatter_hook: grad must be a contiguous 1-D tensor")
    size = state.comm.size
    if grad.numel() % size:
        raise ValueError("reduce_scatter_hook: grad has %d elements, not a multiple of the %d ranks (pad it)"
                         % (grad.numel(), size))
    shard = grad.numel() // size
    array, dtype = _numpy_view(grad, "grad")
    if output is None:
        out_array, result = None, grad[:shard]
    else:
        if not isinstance(output, torch.Tensor) or output.dim() != 1 or not output.is_contiguous() \
                or output.numel() != shard or output.dtype != grad.dtype:
            raise ValueError("reduce_scatter_hook: output must be a contiguous 1-D tensor of %d elements and "
                             "grad's dtype %s" % (shard, grad.dtype))
        out_array, _ = _numpy_view(output, "output")
        result = output
    if method == Method.NONE:
        params = Params(method="none")
    else:
        params = state._params_at(state.iter, ef_key=ef_key)
    state._drop_stale()
    return state._post(lambda: state.comm.ireduce_scatter(array, out_array, op="avg", dtype=dtype, params=params),
                       result)
