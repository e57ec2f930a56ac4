# SPDX-License-Identifier: BSD-3-Clause
"""Checkpoints of a Comm's whole compression state (cc_coll_state_export,
cc_coll_state_import)."""

import ctypes
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

from ._enums import Status
from ._errors import _check
from ._lib import lib


class _Checkpoints:
    """Comm's checkpoint calls (a base class of Comm)."""

    def state_export(self) -> bytes:
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

    def state_import(self, blob: Union[bytes, bytearray, memoryview, "np.ndarray"]) -> None:
        """Replace this communicator's whole compression state with a blob of
        state_export() (bytes, bytearray, memoryview or a uint8 array), all or
        nothing: a blob that is truncated, corrupt, of another format or
        library major version, of another rank or communicator size, or over
        the caps raises Error and changes nothing. Local."""
        data = blob if isinstance(blob, bytes) else bytes(memoryview(blob).cast("B"))
        _check(lib.cc_coll_state_import(self._handle, data if data else None, len(data)))
