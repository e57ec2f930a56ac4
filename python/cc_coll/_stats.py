# SPDX-License-Identifier: BSD-3-Clause
"""A Comm's counters (cc_coll_comm_get_stats) as a Stats object, and AUTO's
cost model (cc_coll_auto_predict)."""

import ctypes
import dataclasses
import warnings
from typing import Any, Dict, Iterator, Optional, Tuple, Union

from . import _lib
from ._args import _enum_arg
from ._enums import Dtype
from ._errors import _check
from ._lib import lib
from ._methods import Method
from ._params import Params, _as_params

__all__ = ["Stats"]


@dataclasses.dataclass(frozen=True)
class Stats:
    """One rank's counters of a Comm since its creation or reset_stats()
    (cc_coll_comm_get_stats), as Comm.stats() returns them.

    calls              -- collective calls that succeeded
    bytes_uncompressed -- the bytes those calls would have sent uncompressed
                          (count x element size per call)
    bytes_wire         -- the bytes this rank sent for them
    time_compress      -- seconds spent compressing
    time_communicate   -- seconds spent in MPI
    time_decompress    -- seconds spent decompressing
    sketch_elements    -- SKETCH: the support elements decoded
    sketch_peeled      -- SKETCH: how many of them peeling recovered exactly
                          (the others are estimates)
    time_total         -- seconds inside the communicator's calls, entry to
                          return, failed calls included
    auto_calls         -- AUTO: the calls it decided
    auto_lossy_calls   -- AUTO: how many of them its cost model compressed
    auto_predicted     -- AUTO: the seconds its model predicted for those
                          choices (as corrected by the calls before), summed
    auto_explored_calls -- AUTO: how many of them ran the runner-up to check
                          the model
    auto_measured      -- AUTO: the seconds those calls took on this rank

    The property `ratio` is bytes_uncompressed / bytes_wire. A Stats still
    answers stats["bytes_wire"] as the dict of earlier versions did, with a
    DeprecationWarning: use stats.bytes_wire (or as_dict()).
    """

    calls: int = 0
    bytes_uncompressed: int = 0
    bytes_wire: int = 0
    time_compress: float = 0.0
    time_communicate: float = 0.0
    time_decompress: float = 0.0
    sketch_elements: int = 0
    sketch_peeled: int = 0
    time_total: float = 0.0
    auto_calls: int = 0
    auto_lossy_calls: int = 0
    auto_predicted: float = 0.0
    auto_explored_calls: int = 0
    auto_measured: float = 0.0

    @property
    def ratio(self) -> float:
        """bytes_uncompressed / bytes_wire: how many times fewer bytes went
        on the wire (inf when nothing was sent, 1.0 for no calls)."""
        if self.bytes_wire == 0:
            return 1.0 if self.bytes_uncompressed == 0 else float("inf")
        return self.bytes_uncompressed / self.bytes_wire

    def as_dict(self) -> Dict[str, Union[int, float]]:
        """The counters as a dict {field name: value}."""
        return dataclasses.asdict(self)

    # -- the dict interface of earlier versions (deprecated) -----------------

    def __getitem__(self, name: str) -> Union[int, float]:
        warnings.warn("Comm.stats() returns a cc_coll.Stats: stats[%r] is deprecated, use stats.%s"
                      % (name, name), DeprecationWarning, stacklevel=2)
        if name not in self.__dataclass_fields__:
            raise KeyError(name)
        return getattr(self, name)

    def keys(self) -> Tuple[str, ...]:
        """The field names (the dict interface of earlier versions)."""
        return tuple(f.name for f in dataclasses.fields(self))

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def __contains__(self, name: object) -> bool:
        return name in self.__dataclass_fields__


class _Stats:
    """Comm's statistics calls (a base class of Comm)."""

    _handle: Any

    def stats(self) -> Stats:
        """This rank's counters since creation or reset_stats(): a Stats
        (calls, bytes_uncompressed, bytes_wire, the times in seconds,
        SKETCH's and AUTO's counters; help(cc_coll.Stats) says each)."""
        s = _lib.StatsStruct(mask=_lib.STATS_FIELD_ALL)
        _check(lib.cc_coll_comm_get_stats(self._handle, ctypes.byref(s)))
        return Stats(**{name: getattr(s, name) for name, _ in _lib.StatsStruct._fields_ if name != "mask"})

    def auto_predict(self, count: int, dtype: Union[Dtype, int, str] = Dtype.F32,
                     params: Optional[Params] = None) -> Tuple[Method, float, float]:
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

    def reset_stats(self) -> None:
        """Zero the counters."""
        _check(lib.cc_coll_comm_reset_stats(self._handle))
