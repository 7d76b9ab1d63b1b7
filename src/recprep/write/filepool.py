"""A bound on the files a write task holds open at once.

A task writes instance ``j`` to file ``j % N``: each of its ``N`` shard (or piece) files is
being written for the whole pass. One open file each is ``N`` file descriptors — 1,500
shards fail under the common limit of 1,024 — and, on an object store, ``N`` upload
buffers (s3fs: up to 50 MiB each). A :class:`WritePool` hands out :class:`PooledWriter`
objects that look like files opened for writing (``write``, ``close``) but hold a real
handle only while they are among the ``max_open`` the pool keeps open:

* Writes come round-robin (each file gets a chunk in turn), where keeping the least
  recently used files open would close each one just before its turn. The pool closes
  the *most* recently used file instead: ``max_open - 1`` files stay open and one handle
  goes round the others (a chunk's header and payload are written together, through it).
* A file closed early is reopened for appending where the filesystem can (local disks,
  ``memory://``). Object stores can't append: there its next bytes go to a new *segment*
  object beside it (``{path}.seg-00001``...), and closing the file joins its segments
  into ``path``, in order (a streamed copy, one segment open at a time), and removes them.
* Either way the file's bytes are exactly what one open file would have received,
  whatever ``max_open`` is: the output doesn't depend on the limit.

On an object store an open file is an upload that buffers up to a part before it sends
it. Where the filesystem speaks the S3 API on an event loop (s3fs), a file is a
:class:`~recprep.write.uploads.PartUpload`: its parts
(:data:`~recprep.write.uploads.PART_BYTES`) go out while the task writes on, the task's
uploads sharing one :class:`~recprep.write.uploads.UploadSlots` (at most
``max_concurrency`` parts in flight), and :meth:`WritePool.wait` waits for them all;
elsewhere it is ``fs.open(path, "wb")``,
whose buffer is the filesystem's block size. With many files open at once, each is opened
with a part (or block) size that keeps them together near :data:`UPLOAD_BUDGET` (never
below :data:`MIN_UPLOAD_BLOCK`, S3's smallest part; never above the default): a task's
uploads buffer at most about ``max(UPLOAD_BUDGET, max_open * MIN_UPLOAD_BLOCK)`` (1.25 GiB
with 256 open) plus the parts in flight, however many shards it writes and however big
they are.

``max_open`` defaults to :func:`~recprep.storage.openfiles.default_max_open` (256, or a
quarter of ``RLIMIT_NOFILE`` if lower). An open that still fails with ``EMFILE`` or
``ENFILE`` (the program holds other files) closes pooled handles and halves the pool, down
to one file; with none left to close, the error is raised (the write loop makes it a
:class:`~recprep.errors.WriteError` that says it is the open-files limit).

Example
-------
>>> import fsspec
>>> fs = fsspec.filesystem("memory")
>>> pool = WritePool(fs, max_open=2)
>>> files = [pool.open(f"/wpool/{k}") for k in range(3)]
>>> for round in range(2):
...     for k, f in enumerate(files):
...         _ = f.write(bytes([65 + k]) * (round + 1))
>>> pool.num_open
2
>>> for f in files:
...     f.close()
>>> [fs.cat_file(f"/wpool/{k}") for k in range(3)], pool.num_open
([b'AAA', b'BBB', b'CCC'], 0)
"""

from __future__ import annotations

import contextlib
import errno
import logging
import posixpath
from collections import OrderedDict
from typing import Any

from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

from ..errors import WriteError
from ..storage.fs import COPY_BLOCK
from ..storage.openfiles import default_max_open
from .uploads import PART_BYTES, VERIFIED, PartUpload, UploadSlots, speaks_s3, store_checks

__all__ = ["MIN_UPLOAD_BLOCK", "UPLOAD_BUDGET", "PooledWriter", "WritePool", "can_append"]

log = logging.getLogger("recprep")

#: the errors of an open that ran out of file descriptors (the process's, the system's)
FD_EXHAUSTED = (errno.EMFILE, errno.ENFILE)
UPLOAD_BUDGET = 512 << 20
"""What the open uploads of one task (storage that can't append) buffer together, at most
(unless :data:`MIN_UPLOAD_BLOCK` each is more)."""
MIN_UPLOAD_BLOCK = 5 << 20
"""The smallest block an upload is opened with: S3's smallest multipart part. (With it, an
S3 object holds at most 10,000 parts: 50 GB, when more than 102 files are open at once.)"""


def can_append(fs: Any) -> bool:
    """Whether files of ``fs`` can be reopened to append (``"ab"``) at no cost beyond the
    bytes appended: fsspec's local files and ``memory://`` (by their protocol: a subclass
    registered under another name may not); not object stores (s3fs emulates appending
    by copying the object)."""
    protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
    return (isinstance(fs, LocalFileSystem) and bool(protocols & {"file", "local"})) or (
        isinstance(fs, MemoryFileSystem) and "memory" in protocols)


