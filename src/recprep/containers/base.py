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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from ..errors import CorruptDataWarning, warn

#: called with each :class:`~recprep.errors.CorruptDataWarning` a reader gives when it skips
OnSkip = Callable[[CorruptDataWarning], None]


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

NO_LIMIT = 1 << 62
"""A ``max_chunk_bytes`` that bounds nothing: for files recprep itself just wrote."""

#: the most one stored byte can decompress to, per compression name (a property of each
#: format: deflate's longest match costs two bits, snappy's three bytes copy 64); a record
#: count that its chunk's bytes could not hold is damage, found before anything is sized
#: by it
MAX_EXPANSION = {"none": 1, "snappy-framed": 22, "snappy-raw": 22, "gzip": 1032, "zlib": 1032}


def max_records(stored: int, compression: str, min_record: int, limit: int = NO_LIMIT) -> int:
    """The most records ``stored`` bytes compressed with ``compression`` can hold when each
    record takes at least ``min_record`` bytes uncompressed and the whole decompresses
    within ``limit`` bytes (an unknown compression: only ``limit`` bounds it).

    >>> max_records(26, "none", 4), max_records(26, "gzip", 4), max_records(26, "gzip", 4, 64)
    (6, 6708, 16)
    """
    ratio = MAX_EXPANSION.get(compression)
    inflated = limit if ratio is None else min(stored * ratio, limit)
    return inflated // min_record


def report_skip(
    on_skip: OnSkip | None,
    detail: str,
    *,
    path: str | None,
    offset: int | None,
    records_lost: int | None,
) -> CorruptDataWarning:
    """Tell the user that damaged data was skipped: a
    :class:`~recprep.errors.CorruptDataWarning` (``warnings.warn``, pointing at the first
    caller outside recprep), also handed to ``on_skip`` (a reader counts them there).

    >>> import warnings
    >>> seen = []
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = report_skip(seen.append, "bad CRC", path="f", offset=40, records_lost=3)
    >>> print(caught[0].message)
    f at byte 40: skipped damaged data, 3 record(s) lost (bad CRC)
    >>> seen[0].records_lost
    3
    """
    warning = CorruptDataWarning(detail, path=path, offset=offset, records_lost=records_lost)
    warn(warning)
    if on_skip is not None:
        on_skip(warning)
    return warning


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

    def cut(self) -> None:
        """End what is buffered here, as a writer closing would: the bytes written so far
        and those written after are each what a writer of their own would write, so the
        file is their concatenation (for formats that are :meth:`Format.concatenable`).
        Writing goes on after it. The default closes, which every built-in writer allows
        writing after."""
        self.close()


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
        on_skip: OnSkip | None = None,
    ) -> Iterator[Chunk]:
        """Yield the chunks of ``file`` from its start, verifying checksums.

        With ``on_corrupt="raise"``, damage raises
        :class:`~recprep.errors.CorruptDataError` naming ``path`` and the byte offset; with
        ``"skip"``, the damaged chunk is dropped with a
        :class:`~recprep.errors.CorruptDataWarning` (file, offset, records lost; see
        :func:`report_skip`, which also hands it to ``on_skip``) and reading goes on. A
        damaged record is never yielded. Finding the next sound data after damage costs
        time linear in the bytes passed over.
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
