# SPDX-License-Identifier: BSD-3-Clause
"""The public Python API: enumerations, Error, Comm and module functions."""

import ctypes
import enum
import numbers

import numpy as np

from . import _lib
from ._lib import lib
from ._version import ABI_MAJOR, ABI_MINOR

__all__ = [
    "Status", "Dtype", "Op", "Method", "Sparsifier", "Error", "Comm",
    "version", "version_info", "check_version", "settings", "build_info",
    "to_bfloat16", "from_bfloat16",
]

_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1


# --------------------------------------------------------------------------
# Enumerations (values of include/cc_coll.h; names without the C prefix)
# --------------------------------------------------------------------------

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


class Method(enum.IntEnum):
    """cc_coll_method_t."""
    NONE = 0
    TOPK = 1
    SKETCH = 2


class Sparsifier(enum.IntEnum):
    """cc_coll_sparsifier_t (CC_COLL_SPARSIFY_*): how SKETCH picks the
    elements it sends."""
    TOPK = 0
    THRESHOLD = 1


# numpy element type of each Dtype. bfloat16 has no numpy type: its arrays
# are uint16 holding the bit patterns, and the call must say dtype=Dtype.BF16.
_NUMPY_OF_DTYPE = {
    Dtype.F32: np.dtype(np.float32),
    Dtype.F64: np.dtype(np.float64),
    Dtype.F16: np.dtype(np.float16),
    Dtype.BF16: np.dtype(np.uint16),
}
_DTYPE_OF_NUMPY = {
    np.dtype(np.float32): Dtype.F32,
    np.dtype(np.float64): Dtype.F64,
    np.dtype(np.float16): Dtype.F16,
}


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------

class Error(Exception):
    """A libcc_coll call failed.

    status  -- the Status (a plain int if this package does not know it)
    message -- the library's message (cc_coll_last_error()): which argument or
               which MPI call failed, and why
    """

    def __init__(self, status, message=""):
        try:
            status = Status(status)
        except ValueError:
            status = int(status)
        self.status = status
        self.message = message or _status_string(status)
        name = _status_string(status).split(":", 1)[0]
        super().__init__("%s: %s" % (name, self.message))

    def __reduce__(self):
        return (type(self), (int(self.status), self.message))


def _status_string(status):
    return lib.cc_coll_status_string(int(status)).decode("utf-8", "replace")


def _check(status):
    if status != Status.OK:
        raise Error(status, lib.cc_coll_last_error().decode("utf-8", "replace"))


# --------------------------------------------------------------------------
# Module functions
# --------------------------------------------------------------------------

def version():
    """The library's version at run time, "MAJOR.MINOR.PATCH"."""
    return lib.cc_coll_version_string().decode()


def version_info():
    """The library's version at run time as a tuple (major, minor, patch)."""
    v = [ctypes.c_int() for _ in range(3)]
    lib.cc_coll_get_version(*(ctypes.byref(x) for x in v))
    return tuple(x.value for x in v)


def check_version(major=ABI_MAJOR, minor=ABI_MINOR):
    """Raise Error(Status.VERSION_MISMATCH) unless code written against header
    version (major, minor) can use the loaded library (cc_coll_check_version_numbers).
    The package checks its own version this way when it is imported."""
    _check(lib.cc_coll_check_version_numbers(int(major), int(minor)))


def settings():
    """Every setting of the library (cc_coll_setting_get) as a list of dicts:
    name, env_var, default, value (in effect now), doc, from_env (bool) and
    error (None, or why the environment's value was rejected)."""
    out = []
    for i in range(lib.cc_coll_setting_count()):
        s = _lib.SettingStruct()
        status = lib.cc_coll_setting_get(i, ctypes.byref(s))
        error = None
        if status == Status.CONFIG:
            error = lib.cc_coll_last_error().decode("utf-8", "replace")
        else:
            _check(status)

        def text(p):
            return p.decode("utf-8", "replace") if p is not None else None

        out.append({
            "name": text(s.name),
            "env_var": text(s.env_var),
            "default": text(s.default_value),
            "value": text(s.value),
            "doc": text(s.doc),
            "from_env": bool(s.from_env),
            "error": error,
        })
    return out


def build_info():
    """How the loaded library was built: {"library": path, "cuda": bool,
    "fortran": bool, "mpi_cuda_aware": bool}."""
    flags = lib.cc_coll_build_flags()
    return {
        "library": _lib.library_path,
        "cuda": bool(flags & _lib.BUILD_CUDA),
        "fortran": bool(flags & _lib.BUILD_FORTRAN),
        "mpi_cuda_aware": bool(lib.cc_coll_mpi_cuda_aware()),
    }