class PooledWriter:
    """A file of a :class:`WritePool` opened for writing: its real handle may be closed
    between writes and reopened (appending, or as a new segment) at the next one."""

    def __init__(self, pool: WritePool, path: str) -> None:
        self.pool = pool
        self.path = path
        self.handle: Any = None
        self.created = False  # ``path`` itself was opened once (it exists)
        self.segments = 0  # segments after ``path`` (storage that can't append)
        self.closed = False

    def segment(self, k: int) -> str:
        """Where segment ``k`` is (``path`` itself for the first)."""
        return self.path if k == 0 else f"{self.path}.seg-{k:05d}"

    def write(self, data: bytes) -> int:
        if self.closed:
            raise ValueError(f"write to closed file {self.path}")
        handle = self.handle if self.handle is not None else self.pool.acquire(self)
        self.pool.touch(self)
        handle.write(data)
        return len(data)

    def close(self) -> None:
        """Close the file: its last handle, or the empty file it is if never written; then
        join its segments, if it has any."""
        if self.closed:
            return
        if not self.created:
            self.pool.acquire(self)  # an empty file is a file too
        self.closed = True
        if self.handle is not None:
            self.pool.release(self)
        if self.segments:
            self._join()

    def abort(self) -> None:
        """Close the handle without joining anything, ignoring errors (the write failed;
        the staging directory and what is in it go)."""
        self.closed = True
        handle, self.handle = self.handle, None
        self.pool.forget(self)
        if isinstance(handle, PartUpload):
            handle.discard()  # aborted: no part stays on the store
        elif handle is not None:
            with contextlib.suppress(Exception):
                handle.close()

    def _join(self) -> None:
        """``path`` followed by its segments, in order, into ``path``."""
        fs = self.pool.fs
        self.pool.wait()  # the segments' uploads are complete
        joined = f"{self.path}.joined"
        with fs.open(joined, "wb") as out:
            for k in range(self.segments + 1):
                with fs.open(self.segment(k), "rb") as part:
                    while block := part.read(COPY_BLOCK):
                        out.write(block)
        fs.mv(joined, self.path)
        fs.rm([self.segment(k) for k in range(1, self.segments + 1)])
        self.segments = 0


class WritePool:
    """Files of one filesystem opened for writing, at most ``max_open`` of them really
    open at once (see the module docs). One task's: not shared between threads."""

    def __init__(self, fs: Any, max_open: int | None = None, files: int | None = None) -> None:
        self.fs = fs
        self.max_open = max(1, default_max_open() if max_open is None else max_open)
        self.appends = can_append(fs)
        self._open: OrderedDict[int, PooledWriter] = OrderedDict()
        #: how files are opened for writing: the block size of uploads, when ``files``
        #: (how many the task writes) open together would buffer more than the budget
        self.options: dict[str, Any] = {}
        #: uploads with parts in flight (a filesystem that speaks S3), else None
        self.slots = UploadSlots(fs) if not self.appends and speaks_s3(fs) else None
        self.part_bytes = PART_BYTES
        self._checksums: bool | None = None  # whether the store checks them (found once)
        if not self.appends and files:
            block = max(MIN_UPLOAD_BLOCK, UPLOAD_BUDGET // min(files, self.max_open))
            self.part_bytes = min(PART_BYTES, block)
            default = getattr(fs, "default_block_size", None) or getattr(fs, "blocksize", None)
            if isinstance(default, int) and block < default:
                self.options["block_size"] = block

    @property
    def num_open(self) -> int:
        """Real handles open now."""
        return len(self._open)

    def open(self, path: str) -> PooledWriter:
        """``path``, to be written; nothing is opened until the first write (or close)."""
        return PooledWriter(self, path)

    def touch(self, file: PooledWriter) -> None:
        """``file`` was just written to: it is the most recently used."""
        self._open.move_to_end(id(file))

    def acquire(self, file: PooledWriter) -> Any:
        """Open ``file``'s real handle (closing another first if the pool is full)."""
        while True:
            while len(self._open) >= self.max_open:
                self.release(next(reversed(self._open.values())))
            try:
                handle = self._open_handle(file)
                break
            except OSError as err:
                if err.errno not in FD_EXHAUSTED or not self._open:
                    raise
                self.max_open = max(1, len(self._open) // 2)
                log.info("recprep: out of file descriptors (%s) with %d files open for "
                         "writing; keeping at most %d open", err.strerror, len(self._open),
                         self.max_open)
        file.handle = handle
        self._open[id(file)] = file
        return handle

    def _open_handle(self, file: PooledWriter) -> Any:
        if not file.created:
            handle = self._create(file.path)
            file.created = True
        elif self.appends:
            handle = self.fs.open(file.path, "ab")
        else:
            handle = self._create(file.segment(file.segments + 1))
            file.segments += 1
        return handle

    def _create(self, path: str) -> Any:
        if self.slots is None:
            return self.fs.open(path, "wb", **self.options)
        if self._checksums is None:
            self._checksums = store_checks(self.fs, posixpath.dirname(path)) == VERIFIED
        return PartUpload(self.fs, path, self.slots, part_bytes=self.part_bytes,
                          checksums=self._checksums)

    def wait(self) -> None:
        """Wait for the uploads of the files closed so far (where they go out in the
        background); a failed one raises :class:`~recprep.errors.WriteError` naming it."""
        if self.slots is not None:
            self.slots.wait()

    def discard(self) -> None:
        """Abort the uploads not complete yet (the task failed); never raises."""
        if self.slots is not None:
            self.slots.discard()

    def release(self, file: PooledWriter) -> None:
        """Close ``file``'s real handle (where an object store uploads it). A failure is
        the output's: :class:`~recprep.errors.WriteError` naming that file."""
        handle, file.handle = file.handle, None
        self._open.pop(id(file), None)
        if handle is None:
            return
        try:
            handle.close()
        except WriteError:
            raise
        except Exception as err:  # an object store's upload errors aren't OSErrors
            raise WriteError(file.path, err) from err

    def forget(self, file: PooledWriter) -> None:
        self._open.pop(id(file), None)
