# SPDX-License-Identifier: BSD-3-Clause
"""The methods of the loaded library and what each can do, read from its
registry (cc_coll_method_count, cc_coll_method_at, cc_coll_method_name,
cc_coll_method_caps, cc_coll_method_summary) when the package is imported.

The package keeps no list of methods and never tests a method's id: it asks
for a capability (MethodCap), so a method added to libcc_coll needs no
change here.
"""

import ctypes
import enum

from . import _lib
from ._lib import lib

__all__ = ["Method", "MethodCap", "method_caps", "methods_with"]


class MethodCap(enum.IntFlag):
    """cc_coll_method_cap_t (CC_COLL_METHOD_CAP_*): what a method can do, as
    Method.caps (cc_coll_method_caps) gives it."""
    LOSSY = _lib.METHOD_CAP_LOSSY                    # results may differ from MPI_Allreduce's
    REDUCE_SCATTER = _lib.METHOD_CAP_REDUCE_SCATTER  # Comm.reduce_scatter runs it
    P2P = _lib.METHOD_CAP_P2P                        # Comm.send(compress=True) compresses with it
    MATRIX = _lib.METHOD_CAP_MATRIX                  # views a tensor as rows x cols (pass a shape)
    STATE = _lib.METHOD_CAP_STATE                    # per-tensor state besides residuals
    SELECTS = _lib.METHOD_CAP_SELECTS                # picks another method per call
    AUTO_CANDIDATE = _lib.METHOD_CAP_AUTO_CANDIDATE  # CC_COLL_AUTO_METHOD may name it
    DENSITY = _lib.METHOD_CAP_DENSITY                # takes density; density 1 keeps every element


class _MethodBase(enum.IntEnum):
    """Method's members answer what the library says of them."""

    @property
    def caps(self) -> "MethodCap":
        """The method's MethodCap (cc_coll_method_caps)."""
        return type(self)._registry_caps[int(self)]

    @property
    def summary(self) -> str:
        """One line that says what the method does (cc_coll_method_summary)."""
        return type(self)._registry_summaries[int(self)]


def _registry(library):
    """[(id, name, caps, summary)] of the library's methods, in id order."""
    out = []
    for index in range(library.cc_coll_method_count()):
        method = ctypes.c_int()
        if library.cc_coll_method_at(index, ctypes.byref(method)) != 0:
            raise ImportError("cc_coll: %s: cc_coll_method_at(%d) fails below cc_coll_method_count()"
                              % (_lib.library_path, index))
        name = library.cc_coll_method_name(method.value)
        if name is None:
            raise ImportError("cc_coll: %s names no method %d (cc_coll_method_name)"
                              % (_lib.library_path, method.value))
        summary = library.cc_coll_method_summary(method.value)
        out.append((method.value, name.decode("ascii"), int(library.cc_coll_method_caps(method.value)),
                    summary.decode("utf-8", "replace") if summary is not None else ""))
    return out


def _method_enum(entries):
    """The Method IntEnum of registry `entries` ([(id, name, caps, summary)],
    as _registry reads them): a member per method, named as the library
    names it in upper case (NONE, TOPK, ...), valued as its id, with its caps
    and summary."""
    if not entries:
        raise ImportError("cc_coll: %s has no method (cc_coll_method_count() is 0)" % _lib.library_path)
    cls = _MethodBase("Method", [(name.upper(), value) for value, name, _, _ in entries],
                      module=__name__, qualname="Method")
    cls._registry_caps = {value: MethodCap(bits) for value, _, bits, _ in entries}
    cls._registry_summaries = {value: text for value, _, _, text in entries}
    cls.__doc__ = ("cc_coll_method_t: the methods of the loaded library, as cc_coll_method_name "
                   "names them (upper case here): %s. Each member's `caps` (MethodCap) and `summary` "
                   "say what it does." % ", ".join(m.name for m in cls))
    return cls


# Read from the library when the package is imported.
Method = _method_enum(_registry(lib))


def method_caps(method):
    """The MethodCap of a Method (of any Method enum: its own caps) or of a
    method id (the library's; none for an id it does not know, and it
    refuses a call with it)."""
    if isinstance(method, _MethodBase):
        return method.caps
    return MethodCap(lib.cc_coll_method_caps(int(method)))


def methods_with(cap=MethodCap(0), without=MethodCap(0), methods=None):
    """The methods of `methods` (a Method enum, Method by default) that have
    every capability of `cap` and none of `without`, in id order."""
    return tuple(m for m in (Method if methods is None else methods) if m.caps & cap == cap and not m.caps & without)


def method_names(methods):
    """'none, topk, ...': the lower-case names of `methods`, for messages."""
    return ", ".join(m.name.lower() for m in methods)


def may_view_as_matrix(method):
    """Whether a call with `method` (a Method, an id, or None) may run a
    method that views the tensor as a matrix (MethodCap.MATRIX): the method
    itself, or a selecting one (MethodCap.SELECTS) of which a candidate
    (MethodCap.AUTO_CANDIDATE) has it. Such a call wants a shape."""
    if method is None:
        return False
    caps = method_caps(method)
    if caps & MethodCap.MATRIX:
        return True
    methods = type(method) if isinstance(method, _MethodBase) else Method
    return bool(caps & MethodCap.SELECTS) and bool(methods_with(MethodCap.AUTO_CANDIDATE | MethodCap.MATRIX,
                                                                methods=methods))


def method_named(name):
    """The Method the library names `name` (case-insensitive;
    cc_coll_method_from_name), or None where it names none."""
    method = ctypes.c_int()
    if lib.cc_coll_method_from_name(str(name).encode("utf-8", "replace"), ctypes.byref(method)) != 0:
        return None
    try:
        return Method(method.value)
    except ValueError:
        return None
