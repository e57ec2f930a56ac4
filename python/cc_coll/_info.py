# SPDX-License-Identifier: BSD-3-Clause
"""Module functions about the loaded library: versions, settings, build."""

import ctypes
from typing import Any, Dict, List, Tuple

from . import _lib
from ._enums import Status
from ._errors import _check
from ._lib import lib
from ._version import ABI_MAJOR, ABI_MINOR

__all__ = ["version", "version_info", "check_version", "settings", "build_info"]


def version() -> str:
    """The library's version at run time, "MAJOR.MINOR.PATCH"."""
    return lib.cc_coll_version_string().decode()


def version_info() -> Tuple[int, int, int]:
    """The library's version at run time as a tuple (major, minor, patch)."""
    v = [ctypes.c_int() for _ in range(3)]
    lib.cc_coll_get_version(*(ctypes.byref(x) for x in v))
    return tuple(x.value for x in v)


def check_version(major: int = ABI_MAJOR, minor: int = ABI_MINOR) -> None:
    """Raise Error(Status.VERSION_MISMATCH) unless code written against header
    version (major, minor) can use the loaded library (cc_coll_check_version_numbers).
    The package checks its own version this way when it is imported."""
    _check(lib.cc_coll_check_version_numbers(int(major), int(minor)))


def settings() -> List[Dict[str, Any]]:
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


def build_info() -> Dict[str, Any]:
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
