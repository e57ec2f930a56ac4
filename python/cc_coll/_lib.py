# SPDX-License-Identifier: BSD-3-Clause
"""Loading libcc_coll and declaring its C ABI for ctypes.

Nothing here is public: the rest of the package uses `lib` and the
structures; users go through cc_coll.Comm and the module functions.
"""

import ctypes
import ctypes.util
import os

from ._version import ABI_MAJOR

#: Environment variable naming the shared library to load (a path).
LIBRARY_ENV = "CC_COLL_LIBRARY"

SONAME = "libcc_coll.so.%d" % ABI_MAJOR


# --------------------------------------------------------------------------
# Structures (mirror include/cc_coll.h; ctypes applies the platform's C
# alignment rules, so the padding matches the compiler's)
# --------------------------------------------------------------------------

class ParamsStruct(ctypes.Structure):
    """cc_coll_params_t."""
    _fields_ = [
        ("mask", ctypes.c_uint64),
        ("method", ctypes.c_int),     # cc_coll_method_t (an int-sized enum)
        ("density", ctypes.c_double),
        ("ef", ctypes.c_int),
        ("ef_key", ctypes.c_uint64),
        ("sparsifier", ctypes.c_int),  # cc_coll_sparsifier_t
        ("zero_fraction", ctypes.c_double),
        ("load_factor", ctypes.c_double),
        ("seed", ctypes.c_uint64),
        # LOWRANK (PowerSGD)
        ("rows", ctypes.c_uint64),
        ("cols", ctypes.c_uint64),
        ("rank", ctypes.c_int),
        ("warm_start", ctypes.c_int),
        ("start_iter", ctypes.c_uint64),
        ("min_compression_rate", ctypes.c_double),
    ]


class StatsStruct(ctypes.Structure):
    """cc_coll_stats_t."""
    _fields_ = [
        ("mask", ctypes.c_uint64),
        ("calls", ctypes.c_uint64),
        ("bytes_uncompressed", ctypes.c_uint64),
        ("bytes_wire", ctypes.c_uint64),
        ("time_compress", ctypes.c_double),
        ("time_communicate", ctypes.c_double),
        ("time_decompress", ctypes.c_double),
        ("sketch_elements", ctypes.c_uint64),
        ("sketch_peeled", ctypes.c_uint64),
        ("time_total", ctypes.c_double),
        ("auto_calls", ctypes.c_uint64),
        ("auto_lossy_calls", ctypes.c_uint64),
        ("auto_predicted", ctypes.c_double),
        ("auto_explored_calls", ctypes.c_uint64),
        ("auto_measured", ctypes.c_double),
    ]


class SettingStruct(ctypes.Structure):
    """cc_coll_setting_t."""
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("env_var", ctypes.c_char_p),
        ("default_value", ctypes.c_char_p),
        ("value", ctypes.c_char_p),
        ("doc", ctypes.c_char_p),
        ("from_env", ctypes.c_int),
    ]


# Bits of cc_coll_params_t.mask and cc_coll_stats_t.mask.
PARAMS_FIELD_METHOD = 1 << 0
PARAMS_FIELD_DENSITY = 1 << 1
PARAMS_FIELD_EF = 1 << 2
PARAMS_FIELD_EF_KEY = 1 << 3
PARAMS_FIELD_SPARSIFIER = 1 << 4
PARAMS_FIELD_ZERO_FRACTION = 1 << 5
PARAMS_FIELD_LOAD_FACTOR = 1 << 6
PARAMS_FIELD_SEED = 1 << 7
PARAMS_FIELD_SHAPE = 1 << 8
PARAMS_FIELD_RANK = 1 << 9
PARAMS_FIELD_WARM_START = 1 << 10
PARAMS_FIELD_START_ITER = 1 << 11
PARAMS_FIELD_MIN_COMPRESSION_RATE = 1 << 12

STATS_FIELD_ALL = (1 << 14) - 1  # CALLS .. TIME_TOTAL, AUTO_CALLS .. AUTO_MEASURED

# Bits of cc_coll_method_cap_t (cc_coll_method_caps).
METHOD_CAP_LOSSY = 1 << 0
METHOD_CAP_REDUCE_SCATTER = 1 << 1
METHOD_CAP_P2P = 1 << 2
METHOD_CAP_MATRIX = 1 << 3
METHOD_CAP_STATE = 1 << 4
METHOD_CAP_SELECTS = 1 << 5
METHOD_CAP_AUTO_CANDIDATE = 1 << 6
METHOD_CAP_DENSITY = 1 << 7

