# SPDX-License-Identifier: BSD-3-Clause
"""Error, the base of the exceptions a failed libcc_coll call raises, one
subclass per status code (cc_coll_status_t), and the check every call goes
through."""

from typing import Any, ClassVar, Dict, Optional, Tuple, Type, Union

from ._enums import Status
from ._lib import lib

__all__ = [
    "Error", "NullBufferError", "InvalidDtypeError", "InvalidOpError", "InvalidMethodError", "CountOverflowError",
    "InvalidCommError", "InvalidParamsError", "InvalidArgError", "MPIError", "MPINotInitializedError",
    "VersionMismatchError", "ConfigError", "NotSupportedError", "NoMemoryError", "InternalError", "EFLimitError",
    "MismatchError", "CUDAError",
]


class Error(Exception):
    """A libcc_coll call failed: the base of the package's exceptions.

    Each status code has its subclass (InvalidArgError for
    Status.INVALID_ARG, MPIError for Status.MPI, ...); ``except cc_coll.Error``
    catches them all. ``Error(status, message)`` builds the subclass of
    `status`; a subclass takes the message alone (``InvalidArgError("...")``).

    status  -- the Status (a plain int if this package does not know it)
    message -- the library's message (cc_coll_last_error()): which argument or
               which MPI call failed, and why
    """

    #: The status code of a subclass (None for Error itself).
    STATUS: ClassVar[Optional[Status]] = None
    _by_status: ClassVar[Dict[int, "Type[Error]"]] = {}

    status: Union[Status, int]
    message: str

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.STATUS is not None:
            Error._by_status.setdefault(int(cls.STATUS), cls)

    def __new__(cls, *args: Any, **kwargs: Any) -> "Error":
        if cls is Error:
            status = args[0] if args else kwargs.get("status")
            if status is not None and not isinstance(status, str):
                cls = Error._by_status.get(_as_int(status), Error)
        return super().__new__(cls, *args)

    def __init__(self, status: Union[Status, int, str, None] = None, message: str = "") -> None:
        if isinstance(status, str) and not message:  # SubclassError("message")
            status, message = None, status
        if status is None:
            if self.STATUS is None:
                raise TypeError("cc_coll.Error needs a status: Error(status, message)")
            status = self.STATUS
        try:
            status = Status(_as_int(status))
        except ValueError:
            status = _as_int(status)
        self.status = status
        self.message = message or _status_string(status)
        name = _status_string(status).split(":", 1)[0]
        super().__init__("%s: %s" % (name, self.message))

    def __reduce__(self) -> Tuple[Any, ...]:
        return (type(self), (int(self.status), self.message))


def _as_int(status: Any) -> int:
    try:
        return int(status)
    except (TypeError, ValueError):
        raise TypeError("cc_coll.Error: status must be a Status or an int, not %r" % (status,)) from None


class NullBufferError(Error):
    """Status.NULL_BUFFER: a buffer is NULL while count > 0."""
    STATUS = Status.NULL_BUFFER


class InvalidDtypeError(Error):
    """Status.INVALID_DTYPE: dtype is not a Dtype the library knows."""
    STATUS = Status.INVALID_DTYPE


class InvalidOpError(Error):
    """Status.INVALID_OP: op is not an Op the library knows."""
    STATUS = Status.INVALID_OP


class InvalidMethodError(Error):
    """Status.INVALID_METHOD: not a method of the library, or a name it does
    not know."""
    STATUS = Status.INVALID_METHOD


class CountOverflowError(Error):
    """Status.COUNT_OVERFLOW: a count does not fit MPI's count type."""
    STATUS = Status.COUNT_OVERFLOW


class InvalidCommError(Error):
    """Status.INVALID_COMM: the communicator is closed (or was never valid)."""
    STATUS = Status.INVALID_COMM


class InvalidParamsError(Error):
    """Status.INVALID_PARAMS: the parameters have fields the library does not
    know."""
    STATUS = Status.INVALID_PARAMS


class InvalidArgError(Error):
    """Status.INVALID_ARG: an argument is out of its domain (the message
    names it), or a call is not allowed now (requests in flight)."""
    STATUS = Status.INVALID_ARG


class MPIError(Error):
    """Status.MPI: an MPI call failed (the message says which, and MPI's
    error string)."""
    STATUS = Status.MPI


class MPINotInitializedError(Error):
    """Status.MPI_NOT_INITIALIZED: MPI is not initialised, or is finalised."""
    STATUS = Status.MPI_NOT_INITIALIZED


class VersionMismatchError(Error):
    """Status.VERSION_MISMATCH: the package's and the library's versions
    disagree."""
    STATUS = Status.VERSION_MISMATCH


class ConfigError(Error):
    """Status.CONFIG: a CC_COLL_* environment value is bad (the message
    names it)."""
    STATUS = Status.CONFIG


class NotSupportedError(Error):
    """Status.NOT_SUPPORTED: a valid request this build of the library cannot
    serve."""
    STATUS = Status.NOT_SUPPORTED


class NoMemoryError(Error):
    """Status.NO_MEMORY: an allocation failed."""
    STATUS = Status.NO_MEMORY


class InternalError(Error):
    """Status.INTERNAL: a bug in libcc_coll; please report it."""
    STATUS = Status.INTERNAL


class EFLimitError(Error):
    """Status.EF_LIMIT: a new residual would pass CC_COLL_EF_MAX_BYTES, or new
    method state CC_COLL_STATE_MAX_BYTES."""
    STATUS = Status.EF_LIMIT


class MismatchError(Error):
    """Status.MISMATCH: the ranks disagree on a call's arguments, or a
    residual's key is reused with another count or dtype."""
    STATUS = Status.MISMATCH


class CUDAError(Error):
    """Status.CUDA: a CUDA runtime, cuBLAS, cuSOLVER or cuRAND call failed."""
    STATUS = Status.CUDA


def _status_string(status: Union[Status, int]) -> str:
    return lib.cc_coll_status_string(int(status)).decode("utf-8", "replace")


def _check(status: int) -> None:
    """Raise the Error subclass of `status` with the library's message unless
    it is Status.OK."""
    if status != Status.OK:
        raise Error(status, lib.cc_coll_last_error().decode("utf-8", "replace"))
