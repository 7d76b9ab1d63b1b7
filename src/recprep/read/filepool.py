"""A bound on the files a reader holds open at once.

Reading a shard set round-robin takes one record from each shard in turn, so every shard
is "being read" for the whole pass: 10,000 shards would be 10,000 open files (and their
read buffers, megabytes each on object stores), past the common limit of 1,024 file
descriptors. A :class:`FilePool` hands out :class:`PooledFile` objects that look like
open files (``read``/``seek``/``tell``) but hold a real handle only while they are among
the ``max_open`` most recently used: the others are closed, and reopened at their
position when read again. A file that is being read at that moment (by a prefetch
thread) is never closed under it. Files are opened with
:func:`~recprep.storage.fs.open_regular`: a FIFO or a device where a shard should be is
refused, never read.

Example
-------
>>> import fsspec
>>> fs = fsspec.filesystem("memory")
>>> for k in range(3):
...     fs.pipe_file(f"/pool/{k}", bytes([k]) * 4)
>>> pool = FilePool(fs, max_open=2)
>>> files = [pool.open(f"/pool/{k}") for k in range(3)]
>>> pool.num_open
2
>>> [f.read(2) for f in files], pool.num_open
([b'\\x00\\x00', b'\\x01\\x01', b'\\x02\\x02'], 2)
>>> files[0].read(), files[0].tell()
(b'\\x00\\x00', 4)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from ..storage.fetch import Fetcher
from ..storage.fs import open_regular, read_into
from ..storage.openfiles import MAX_OPEN_FILES, default_max_open

__all__ = ["MAX_OPEN_FILES", "FilePool", "PooledFile", "default_max_open"]


class PooledFile:
    """An open file of a :class:`FilePool`: reopened at its position when needed."""

    def __init__(self, pool: FilePool, path: str) -> None:
        self._pool = pool
        self.path = path
        self._file: Any = None
        self._pos = 0
        self._lock = threading.Lock()
        self.closed = False
        #: its bytes were checked whole against a manifest as it was opened (a cached
        #: shard's local copy): a pass needn't check them again as it reads them
        self.verified = False

    def _handle(self) -> Any:
        """The real file, opened (and positioned) if it was closed; holds ``_lock``."""
        if self._file is None:
            if self.closed:
                raise ValueError(f"I/O operation on closed file {self.path}")
            self._file = open_regular(self._pool.fs, self.path)
            if self._pos:
                self._file.seek(self._pos)
        self._pool.touch(self)
        return self._file

    def read(self, size: int = -1) -> bytes:
        with self._lock:
            data: bytes = self._handle().read(size)
            self._pos += len(data)
            return data

    def readinto(self, buffer: memoryview) -> int:
        with self._lock:
            n = read_into(self._handle(), buffer)
            self._pos += n
            return n

    def seek(self, offset: int, whence: int = 0) -> int:
        with self._lock:
            if whence == 0 and self._file is None:
                self._pos = offset  # no need to open a file to move in it
            else:
                self._pos = self._handle().seek(offset, whence)
            return self._pos

    def tell(self) -> int:
        return self._pos

    def release(self) -> bool:
        """Close the real file unless it is in use right now; whether it was closed."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if self._file is not None:
                self._file.close()
                self._file = None
            return True
        finally:
            self._lock.release()

    def close(self) -> None:
        with self._lock:
            self.closed = True
            if self._file is not None:
                self._file.close()
                self._file = None
        self._pool.forget(self)

    def __enter__(self) -> PooledFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FilePool:
    """Files of one filesystem, at most ``max_open`` of them really open at once. With a
    ``fetcher`` (object stores), files are its ranged files instead: they hold no
    handle, only the ranges fetched ahead within its budget."""

    def __init__(self, fs: Any, max_open: int | None = None,
                 fetcher: Fetcher | None = None) -> None:
        self.fs = fs
        self.fetcher = fetcher
        self.max_open = max(1, default_max_open() if max_open is None else max_open)
        self._open: OrderedDict[int, PooledFile] = OrderedDict()
        self._lock = threading.Lock()
        self._last: PooledFile | None = None  # the file touched last (the newest)

    def __getstate__(self) -> dict[str, Any]:
        return {"fs": self.fs, "max_open": self.max_open, "fetcher": self.fetcher}

    def __setstate__(self, state: dict[str, Any]) -> None:  # no handles, no lock
        self.__init__(state["fs"], state["max_open"], state["fetcher"])  # type: ignore[misc]

    @property
    def num_open(self) -> int:
        """Real handles open now."""
        return len(self._open)

    def open(
        self, path: str, *, size: int | None = None, etag: str | None = None,
        span: tuple[int, int] | None = None,
    ) -> Any:
        """``path`` opened for reading (so a missing file raises here); it may be closed
        and reopened behind the scenes later.

        ``size`` (the bytes its manifest lists), ``etag`` (the object's ETag its manifest
        records: reads fail with :class:`~recprep.storage.fetch.ObjectChangedError` once
        the object is another) and ``span`` (the bytes ``[start, end)`` the pass will
        read) let an object store's file stream ranges ahead (:mod:`recprep.storage.fetch`)
        without a request of its own to learn them.
        """
        if self.fetcher is not None:
            return self.fetcher.open(path, size=size, etag=etag, span=span)
        file = PooledFile(self, path)
        with file._lock:
            file._handle()
        return file

    def touch(self, file: PooledFile) -> None:
        """``file`` was just used: keep it open, close the least recently used ones
        beyond ``max_open`` (skipping those being read right now)."""
        if self._last is file:  # the newest already (a chunk's header, then its bytes)
            return
        with self._lock:
            self._last = file
            self._open[id(file)] = file
            self._open.move_to_end(id(file))
            excess = len(self._open) - self.max_open
            if excess <= 0:
                return
            for key, other in list(self._open.items()):
                if excess <= 0:
                    break
                if other is not file and other.release():
                    del self._open[key]
                    excess -= 1

    def forget(self, file: PooledFile) -> None:
        with self._lock:
            self._open.pop(id(file), None)
            if self._last is file:
                self._last = None
