# SPDX-License-Identifier: BSD-3-Clause
"""Params: the per-call parameters (cc_coll_params_t)."""

import collections
import collections.abc
import enum
import math
from typing import Any, Dict, Optional

from . import _lib
from ._args import _enum_arg, _flag_arg, _int_arg, _real_arg, _shape_arg, _u64_arg
from ._enums import Sparsifier
from ._methods import Method
from ._types import Flag, MethodLike, ShapeLike, SparsifierLike

__all__ = ["Params"]


# Each field of Params: how the Python value is checked and converted, and the
# bit of cc_coll_params_t.mask it sets. The order is the positional order of
# Params() and of _params().
_FIELDS = collections.OrderedDict([
    ("method", (lambda v: _enum_arg(Method, v, "method"), _lib.PARAMS_FIELD_METHOD)),
    ("density", (lambda v: _real_arg(v, "density"), _lib.PARAMS_FIELD_DENSITY)),
    ("ef", (lambda v: _flag_arg(v, "ef"), _lib.PARAMS_FIELD_EF)),
    ("ef_key", (lambda v: _u64_arg(v, "ef_key"), _lib.PARAMS_FIELD_EF_KEY)),
    ("sparsifier", (lambda v: _enum_arg(Sparsifier, v, "sparsifier"), _lib.PARAMS_FIELD_SPARSIFIER)),
    ("zero_fraction", (lambda v: _real_arg(v, "zero_fraction"), _lib.PARAMS_FIELD_ZERO_FRACTION)),
    ("load_factor", (lambda v: _real_arg(v, "load_factor"), _lib.PARAMS_FIELD_LOAD_FACTOR)),
    ("seed", (lambda v: _u64_arg(v, "seed"), _lib.PARAMS_FIELD_SEED)),
    ("shape", (_shape_arg, _lib.PARAMS_FIELD_SHAPE)),
    ("rank", (lambda v: _int_arg(v, "rank"), _lib.PARAMS_FIELD_RANK)),
    ("warm_start", (lambda v: _flag_arg(v, "warm_start"), _lib.PARAMS_FIELD_WARM_START)),
    ("start_iter", (lambda v: _u64_arg(v, "start_iter"), _lib.PARAMS_FIELD_START_ITER)),
    ("min_compression_rate", (lambda v: _real_arg(v, "min_compression_rate"),
                              _lib.PARAMS_FIELD_MIN_COMPRESSION_RATE)),
])


