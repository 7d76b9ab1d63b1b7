"""Storage: fsspec filesystems, the hidden staging directory, and the atomic commit.

All file access in recprep goes through fsspec, so a local path, ``memory://``,
``s3://`` or any other protocol fsspec knows works the same way.

The staging directory and the commit protocol live in ``storage/staging.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, BinaryIO, Protocol

import fsspec
import google_crc32c

from ..errors import InvalidArgumentError


class Sink(Protocol):
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


class ChecksumWriter:
    """A write-only file wrapper that counts bytes and keeps a running CRC-32C."""

    def __init__(self, file: Sink) -> None:
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

    def retarget(self, file: Sink) -> None:
        """Write to ``file`` from now on (which already holds what was written)."""
        self._file = file


def checksum(
    file: BinaryIO,
    *,
    start: int = 0,
    size: int | None = None,
    out: Sink | None = None,
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

    def update(self, pos: int, data: bytes) -> None:
        """Count ``data``, read at ``pos``, where it extends what is counted."""
        if pos <= self.done < pos + len(data):
            self.crc32c = google_crc32c.extend(self.crc32c, data[self.done - pos:])
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

