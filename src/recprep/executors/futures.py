"""Any ``concurrent.futures.Executor`` as a backend; ``"processes"`` is one of them."""

from __future__ import annotations

import concurrent.futures as cf
import ctypes
import multiprocessing
import os
import signal
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import InvalidArgumentError, TaskFailedError
from .base import Backend, Outcome, execute


def _die_with_parent() -> None:
    """Worker initializer: on Linux, ask the kernel to SIGKILL this worker when its parent
    dies, so a killed conversion leaves no orphan still writing into staging. (Under
    forkserver the parent is the fork server, which exits when the driver does.)"""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


class FuturesBackend(Backend):
    """Runs tasks on a ``concurrent.futures.Executor`` the user owns (never shut down)."""

    name = "futures"

    def __init__(self, executor: cf.Executor) -> None:
        super().__init__()
        self.executor = executor

    def run(self, payloads: list[bytes]) -> Iterator[tuple[int, Outcome]]:
        futures = {self.executor.submit(execute, p): i for i, p in enumerate(payloads)}
        try:
            for future in cf.as_completed(futures):
                try:
                    outcome = future.result()
                except Exception as err:  # the worker died, or the pool broke
                    raise TaskFailedError(
                        f"task {futures[future]} (worker)", type(err).__name__, str(err)
                    ) from err
                yield futures[future], outcome
        finally:
            for future in futures:
                future.cancel()
            cf.wait(futures)  # what was already running finishes before cleanup

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.executor!r})"


class ProcessBackend(FuturesBackend):
    """``executor="processes"``: a process pool on this machine.

    ``num_workers`` defaults to the CPU count; ``executor_options={"start_method": ...}``
    picks ``fork``, ``spawn`` or ``forkserver`` (default: multiprocessing's own). Scripts
    need the ``if __name__ == "__main__":`` guard under spawn and forkserver, as with
    multiprocessing itself.
    """

    name = "processes"

    def __init__(
        self, num_workers: int | None = None, options: Mapping[str, Any] | None = None
    ) -> None:
        Backend.__init__(self, num_workers, options)
        unknown = set(self.options) - {"start_method"}
        if unknown:
            raise InvalidArgumentError(
                f"executor 'processes' takes executor_options {{'start_method'}}, "
                f"got {sorted(unknown)}"
            )
        method = self.options.get("start_method")
        methods = multiprocessing.get_all_start_methods()
        if method is not None and method not in methods:
            raise InvalidArgumentError(
                f"start_method {method!r} is not available here; valid ones are {methods}"
            )
        self._workers = num_workers or os.cpu_count() or 1
        self._method = method
        self.executor: cf.Executor | None = None  # type: ignore[assignment]

    def run(self, payloads: list[bytes]) -> Iterator[tuple[int, Outcome]]:
        if self.executor is None:
            context = multiprocessing.get_context(self._method)
            self.executor = cf.ProcessPoolExecutor(
                self._workers, mp_context=context, initializer=_die_with_parent
            )
        return super().run(payloads)

    def close(self) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=True, cancel_futures=True)
            self.executor = None

    def __repr__(self) -> str:
        return f"ProcessBackend(num_workers={self._workers}, start_method={self._method!r})"