class Params:
    """Per-call parameters (cc_coll_params_t). Every field left at None is
    unset (its mask bit clear), so the communicator's configuration (the
    CC_COLL_* environment, or the default) applies.

    method      -- Method, or a member's name in any case ("topk")
    density     -- TOPK (and SKETCH's top-k sparsifier): kept fraction, (0, 1]
    ef          -- error feedback on (True) or off (False)
    ef_key      -- int in [0, 2**64) naming the tensor's residual and state
    sparsifier  -- SKETCH: Sparsifier or "topk" / "threshold"
    zero_fraction -- THRESHOLD: [0, 1)
    load_factor -- SKETCH: (0, 16]
    seed        -- SKETCH's hash seed, LOWRANK's initial-Q seed; int in [0, 2**64)
    shape       -- LOWRANK: (rows, cols) of the matrix view, cols 0 meaning
                   count / rows; a single int is (rows, 0); (0, 0) (or 0)
                   is the near-square view. Without it an allreduce sends
                   a 1-D array densely
    rank        -- LOWRANK: target rank >= 1 (r = min(rows, cols, rank))
    warm_start  -- LOWRANK: start from the previous step's Q (True/False)
    start_iter  -- LOWRANK: the tensor's first start_iter calls are plain
    min_compression_rate -- LOWRANK: compress only when
                   (rows + cols) * r * rate < rows * cols; >= 1

    Types are checked here (TypeError, ValueError); the library judges the
    values (ranges) when a call uses them and raises Error. Params are
    immutable: replace() returns a modified copy. Wherever the package takes
    `params`, a dict of these fields is accepted too.
    """

    __slots__ = tuple(_FIELDS)

    def __init__(self, method: Optional[MethodLike] = None, density: Optional[float] = None,
                 ef: Optional[Flag] = None, ef_key: Optional[int] = None,
                 sparsifier: Optional[SparsifierLike] = None, zero_fraction: Optional[float] = None,
                 load_factor: Optional[float] = None, seed: Optional[int] = None,
                 shape: Optional[ShapeLike] = None, rank: Optional[int] = None,
                 warm_start: Optional[Flag] = None, start_iter: Optional[int] = None,
                 min_compression_rate: Optional[float] = None) -> None:
        values = locals()
        for name, (convert, _) in _FIELDS.items():
            value = values[name]
            object.__setattr__(self, name, None if value is None else convert(value))

    def __setattr__(self, name, value):
        raise AttributeError("cc_coll.Params is immutable; use params.replace(%s=...)" % name)

    def replace(self, **changes: Any) -> "Params":
        """A copy with the given fields changed (None unsets a field)."""
        unknown = set(changes) - set(_FIELDS)
        if unknown:
            raise TypeError("Params has no field %s" % ", ".join(sorted(unknown)))
        fields = self.to_dict()
        fields.update(changes)
        return Params(**fields)

    def to_dict(self) -> Dict[str, Any]:
        """The fields that are set, as a dict."""
        return {name: getattr(self, name) for name in _FIELDS if getattr(self, name) is not None}

    def __eq__(self, other):
        return isinstance(other, Params) and self.to_dict() == other.to_dict()

    def __hash__(self):
        return hash(tuple(sorted(self.to_dict().items())))

    def __repr__(self):
        def show(v):
            return repr(v.name.lower()) if isinstance(v, enum.Enum) else repr(v)
        return "Params(%s)" % ", ".join("%s=%s" % (k, show(v)) for k, v in self.to_dict().items())

    def _struct(self):
        """The cc_coll_params_t, with a mask bit for every field that is set."""
        p = _lib.ParamsStruct()
        for name, (_, bit) in _FIELDS.items():
            value = getattr(self, name)
            if value is None:
                continue
            p.mask |= bit
            if name == "shape":
                p.rows, p.cols = value
            else:
                setattr(p, name, int(value) if isinstance(value, enum.Enum) else value)
        return p


def _as_params(params, what="params"):
    """A Params from None, a Params or a mapping of its fields."""
    if params is None:
        return Params()
    if isinstance(params, Params):
        return params
    if isinstance(params, collections.abc.Mapping):
        try:
            return Params(**params)
        except TypeError as exc:
            if "unexpected keyword" in str(exc):
                raise TypeError("%s: %s" % (what, exc)) from None
            raise
    raise TypeError("%s must be a cc_coll.Params, a dict of its fields or None, not %s"
                    % (what, type(params).__name__))


def _merge(params, fields):
    """params (as _as_params takes it) with the keyword fields that are not
    None put over it."""
    base = _as_params(params)
    given = {k: v for k, v in fields.items() if v is not None}
    return base.replace(**given) if given else base


def _params(*args, **kwargs):
    """The cc_coll_params_t of Params(*args, **kwargs)."""
    return Params(*args, **kwargs)._struct()


def _matrix_shape(count, shape, rank):
    """(rows, cols, r) as the library resolves the matrix view (rows x cols,
    rank r) of a tensor of `count` elements for a method with
    MethodCap.MATRIX (lowrank::resolve_shape), or None where it would refuse. A shape
    (0, 0), like no shape, is the near-square view (an allreduce sends a
    tensor without a shape densely and resolves no view for it)."""
    if count == 0:
        return None
    if shape is not None and shape[0] == 0 and shape[1] != 0:
        return None
    if shape is not None and shape[0] != 0:
        rows, cols = shape
        if cols == 0:
            if count % rows:
                return None
            cols = count // rows
        if rows * cols != count:
            return None
    else:
        rows = math.isqrt(count)
        if rows * rows < count:
            rows += 1
        cols = -(-count // rows)
    return rows, cols, min(max(rank, 1), rows, cols)
