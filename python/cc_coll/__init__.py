# SPDX-License-Identifier: BSD-3-Clause
"""cc_coll: compressed MPI collectives (libcc_coll) for numpy arrays.

    from mpi4py import MPI
    import numpy as np
    import cc_coll

    with cc_coll.Comm(MPI.COMM_WORLD) as comm:
        grad = np.ones(1000, dtype=np.float32)
        comm.allreduce(grad, op="avg", method="topk", density=0.01)
        req = comm.iallreduce(grad, op="avg", method="topk", density=0.01)
        ...                                   # compute; leave grad alone
        req.wait()

A thin ctypes layer over the C ABI of libcc_coll (include/cc_coll.h). The
shared library is found through the environment variable CC_COLL_LIBRARY (a
path), then a libcc_coll.so.<major> next to this package, then the dynamic
loader (ctypes.util.find_library, LD_LIBRARY_PATH). See docs/python.md.
"""

from ._version import ABI_MAJOR, ABI_MINOR, ABI_PATCH, __version__
from ._lib import library_path
from ._arrays import DeviceArray, from_bfloat16, to_bfloat16
from ._comm import Comm
from ._enums import Dtype, Op, Sparsifier, Status
from ._errors import (
    ConfigError, CountOverflowError, CUDAError, EFLimitError, Error, InternalError, InvalidArgError, InvalidCommError,
    InvalidDtypeError, InvalidMethodError, InvalidOpError, InvalidParamsError, MismatchError, MPIError,
    MPINotInitializedError, NoMemoryError, NotSupportedError, NullBufferError, VersionMismatchError,
)
from ._info import build_info, check_version, settings, version, version_info
from ._methods import Method, MethodCap
from ._params import Params
from ._request import Request, waitall
from ._stats import Stats
from ._tensor_state import LowRankState

__all__ = [
    "Comm", "DeviceArray", "Dtype", "Error", "LowRankState", "Method", "MethodCap", "Op", "Params", "Request", "Sparsifier",
    "Stats", "Status",
    "ConfigError", "CountOverflowError", "CUDAError", "EFLimitError", "InternalError", "InvalidArgError",
    "InvalidCommError", "InvalidDtypeError", "InvalidMethodError", "InvalidOpError", "InvalidParamsError",
    "MismatchError", "MPIError", "MPINotInitializedError", "NoMemoryError", "NotSupportedError", "NullBufferError",
    "VersionMismatchError",
    "build_info", "check_version", "from_bfloat16", "settings", "to_bfloat16", "waitall",
    "version", "version_info", "library_path", "__version__",
    "ABI_MAJOR", "ABI_MINOR", "ABI_PATCH",
]

# The library must be able to serve code written against this package's copy
# of the header (same major version, library minor >= ours).
try:
    check_version(ABI_MAJOR, ABI_MINOR)
except Error as _exc:
    raise ImportError("cc_coll %s needs libcc_coll %d.%d or a later %d.x, but %s is %s: %s"
                      % (__version__, ABI_MAJOR, ABI_MINOR, ABI_MAJOR, library_path,
                         version(), _exc)) from _exc
