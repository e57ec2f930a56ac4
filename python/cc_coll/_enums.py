# SPDX-License-Identifier: BSD-3-Clause
"""Enumerations of include/cc_coll.h with fixed values (names without the C
prefix). Method, read from the library, is in _methods."""

import enum

__all__ = ["Status", "Dtype", "Op", "Sparsifier"]


class Status(enum.IntEnum):
    """cc_coll_status_t: CC_COLL_OK and CC_COLL_ERR_* (without the ERR_)."""
    OK = 0
    NULL_BUFFER = -1
    INVALID_DTYPE = -2
    INVALID_OP = -3
    INVALID_METHOD = -4
    COUNT_OVERFLOW = -5
    INVALID_COMM = -6
    INVALID_PARAMS = -7
    INVALID_ARG = -8
    MPI = -9
    MPI_NOT_INITIALIZED = -10
    VERSION_MISMATCH = -11
    CONFIG = -12
    NOT_SUPPORTED = -13
    NO_MEMORY = -14
    INTERNAL = -15
    EF_LIMIT = -16
    MISMATCH = -17
    CUDA = -18


class Dtype(enum.IntEnum):
    """cc_coll_dtype_t."""
    F32 = 0
    F64 = 1
    F16 = 2
    BF16 = 3


class Op(enum.IntEnum):
    """cc_coll_op_t."""
    SUM = 0
    AVG = 1


class Sparsifier(enum.IntEnum):
    """cc_coll_sparsifier_t (CC_COLL_SPARSIFY_*): how SKETCH picks the
    elements it sends."""
    TOPK = 0
    THRESHOLD = 1
