# SPDX-License-Identifier: BSD-3-Clause
"""The public names of the package, from the modules that define them (kept
for code that imports cc_coll._api; `cc_coll` itself re-exports them)."""

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
    "Status", "Dtype", "Op", "Method", "MethodCap", "Sparsifier", "Error", "Params", "LowRankState", "Comm", "DeviceArray",
    "Request", "waitall", "version", "version_info", "check_version", "settings", "build_info",
    "to_bfloat16", "from_bfloat16", "Stats",
    "ConfigError", "CountOverflowError", "CUDAError", "EFLimitError", "InternalError", "InvalidArgError",
    "InvalidCommError", "InvalidDtypeError", "InvalidMethodError", "InvalidOpError", "InvalidParamsError",
    "MismatchError", "MPIError", "MPINotInitializedError", "NoMemoryError", "NotSupportedError", "NullBufferError",
    "VersionMismatchError",
]