def to_bfloat16(a):
    """bfloat16 bit patterns (uint16 array) of a float array, rounded to
    nearest, ties to even; NaN stays NaN."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))
               >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(bits.view(np.float32))
    rounded[nan] = ((bits[nan] >> np.uint32(16)) | np.uint32(0x0040)).astype(np.uint16)
    return rounded


def from_bfloat16(bits):
    """float32 array of bfloat16 bit patterns (a uint16 array)."""
    bits = np.ascontiguousarray(bits, dtype=np.uint16)
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


# --------------------------------------------------------------------------
# Argument conversion
# --------------------------------------------------------------------------

def _enum_arg(cls, value, what):
    """An enum member (or a plain int, left for the library to judge) from a
    member, an int or a case-insensitive name."""
    if isinstance(value, str):
        try:
            return cls[value.strip().upper()]
        except KeyError:
            names = ", ".join(repr(m.name.lower()) for m in cls)
            raise ValueError("%s = %r is not one of %s" % (what, value, names)) from None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s must be a %s or its name, not %r" % (what, cls.__name__, value))
    value = int(value)
    if not _INT_MIN <= value <= _INT_MAX:
        raise ValueError("%s = %d does not fit a C int" % (what, value))
    try:
        return cls(value)
    except ValueError:
        return value  # the library returns the matching CC_COLL_ERR_INVALID_*


def _real_arg(value, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError("%s must be a real number, not %r" % (what, value))
    return float(value)


def _u64_arg(value, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s must be an int, not %r" % (what, value))
    if not 0 <= int(value) < (1 << 64):
        raise ValueError("%s = %d is outside [0, 2**64)" % (what, int(value)))
    return int(value)


def _params(method=None, density=None, ef=None, ef_key=None, sparsifier=None, zero_fraction=None,
            load_factor=None, seed=None):
    """A cc_coll_params_t with a mask bit for every argument that is not None.
    The Python layer checks types; the library judges the values (ranges,
    unknown enumeration values) and reports them as Error."""
    p = _lib.ParamsStruct()
    if method is not None:
        p.method = _enum_arg(Method, method, "method")
        p.mask |= _lib.PARAMS_FIELD_METHOD
    if density is not None:
        p.density = _real_arg(density, "density")  # the library checks 0 < density <= 1
        p.mask |= _lib.PARAMS_FIELD_DENSITY
    if ef is not None:
        if not isinstance(ef, (numbers.Integral, np.bool_)) or not _INT_MIN <= int(ef) <= _INT_MAX:
            raise TypeError("ef must be True/False (or 1/0), not %r" % (ef,))
        p.ef = int(ef)  # the library rejects values other than 0 and 1
        p.mask |= _lib.PARAMS_FIELD_EF
    if ef_key is not None:
        p.ef_key = _u64_arg(ef_key, "ef_key")
        p.mask |= _lib.PARAMS_FIELD_EF_KEY
    if sparsifier is not None:
        p.sparsifier = _enum_arg(Sparsifier, sparsifier, "sparsifier")
        p.mask |= _lib.PARAMS_FIELD_SPARSIFIER
    if zero_fraction is not None:
        p.zero_fraction = _real_arg(zero_fraction, "zero_fraction")  # library: [0, 1)
        p.mask |= _lib.PARAMS_FIELD_ZERO_FRACTION
    if load_factor is not None:
        p.load_factor = _real_arg(load_factor, "load_factor")  # library: (0, 16]
        p.mask |= _lib.PARAMS_FIELD_LOAD_FACTOR
    if seed is not None:
        p.seed = _u64_arg(seed, "seed")
        p.mask |= _lib.PARAMS_FIELD_SEED
    return p


def _array(a, name, writable):
    if not isinstance(a, np.ndarray):
        raise TypeError("%s must be a numpy.ndarray, not %s" % (name, type(a).__name__))
    if not a.flags.c_contiguous:
        raise ValueError("%s is not C-contiguous (shape %s, strides %s); pass "
                         "numpy.ascontiguousarray(%s) and copy the result back"
                         % (name, a.shape, a.strides, name))
    if writable and not a.flags.writeable:
        raise ValueError("%s is read-only" % name)
    return a


def _dtype_of(a, dtype, name):
    if dtype is None:
        try:
            return _DTYPE_OF_NUMPY[a.dtype]
        except KeyError:
            raise TypeError(
                "%s has dtype %s; supported: float32, float64, float16 in native byte "
                "order, or uint16 bit patterns with dtype=Dtype.BF16" % (name, a.dtype)) from None
    d = _enum_arg(Dtype, dtype, "dtype")
    if not isinstance(d, Dtype):
        raise ValueError("dtype = %d is not a Dtype" % d)
    if a.dtype != _NUMPY_OF_DTYPE[d]:
        raise TypeError("dtype=%s needs a %s array; %s has dtype %s"
                        % (d.name, _NUMPY_OF_DTYPE[d], name, a.dtype))
    return d


def _fint_of(comm):
    if isinstance(comm, bool):
        raise TypeError("comm must be an mpi4py communicator or a Fortran handle (int)")
    if isinstance(comm, numbers.Integral):
        fint = int(comm)
    elif hasattr(comm, "py2f"):
        fint = int(comm.py2f())
    else:
        raise TypeError("comm must be an mpi4py communicator or a Fortran handle (int), not %s"
                        % type(comm).__name__)
    if not _INT_MIN <= fint <= _INT_MAX:
        raise ValueError("Fortran communicator handle %d does not fit MPI_Fint" % fint)
    return fint


# --------------------------------------------------------------------------
# Communicator
# --------------------------------------------------------------------------

class Comm:
    """A libcc_coll communicator over an MPI communicator.

    Comm(comm) -- comm is an mpi4py communicator (mpi4py.MPI.Comm) or an
    integer Fortran handle (MPI_Fint, as MPI_Comm_c2f gives). Collective over
    comm; MPI must be initialised (importing mpi4py.MPI does it). The library
    duplicates comm, so its traffic never mixes with the caller's.

    Close it with close() or a `with` block before MPI is finalised; close()
    is local (not collective) and may be called more than once. After close()
    every method raises Error(Status.INVALID_COMM).
    """

    def __init__(self, comm):
        fint = _fint_of(comm)
        handle = ctypes.c_void_p()
        _check(lib.cc_coll_comm_create_fint_versioned(fint, ctypes.byref(handle),
                                                      ABI_MAJOR, ABI_MINOR))
        self._handle = handle.value
        self._closed = False

    # -- lifetime ----------------------------------------------------------

    def close(self):
        """Destroy the communicator (cc_coll_comm_destroy); a no-op when closed."""
        if self._closed:
            return
        self._closed = True
        _check(lib.cc_coll_comm_destroy(self._handle))

    @property
    def closed(self):
        return self._closed

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
    def handle(self):
        """The C handle (cc_coll_comm_h) as an int; it stays the destroyed
        handle after close()."""
        return self._handle

    @property
    def rank(self):
        r = ctypes.c_int()
        _check(lib.cc_coll_comm_rank(self._handle, ctypes.byref(r)))
        return r.value

    @property
    def size(self):
        s = ctypes.c_int()
        _check(lib.cc_coll_comm_size(self._handle, ctypes.byref(s)))
        return s.value

    # -- collectives -------------------------------------------------------

    def allreduce(self, sendbuf, recvbuf=None, op=Op.SUM, method=None, density=None,
                  ef=None, ef_key=None, dtype=None, sparsifier=None, zero_fraction=None,
                  load_factor=None, seed=None):
        """Allreduce numpy arrays over the communicator (cc_coll_allreduce).

        sendbuf -- C-contiguous numpy array of float32, float64 or float16
                   (or uint16 bfloat16 bit patterns with dtype=Dtype.BF16)
        recvbuf -- array of the same shape and dtype for the result; None or
                   sendbuf itself reduces in place
        op      -- Op.SUM / Op.AVG or "sum" / "avg"
        method, density, ef, ef_key, sparsifier, zero_fraction, load_factor,
        seed    -- per-call parameters; None leaves a field unset, so it comes
                   from the CC_COLL_* environment or the default.
                   method: Method or "none" / "topk" / "sketch"; density in
                   (0, 1]; ef: True/False; ef_key: int in [0, 2**64);
                   sparsifier (SKETCH): Sparsifier or "topk" / "threshold";
                   zero_fraction (THRESHOLD) in [0, 1); load_factor (SKETCH)
                   in (0, 1]; seed (SKETCH): int in [0, 2**64), the same on
                   every rank
        dtype   -- None (from the array) or a Dtype; required for BF16

        Every rank must pass the same shape, dtype, op and parameters.
        Returns recvbuf (sendbuf when in place).
        """
        in_place = recvbuf is None or recvbuf is sendbuf
        _array(sendbuf, "sendbuf", writable=in_place)
        d = _dtype_of(sendbuf, dtype, "sendbuf")
        if in_place:
            recvbuf = sendbuf
        else:
            _array(recvbuf, "recvbuf", writable=True)
            if recvbuf.dtype != sendbuf.dtype:
                raise TypeError("recvbuf has dtype %s but sendbuf has %s"
                                % (recvbuf.dtype, sendbuf.dtype))
            if recvbuf.shape != sendbuf.shape:
                raise ValueError("recvbuf has shape %s but sendbuf has %s"
                                 % (recvbuf.shape, sendbuf.shape))
        op = _enum_arg(Op, op, "op")
        params = _params(method, density, ef, ef_key, sparsifier, zero_fraction, load_factor, seed)
        _check(lib.cc_coll_allreduce(sendbuf.ctypes.data, recvbuf.ctypes.data, sendbuf.size,
                                     int(d), int(op), ctypes.byref(params), self._handle, None))
        return recvbuf

    def reduce_scatter(self, sendbuf, recvbuf=None, op=Op.SUM, method=None, density=None,
                       ef=None, ef_key=None, dtype=None, sparsifier=None, zero_fraction=None,
                       load_factor=None, seed=None):
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
        load_factor, seed -- as for allreduce (method NONE, TOPK or SKETCH)

        Every rank must pass the same size, dtype, op and parameters.
        Returns recvbuf, or in place a 1-D view of sendbuf's first recvcount
        elements (sendbuf.reshape(-1)[:recvcount]). The error-feedback
        residual covers the whole sendbuf: without ef_key it is named by
        (recvbuf address, recvcount * P, dtype), and ef_residual(sendbuf,
        ef_key=...) reads it back.
        """
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
        params = _params(method, density, ef, ef_key, sparsifier, zero_fraction, load_factor, seed)
        _check(lib.cc_coll_reduce_scatter(sendbuf.ctypes.data, recvbuf.ctypes.data, recvcount,
                                          int(d), int(op), ctypes.byref(params), self._handle, None))
        if in_place:
            return sendbuf.reshape(-1)[:recvcount]
        return recvbuf

    # -- error feedback ----------------------------------------------------

    def ef_bytes(self):
        """Bytes held by all error-feedback residuals of this communicator on this rank."""
        n = ctypes.c_uint64()
        _check(lib.cc_coll_ef_bytes(self._handle, ctypes.byref(n)))
        return n.value

    def ef_residual(self, recvbuf, ef_key=None, dtype=None):
        """This rank's residual of the tensor that allreduce calls name with
        (recvbuf, ef_key): a float64 array shaped like recvbuf (zeros when
        there is none yet). Without ef_key the key is recvbuf's address,
        size and dtype."""
        _array(recvbuf, "recvbuf", writable=False)
        d = _dtype_of(recvbuf, dtype, "recvbuf")
        params = _params(ef_key=ef_key)
        out = np.zeros(recvbuf.shape, dtype=np.float64)
        _check(lib.cc_coll_ef_get_residual(self._handle, ctypes.byref(params), recvbuf.ctypes.data,
                                           recvbuf.size, int(d), out.ctypes.data))
        return out

    def ef_reset(self, recvbuf, ef_key=None, dtype=None):
        """Drop the residual of one tensor, named as in ef_residual()."""
        _array(recvbuf, "recvbuf", writable=False)
        d = _dtype_of(recvbuf, dtype, "recvbuf")
        params = _params(ef_key=ef_key)
        _check(lib.cc_coll_ef_reset(self._handle, ctypes.byref(params), recvbuf.ctypes.data,
                                    recvbuf.size, int(d)))

    def ef_reset_all(self):
        """Drop every residual of this communicator."""
        _check(lib.cc_coll_ef_reset_all(self._handle))

    # -- statistics --------------------------------------------------------

    def stats(self):
        """This rank's counters since creation or reset_stats(): a dict with
        calls, bytes_uncompressed, bytes_wire (ints), time_compress,
        time_communicate, time_decompress (seconds), sketch_elements and
        sketch_peeled (ints: SKETCH's decoded support elements, and how many
        of them peeling recovered exactly)."""
        s = _lib.StatsStruct(mask=_lib.STATS_FIELD_ALL)
        _check(lib.cc_coll_comm_get_stats(self._handle, ctypes.byref(s)))
        return {name: getattr(s, name) for name, _ in _lib.StatsStruct._fields_ if name != "mask"}

    def reset_stats(self):
        """Zero the counters."""
        _check(lib.cc_coll_comm_reset_stats(self._handle))
