# SPDX-License-Identifier: BSD-3-Clause
"""Point-to-point messages of a Comm (cc_coll_send, cc_coll_recv) and their
LEP residuals."""

import ctypes
from typing import Any

import numpy as np

from ._args import _int_arg, _flag_arg
from ._arrays import _array, _dtype_of
from ._errors import _check
from ._lib import lib
from ._params import _merge
from ._types import Buffer, DtypeLike, Flag, ParamsLike


class _PointToPoint:
    """Comm's point-to-point calls (a base class of Comm)."""

    _handle: Any

    def send(self, buf: Buffer, dest: int, tag: int, compress: Flag = True, params: ParamsLike = None,
             dtype: DtypeLike = None, **fields: Any) -> None:
        """Send an array to rank `dest` (cc_coll_send); returns once the
        receiver has it.

        buf      -- C-contiguous numpy array (as for allreduce); not modified
        dest     -- the receiving rank of this communicator
        tag      -- int in [0, p2p_tag_ub()]
        compress -- True: compress with the params' method (LOWRANK: one local
                    PowerSGD step, P and Q are sent; TOPK: (index, value)
                    pairs; NONE: the data as it is; SKETCH is
                    Status.NOT_SUPPORTED). False: send uncompressed, which
                    also flushes the channel's LEP residual into this message
        params, **fields -- Params and keyword fields as for allreduce; an
                    array of two or more dimensions gets the LOWRANK view
                    (shape[0], rest). ef (default on) keeps the lazy error
                    propagation residual of the channel (dest, ef_key if
                    set, else tag)
        dtype    -- None (from the array) or a Dtype

        The receiver must call recv with the same count, dtype and, for a
        compressed message, the same method, shape and rank or density;
        otherwise both sides raise Error(Status.MISMATCH).
        """
        _array(buf, "buf", writable=False)
        d = _dtype_of(buf, dtype, "buf")
        p = self._call_params(params, fields, buf)
        _check(lib.cc_coll_send(buf.ctypes.data, buf.size, int(d), _int_arg(dest, "dest"),
                                    _int_arg(tag, "tag"), _flag_arg(compress, "compress"),
                                    ctypes.byref(p._struct()), self._handle, None))

    def recv(self, buf: Buffer, source: int, tag: int, params: ParamsLike = None, dtype: DtypeLike = None,
             **fields: Any) -> Buffer:
        """Receive into `buf` what send() sent from rank `source` with `tag`,
        compressed or not (cc_coll_recv); returns buf.

        buf    -- C-contiguous, writable numpy array of the sender's size and dtype
        source -- the sending rank (not MPI.ANY_SOURCE)
        params, **fields -- what a compressed message must match (method,
                  shape, rank, density): pass the sender's. As in send, an
                  array of two or more dimensions gets the LOWRANK view
                  (shape[0], rest)
        """
        _array(buf, "buf", writable=True)
        d = _dtype_of(buf, dtype, "buf")
        p = self._call_params(params, fields, buf)
        _check(lib.cc_coll_recv(buf.ctypes.data, buf.size, int(d), _int_arg(source, "source"),
                                    _int_arg(tag, "tag"), ctypes.byref(p._struct()), self._handle, None))
        return buf

    def p2p_tag_ub(self) -> int:
        """The largest tag send() and recv() accept (cc_coll_p2p_tag_ub)."""
        ub = ctypes.c_int()
        _check(lib.cc_coll_p2p_tag_ub(self._handle, ctypes.byref(ub)))
        return ub.value

    def lep_residual(self, buf: Buffer, dest: int, tag: int, params: ParamsLike = None, dtype: DtypeLike = None,
                     **fields: Any) -> np.ndarray:
        """The LEP residual of the send channel (dest, ef_key if given, else
        tag) as a float64 array shaped like buf (zeros when the channel has
        none), buf giving the size and dtype (cc_coll_lep_get_residual)."""
        _array(buf, "buf", writable=False)
        d = _dtype_of(buf, dtype, "buf")
        p = _merge(params, fields)
        out = np.zeros(buf.shape, dtype=np.float64)
        _check(lib.cc_coll_lep_get_residual(self._handle, _int_arg(dest, "dest"), _int_arg(tag, "tag"),
                                                ctypes.byref(p._struct()), buf.size, int(d), out.ctypes.data))
        return out

    def lep_reset(self, dest: int, tag: int, params: ParamsLike = None, **fields: Any) -> None:
        """Drop the LEP residual (and warm-start Q) of the send channel (dest,
        ef_key if given, else tag) (cc_coll_lep_reset)."""
        p = _merge(params, fields)
        _check(lib.cc_coll_lep_reset(self._handle, _int_arg(dest, "dest"), _int_arg(tag, "tag"),
                                         ctypes.byref(p._struct())))
