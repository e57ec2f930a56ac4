# SPDX-License-Identifier: BSD-3-Clause
"""The public Python API: enumerations, Error, Comm and module functions."""

import collections
import collections.abc
import ctypes
import enum
import math
import numbers
import threading

import numpy as np

from . import _lib
from ._lib import lib
from ._version import ABI_MAJOR, ABI_MINOR

__all__ = [
    "Status", "Dtype", "Op", "Method", "Sparsifier", "Error", "Params", "LowRankState", "Comm", "Request",
    "waitall", "version", "version_info", "check_version", "settings", "build_info",
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


def _method_enum(method_name):
    """The Method IntEnum of the methods `method_name` (cc_coll_method_name)
    knows: a member per method, named as the library names it in upper case
    (NONE, TOPK, ...), valued as its cc_coll_method_t enumerator.

    Method values are dense from 0 (include/cc_coll.h), so the methods are
    method_name(0), method_name(1), ... up to the first NULL (None)."""
    members = []
    while True:
        name = method_name(len(members))
        if name is None:
            break
        members.append((name.decode("ascii").upper(), len(members)))
    if not members:
        raise ImportError("cc_coll: %s names no method (cc_coll_method_name(0) is NULL)" % _lib.library_path)
    cls = enum.IntEnum("Method", members, module=__name__, qualname="Method")
    cls.__doc__ = ("cc_coll_method_t: the methods of the loaded library, as cc_coll_method_name "
                   "names them (upper case here): %s." % ", ".join(m.name for m in cls))
    return cls


# Read from the library when the package is imported, so a method added to
# libcc_coll needs no change here.
Method = _method_enum(lib.cc_coll_method_name)


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
    """How the loaded library was built and what it finds at run time:
    {"library": path, "cuda": bool, "fortran": bool, "mpi_cuda_aware": bool,
    "cuda_devices": int}."""
    flags = lib.cc_coll_build_flags()
    return {
        "library": _lib.library_path,
        "cuda": bool(flags & _lib.BUILD_CUDA),
        "fortran": bool(flags & _lib.BUILD_FORTRAN),
        "mpi_cuda_aware": bool(lib.cc_coll_mpi_cuda_aware()),
        "cuda_devices": int(lib.cc_coll_cuda_device_count()),
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


def _int_arg(value, what):
    """A Python int that fits a C int."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s must be an int, not %r" % (what, value))
    value = int(value)
    if not _INT_MIN <= value <= _INT_MAX:
        raise ValueError("%s = %d does not fit a C int" % (what, value))
    return value


def _flag_arg(value, what):
    """An on/off field (ef, warm_start, compress): True/False or an int; the
    library rejects ints other than 0 and 1."""
    if not isinstance(value, (numbers.Integral, np.bool_)) or not _INT_MIN <= int(value) <= _INT_MAX:
        raise TypeError("%s must be True/False (or 1/0), not %r" % (what, value))
    return int(value)


def _shape_arg(value):
    """(rows, cols) from a pair of ints, or from one int (rows; cols = 0:
    count / rows)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = (value, 0)
    if isinstance(value, (str, bytes)) or not isinstance(value, collections.abc.Sequence) or len(value) != 2:
        raise TypeError("shape must be (rows, cols) (cols 0: count / rows) or rows, not %r" % (value,))
    return (_u64_arg(value[0], "shape[0] (rows)"), _u64_arg(value[1], "shape[1] (cols)"))


# Each field of Params: how the Python value is checked and converted, and the
# bit of cc_coll_params_t.mask it sets. The order is the positional order of
# Params() and of _params().
_FIELDS = collections.OrderedDict([
    ("method", (lambda v: _enum_arg(Method, v, "method"), _lib.PARAMS_FIELD_METHOD)),
    ("density", (lambda v: _real_arg(v, "density"), _lib.PARAMS_FIELD_DENSITY)),
    ("ef", (lambda v: _flag_arg(v, "ef"), _lib.PARAMS_FIELD_EF)),
    ("ef_key", (lambda v: _u64_arg(v, "ef_key"), _lib.PARAMS_FIELD_EF_KEY)),
    ("sparsifier", (lambda v: _enum_arg(Sparsifier, v, "sparsifier"), _lib.PARAMS_FIELD_SPARSIFIER)),
    ("zero_fraction", (lambda v: _real_arg(v, "zero_fraction"), _lib.PARAMS_FIELD_ZERO_FRACTION)),
    ("load_factor", (lambda v: _real_arg(v, "load_factor"), _lib.PARAMS_FIELD_LOAD_FACTOR)),
    ("seed", (lambda v: _u64_arg(v, "seed"), _lib.PARAMS_FIELD_SEED)),
    ("shape", (_shape_arg, _lib.PARAMS_FIELD_SHAPE)),
    ("rank", (lambda v: _int_arg(v, "rank"), _lib.PARAMS_FIELD_RANK)),
    ("warm_start", (lambda v: _flag_arg(v, "warm_start"), _lib.PARAMS_FIELD_WARM_START)),
    ("start_iter", (lambda v: _u64_arg(v, "start_iter"), _lib.PARAMS_FIELD_START_ITER)),
    ("min_compression_rate", (lambda v: _real_arg(v, "min_compression_rate"),
                              _lib.PARAMS_FIELD_MIN_COMPRESSION_RATE)),
])


class Params:
    """Per-call parameters (cc_coll_params_t). Every field left at None is
    unset (its mask bit clear), so the communicator's configuration (the
    CC_COLL_* environment, or the default) applies.

    method      -- Method, or a member's name in any case ("topk")
    density     -- TOPK (and SKETCH's top-k sparsifier): kept fraction, (0, 1]
    ef          -- error feedback on (True) or off (False)
    ef_key      -- int in [0, 2**64) naming the tensor's residual and state
    sparsifier  -- SKETCH: Sparsifier or "topk" / "threshold"
    zero_fraction -- THRESHOLD: [0, 1)
    load_factor -- SKETCH: (0, 16]
    seed        -- SKETCH's hash seed, LOWRANK's initial-Q seed; int in [0, 2**64)
    shape       -- LOWRANK: (rows, cols) of the matrix view, cols 0 meaning
                   count / rows; a single int is (rows, 0); (0, 0) (or 0)
                   is the near-square view. Without it an allreduce sends
                   a 1-D array densely
    rank        -- LOWRANK: target rank >= 1 (r = min(rows, cols, rank))
    warm_start  -- LOWRANK: start from the previous step's Q (True/False)
    start_iter  -- LOWRANK: the tensor's first start_iter calls are plain
    min_compression_rate -- LOWRANK: compress only when
                   (rows + cols) * r * rate < rows * cols; >= 1

    Types are checked here (TypeError, ValueError); the library judges the
    values (ranges) when a call uses them and raises Error. Params are
    immutable: replace() returns a modified copy. Wherever the package takes
    `params`, a dict of these fields is accepted too.
    """

    __slots__ = tuple(_FIELDS)

    def __init__(self, method=None, density=None, ef=None, ef_key=None, sparsifier=None, zero_fraction=None,
                 load_factor=None, seed=None, shape=None, rank=None, warm_start=None, start_iter=None,
                 min_compression_rate=None):
        values = locals()
        for name, (convert, _) in _FIELDS.items():
            value = values[name]
            object.__setattr__(self, name, None if value is None else convert(value))

    def __setattr__(self, name, value):
        raise AttributeError("cc_coll.Params is immutable; use params.replace(%s=...)" % name)

    def replace(self, **changes):
        """A copy with the given fields changed (None unsets a field)."""
        unknown = set(changes) - set(_FIELDS)
        if unknown:
            raise TypeError("Params has no field %s" % ", ".join(sorted(unknown)))
        fields = self.to_dict()
        fields.update(changes)
        return Params(**fields)

    def to_dict(self):
        """The fields that are set, as a dict."""
        return {name: getattr(self, name) for name in _FIELDS if getattr(self, name) is not None}

    def __eq__(self, other):
        return isinstance(other, Params) and self.to_dict() == other.to_dict()

    def __hash__(self):
        return hash(tuple(sorted(self.to_dict().items())))

    def __repr__(self):
        def show(v):
            return repr(v.name.lower()) if isinstance(v, enum.Enum) else repr(v)
        return "Params(%s)" % ", ".join("%s=%s" % (k, show(v)) for k, v in self.to_dict().items())

    def _struct(self):
        """The cc_coll_params_t, with a mask bit for every field that is set."""
        p = _lib.ParamsStruct()
        for name, (_, bit) in _FIELDS.items():
            value = getattr(self, name)
            if value is None:
                continue
            p.mask |= bit
            if name == "shape":
                p.rows, p.cols = value
            else:
                setattr(p, name, int(value) if isinstance(value, enum.Enum) else value)
        return p


def _as_params(params, what="params"):
    """A Params from None, a Params or a mapping of its fields."""
    if params is None:
        return Params()
    if isinstance(params, Params):
        return params
    if isinstance(params, collections.abc.Mapping):
        try:
            return Params(**params)
        except TypeError as exc:
            if "unexpected keyword" in str(exc):
                raise TypeError("%s: %s" % (what, exc)) from None
            raise
    raise TypeError("%s must be a cc_coll.Params, a dict of its fields or None, not %s"
                    % (what, type(params).__name__))


def _merge(params, fields):
    """params (as _as_params takes it) with the keyword fields that are not
    None put over it."""
    base = _as_params(params)
    given = {k: v for k, v in fields.items() if v is not None}
    return base.replace(**given) if given else base


def _params(*args, **kwargs):
    """The cc_coll_params_t of Params(*args, **kwargs)."""
    return Params(*args, **kwargs)._struct()


def _lowrank_shape(count, shape, rank):
    """(rows, cols, r) as the library resolves a LOWRANK tensor of `count`
    elements (lowrank::resolve_shape), or None where it would refuse. A shape
    (0, 0), like no shape, is the near-square view (an allreduce sends a
    tensor without a shape densely and resolves no view for it)."""
    if count == 0:
        return None
    if shape is not None and shape[0] == 0 and shape[1] != 0:
        return None
    if shape is not None and shape[0] != 0:
        rows, cols = shape
        if cols == 0:
            if count % rows:
                return None
            cols = count // rows
        if rows * cols != count:
            return None
    else:
        rows = math.isqrt(count)
        if rows * rows < count:
            rows += 1
        cols = -(-count // rows)
    return rows, cols, min(max(rank, 1), rows, cols)


#: What Comm.lowrank_state returns.
LowRankState = collections.namedtuple("LowRankState", "rows cols rank calls p q")
LowRankState.__doc__ = """A LOWRANK tensor's state (cc_coll_lowrank_get_state): the matrix shape
rows x cols and rank r of its last compressed step (r = 0 before the first),
its number of calls, P (rows x r) and Q (cols x r, already divided by the
communicator size) as float64 arrays."""


class DeviceArray:
    """A CUDA device buffer for the Comm calls: DeviceArray(obj) wraps any
    object with the CUDA Array Interface (`__cuda_array_interface__`: a
    torch CUDA tensor, a CuPy or Numba array) so that it can stand where the
    calls take a numpy array. The library then runs on the device (docs/gpu.md):
    it finds the memory kind itself, waits for the work already on the legacy
    default stream, and a request's result is there once the request
    completes (wait on it before reading). The wrapper keeps `obj` alive and
    reads its pointer, shape, dtype and strides once; it needs a library
    built with CUDA (build_info()["cuda"]), else TypeError.

    Attributes as numpy's where the calls read them: shape, ndim, size,
    dtype, nbytes, flags.c_contiguous, flags.writeable, ctypes.data; `obj`
    is the wrapped object. d.reshape(-1) and 1-D slices d[a:b] of a
    contiguous array give DeviceArrays over the same memory."""

    class _Flags:
        __slots__ = ("c_contiguous", "writeable")

    class _Ctypes:
        __slots__ = ("data",)

    def __init__(self, obj, _view=None):
        if _view is not None:  # (pointer, shape, dtype, writeable): a view of obj
            ptr, shape, dtype, writeable, contiguous = _view
        else:
            try:
                cai = obj.__cuda_array_interface__
            except AttributeError:
                raise TypeError("DeviceArray needs an object with __cuda_array_interface__, not %s"
                                % type(obj).__name__) from None
            if not build_info()["cuda"]:
                raise TypeError("a CUDA device array, but this libcc_coll was built without CUDA "
                                "(build_info()['cuda'] is False)")
            ptr, readonly = cai["data"]
            shape = tuple(int(n) for n in cai["shape"])
            dtype = np.dtype(cai["typestr"])
            writeable = not readonly
            strides = cai.get("strides")
            contiguous = True
            if strides is not None:
                expect, step = [], dtype.itemsize
                for n in reversed(shape):
                    expect.append(step)
                    step *= n
                contiguous = all(n == 1 or s == e for n, s, e in zip(shape, strides, reversed(expect)))
        self.obj = obj
        self.shape = shape
        self.ndim = len(shape)
        self.size = int(np.prod(shape, dtype=np.int64)) if shape else 1
        self.dtype = dtype
        self.nbytes = self.size * dtype.itemsize
        self.flags = DeviceArray._Flags()
        self.flags.c_contiguous = contiguous
        self.flags.writeable = writeable
        self.ctypes = DeviceArray._Ctypes()
        self.ctypes.data = int(ptr or 0)

    def _need_contiguous(self, what):
        if not self.flags.c_contiguous:
            raise ValueError("%s of a DeviceArray that is not C-contiguous" % what)

    def reshape(self, *shape):
        self._need_contiguous("reshape")
        if len(shape) == 1 and isinstance(shape[0], tuple):
            shape = shape[0]
        if shape == (-1,):
            shape = (self.size,)
        if int(np.prod(shape, dtype=np.int64)) != self.size:
            raise ValueError("cannot reshape a DeviceArray of %d elements into %s" % (self.size, shape))
        return DeviceArray(self.obj, (self.ctypes.data, tuple(shape), self.dtype, self.flags.writeable, True))

    def __getitem__(self, key):
        if self.ndim != 1 or not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("a DeviceArray takes 1-D slices with step 1 only")
        self._need_contiguous("a slice")
        start, stop, _ = key.indices(self.size)
        stop = max(start, stop)
        return DeviceArray(self.obj, (self.ctypes.data + start * self.dtype.itemsize, (stop - start,),
                                      self.dtype, self.flags.writeable, True))

    def __len__(self):
        return self.shape[0] if self.shape else 1

    def __repr__(self):
        return "<cc_coll.DeviceArray %s %s at 0x%x>" % (self.dtype, self.shape, self.ctypes.data)


def _array(a, name, writable):
    if not isinstance(a, (np.ndarray, DeviceArray)):
        raise TypeError("%s must be a numpy.ndarray or a cc_coll.DeviceArray, not %s" % (name, type(a).__name__))
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

def _check_recvbuf(send, recv, send_name, recv_name):
    """An out-of-place result array: C-contiguous, writable, same dtype and shape."""
    _array(recv, recv_name, writable=True)
    if recv.dtype != send.dtype:
        raise TypeError("%s has dtype %s but %s has %s" % (recv_name, recv.dtype, send_name, send.dtype))
    if recv.shape != send.shape:
        raise ValueError("%s has shape %s but %s has %s" % (recv_name, recv.shape, send_name, send.shape))


def _per_tensor(value, n, what, is_single, single_ok=True):
    """A list of n entries from None, one value for all (is_single(value)),
    or a sequence of n."""
    if value is None:
        return [None] * n
    if single_ok and is_single(value):
        return [value] * n
    if isinstance(value, (str, bytes, np.ndarray)) or not isinstance(value, collections.abc.Iterable):
        raise TypeError("%s must be %sa sequence with one entry per tensor, not %s"
                        % (what, "None, one value or " if single_ok else "None or ", type(value).__name__))
    value = list(value)
    if len(value) != n:
        raise ValueError("%s has %d entries for %d tensors" % (what, len(value), n))
    return value


class Comm:
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

    def __init__(self, comm):
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
        try:
            self._config_method = Method[str(config.get("METHOD", "none")).upper()]
        except KeyError:
            self._config_method = None
        try:
            self._config_rank = int(config.get("LOWRANK_RANK", 1))
        except ValueError:
            self._config_rank = 1

    # -- lifetime ----------------------------------------------------------

    def close(self):
        """Destroy the communicator (cc_coll_comm_destroy); a no-op when closed."""
        if self._closed:
            return
        self._closed = True
        # Destroying the communicator completes its requests first.
        _check(lib.cc_coll_comm_destroy(self._handle))
        self._completed_through(self._posted)

    @property
    def closed(self):
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

    # -- parameters --------------------------------------------------------

    def _call_params(self, params, fields, buf, lowrank=False):
        """The Params of a call: `params` with the keyword fields over it and,
        for LOWRANK or AUTO (the call's method, the communicator's, or
        `lowrank`) on an array of two or more dimensions without a shape, the
        matrix view (shape[0], product of the rest), like torch's
        tensor.view(shape[0], -1): AUTO may choose LOWRANK (the other methods
        ignore the shape)."""
        p = _merge(params, fields)
        method = p.method if p.method is not None else self._config_method
        matrix = lowrank or method in (Method.LOWRANK, getattr(Method, "AUTO", None))
        if (p.shape is None and matrix and buf.ndim >= 2 and buf.size > 0):
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

    def allreduce(self, sendbuf, recvbuf=None, op=Op.SUM, method=None, density=None,
                  ef=None, ef_key=None, dtype=None, sparsifier=None, zero_fraction=None,
                  load_factor=None, seed=None, shape=None, rank=None, warm_start=None,
                  start_iter=None, min_compression_rate=None, params=None):
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

    def iallreduce(self, sendbuf, recvbuf=None, op=Op.SUM, method=None, density=None,
                   ef=None, ef_key=None, dtype=None, sparsifier=None, zero_fraction=None,
                   load_factor=None, seed=None, shape=None, rank=None, warm_start=None,
                   start_iter=None, min_compression_rate=None, params=None):
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

    def allreduce_group(self, sendbufs, recvbufs=None, op=Op.SUM, params=None, dtype=None):
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

    def iallreduce_group(self, sendbufs, recvbufs=None, op=Op.SUM, params=None, dtype=None):
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

    def reduce_scatter(self, sendbuf, recvbuf=None, op=Op.SUM, method=None, density=None,
                       ef=None, ef_key=None, dtype=None, sparsifier=None, zero_fraction=None,
                       load_factor=None, seed=None, params=None):
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

    def ireduce_scatter(self, sendbuf, recvbuf=None, op=Op.SUM, method=None, density=None,
                        ef=None, ef_key=None, dtype=None, sparsifier=None, zero_fraction=None,
                        load_factor=None, seed=None, params=None):
        """Start reduce_scatter() without waiting for it
        (cc_coll_ireduce_scatter): the same arguments, checked at once;
        returns a Request whose wait() returns what reduce_scatter() would,
        bit for bit. The arrays belong to the request until it completes."""
        return self._post(lib.cc_coll_ireduce_scatter, self._reduce_scatter_call(
            sendbuf, recvbuf, op, dtype, params, dict(method=method, density=density, ef=ef, ef_key=ef_key,
                                                      sparsifier=sparsifier, zero_fraction=zero_fraction,
                                                      load_factor=load_factor, seed=seed)))

    # -- point to point ----------------------------------------------------

    def send(self, buf, dest, tag, compress=True, params=None, dtype=None, **fields):
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

    def recv(self, buf, source, tag, params=None, dtype=None, **fields):
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

    def p2p_tag_ub(self):
        """The largest tag send() and recv() accept (cc_coll_p2p_tag_ub)."""
        ub = ctypes.c_int()
        _check(lib.cc_coll_p2p_tag_ub(self._handle, ctypes.byref(ub)))
        return ub.value

    def lep_residual(self, buf, dest, tag, params=None, dtype=None, **fields):
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

    def lep_reset(self, dest, tag, params=None, **fields):
        """Drop the LEP residual (and warm-start Q) of the send channel (dest,
        ef_key if given, else tag) (cc_coll_lep_reset)."""
        p = _merge(params, fields)
        _check(lib.cc_coll_lep_reset(self._handle, _int_arg(dest, "dest"), _int_arg(tag, "tag"),
                                         ctypes.byref(p._struct())))

    # -- low-rank state ----------------------------------------------------

    def lowrank_state(self, recvbuf, params=None, dtype=None, **fields):
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

    def lowrank_set_q(self, recvbuf, q, params=None, dtype=None, **fields):
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
        p = self._call_params(params, fields, recvbuf, lowrank=True)
        q = np.ascontiguousarray(q, dtype=np.float64)
        resolved = None  # no shape (a 1-D array: sent densely, no factors): the library refuses
        if p.shape is not None:
            resolved = _lowrank_shape(recvbuf.size, p.shape, p.rank if p.rank is not None else self._config_rank)
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

    def ef_bytes(self):
        """Bytes held by all error-feedback residuals of this communicator on
        this rank (LEP residuals of point-to-point channels included)."""
        n = ctypes.c_uint64()
        _check(lib.cc_coll_ef_bytes(self._handle, ctypes.byref(n)))
        return n.value

    def state_bytes(self):
        """Bytes held by the methods' per-tensor state other than residuals
        on this rank: LOWRANK's call counts and factors P and Q, of tensors
        and point-to-point channels, kept with ef=0 too. Bounded by
        CC_COLL_STATE_MAX_BYTES (a new key past it raises EF_LIMIT);
        ef_reset, ef_reset_all and lep_reset give the bytes back."""
        n = ctypes.c_uint64()
        _check(lib.cc_coll_state_bytes(self._handle, ctypes.byref(n)))
        return n.value

    def ef_residual(self, recvbuf, ef_key=None, dtype=None, params=None):
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

    def ef_reset(self, recvbuf, ef_key=None, dtype=None, params=None):
        """Drop the residual of one tensor, named as in ef_residual(), and
        its LOWRANK state (call count, P, Q)."""
        _array(recvbuf, "recvbuf", writable=False)
        d = _dtype_of(recvbuf, dtype, "recvbuf")
        p = _merge(params, dict(ef_key=ef_key))
        _check(lib.cc_coll_ef_reset(self._handle, ctypes.byref(p._struct()), recvbuf.ctypes.data,
                                    recvbuf.size, int(d)))

    def ef_reset_all(self):
        """Drop every residual of this communicator."""
        _check(lib.cc_coll_ef_reset_all(self._handle))

    # -- checkpoints -------------------------------------------------------

    def state_export(self):
        """This rank's whole compression state as bytes (cc_coll_state_export):
        every residual with its key, every LEP residual of a point-to-point
        channel, and LOWRANK's call counts, shapes and factors. Save it with
        the training checkpoint, one blob per rank, and give it to
        state_import() of a new Comm on the same rank to resume bit for bit.
        Local; raises Error(Status.INVALID_ARG) while non-blocking requests
        are in flight."""
        size = ctypes.c_size_t(0)
        _check(lib.cc_coll_state_export(self._handle, None, ctypes.byref(size)))
        while True:
            buf = ctypes.create_string_buffer(max(size.value, 1))
            need = ctypes.c_size_t(size.value)
            status = lib.cc_coll_state_export(self._handle, buf, ctypes.byref(need))
            # The state cannot change between the two calls unless another
            # thread runs a collective meanwhile: then ask again.
            if status == Status.INVALID_ARG and need.value > size.value:
                size = need
                continue
            _check(status)
            return buf.raw[:need.value]

    def state_import(self, blob):
        """Replace this communicator's whole compression state with a blob of
        state_export() (bytes, bytearray, memoryview or a uint8 array), all or
        nothing: a blob that is truncated, corrupt, of another format or
        library major version, of another rank or communicator size, or over
        the caps raises Error and changes nothing. Local."""
        data = blob if isinstance(blob, bytes) else bytes(memoryview(blob).cast("B"))
        _check(lib.cc_coll_state_import(self._handle, data if data else None, len(data)))

    # -- statistics --------------------------------------------------------

    def stats(self):
        """This rank's counters since creation or reset_stats(): a dict with
        calls, bytes_uncompressed, bytes_wire (ints), time_compress,
        time_communicate, time_decompress (seconds), sketch_elements and
        sketch_peeled (ints: SKETCH's decoded support elements, and how many
        of them peeling recovered exactly), time_total (seconds inside the
        communicator's calls, entry to return, failed calls included), and
        for method AUTO auto_calls, auto_lossy_calls (how many of them the
        cost model compressed) and auto_predicted (its predicted seconds of
        those choices, summed)."""
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


# --------------------------------------------------------------------------
# Non-blocking collectives
# --------------------------------------------------------------------------

#: What a collective's argument checks give: the C arguments up to the
#: communicator, the call's result, and the objects the library uses until
#: the collective completes.
_Call = collections.namedtuple("_Call", "args result keep")


class Request:
    """A non-blocking collective in flight (cc_coll_request_h), as
    Comm.iallreduce, Comm.ireduce_scatter and Comm.iallreduce_group return
    it.

    wait()   -- until it completes (cc_coll_wait); returns the result the
                blocking call returns, or raises its Error
    test()   -- whether it has completed (cc_coll_test), raising its Error
                once it has failed; with caller-driven progress
                (CC_COLL_PROGRESS=caller) this advances the requests
    done, status, message -- its state without advancing it
                (cc_coll_request_status): status is Status.OK and message ""
                while it runs
    free()   -- frees the handle (cc_coll_request_free); idempotent, and done
                by `del`, garbage collection and the end of a `with` block.
                Freeing does not cancel: a request freed in flight still
                runs to its end, and the package keeps its arrays until then

    Until the request completes its arrays belong to it: do not write the
    send buffers, nor read or write the receive buffers. The request keeps
    them alive meanwhile. Completion does not free the handle: wait(), done,
    status and message keep answering until free(); after free() they raise
    Error(Status.INVALID_ARG) with the library's message.
    """

    def __init__(self, comm, handle, number, result, keep):
        self._comm = comm
        self._handle = handle
        self._number = number
        self._result = result
        self._keep = keep
        self._freed = False
        self._lock = threading.Lock()

    @property
    def handle(self):
        """The C handle (cc_coll_request_h) as an int; it stays the freed
        handle after free()."""
        return self._handle

    @property
    def comm(self):
        """The Comm the request was posted on."""
        return self._comm

    def _completed(self):
        """The library reported the request complete: its arrays are free
        again (the result stays, for wait()), and so are those of the
        requests posted before it on the communicator."""
        self._keep = None
        self._comm._completed_through(self._number)

    def wait(self):
        """Wait until the collective completes; return its result (what the
        blocking call returns: the receive array, the list of a group, the
        shard of a reduce-scatter) or raise its Error. Waiting again returns
        (or raises) at once."""
        status = lib.cc_coll_wait(self._handle)
        if not self._freed:
            self._completed()
        _check(status)
        return self._result

    def test(self):
        """True once the collective has completed (raising its Error if it
        failed), else False."""
        done = ctypes.c_int()
        status = lib.cc_coll_test(self._handle, ctypes.byref(done))
        if done.value and not self._freed:
            self._completed()
        _check(status)
        return bool(done.value)

    def _query(self):
        done, status, message = ctypes.c_int(), ctypes.c_int(), ctypes.c_char_p()
        _check(lib.cc_coll_request_status(self._handle, ctypes.byref(done), ctypes.byref(status),
                                          ctypes.byref(message)))
        if done.value and not self._freed:
            self._completed()
        return bool(done.value), status.value, (message.value or b"").decode("utf-8", "replace")

    @property
    def done(self):
        """Whether the collective has completed (without advancing it)."""
        return self._query()[0]

    @property
    def status(self):
        """Its Status once done (Status.OK while it runs)."""
        status = self._query()[1]
        try:
            return Status(status)
        except ValueError:
            return status

    @property
    def message(self):
        """Its error message once done ("" on success and while it runs)."""
        return self._query()[2]

    @property
    def freed(self):
        return self._freed

    def free(self):
        """Free the handle (cc_coll_request_free); a no-op once freed. A
        request still in flight runs to its end: its arrays are kept (by its
        Comm) until it has completed."""
        with self._lock:
            if self._freed:
                return
            self._freed = True
            keep, self._keep = self._keep, None
        if keep is not None:
            done = ctypes.c_int()
            if lib.cc_coll_request_status(self._handle, ctypes.byref(done), None, None) != Status.OK \
                    or not done.value:
                self._comm._hold(self._number, keep)
        _check(lib.cc_coll_request_free(self._handle))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()
        return False

    def __del__(self):
        try:
            self.free()
        except Exception:  # interpreter shutdown, or nothing left to report to
            pass

    def __repr__(self):
        if self._freed:
            state = "freed"
        else:
            try:
                state = "done" if self.done else "in flight"
            except Error:
                state = "dead"
        return "<cc_coll.Request %s>" % state

    def to_torch_future(self):
        """A torch.futures.Future completed with wait()'s result
        (set_result) or its Error (set_exception) once the collective
        completes, so that a DDP communication hook can return it. A thread
        waits for the request (the C wait releases the GIL). It is not a
        daemon thread: the interpreter waits for it at exit, as MPI_Finalize
        would wait for the request; it must not be killed inside PyTorch's
        set_result. The request must be able to complete without the
        caller's help: with
        the progress thread (CC_COLL_PROGRESS=thread, or auto under
        MPI_THREAD_MULTIPLE, mpi4py's default) it does; with caller-driven
        progress the waiting thread drives it, which MPI allows only under
        MPI_THREAD_MULTIPLE. Raises ImportError when PyTorch cannot be
        imported."""
        try:
            import torch.futures
        except ImportError as exc:
            raise ImportError("cc_coll.Request.to_torch_future needs PyTorch (torch.futures), which cannot be "
                              "imported: %s" % exc) from exc
        future = torch.futures.Future()

        def complete():
            try:
                result = self.wait()
            except Exception as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)

        threading.Thread(target=complete, name="cc_coll request %d" % self._number).start()
        return future


def waitall(requests):
    """Wait for every request of `requests` (cc_coll_waitall); None entries
    are skipped. Returns the list of their results (None for None entries);
    once all have completed, raises the Error of the first that failed."""
    requests = list(requests)
    for i, r in enumerate(requests):
        if r is not None and not isinstance(r, Request):
            raise TypeError("requests[%d] must be a cc_coll.Request or None, not %s" % (i, type(r).__name__))
    n = len(requests)
    handles = (ctypes.c_void_p * n)(*(r._handle if r is not None else None for r in requests))
    status = lib.cc_coll_waitall(n, handles, None)
    for r in requests:
        if r is not None and not r._freed:
            r._completed()
    _check(status)
    return [r._result if r is not None else None for r in requests]
