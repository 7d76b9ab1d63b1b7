"""Storage: fsspec filesystems, the hidden staging directory, and the atomic commit.

All file access in recprep goes through fsspec, so a local path, ``memory://``,
``s3://`` or any other protocol fsspec knows works the same way.

Files recprep reads are input, and a local directory can hold more than files: a FIFO
that blocks whoever opens it, a link to ``/dev/zero`` that never ends. Every file a reader
or a tool opens (shards, manifests, side files) goes through :func:`open_regular` or
:func:`read_regular`, which refuse anything but a regular file on the local filesystem
(checked on the open descriptor, opened without blocking) and read side files with their
size cap enforced, on every filesystem.

The staging directory and the commit protocol live in ``storage/staging.py``.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO, Protocol, cast

import fsspec
import google_crc32c

from .._core.native import crc32c
from ..errors import CorruptDataError, InvalidArgumentError


class Writable(Protocol):
    """What the CRC-32C helpers write to: anything with ``write`` (a file, a wrapper)."""

    def write(self, data: bytes, /) -> int: ...


#: bytes read (and checksummed) at a time when a whole file or range is streamed
COPY_BLOCK = 8 << 20


def resolve(url: str, storage_options: Mapping[str, Any] | None = None) -> tuple[Any, str]:
    """``(filesystem, path)`` for a local path or fsspec URL."""
    options = dict(storage_options or {})
    try:
        fs, path = fsspec.core.url_to_fs(str(url), **options)
    except ImportError as err:
        raise InvalidArgumentError(
            f"{url!r} needs a filesystem that isn't installed ({err}); e.g. "
            "pip install 'recprep[s3]' for s3://"
        ) from None
    return fs, path.rstrip("/") or path


def display(fs: Any, path: str) -> str:
    """A path as the user would write it (``s3://b/k``, ``memory://x``, ``/local``)."""
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    if protocol in ("file", "local"):
        return path
    return fs.unstrip_protocol(path)


def in_this_process(fs: Any) -> Any:
    """``fs``, or — in a process forked after ``fs`` was made (a DataLoader worker) — the
    same filesystem made in this one: an async filesystem's event loop and connections
    don't cross a fork (fsspec refuses to use them), its options do.

    >>> fs = fsspec.filesystem("memory")
    >>> in_this_process(fs) is fs
    True
    """
    made_in = getattr(fs, "_pid", None)
    if made_in is None or made_in == os.getpid() or not getattr(fs, "async_impl", False):
        return fs
    return type(fs)(*fs.storage_args, **fs.storage_options)


def is_local(fs: Any) -> bool:
    """Whether ``fs`` is the local filesystem (where FIFOs, devices and locks exist).

    >>> is_local(fsspec.filesystem("file")), is_local(fsspec.filesystem("memory"))
    (True, False)
    """
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return protocol in ("file", "local")


_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def _kind_of(mode: int) -> str:
    return next((kind for test, kind in _KINDS if test(mode)), "a special file")


def _refused(path: str, shown: str, kind: str, what: str) -> CorruptDataError:
    if os.path.islink(path):
        kind = f"a symbolic link to {os.readlink(path)}, {kind}"
    return CorruptDataError(
        f"not a regular file but {kind}: recprep reads {what} only from a regular file (a "
        "FIFO or a device could block the reader or never end); put the real file there",
        path=shown, remedy=(),  # on_corrupt="skip" reads around damage, not a device
    )


def _open_local(path: str, shown: str, what: str) -> int:
    """A descriptor of the local regular file ``path``, opened without blocking (a FIFO
    with no writer would block an ordinary open) and checked on the open descriptor."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        if err.errno == errno.ENXIO:  # a socket (or a device without its driver)
            raise _refused(path, shown, _kind_of(os.stat(path).st_mode), what) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _refused(path, shown, _kind_of(mode), what)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(fs: Any, path: str, *, what: str = "a shard") -> BinaryIO:
    """``fs.open(path, "rb")``, refusing anything but a regular file on the local
    filesystem with :class:`~recprep.errors.CorruptDataError` naming the path and what it
    is (a FIFO, a character device...). ``what`` names the file in that message.

    >>> import os, tempfile
    >>> pipe = os.path.join(tempfile.mkdtemp(), "p-00000-of-00001")
    >>> os.mkfifo(pipe)
    >>> open_regular(fsspec.filesystem("file"), pipe)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    recprep.errors.CorruptDataError: /...: not a regular file but a FIFO (named pipe): ...
    """
    if not is_local(fs):
        return cast(BinaryIO, fs.open(path, "rb"))
    local = fs._strip_protocol(path)
    return os.fdopen(_open_local(local, display(fs, path), what), "rb")


def read_regular(fs: Any, path: str, limit: int, *, what: str = "a side file") -> bytes:
    """The bytes of the file at ``path``, at most ``limit`` of them: a larger file raises
    :class:`~recprep.errors.CorruptDataError` (a local one before any byte is read; a
    remote one after one bounded read of ``limit + 1`` bytes), and so does anything but a
    regular file on the local filesystem (see :func:`open_regular`). A missing file
    raises ``FileNotFoundError``.

    >>> fs = fsspec.filesystem("memory")
    >>> fs.pipe_file("/doc/regular/x.json", b"{}" * 10)
    >>> read_regular(fs, "/doc/regular/x.json", 100)
    b'{}{}{}{}{}{}{}{}{}{}'
    >>> read_regular(fs, "/doc/regular/x.json", 8, what="a manifest")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    recprep.errors.CorruptDataError: memory:///doc/regular/x.json: 20 bytes, more than ...
    """
    shown = display(fs, path)

    def too_big(size: int | None) -> CorruptDataError:
        found = "more" if size is None else str(size)
        return CorruptDataError(f"{found} bytes, more than {what} may have ({limit})",
                                path=shown)

    if not is_local(fs):
        data = bytes(fs.cat_file(path, start=0, end=limit + 1))
        if len(data) > limit:
            try:
                size = int(fs.size(path))
            except Exception:  # only for the message
                size = None
            raise too_big(size)
        return data
    fd = _open_local(fs._strip_protocol(path), shown, what)
    with os.fdopen(fd, "rb") as file:
        size = os.fstat(fd).st_size
        if size > limit:
            raise too_big(size)
        data = file.read(size + 1)  # read(n) allocates n bytes: the size, not the cap
        while len(data) <= limit:  # it grew since the fstat: read on, still bounded
            more = file.read(min(1 << 16, limit + 1 - len(data)))
            if not more:
                break
            data += more
    if len(data) > limit:
        raise too_big(None)
    return data


class ChecksumWriter:
    """A write-only file wrapper that counts bytes and keeps a running CRC-32C."""

    def __init__(self, file: Writable) -> None:
        self._file = file
        self.crc32c = 0
        self.size = 0

    def write(self, data: bytes) -> int:
        self._file.write(data)
        self.crc32c = google_crc32c.extend(self.crc32c, data)
        self.size += len(data)
        return len(data)

    def tell(self) -> int:
        return self.size

    def retarget(self, file: Writable) -> None:
        """Write to ``file`` from now on (which already holds what was written)."""
        self._file = file


def checksum(
    file: BinaryIO,
    *,
    start: int = 0,
    size: int | None = None,
    out: Writable | None = None,
    on_block: Callable[[bytes], None] | None = None,
) -> tuple[int, int]:
    """``(crc32c, bytes read)`` of ``size`` bytes of the open ``file`` from ``start`` (to
    its end when ``size`` is None), each block also written to ``out`` and handed to
    ``on_block`` (a progress bar, a cancel check). The one streaming CRC-32C loop: copies,
    staged-file checks, verification. Fewer bytes than ``size`` means the file is shorter;
    the caller says what that means.

    >>> import io
    >>> checksum(io.BytesIO(b"123456789"))
    (3808858755, 9)
    >>> sink = io.BytesIO()
    >>> checksum(io.BytesIO(b"abcdef"), start=2, size=3, out=sink), sink.getvalue()
    ((910875488, 3), b'cde')
    """
    if start:
        file.seek(start)
    crc = done = 0
    while size is None or done < size:
        block = file.read(COPY_BLOCK if size is None else min(COPY_BLOCK, size - done))
        if not block:
            break
        crc = google_crc32c.extend(crc, block)
        done += len(block)
        if out is not None:
            out.write(block)
        if on_block is not None:
            on_block(block)
    return crc, done


def read_into(file: Any, buffer: memoryview) -> int:
    """Read into ``buffer`` (a memoryview of bytes) from ``file``: with its ``readinto``
    where it has one, else ``read`` and a copy; how many bytes were read.

    >>> import io
    >>> buffer = memoryview(bytearray(4))
    >>> read_into(io.BytesIO(b"abcdef"), buffer), bytes(buffer)
    (4, b'abcd')
    """
    readinto = getattr(file, "readinto", None)
    if readinto is not None:
        return int(readinto(buffer) or 0)
    data = file.read(len(buffer))
    buffer[: len(data)] = data
    return len(data)


class ChecksumReader:
    """A read-through file wrapper keeping the CRC-32C of the bytes read front to back:
    bytes ``[0, done)`` are in :attr:`crc32c`, however the reader seeks (a byte range read
    again, or skipped and read later, counts once, in order).

    >>> import io
    >>> r = ChecksumReader(io.BytesIO(b"123456789"))
    >>> r.read(4), r.seek(2), r.read(), r.crc32c, r.done
    (b'1234', 2, b'3456789', 3808858755, 9)
    """

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        self.crc32c = 0
        self.done = 0

    def read(self, size: int = -1) -> bytes:
        pos = self._file.tell()
        data = self._file.read(size)
        self.update(pos, data)
        return data

    def update(self, pos: int, data: bytes | memoryview) -> None:
        """Count ``data``, read at ``pos``, where it extends what is counted."""
        if pos <= self.done < pos + len(data):
            self.crc32c = crc32c(data[self.done - pos:], self.crc32c)
            self.done = pos + len(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self._file.seek(offset, whence))

    def tell(self) -> int:
        return int(self._file.tell())

    def finish(self) -> tuple[int, int]:
        """Count the rest of the file; ``(crc32c, size)``."""
        self._file.seek(self.done)
        while block := self._file.read(COPY_BLOCK):
            self.update(self.done, block)
        return self.crc32c, self.done

