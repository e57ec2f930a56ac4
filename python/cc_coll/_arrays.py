# SPDX-License-Identifier: BSD-3-Clause
"""The arrays the calls take: numpy arrays (their dtypes, bfloat16 bit
patterns) and DeviceArray views of CUDA buffers."""

from typing import Any, Optional, Tuple, Union

import numpy as np

from ._args import _enum_arg
from ._enums import Dtype
from ._info import build_info

__all__ = ["DeviceArray", "to_bfloat16", "from_bfloat16"]


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


def to_bfloat16(a: "np.typing.ArrayLike") -> np.ndarray:
    """bfloat16 bit patterns (uint16 array) of a float array, rounded to
    nearest, ties to even; NaN stays NaN."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))
               >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(bits.view(np.float32))
    rounded[nan] = ((bits[nan] >> np.uint32(16)) | np.uint32(0x0040)).astype(np.uint16)
    return rounded


def from_bfloat16(bits: "np.typing.ArrayLike") -> np.ndarray:
    """float32 array of bfloat16 bit patterns (a uint16 array)."""
    bits = np.ascontiguousarray(bits, dtype=np.uint16)
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


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

    def __init__(self, obj: Any, _view: Optional[Tuple[Any, ...]] = None) -> None:
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

    def reshape(self, *shape: Union[int, Tuple[int, ...]]) -> "DeviceArray":
        """A view of the same device memory with another shape of as many
        elements ((-1,): flat); the array must be C-contiguous."""
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


def _check_recvbuf(send, recv, send_name, recv_name):
    """An out-of-place result array: C-contiguous, writable, same dtype and shape."""
    _array(recv, recv_name, writable=True)
    if recv.dtype != send.dtype:
        raise TypeError("%s has dtype %s but %s has %s" % (recv_name, recv.dtype, send_name, send.dtype))
    if recv.shape != send.shape:
        raise ValueError("%s has shape %s but %s has %s" % (recv_name, recv.shape, send_name, send.shape))
