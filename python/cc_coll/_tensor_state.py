# SPDX-License-Identifier: BSD-3-Clause
"""A Comm's per-tensor state: error-feedback residuals and the matrix
method's factors (cc_coll_lowrank_get_state, cc_coll_lowrank_set_q)."""

import collections
import ctypes
from typing import Any, Optional

import numpy as np

from ._arrays import _array, _dtype_of
from ._enums import Status
from ._errors import Error, _check
from ._lib import lib
from ._params import _matrix_shape, _merge
from ._types import Buffer, DtypeLike, ParamsLike

__all__ = ["LowRankState"]


#: What Comm.lowrank_state returns.
LowRankState = collections.namedtuple("LowRankState", "rows cols rank calls p q")
LowRankState.__doc__ = """A LOWRANK tensor's state (cc_coll_lowrank_get_state): the matrix shape
rows x cols and rank r of its last compressed step (r = 0 before the first),
its number of calls, P (rows x r) and Q (cols x r, already divided by the
communicator size) as float64 arrays."""


class _TensorState:
    """Comm's per-tensor state (a base class of Comm)."""

    _handle: Any

    def lowrank_state(self, recvbuf: Buffer, params: ParamsLike = None, dtype: DtypeLike = None,
                      **fields: Any) -> "LowRankState":
        """The LOWRANK state of the tensor that allreduce calls name with
        (recvbuf, ef_key) (cc_coll_lowrank_get_state): a LowRankState
        (rows, cols, rank, calls, p, q). rank is 0, and p and q are empty,
        before the tensor's first compressed step; p is rows x rank and q is
        cols x rank (already divided by the communicator size), float64."""
        _array(recvbuf, "recvbuf", writable=False)
        d = _dtype_of(recvbuf, dtype, "recvbuf")
        params = _merge(params, fields)._struct()
        rows, cols, calls, rank = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_int()

        def get(p, q):
            _check(lib.cc_coll_lowrank_get_state(self._handle, ctypes.byref(params), recvbuf.ctypes.data,
                                                 recvbuf.size, int(d), ctypes.byref(rows), ctypes.byref(cols),
                                                 ctypes.byref(rank), ctypes.byref(calls), p, q))

        get(None, None)
        p = np.zeros((rows.value, max(rank.value, 0)), dtype=np.float64)
        q = np.zeros((cols.value, max(rank.value, 0)), dtype=np.float64)
        if rank.value > 0:
            get(p.ctypes.data, q.ctypes.data)
            if (p.shape, q.shape) != ((rows.value, rank.value), (cols.value, rank.value)):
                raise Error(Status.INTERNAL, "cc_coll_lowrank_get_state: the state changed between two reads")
        return LowRankState(rows.value, cols.value, rank.value, calls.value, p, q)

    def lowrank_set_q(self, recvbuf: Buffer, q: np.ndarray, params: ParamsLike = None, dtype: DtypeLike = None,
                      **fields: Any) -> None:
        """Set the warm-start Q of the LOWRANK tensor named by (recvbuf,
        ef_key) (cc_coll_lowrank_set_q): with warm start on, its next
        compressed call orthogonalises q and starts from it. q is cols x r
        (array-like, converted to float64) for the shape and rank the
        params resolve to, as a call with recvbuf would: an array of two or
        more dimensions gets the view (shape[0], rest); a 1-D array needs a
        shape (without one it is sent densely and has no factors:
        Error(Status.INVALID_ARG)). Do it alike on every rank."""
        _array(recvbuf, "recvbuf", writable=False)
        d = _dtype_of(recvbuf, dtype, "recvbuf")
        p = self._call_params(params, fields, recvbuf, matrix=True)
        q = np.ascontiguousarray(q, dtype=np.float64)
        resolved = None  # no shape (a 1-D array: sent densely, no factors): the library refuses
        if p.shape is not None:
            resolved = _matrix_shape(recvbuf.size, p.shape, p.rank if p.rank is not None else self._config_rank)
        q_ptr = None  # a shape the library refuses: it says why before reading q
        if resolved is not None:
            rows, cols, r = resolved
            if q.size != cols * r or (q.ndim == 2 and q.shape != (cols, r)) or q.ndim > 2:
                raise ValueError("q has shape %s; this tensor (%d x %d, rank %d) needs Q of cols x r = %d x %d"
                                 % (q.shape, rows, cols, r, cols, r))
            q_ptr = q.ctypes.data
        _check(lib.cc_coll_lowrank_set_q(self._handle, ctypes.byref(p._struct()), recvbuf.ctypes.data,
                                         recvbuf.size, int(d), q_ptr))

    # -- error feedback ----------------------------------------------------

    def ef_bytes(self) -> int:
        """Bytes held by all error-feedback residuals of this communicator on
        this rank (LEP residuals of point-to-point channels included)."""
        n = ctypes.c_uint64()
        _check(lib.cc_coll_ef_bytes(self._handle, ctypes.byref(n)))
        return n.value

    def state_bytes(self) -> int:
        """Bytes held by the methods' per-tensor state other than residuals
        on this rank: LOWRANK's call counts and factors P and Q, of tensors
        and point-to-point channels, kept with ef=0 too. Bounded by
        CC_COLL_STATE_MAX_BYTES (a new key past it raises EF_LIMIT);
        ef_reset, ef_reset_all and lep_reset give the bytes back."""
        n = ctypes.c_uint64()
        _check(lib.cc_coll_state_bytes(self._handle, ctypes.byref(n)))
        return n.value

    def ef_residual(self, recvbuf: Buffer, ef_key: Optional[int] = None, dtype: DtypeLike = None,
                    params: ParamsLike = None) -> np.ndarray:
        """This rank's residual of the tensor that allreduce calls name with
        (recvbuf, ef_key): a float64 array shaped like recvbuf (zeros when
        there is none yet). Without ef_key (here or in params) the key is
        recvbuf's address, size and dtype."""
        _array(recvbuf, "recvbuf", writable=False)
        d = _dtype_of(recvbuf, dtype, "recvbuf")
        p = _merge(params, dict(ef_key=ef_key))
        out = np.zeros(recvbuf.shape, dtype=np.float64)
        _check(lib.cc_coll_ef_get_residual(self._handle, ctypes.byref(p._struct()), recvbuf.ctypes.data,
                                           recvbuf.size, int(d), out.ctypes.data))
        return out

    def ef_reset(self, recvbuf: Buffer, ef_key: Optional[int] = None, dtype: DtypeLike = None,
                 params: ParamsLike = None) -> None:
        """Drop the residual of one tensor, named as in ef_residual(), and
        its LOWRANK state (call count, P, Q)."""
        _array(recvbuf, "recvbuf", writable=False)
        d = _dtype_of(recvbuf, dtype, "recvbuf")
        p = _merge(params, dict(ef_key=ef_key))
        _check(lib.cc_coll_ef_reset(self._handle, ctypes.byref(p._struct()), recvbuf.ctypes.data,
                                    recvbuf.size, int(d)))

    def ef_reset_all(self) -> None:
        """Drop every residual of this communicator."""
        _check(lib.cc_coll_ef_reset_all(self._handle))