BUILD_CUDA = 1 << 0
BUILD_FORTRAN = 1 << 1


# --------------------------------------------------------------------------
# Finding the library
# --------------------------------------------------------------------------

def _candidates():
    """(description, name-or-path) pairs in the order they are tried."""
    env = os.environ.get(LIBRARY_ENV)
    if env:
        # An explicit choice is final: no silent fallback to another copy.
        return [("%s=%s" % (LIBRARY_ENV, env), env)], True
    out = []
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), SONAME)
    if os.path.exists(here):
        out.append(("next to the package", here))
    found = ctypes.util.find_library("cc_coll")
    if found:
        out.append(("ctypes.util.find_library('cc_coll')", found))
    out.append(("the dynamic loader (LD_LIBRARY_PATH, ld.so.cache)", SONAME))
    return out, False


def _load():
    candidates, explicit = _candidates()
    errors = []
    for where, name in candidates:
        try:
            # RTLD_GLOBAL: MPI implementations (Open MPI's plugins) expect the
            # MPI library's symbols to be globally visible.
            return ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL), name
        except OSError as exc:
            errors.append("  %s: %s" % (where, exc))
    hint = ("set %s to the path of %s (e.g. build/%s), or add its directory "
            "to LD_LIBRARY_PATH" % (LIBRARY_ENV, SONAME, SONAME))
    if explicit:
        hint = "%s names a library that cannot be loaded" % LIBRARY_ENV
    raise ImportError("cc_coll: cannot load the libcc_coll shared library (%s). Tried:\n%s"
                      % (hint, "\n".join(errors)))


lib, library_path = _load()


# --------------------------------------------------------------------------
# Prototypes
# --------------------------------------------------------------------------

_status = ctypes.c_int
_handle = ctypes.c_void_p
_size_t = ctypes.c_size_t
_P = ctypes.POINTER


def _proto(name, restype, *argtypes):
    try:
        fn = getattr(lib, name)
    except AttributeError:
        raise ImportError("cc_coll: %s (%s) does not export %s; it is not the libcc_coll this "
                          "package was written for" % (library_path, SONAME, name)) from None
    fn.restype = restype
    fn.argtypes = list(argtypes)
    return fn


_proto("cc_coll_status_string", ctypes.c_char_p, _status)
_proto("cc_coll_last_error", ctypes.c_char_p)
_proto("cc_coll_get_version", None, _P(ctypes.c_int), _P(ctypes.c_int), _P(ctypes.c_int))
_proto("cc_coll_version_string", ctypes.c_char_p)
_proto("cc_coll_check_version_numbers", _status, ctypes.c_int, ctypes.c_int)
_proto("cc_coll_dtype_size", _size_t, ctypes.c_int)
_proto("cc_coll_method_name", ctypes.c_char_p, ctypes.c_int)
_proto("cc_coll_method_count", ctypes.c_int)
_proto("cc_coll_method_at", _status, ctypes.c_int, _P(ctypes.c_int))
_proto("cc_coll_method_caps", ctypes.c_uint, ctypes.c_int)
_proto("cc_coll_method_summary", ctypes.c_char_p, ctypes.c_int)
_proto("cc_coll_method_from_name", _status, ctypes.c_char_p, _P(ctypes.c_int))
_proto("cc_coll_comm_create_fint_versioned", _status, ctypes.c_int, _P(_handle),
       ctypes.c_int, ctypes.c_int)
_proto("cc_coll_comm_destroy", _status, _handle)
_proto("cc_coll_comm_rank", _status, _handle, _P(ctypes.c_int))
_proto("cc_coll_comm_size", _status, _handle, _P(ctypes.c_int))
_proto("cc_coll_allreduce", _status, ctypes.c_void_p, ctypes.c_void_p, _size_t, ctypes.c_int,
       ctypes.c_int, _P(ParamsStruct), _handle, ctypes.c_void_p)
_proto("cc_coll_reduce_scatter", _status, ctypes.c_void_p, ctypes.c_void_p, _size_t, ctypes.c_int,
       ctypes.c_int, _P(ParamsStruct), _handle, ctypes.c_void_p)
