# SPDX-License-Identifier: BSD-3-Clause
"""Request (a non-blocking collective in flight) and waitall."""

import atexit
import collections
import ctypes
import threading
from typing import TYPE_CHECKING, Any, Deque, List, Optional, Sequence, Tuple, Union

if TYPE_CHECKING:  # pragma: no cover
    import torch.futures

    from ._comm import Comm

from ._enums import Status
from ._errors import Error, _check
from ._lib import lib

__all__ = ["Request", "waitall"]


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

    def __init__(self, comm: "Comm", handle: int, number: int, result: Any, keep: Any) -> None:
        self._comm = comm
        self._handle = handle
        self._number = number
        self._result = result
        self._keep = keep
        self._freed = False
        self._lock = threading.Lock()

    @property
    def handle(self) -> int:
        """The C handle (cc_coll_request_h) as an int; it stays the freed
        handle after free()."""
        return self._handle

    @property
    def comm(self) -> "Comm":
        """The Comm the request was posted on."""
        return self._comm

    def _completed(self):
        """The library reported the request complete: its arrays are free
        again (the result stays, for wait()), and so are those of the
        requests posted before it on the communicator."""
        self._keep = None
        self._comm._completed_through(self._number)

    def wait(self) -> Any:
        """Wait until the collective completes; return its result (what the
        blocking call returns: the receive array, the list of a group, the
        shard of a reduce-scatter) or raise its Error. Waiting again returns
        (or raises) at once."""
        status = lib.cc_coll_wait(self._handle)
        if not self._freed:
            self._completed()
        _check(status)
        return self._result

    def test(self) -> bool:
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
    def done(self) -> bool:
        """Whether the collective has completed (without advancing it)."""
        return self._query()[0]

    @property
    def status(self) -> Union[Status, int]:
        """Its Status once done (Status.OK while it runs)."""
        status = self._query()[1]
        try:
            return Status(status)
        except ValueError:
            return status

    @property
    def message(self) -> str:
        """Its error message once done ("" on success and while it runs)."""
        return self._query()[2]

    @property
    def freed(self) -> bool:
        """Whether free() ran."""
        return self._freed

    def free(self) -> None:
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

    def to_torch_future(self) -> "torch.futures.Future":
        """A torch.futures.Future completed with wait()'s result
        (set_result) or its Error (set_exception) once the collective
        completes, so that a DDP communication hook can return it.

        One helper thread of the package (for all requests of all Comms)
        waits for the requests in the order their futures were asked for
        (the C wait releases the GIL), completing each future, and the
        callbacks chained on it with then(), on that thread. Before the
        interpreter exits (atexit, ahead of mpi4py's MPI_Finalize) the
        package waits for the requests still queued. The request must be
        able to complete without the caller's help: with the progress thread
        (CC_COLL_PROGRESS=thread, or auto under MPI_THREAD_MULTIPLE,
        mpi4py's default) it does; with caller-driven progress the helper
        thread drives it, which MPI allows only under MPI_THREAD_MULTIPLE.
        Raises ImportError when PyTorch cannot be imported."""
        try:
            import torch.futures
        except ImportError as exc:
            raise ImportError("cc_coll.Request.to_torch_future needs PyTorch (torch.futures), which cannot be "
                              "imported: %s" % exc) from exc
        future = torch.futures.Future()
        _completer.submit(self, future)
        return future


class _Completer:
    """The helper thread of to_torch_future: one daemon thread that waits for
    the queued requests in order and completes their futures. drain() (run
    at exit) waits until the queue is empty."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._queue: Deque[Tuple[Request, Any]] = collections.deque()
        self._pending = 0
        self._thread: Optional[threading.Thread] = None
        self._atexit = False
        self.started = 0  # threads started, for the tests

    def submit(self, request: Request, future: Any) -> None:
        with self._cv:
            self._queue.append((request, future))
            self._pending += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="cc_coll requests", daemon=True)
                self._thread.start()
                self.started += 1
            if not self._atexit:
                atexit.register(self.drain)
                self._atexit = True
            self._cv.notify_all()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._queue:
                    self._cv.wait()
                request, future = self._queue.popleft()
            try:
                try:
                    result = request.wait()
                except Exception as exc:
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            except Exception:  # a callback chained with then() raised: its future holds the error
                pass
            finally:
                del request, future
                with self._cv:
                    self._pending -= 1
                    self._cv.notify_all()

    def drain(self) -> None:
        """Wait until every queued request has completed its future."""
        with self._cv:
            while self._pending and self._thread is not None and self._thread.is_alive():
                self._cv.wait()

    @property
    def pending(self) -> int:
        """Futures not completed yet."""
        with self._cv:
            return self._pending


_completer = _Completer()


def waitall(requests: Sequence[Optional[Request]]) -> List[Any]:
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
