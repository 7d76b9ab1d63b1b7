"""The container contract: record bytes in, file bytes out, and back.

A container frames records (opaque ``bytes``) into a file and reads them back chunk by
chunk, verifying every checksum. It never looks inside a record and never opens a file
itself: it is handed file objects (anything with ``read``/``write``).

A :class:`Format` is registered under the name users pass as ``format=``; it lists the
``compressor=`` names it accepts, writes through a :class:`RecordWriter`, and reads with
:meth:`Format.read_chunks`, which yields :class:`Chunk` objects in file order.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import ClassVar, Protocol


class Source(Protocol):
    """What containers read from: a binary file opened for reading (or a window of one)."""

    def read(self, size: int = ..., /) -> bytes: ...

    def seek(self, offset: int, whence: int = ..., /) -> int: ...

    def tell(self) -> int: ...


class Sink(Protocol):
    """What containers write to: a binary file opened for writing (or a wrapper of one)."""

    def write(self, data: bytes, /) -> int: ...


DEFAULT_MAX_CHUNK_BYTES = 256 * 1024 * 1024
"""What one chunk may claim, or decompress to, unless the reader raises the bound."""


@dataclass
class Chunk:
    """The records of one chunk and where the chunk starts in its file."""

    offset: int
    records: list[bytes] = field(default_factory=list)


@dataclass(frozen=True)
class ChunkInfo:
    """A chunk header as the index sees it: where it is and how many records it has."""

    offset: int
    num_records: int
    stored_size: int


class RecordWriter(abc.ABC):
    """Writes records into one open file; :meth:`close` flushes (the file stays open)."""

    num_records: int = 0

    @abc.abstractmethod
    def write(self, record: bytes) -> None:
        """Append one record."""

    @abc.abstractmethod
    def close(self) -> None:
        """Write out what is buffered."""


class Format(abc.ABC):
    """A container format, registered under :attr:`name`."""

    name: ClassVar[str] = ""
    #: the ``compressor=`` names this format accepts
    compressors: ClassVar[tuple[str, ...]] = ()
    #: what ``compressor=`` defaults to
    default_compressor: ClassVar[str] = "none"

    @abc.abstractmethod
    def writer(self, file: Sink, compressor: str, chunk_bytes: int) -> RecordWriter:
        """Return a writer of records into ``file`` (positioned at the end)."""

    @abc.abstractmethod
    def read_chunks(
        self,
        file: Source,
        *,
        path: str,
        max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
        on_corrupt: str = "raise",
    ) -> Iterator[Chunk]:
        """Yield the chunks of ``file`` from its start, verifying checksums.

        With ``on_corrupt="raise"``, damage raises
        :class:`~recprep.errors.CorruptDataError` naming ``path`` and the byte offset; with
        ``"skip"``, the damaged chunk is dropped with a logged warning (file, offset,
        records lost) and reading goes on. A damaged record is never yielded.
        """

    def concatenable(self, compressor: str) -> bool:
        """Whether two files written with ``compressor`` joined byte for byte are one valid
        file (RecordIO: always; a zlib stream: no). Assembling shards from pieces relies on
        it; when it doesn't hold, the pieces' records are written again instead."""
        return True

    @classmethod
    def sniff(cls, head: bytes) -> bool:
        """Whether a file starting with ``head`` (up to 64 bytes) looks like this format."""
        return False
