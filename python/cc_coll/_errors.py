# SPDX-License-Identifier: BSD-3-Clause
"""Error: a failed libcc_coll call, and the check every call goes through."""

from ._enums import Status
from ._lib import lib

__all__ = ["Error"]


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
