"""Transferring a copy's files: each streamed into a temporary and checked, several at once.

:func:`copy_one` streams one :class:`~recprep.tools.copyplan.CopyItem` into a temporary
while its CRC-32C is computed (from an async filesystem, several ranges in flight; to a
store that speaks S3, several parts in flight: :mod:`recprep.write.uploads`), refuses a
source whose size or CRC-32C differs from what its listing and manifest say, and checks
the copy: where the store checks the CRC-32C sent with every part, that is the check (a
wrong byte is refused by the store); where the store's ETag is the MD5 of the bytes sent
(S3 without SSE-KMS/SSE-C, moto), that receipt is; elsewhere the temporary is read back
and compared (a difference is a :class:`~recprep.errors.WriteError`). With
``deferred=True`` on a store that speaks S3, a file isn't written to a temporary: it is
uploaded to its final name and left incomplete (:attr:`Destination.pending` keeps the
upload for the commit to complete: :mod:`recprep.storage.multipart`), checked by the store
or by each part's ETag — where neither can vouch for it, it is copied to the temporary
after all. The sources are
read through :class:`CopySources` (ranges of every file in flight at once, from a store).
:func:`run_all_or_stop` runs transfers on a thread pool and stops them all at the first failure;
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
import dataclasses
import logging
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import google_crc32c

from ..errors import CorruptDataError, NotFoundError, RecprepError, WriteError
from ..storage import failpoints
from ..storage.fetch import Fetcher, FetchOptions, FetchStats, streams_ranges
from ..storage.fs import COPY_BLOCK, checksum, display, open_regular
from ..storage.multipart import PendingUpload, abort
from ..storage.staging import note_cleanup_failure
from ..write.uploads import (
    PART_BYTES,
    SINGLE_PUT_BYTES,
    VERIFIED,
    UploadSlots,
    open_upload,
    speaks_s3,
    store_checks,
)
from .copyplan import CopyItem

__all__ = ["RANGE_BYTES", "REQUESTS_AT_FIRST", "ByteProgress", "CopiedFile", "CopySources",
           "Destination", "copy_one", "move_file", "remove_temporaries", "run_all_or_stop"]

log = logging.getLogger("recprep")

RANGE_BYTES = 8 << 20
"""A file copied from an async filesystem (s3fs, gcsfs, HTTP) is fetched in ranges this
big (:class:`CopySources`)."""
REQUESTS_AT_FIRST = 16
"""Range requests in flight when a download starts (more while throughput grows, up to
the fetcher's ``max_requests``): a copy is a bulk transfer, it starts with the link full."""


@dataclass(frozen=True)
class CopiedFile:
    """One file copied and checked: URLs, byte size and CRC-32C (8 hex digits); the ETag
    its store answered for the object written in place (None: not known, or not written
    in place)."""

    source: str
    dest: str
    bytes: int
    crc32c: str
    etag: str | None = dataclasses.field(default=None, repr=False, compare=False)


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


class GatedSlots(UploadSlots):
    """:class:`~recprep.write.uploads.UploadSlots` that let no part or object go before
    ``gate`` is done (its failure is the writer's): a copy's files are read and hashed
    while what must come before their first byte on the store is done."""

    gate: cf.Future[Any] | None = None

    def take(self) -> None:
        if self.gate is not None:
            self.gate.result()
        super().take()


@dataclass
class Destination:
    """Where a copy's files go: the filesystem, and how uploads to it go out — with parts
    in flight sharing ``slots`` (a store that speaks S3; None: ``fs.open``), each part's
    CRC-32C sent for the store to check where it checks one (``verified``: then a copy
    isn't read back); ``pending``: final path -> the incomplete upload of a file copied
    with ``deferred`` (a commit completes it, :meth:`abort_pending` aborts the rest);
    ``gate``: what must be done before anything is written (:meth:`hold`)."""

    fs: Any
    slots: UploadSlots | None = None
    verified: bool = False
    pending: dict[str, PendingUpload] = dataclasses.field(default_factory=dict)
    gate: cf.Future[Any] | None = None

    def take(self, paths: Iterable[str]) -> dict[str, PendingUpload]:
        """The pending uploads of ``paths`` (final paths), now the caller's to complete."""
        return {p: self.pending.pop(p) for p in paths if p in self.pending}

    def abort_pending(self, error: BaseException | None = None) -> None:
        """Abort every upload still pending (failures become notes on ``error``)."""
        for path, upload in list(self.pending.items()):
            try:
                abort(self.fs, path, upload.upload_id)
            except Exception as failure:  # cleanup must not hide the error that led here
                note_cleanup_failure(error, f"aborting the upload of {path}", failure)
        self.pending.clear()

    @classmethod
    def of(cls, fs: Any, directory: str) -> Destination:
        """The destination directory ``directory`` of ``fs``, its store asked once
        whether it checks checksums (:func:`~recprep.write.uploads.store_checks`)."""
        if not speaks_s3(fs):
            return cls(fs)
        return cls(fs, GatedSlots(fs), store_checks(fs, directory) == VERIFIED)

    def hold(self, gate: cf.Future[Any]) -> None:
        """Let nothing be written before ``gate`` is done (see :class:`GatedSlots`)."""
        self.gate = gate
        if isinstance(self.slots, GatedSlots):
            self.slots.gate = gate

    def opened(self, *, quiet: bool = False) -> None:
        """Wait for the gate :meth:`hold` set; its failure is raised (unless ``quiet``)."""
        if self.gate is not None:
            cf.wait([self.gate])
            if (failure := self.gate_failure()) is not None and not quiet:
                raise failure

    def gate_failure(self) -> BaseException | None:
        """Why the gate failed (None: it didn't, or isn't done)."""
        if self.gate is None or not self.gate.done() or self.gate.cancelled():
            return None
        return self.gate.exception()


class CopySources:
    """The filesystems a copy reads from. A file of a filesystem with async I/O (s3fs,
    gcsfs, HTTP: :func:`~recprep.storage.fetch.streams_ranges`) streams through the one
    :class:`~recprep.storage.fetch.Fetcher` of its filesystem: ranges of every file being
    copied are in flight together (as many as keep the link busy, within the fetcher's
    byte budget), each piece handed on as it arrives, a dropped transfer resumed at its
    byte. Other files are read through their own ``open``. Thread-safe; ``close`` when
    the copy is done."""

    def __init__(self, options: FetchOptions | None = None) -> None:
        self.options = options or FetchOptions(range_bytes=RANGE_BYTES,
                                               initial_requests=REQUESTS_AT_FIRST)
        self._fetchers: dict[int, Fetcher] = {}
        self._lock = threading.Lock()

    def _fetcher(self, fs: Any) -> Fetcher:
        with self._lock:
            fetcher = self._fetchers.get(id(fs))
            if fetcher is None:
                fetcher = self._fetchers[id(fs)] = Fetcher(fs, self.options)
            return fetcher

    def blocks(self, fs: Any, path: str, size: int, block: int = COPY_BLOCK
               ) -> Iterator[bytes]:
        """The bytes of ``path`` (``size`` of them, as listed), in order; from a file read
        through its ``open``, ``block`` of them at a time."""
        if not streams_ranges(fs):
            with open_regular(fs, path, what="a file to copy") as source:
                while data := source.read(max(1, block)):
                    yield data
            return
        with self._fetcher(fs).open(path, size=size, span=(0, size)) as source:
            while data := source.read1(COPY_BLOCK):  # as the pieces arrive, unjoined
                yield data

    def stats(self) -> FetchStats:
        """The requests and bytes of every fetcher so far, added up."""
        with self._lock:
            return sum((f.stats() for f in self._fetchers.values()), FetchStats())

    def close(self) -> None:
        with self._lock:
            fetchers, self._fetchers = list(self._fetchers.values()), {}
        for fetcher in fetchers:
            fetcher.close()


def _stream(item: CopyItem, sources: CopySources, dest: Destination, temp: str,
            bar: ByteProgress, stop: threading.Event, deferred: bool = False
            ) -> tuple[int, int, bool, PendingUpload | None, str | None]:
    """Copy ``item`` into ``temp``; returns the source's ``(crc32c, size)`` as read,
    whether the store's receipt (its ETag, or with ``deferred`` each part's) vouches that
    it holds exactly those bytes, with ``deferred`` the upload left incomplete, and the
    ETag the store answered for the object (None: not answered, or ``deferred``)."""
    shown = display(item.fs, item.path)
    if stop.is_set():
        raise _TransferCancelled("stopped: another transfer failed")
    crc = done = 0
    try:
        # one PutObject, when small enough (the file then read whole: the one block read
        # is the object sent, no copy joined); a deferred upload is in parts whatever its
        # size (its first part goes once written, not after the whole file was read)
        part = item.size if item.size <= SINGLE_PUT_BYTES and not deferred else PART_BYTES
        with open_upload(dest.fs, temp, dest.slots, part, receipt=not dest.verified,
                         deferred=deferred) as out:
            for block in sources.blocks(item.fs, item.path, item.size,
                                        part if part == item.size else COPY_BLOCK):
                crc = google_crc32c.extend(crc, block)
                done += len(block)
                out.write(block)
                bar.add(len(block))
                if stop.is_set():
                    raise _TransferCancelled("stopped: another transfer failed")
    except FileNotFoundError:
        raise NotFoundError(shown, "disappeared before or while it was copied") from None
    pending = getattr(out, "pending", None) if deferred else None
    if pending is not None:
        pending = dest.pending[temp] = dataclasses.replace(pending, crc32c=crc)
    etag = getattr(out, "etag", None)
    return crc, done, bool(getattr(out, "vouched", False)), pending, etag


def _read_back(fs: Any, path: str) -> tuple[int, int]:
    """``(crc32c, size)`` of a file, read back from storage."""
    with fs.open(path, "rb") as f:
        return checksum(f)


def _check_copy(dest: Destination, temp: str, crc: int, size: int, vouched: bool) -> None:
    """Check the copy ``temp`` holds ``size`` bytes of CRC-32C ``crc``: the store checked
    every part's CRC-32C (``dest.verified``), or its ETag is the MD5 of the bytes sent
    (``vouched``), or else it is read back; a difference is an ``OSError``."""
    if dest.verified or vouched:
        return
    got_crc, got_size = _read_back(dest.fs, temp)
    if (got_crc, got_size) != (crc, size):
        raise OSError(
            f"the copy has {got_size} bytes, CRC-32C {got_crc:08x}; the source has "
            f"{size} bytes, CRC-32C {crc:08x}: the bytes changed on the way (run it again)")
    if speaks_s3(dest.fs):
        log.debug("recprep: %s checks out read back; its store's ETag isn't the MD5 of "
                  "its bytes", display(dest.fs, temp))


def copy_one(
    item: CopyItem, sources: CopySources, dest: Destination, temp: str, final: str,
    bar: ByteProgress, stop: threading.Event, *, deferred: bool = False,
) -> CopiedFile:
    """Copy ``item`` (read through ``sources``) into ``temp`` — with ``deferred`` on a
    store that speaks S3, into an incomplete upload to ``final`` (``dest.pending``) —
    checked: its size and CRC-32C as its listing and manifest say, and the copy's — by
    the store, which checked every part's CRC-32C (``dest.verified``), or by the store's
    receipt (an ETag that is the MD5 of the bytes sent), or else read back."""
    source, shown = display(item.fs, item.path), display(dest.fs, final)
    deferred = deferred and dest.slots is not None
    try:
        crc, size, vouched, pending, etag = _stream(
            item, sources, dest, final if deferred else temp, bar, stop, deferred)
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
        if pending is not None and not (dest.verified or vouched):
            log.debug("recprep: no part ETag of %s is an MD5; copied again, to be read "
                      "back", shown)  # an incomplete upload can't be read back
            dest.take([final])
            abort(dest.fs, final, pending.upload_id)
            bar.add(-size)
            return copy_one(item, sources, dest, temp, final, bar, stop)
        if pending is None:
            _check_copy(dest, temp, crc, size, vouched)
    except WriteError as err:  # an upload's: named by the file's final name
        if err is dest.gate_failure():  # (what must come first failed: as it is)
            raise
        raise (err if err.path == shown else WriteError(shown, err.original)) from err
    except RecprepError:
        raise
    except Exception as err:
        raise WriteError(shown, err) from err
    bar.add(files=1)
    failpoints.hit("cp.copied")
    log.debug("recprep: copied %s -> %s (%d bytes, crc32c %08x)", source, shown, size, crc)
    return CopiedFile(source, shown, size, f"{crc:08x}", etag if temp == final else None)


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

