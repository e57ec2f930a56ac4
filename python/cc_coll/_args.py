# SPDX-License-Identifier: BSD-3-Clause
"""Checking and converting the Python arguments of the calls to C values."""

import collections.abc
import numbers

import numpy as np

_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1


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