_proto("cc_coll_allreduce_group", _status, _size_t, _P(ctypes.c_void_p), _P(ctypes.c_void_p), _P(_size_t),
       _P(ctypes.c_int), ctypes.c_int, _P(ParamsStruct), _handle, ctypes.c_void_p)
_proto("cc_coll_iallreduce", _status, ctypes.c_void_p, ctypes.c_void_p, _size_t, ctypes.c_int,
       ctypes.c_int, _P(ParamsStruct), _handle, ctypes.c_void_p, _P(_handle))
_proto("cc_coll_ireduce_scatter", _status, ctypes.c_void_p, ctypes.c_void_p, _size_t, ctypes.c_int,
       ctypes.c_int, _P(ParamsStruct), _handle, ctypes.c_void_p, _P(_handle))
_proto("cc_coll_iallreduce_group", _status, _size_t, _P(ctypes.c_void_p), _P(ctypes.c_void_p), _P(_size_t),
       _P(ctypes.c_int), ctypes.c_int, _P(ParamsStruct), _handle, ctypes.c_void_p, _P(_handle))
_proto("cc_coll_test", _status, _handle, _P(ctypes.c_int))
_proto("cc_coll_wait", _status, _handle)
_proto("cc_coll_waitall", _status, _size_t, _P(_handle), _P(ctypes.c_int))
_proto("cc_coll_request_status", _status, _handle, _P(ctypes.c_int), _P(ctypes.c_int), _P(ctypes.c_char_p))
_proto("cc_coll_request_free", _status, _handle)
_proto("cc_coll_lowrank_get_state", _status, _handle, _P(ParamsStruct), ctypes.c_void_p, _size_t, ctypes.c_int,
       _P(ctypes.c_uint64), _P(ctypes.c_uint64), _P(ctypes.c_int), _P(ctypes.c_uint64), ctypes.c_void_p,
       ctypes.c_void_p)
_proto("cc_coll_lowrank_set_q", _status, _handle, _P(ParamsStruct), ctypes.c_void_p, _size_t, ctypes.c_int,
       ctypes.c_void_p)
_proto("cc_coll_send", _status, ctypes.c_void_p, _size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
       _P(ParamsStruct), _handle, ctypes.c_void_p)
_proto("cc_coll_recv", _status, ctypes.c_void_p, _size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
       _P(ParamsStruct), _handle, ctypes.c_void_p)
_proto("cc_coll_p2p_tag_ub", _status, _handle, _P(ctypes.c_int))
_proto("cc_coll_lep_get_residual", _status, _handle, ctypes.c_int, ctypes.c_int, _P(ParamsStruct), _size_t,
       ctypes.c_int, ctypes.c_void_p)
_proto("cc_coll_lep_reset", _status, _handle, ctypes.c_int, ctypes.c_int, _P(ParamsStruct))
_proto("cc_coll_ef_bytes", _status, _handle, _P(ctypes.c_uint64))
_proto("cc_coll_state_bytes", _status, _handle, _P(ctypes.c_uint64))
_proto("cc_coll_ef_get_residual", _status, _handle, _P(ParamsStruct), ctypes.c_void_p, _size_t,
       ctypes.c_int, ctypes.c_void_p)
_proto("cc_coll_ef_reset", _status, _handle, _P(ParamsStruct), ctypes.c_void_p, _size_t,
       ctypes.c_int)
_proto("cc_coll_ef_reset_all", _status, _handle)
_proto("cc_coll_comm_get_stats", _status, _handle, _P(StatsStruct))
_proto("cc_coll_comm_reset_stats", _status, _handle)
_proto("cc_coll_auto_predict", _status, _handle, _size_t, ctypes.c_int, _P(ParamsStruct), _P(ctypes.c_int),
       _P(ctypes.c_double), _P(ctypes.c_double))
_proto("cc_coll_setting_count", _size_t)
_proto("cc_coll_setting_get", _status, _size_t, _P(SettingStruct))
_proto("cc_coll_build_flags", ctypes.c_uint)
_proto("cc_coll_mpi_cuda_aware", ctypes.c_int)
_proto("cc_coll_cuda_device_count", ctypes.c_int)
_proto("cc_coll_buffer_on_device", ctypes.c_int, ctypes.c_void_p)

# Checkpoints of the compression state.
_proto("cc_coll_state_export", _status, _handle, ctypes.c_void_p, _P(_size_t))
_proto("cc_coll_state_import", _status, _handle, ctypes.c_void_p, _size_t)
