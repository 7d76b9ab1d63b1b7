"""Transferring a copy's files: each streamed into a temporary and checked, several at once.

:func:`copy_one` streams one :class:`~recprep.tools.copyplan.CopyItem` into a temporary
while its CRC-32C is computed, refuses a source whose size or CRC-32C differs from what
its listing and manifest say, and reads the temporary back to compare. :func:`run_all_or_stop`
runs transfers on a thread pool and stops them all at the first failure;
:class:`ByteProgress` counts the bytes (a tqdm bar, or a callback). Nothing here gives a
file its final name but :func:`move_file`, which :mod:`recprep.tools.copy` calls once
every file checks out.

Example
-------
>>> import concurrent.futures as cf, threading
>>> stop = threading.Event()
>>> with cf.ThreadPoolExecutor(2) as pool:
...     run_all_or_stop(pool, [(pow, 2, 3), (pow, 3, 2)], stop)
[8, 9]
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import CorruptDataError, NotFoundError, RecprepError, WriteError
from ..storage import failpoints
from ..storage.fs import checksum, display, open_regular
from ..storage.staging import note_cleanup_failure
from .copyplan import CopyItem

__all__ = ["ByteProgress", "CopiedFile", "copy_one", "move_file", "remove_temporaries",
           "run_all_or_stop"]

log = logging.getLogger("recprep")


@dataclass(frozen=True)
class CopiedFile:
    """One file copied and checked: URLs, byte size and CRC-32C (8 hex digits)."""

    source: str
    dest: str
    bytes: int
    crc32c: str


class _TransferCancelled(RecprepError):
    """Internal: another transfer failed, this one stops."""


class ByteProgress:
    """Bytes copied, to a tqdm bar (on a terminal, or ``progress=True``) or a callback."""

    def __init__(self, progress: Any, total: int, files: int) -> None:
        self._lock = threading.Lock()
        self.bytes = self.files = 0
        self._total_files = files
        self._callback: Callable[[int, int], Any] | None = (
            progress if callable(progress) else None
        )
        self._bar: Any = None
        if (sys.stderr.isatty() if progress is None else progress is True):
            from tqdm.auto import tqdm

            self._bar = tqdm(
                total=total, unit="B", unit_scale=True, unit_divisor=1024,
                desc="recprep cp", dynamic_ncols=True,
            )

    def add(self, nbytes: int = 0, files: int = 0) -> None:
        with self._lock:
            self.bytes += nbytes
            self.files += files
            if self._bar is not None:
                self._bar.update(nbytes)
                if files:
                    self._bar.set_postfix(checked=f"{self.files}/{self._total_files}")
            if self._callback is not None:
                self._callback(self.bytes, self.files)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _stream(item: CopyItem, dfs: Any, temp: str, bar: ByteProgress, stop: threading.Event
            ) -> tuple[int, int]:
    """Copy ``item`` into ``temp``; returns the source's ``(crc32c, size)`` as read."""
    shown = display(item.fs, item.path)

    def on_block(block: bytes) -> None:
        bar.add(len(block))
        if stop.is_set():
            raise _TransferCancelled("stopped: another transfer failed")

    if stop.is_set():
        raise _TransferCancelled("stopped: another transfer failed")
    try:
        source = open_regular(item.fs, item.path, what="a file to copy")
    except FileNotFoundError:
        raise NotFoundError(shown, "disappeared before it could be copied") from None
    with source, dfs.open(temp, "wb") as out:
        try:
            return checksum(source, out=out, on_block=on_block)
        except FileNotFoundError:
            raise NotFoundError(shown, "disappeared while it was being copied") from None


def _read_back(fs: Any, path: str) -> tuple[int, int]:
    """``(crc32c, size)`` of a file, read back from storage."""
    with fs.open(path, "rb") as f:
        return checksum(f)


def copy_one(
    item: CopyItem, dfs: Any, temp: str, final: str, bar: ByteProgress, stop: threading.Event
) -> CopiedFile:
    source, dest = display(item.fs, item.path), display(dfs, final)
    try:
        crc, size = _stream(item, dfs, temp, bar, stop)
        if size != item.size:
            raise CorruptDataError(
                f"read {size} bytes where the listing said {item.size}: the file changed "
                "during the copy; copy it again once it is stable", path=source,
            )
        if item.expected_crc is not None and crc != item.expected_crc:
            raise CorruptDataError(
                f"its CRC-32C is {crc:08x}, its manifest says {item.expected_crc:08x}: the "
                "source is damaged (run recprep verify on it); nothing was copied",
                path=source,
            )
        got_crc, got_size = _read_back(dfs, temp)
        if (got_crc, got_size) != (crc, size):
            raise CorruptDataError(
                f"the copy has {got_size} bytes, CRC-32C {got_crc:08x}; the source has "
                f"{size} bytes, CRC-32C {crc:08x}; nothing was committed", path=dest,
            )
    except RecprepError:
        raise
    except Exception as err:
        raise WriteError(dest, err) from err
    bar.add(files=1)
    failpoints.hit("cp.copied")
    log.debug("recprep: copied %s -> %s (%d bytes, crc32c %08x)", source, dest, size, crc)
    return CopiedFile(source, dest, size, f"{crc:08x}")


def run_all_or_stop(pool: cf.Executor, calls: Iterable[tuple[Any, ...]], stop: threading.Event
                    ) -> list:
    """Run ``fn(*args)`` for each ``(fn, *args)``; on the first failure stop the rest and
    raise it (after the running ones have stopped)."""
    futures = [pool.submit(*call) for call in calls]
    try:
        cf.wait(futures, return_when=cf.FIRST_EXCEPTION)
        for future in futures:
            if future.done() and not future.cancelled() and future.exception() is not None:
                raise future.exception()  # type: ignore[misc]
        return [f.result() for f in futures]
    except BaseException:
        stop.set()
        for future in futures:
            future.cancel()
        cf.wait(futures)
        raise


def remove_temporaries(fs: Any, paths: Iterable[str], error: BaseException) -> None:
    for path in paths:
        try:
            if fs.exists(path):
                fs.rm(path)
        except Exception as failure:  # cleanup must not hide the error that led here
            note_cleanup_failure(error, f"removing the temporary {path}", failure)



def move_file(fs: Any, source: str, dest: str) -> None:
    try:
        fs.mv(source, dest)
    except OSError as err:
        raise WriteError(display(fs, dest), err) from err

