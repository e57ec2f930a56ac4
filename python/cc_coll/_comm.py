# SPDX-License-Identifier: BSD-3-Clause
"""Comm: a libcc_coll communicator and its collectives, blocking and
non-blocking. Its point-to-point, per-tensor state, checkpoint and
statistics calls come from the base classes in _p2p, _tensor_state,
_checkpoint and _stats."""

import collections.abc
import ctypes
import numbers
import threading
from typing import Any, List, Optional, Sequence, Union

import numpy as np

from . import _lib
from ._args import _enum_arg, _fint_of, _per_tensor
from ._arrays import _array, _check_recvbuf, _dtype_of
from ._checkpoint import _Checkpoints
from ._enums import Op
from ._errors import _check
from ._info import settings
from ._lib import lib
from ._methods import may_view_as_matrix, method_named
from ._p2p import _PointToPoint
from ._params import Params, _as_params, _merge
from ._request import Request, _Call
from ._stats import _Stats
from ._tensor_state import _TensorState
from ._types import Buffer, Buffers, DtypeLike, Flag, MethodLike, OpLike, ParamsLike, ShapeLike, SparsifierLike
from ._version import ABI_MAJOR, ABI_MINOR

__all__ = ["Comm"]


class Comm(_PointToPoint, _TensorState, _Checkpoints, _Stats):
    """A libcc_coll communicator over an MPI communicator.

    Comm(comm) -- comm is an mpi4py communicator (mpi4py.MPI.Comm) or an
    integer Fortran handle (MPI_Fint, as MPI_Comm_c2f gives). Collective over
    comm; MPI must be initialised (importing mpi4py.MPI does it). The library
    duplicates comm, so its traffic never mixes with the caller's.

    Close it with close() or a `with` block before MPI is finalised; close()
    is local (not collective) and may be called more than once; it completes
    the requests still in flight first. After close() every method raises
    Error(Status.INVALID_COMM).

    iallreduce, iallreduce_group and ireduce_scatter start the collectives
    of allreduce, allreduce_group and reduce_scatter and return a Request.
    """

    def __init__(self, comm: Any) -> None:
        fint = _fint_of(comm)
        handle = ctypes.c_void_p()
        _check(lib.cc_coll_comm_create_fint_versioned(fint, ctypes.byref(handle),
                                                      ABI_MAJOR, ABI_MINOR))
        self._handle = handle.value
        self._closed = False
        # Requests posted here, numbered from 1; the arrays of those freed in
        # flight, as (number, objects), kept until they complete.
        self._posted = 0
        self._held = []
        self._held_lock = threading.Lock()
        # The configuration the library read from the environment just now,
        # for the Python-side defaults that depend on it (the LOWRANK matrix
        # view of an n-d array, the expected size of a Q).
        config = {s["name"]: s["value"] for s in settings()}
        self._config_method = method_named(config.get("METHOD") or "")
        try:
            self._config_rank = int(config.get("LOWRANK_RANK", 1))
        except ValueError:
            self._config_rank = 1

    # -- lifetime ----------------------------------------------------------

    def close(self) -> None:
        """Destroy the communicator (cc_coll_comm_destroy); a no-op when closed."""
        if self._closed:
            return
        self._closed = True
        # Destroying the communicator completes its requests first.
        _check(lib.cc_coll_comm_destroy(self._handle))
        self._completed_through(self._posted)

    @property
    def closed(self) -> bool:
        """Whether close() ran."""
        return self._closed

    def _hold(self, number, objects):
        """Keep the arrays of request `number`, freed in flight, until it completes."""
        with self._held_lock:
            self._held.append((number, objects))

    def _completed_through(self, number):
        """Requests 1..number have completed. The requests of a communicator
        run one at a time in posting order, so once one has completed, so has
        every request posted before it."""
        with self._held_lock:
            if self._held:
                self._held = [h for h in self._held if h[0] > number]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        # Destroy is local and safe after MPI_Finalize (the duplicate is then
        # simply not freed); errors cannot be reported from here.
        try:
            if not getattr(self, "_closed", True):
                self._closed = True
                lib.cc_coll_comm_destroy(self._handle)
        except Exception:  # interpreter shutdown
            pass

    def __repr__(self):
        if self._closed:
            return "<cc_coll.Comm closed>"
        return "<cc_coll.Comm rank %d of %d>" % (self.rank, self.size)

    @property
    def handle(self) -> int:
        """The C handle (cc_coll_comm_h) as an int; it stays the destroyed
        handle after close()."""
        return self._handle

    @property
    def rank(self) -> int:
        """This process's rank in the communicator (cc_coll_comm_rank)."""
        r = ctypes.c_int()
        _check(lib.cc_coll_comm_rank(self._handle, ctypes.byref(r)))
        return r.value

    @property
    def size(self) -> int:
        """The number of ranks of the communicator (cc_coll_comm_size)."""
        s = ctypes.c_int()
        _check(lib.cc_coll_comm_size(self._handle, ctypes.byref(s)))
        return s.value

    # -- parameters --------------------------------------------------------

    def _call_params(self, params, fields, buf, matrix=False):
        """The Params of a call: `params` with the keyword fields over it and,
        where the call may view the tensor as a matrix (`matrix`, or the
        call's method, else the communicator's, may: MethodCap.MATRIX, or a
        selecting method that may pick such a method) on an array of two or
        more dimensions without a shape, the matrix view (shape[0], product
        of the rest), like torch's tensor.view(shape[0], -1) (the other
        methods ignore the shape)."""
        p = _merge(params, fields)
        method = p.method if p.method is not None else self._config_method
        if p.shape is None and buf.ndim >= 2 and buf.size > 0 and (matrix or may_view_as_matrix(method)):
            p = p.replace(shape=(buf.shape[0], buf.size // buf.shape[0]))
        return p

    # -- collectives -------------------------------------------------------
    #
    # Each collective has a blocking form (allreduce) and a non-blocking one
    # (iallreduce) that share their argument checks: _*_call gives the C
    # arguments up to the communicator, what the call returns, and the
    # objects the library reads or writes until the collective completes.

    def _blocking(self, fn, call):
        _check(fn(*call.args, None))
        # A blocking collective first completes the requests in flight on
        # the communicator.
        self._completed_through(self._posted)
        return call.result

    def _post(self, fn, call):
        handle = ctypes.c_void_p()
        _check(fn(*call.args, None, ctypes.byref(handle)))
        self._posted += 1
        return Request(self, handle.value, self._posted, call.result, call.keep)

    def _allreduce_call(self, sendbuf, recvbuf, op, dtype, params, fields):
        in_place = recvbuf is None or recvbuf is sendbuf
        _array(sendbuf, "sendbuf", writable=in_place)
        d = _dtype_of(sendbuf, dtype, "sendbuf")
        if in_place:
            recvbuf = sendbuf
        else:
            _check_recvbuf(sendbuf, recvbuf, "sendbuf", "recvbuf")
        op = _enum_arg(Op, op, "op")
        p = self._call_params(params, fields, sendbuf)._struct()
        return _Call((sendbuf.ctypes.data, recvbuf.ctypes.data, sendbuf.size, int(d), int(op), ctypes.byref(p),
                      self._handle), recvbuf, (sendbuf, recvbuf, p))

    def allreduce(self, sendbuf: Buffer, recvbuf: Optional[Buffer] = None, op: OpLike = Op.SUM,
                  method: Optional[MethodLike] = None, density: Optional[float] = None,
                  ef: Optional[Flag] = None, ef_key: Optional[int] = None, dtype: DtypeLike = None,
                  sparsifier: Optional[SparsifierLike] = None, zero_fraction: Optional[float] = None,
                  load_factor: Optional[float] = None, seed: Optional[int] = None,
                  shape: Optional[ShapeLike] = None, rank: Optional[int] = None, warm_start: Optional[Flag] = None,
                  start_iter: Optional[int] = None, min_compression_rate: Optional[float] = None,
                  params: ParamsLike = None) -> Buffer:
        """Allreduce numpy arrays over the communicator (cc_coll_allreduce).

        sendbuf -- C-contiguous numpy array of float32, float64 or float16
                   (or uint16 bfloat16 bit patterns with dtype=Dtype.BF16)
        recvbuf -- array of the same shape and dtype for the result; None or
                   sendbuf itself reduces in place
        op      -- Op.SUM / Op.AVG or "sum" / "avg"
        method, density, ef, ef_key, sparsifier, zero_fraction, load_factor,
        seed, shape, rank, warm_start, start_iter, min_compression_rate
                -- per-call parameters, as the fields of Params; None leaves
                   a field unset, so it comes from `params`, else from the
                   CC_COLL_* environment or the default
        params  -- a Params (or a dict of its fields) for the fields not
                   given as keywords
        dtype   -- None (from the array) or a Dtype; required for BF16

        LOWRANK views the buffer as a rows x cols matrix: `shape` when given
        (shape=(0, 0), or 0, asks for the library's near-square view), else
        (sendbuf.shape[0], sendbuf.size // sendbuf.shape[0]) for an array of
        two or more dimensions. A 1-D array without a shape is sent densely
        (a plain allreduce), as torch's powerSGD_hook sends biases.
        Every rank must pass the same shape, dtype, op and parameters.
        Returns recvbuf (sendbuf when in place).
        """
        return self._blocking(lib.cc_coll_allreduce, self._allreduce_call(sendbuf, recvbuf, op, dtype, params, dict(
            method=method, density=density, ef=ef, ef_key=ef_key, sparsifier=sparsifier,
            zero_fraction=zero_fraction, load_factor=load_factor, seed=seed, shape=shape, rank=rank,
            warm_start=warm_start, start_iter=start_iter, min_compression_rate=min_compression_rate)))

    def iallreduce(self, sendbuf: Buffer, recvbuf: Optional[Buffer] = None, op: OpLike = Op.SUM,
                   method: Optional[MethodLike] = None, density: Optional[float] = None,
                   ef: Optional[Flag] = None, ef_key: Optional[int] = None, dtype: DtypeLike = None,
                   sparsifier: Optional[SparsifierLike] = None, zero_fraction: Optional[float] = None,
                   load_factor: Optional[float] = None, seed: Optional[int] = None,
                   shape: Optional[ShapeLike] = None, rank: Optional[int] = None, warm_start: Optional[Flag] = None,
                   start_iter: Optional[int] = None, min_compression_rate: Optional[float] = None,
                   params: ParamsLike = None) -> Request:
        """Start allreduce() without waiting for it (cc_coll_iallreduce):
        the same arguments, checked at once (an error raises here and posts
        nothing); returns a Request whose wait() returns what allreduce()
        would, bit for bit. Until the request completes, the arrays belong
        to it: do not write sendbuf, nor read or write recvbuf."""
        return self._post(lib.cc_coll_iallreduce, self._allreduce_call(sendbuf, recvbuf, op, dtype, params, dict(
            method=method, density=density, ef=ef, ef_key=ef_key, sparsifier=sparsifier,
            zero_fraction=zero_fraction, load_factor=load_factor, seed=seed, shape=shape, rank=rank,
            warm_start=warm_start, start_iter=start_iter, min_compression_rate=min_compression_rate)))

    def _allreduce_group_call(self, sendbufs, recvbufs, op, params, dtype):
        if isinstance(sendbufs, np.ndarray) or not isinstance(sendbufs, collections.abc.Iterable):
            raise TypeError("sendbufs must be a sequence of numpy arrays, not %s" % type(sendbufs).__name__)
        sendbufs = list(sendbufs)
        n = len(sendbufs)
        recvs = _per_tensor(recvbufs, n, "recvbufs", lambda v: False, single_ok=False)
        plist = _per_tensor(params, n, "params", lambda v: v is None or isinstance(v, (Params, collections.abc.Mapping)))
        dlist = _per_tensor(dtype, n, "dtype", lambda v: v is None or isinstance(v, (str, numbers.Integral)))
        op = _enum_arg(Op, op, "op")
        outs, dtypes, structs, keys = [], [], [], {}
        for i, send in enumerate(sendbufs):
            recv = recvs[i]
            in_place = recv is None or recv is send
            _array(send, "sendbufs[%d]" % i, writable=in_place)
            dtypes.append(int(_dtype_of(send, dlist[i], "sendbufs[%d]" % i)))
            if in_place:
                recv = send
            else:
                _check_recvbuf(send, recv, "sendbufs[%d]" % i, "recvbufs[%d]" % i)
            p = self._call_params(_as_params(plist[i], "params[%d]" % i), {}, send)
            if p.ef_key is not None:
                if p.ef_key in keys:
                    raise ValueError("tensors %d and %d have the same ef_key %d: each tensor needs its own"
                                     % (keys[p.ef_key], i, p.ef_key))
                keys[p.ef_key] = i
            outs.append(recv)
            structs.append(p._struct())
        # The library copies the arrays of a group: only the tensors stay in use.
        return _Call((n, (ctypes.c_void_p * n)(*(a.ctypes.data for a in sendbufs)),
                      (ctypes.c_void_p * n)(*(a.ctypes.data for a in outs)),
                      (ctypes.c_size_t * n)(*(a.size for a in sendbufs)), (ctypes.c_int * n)(*dtypes), int(op),
                      (_lib.ParamsStruct * n)(*structs), self._handle), outs, (sendbufs, outs))

    def allreduce_group(self, sendbufs: Buffers, recvbufs: Optional[Buffers] = None, op: OpLike = Op.SUM,
                        params: Union[ParamsLike, Sequence[ParamsLike]] = None,
                        dtype: Union[DtypeLike, Sequence[DtypeLike]] = None) -> List[Buffer]:
        """Allreduce several arrays in one call (cc_coll_allreduce_group), as
        a DDP bucket: the compressed LOWRANK tensors share one MPI_Allreduce
        for their P and one for their Q, and the NONE tensors and the LOWRANK
        tensors not compressed this step share one plain allreduce per dtype.

        sendbufs -- a sequence of C-contiguous numpy arrays (as for allreduce)
        recvbufs -- None (every tensor in place), or a sequence as long as
                    sendbufs of arrays of the same shapes and dtypes; an entry
                    that is None or sendbufs[i] itself is in place
        op       -- one Op for all tensors
        params   -- None, one Params (or dict) for every tensor, or a sequence
                    of one per tensor (entries may be None)
        dtype    -- None, one Dtype for every tensor, or a sequence of one per
                    tensor (as for allreduce)

        Each array of two or more dimensions with LOWRANK and no shape gets
        the view (shape[0], rest), as in allreduce; a 1-D array without a
        shape joins the plain allreduce, as powerSGD_hook's uncompressed
        tensors do. Tensors that set ef_key
        need distinct keys. Every rank must pass the same tensors, in the
        same order, with the same parameters. Returns the list of results
        (recvbufs[i], or sendbufs[i] in place).
        """
        return self._blocking(lib.cc_coll_allreduce_group,
                              self._allreduce_group_call(sendbufs, recvbufs, op, params, dtype))

    def iallreduce_group(self, sendbufs: Buffers, recvbufs: Optional[Buffers] = None, op: OpLike = Op.SUM,
                         params: Union[ParamsLike, Sequence[ParamsLike]] = None,
                         dtype: Union[DtypeLike, Sequence[DtypeLike]] = None) -> Request:
        """Start allreduce_group() without waiting for it
        (cc_coll_iallreduce_group): the same arguments, checked at once;
        returns a Request whose wait() returns the list allreduce_group()
        would, bit for bit. The arrays belong to the request until it
        completes."""
        return self._post(lib.cc_coll_iallreduce_group,
                          self._allreduce_group_call(sendbufs, recvbufs, op, params, dtype))

    def _reduce_scatter_call(self, sendbuf, recvbuf, op, dtype, params, fields):
        in_place = recvbuf is None or recvbuf is sendbuf
        _array(sendbuf, "sendbuf", writable=in_place)
        d = _dtype_of(sendbuf, dtype, "sendbuf")
        nranks = self.size
        if sendbuf.size % nranks != 0:
            raise ValueError("sendbuf has %d elements, not a multiple of the communicator size %d"
                             % (sendbuf.size, nranks))
        recvcount = sendbuf.size // nranks
        if in_place:
            recvbuf = sendbuf
        else:
            _array(recvbuf, "recvbuf", writable=True)
            if recvbuf.dtype != sendbuf.dtype:
                raise TypeError("recvbuf has dtype %s but sendbuf has %s"
                                % (recvbuf.dtype, sendbuf.dtype))
            if recvbuf.size != recvcount:
                raise ValueError("recvbuf has %d elements but sendbuf has %d = %d x %d ranks; recvbuf "
                                 "needs %d" % (recvbuf.size, sendbuf.size, recvcount, nranks, recvcount))
        op = _enum_arg(Op, op, "op")
        p = _merge(params, fields)._struct()
        result = sendbuf.reshape(-1)[:recvcount] if in_place else recvbuf
        return _Call((sendbuf.ctypes.data, recvbuf.ctypes.data, recvcount, int(d), int(op), ctypes.byref(p),
                      self._handle), result, (sendbuf, recvbuf, p))

    def reduce_scatter(self, sendbuf: Buffer, recvbuf: Optional[Buffer] = None, op: OpLike = Op.SUM,
                       method: Optional[MethodLike] = None, density: Optional[float] = None,
                       ef: Optional[Flag] = None, ef_key: Optional[int] = None, dtype: DtypeLike = None,
                       sparsifier: Optional[SparsifierLike] = None, zero_fraction: Optional[float] = None,
                       load_factor: Optional[float] = None, seed: Optional[int] = None,
                       params: ParamsLike = None) -> Buffer:
        """Reduce-scatter numpy arrays over the communicator, like
        MPI_Reduce_scatter_block (cc_coll_reduce_scatter).

        sendbuf -- C-contiguous numpy array as for allreduce, of any shape
                   whose size is recvcount * P (P = self.size): in C order,
                   P shards of recvcount elements; this rank receives the
                   reduction of every rank's shard number `rank`
        recvbuf -- C-contiguous array of the same dtype and size recvcount
                   (any shape) for this rank's shard; None or sendbuf itself
                   reduces in place, and the result is the first recvcount
                   elements of sendbuf
        op, method, density, ef, ef_key, dtype, sparsifier, zero_fraction,
        load_factor, seed, params -- as for allreduce (method NONE, TOPK or
                   SKETCH; LOWRANK is Status.NOT_SUPPORTED)

        Every rank must pass the same size, dtype, op and parameters.
        Returns recvbuf, or in place a 1-D view of sendbuf's first recvcount
        elements (sendbuf.reshape(-1)[:recvcount]). The error-feedback
        residual covers the whole sendbuf: without ef_key it is named by
        (recvbuf address, recvcount * P, dtype), and ef_residual(sendbuf,
        ef_key=...) reads it back.
        """
        return self._blocking(lib.cc_coll_reduce_scatter, self._reduce_scatter_call(
            sendbuf, recvbuf, op, dtype, params, dict(method=method, density=density, ef=ef, ef_key=ef_key,
                                                      sparsifier=sparsifier, zero_fraction=zero_fraction,
                                                      load_factor=load_factor, seed=seed)))

    def ireduce_scatter(self, sendbuf: Buffer, recvbuf: Optional[Buffer] = None, op: OpLike = Op.SUM,
                        method: Optional[MethodLike] = None, density: Optional[float] = None,
                        ef: Optional[Flag] = None, ef_key: Optional[int] = None, dtype: DtypeLike = None,
                        sparsifier: Optional[SparsifierLike] = None, zero_fraction: Optional[float] = None,
                        load_factor: Optional[float] = None, seed: Optional[int] = None,
                        params: ParamsLike = None) -> Request:
        """Start reduce_scatter() without waiting for it
        (cc_coll_ireduce_scatter): the same arguments, checked at once;
        returns a Request whose wait() returns what reduce_scatter() would,
        bit for bit. The arrays belong to the request until it completes."""
        return self._post(lib.cc_coll_ireduce_scatter, self._reduce_scatter_call(
            sendbuf, recvbuf, op, dtype, params, dict(method=method, density=density, ef=ef, ef_key=ef_key,
                                                      sparsifier=sparsifier, zero_fraction=zero_fraction,
                                                      load_factor=load_factor, seed=seed)))
