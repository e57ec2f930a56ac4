# SPDX-License-Identifier: BSD-3-Clause
"""A Comm's counters (cc_coll_comm_get_stats) and AUTO's cost model
(cc_coll_auto_predict)."""

import ctypes

from . import _lib
from ._args import _enum_arg
from ._enums import Dtype
from ._errors import _check
from ._lib import lib
from ._methods import Method
from ._params import _as_params


class _Stats:
    """Comm's statistics calls (a base class of Comm)."""

    def stats(self):
        """This rank's counters since creation or reset_stats(): a dict with
        calls, bytes_uncompressed, bytes_wire (ints), time_compress,
        time_communicate, time_decompress (seconds), sketch_elements and
        sketch_peeled (ints: SKETCH's decoded support elements, and how many
        of them peeling recovered exactly), time_total (seconds inside the
        communicator's calls, entry to return, failed calls included), and
        for method AUTO auto_calls, auto_lossy_calls (how many of them the
        cost model compressed), auto_predicted (its predicted seconds of
        those choices, summed), auto_explored_calls (how many ran the
        runner-up to check the model) and auto_measured (the seconds those
        calls took on this rank)."""
        s = _lib.StatsStruct(mask=_lib.STATS_FIELD_ALL)
        _check(lib.cc_coll_comm_get_stats(self._handle, ctypes.byref(s)))
        return {name: getattr(s, name) for name, _ in _lib.StatsStruct._fields_ if name != "mask"}

    def auto_predict(self, count, dtype=Dtype.F32, params=None):
        """What method AUTO would run for an allreduce of `count` elements of
        `dtype` with `params` (its method is ignored): (method, seconds
        predicted for NONE, seconds predicted for the communicator's lossy
        method) from its cost model (cc_coll_auto_predict). Collective the
        first time a communicator needs its model (every rank must call),
        local afterwards."""
        d = _enum_arg(Dtype, dtype, "dtype")
        p = _as_params(params)
        method = ctypes.c_int()
        none_s, lossy_s = ctypes.c_double(), ctypes.c_double()
        _check(lib.cc_coll_auto_predict(self._handle, int(count), int(d), ctypes.byref(p._struct()),
                                        ctypes.byref(method), ctypes.byref(none_s), ctypes.byref(lossy_s)))
        return Method(method.value), none_s.value, lossy_s.value

    def reset_stats(self):
        """Zero the counters."""
        _check(lib.cc_coll_comm_reset_stats(self._handle))
