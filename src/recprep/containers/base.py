"""The container contract: record bytes in, file bytes out, and back.

A container frames records (opaque ``bytes``) into a file and reads them back chunk by
chunk, verifying every checksum. It never looks inside a record and never opens a file
itself: it is handed file objects (anything with ``read``/``write``/``seek``).

A :class:`Format` is registered under the name users pass as ``format=``; it lists the
``compressor=`` names it accepts, writes through a :class:`RecordWriter`, and reads with
:meth:`Format.read_chunks`, which yields :class:`Chunk` objects in file order. The rest
of recprep asks a format what it can do, never what it is called:

==============================  ==========================================================
hook                            what it says (default: a plain format without either index)
==============================  ==========================================================
:attr:`~Format.min_record_bytes`  the fewest bytes a record takes: bounds untrusted counts
:attr:`~Format.per_chunk_compressor`  each chunk names its compression (``compressor=``
                                is then ignored by readers)
:meth:`~Format.concatenable`    two files joined byte for byte are one file: pieces are
                                copied, not rewritten, when shards are assembled
:attr:`~Format.chunk_header_bytes`  files are chunks with headers (``0``: not): a reader
                                indexes a file by :meth:`~Format.scan_chunks` and seeks to
                                a chunk; ``convert`` writes the set's chunk side file
:attr:`~Format.record_index`    the :class:`~recprep.containers.record_index.RecordIndex`
                                kept beside each shard (``None``: none), built by
                                :meth:`~Format.index_records` or from the records' lengths
:attr:`~Format.record_framing`  what a chunk's payload puts around each record, when
                                its records lie back to back in it (``None``: not so): a
                                writer then takes records laid out ahead in one buffer
                                (:meth:`~Format.frame_records`,
                                :meth:`~RecordWriter.write_framed`)
:meth:`~Format.describe`        what a file's first chunk says (variant, compression), for
                                tools
:meth:`~Format.sniff`           whether a file's first :data:`SNIFF_BYTES` look like it
==============================  ==========================================================

A format defined outside recprep subclasses :class:`Format` (or a built-in one), is
registered with :func:`recprep.containers.register_format`, and is used everywhere the
built-ins are. Instances travel to worker processes by class reference, so the module
that defines (and registers) the format must be importable there.

Example
-------
>>> import io
>>> from recprep.containers import get_format
>>> fmt = get_format("recordio")
>>> fmt.min_record_bytes, fmt.per_chunk_compressor, fmt.chunk_header_bytes, fmt.record_index
(4, True, 20, None)
>>> buf = io.BytesIO()
>>> w = fmt.writer(buf, "gzip", chunk_bytes=1)
>>> for r in (b"a", b"bc"):
...     w.write(r)
>>> w.close()
>>> fmt.scan_chunks(buf, path="mem")
([0, 45], [1, 1])
>>> w.chunks  # what the writer reported as it wrote them: the same, without a read
[(0, 1), (45, 1)]
>>> fmt.describe(buf, path="mem")
{'format': 'recordio', 'compressor': 'gzip'}
"""

from __future__ import annotations

import abc
import io
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

import numpy as np

from .._core.records import Chunk
from ..errors import CorruptDataWarning, warn

if TYPE_CHECKING:
    from .record_index import RecordIndex

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


SNIFF_BYTES = 64
"""How many bytes of a file's start :meth:`Format.sniff` is shown."""

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
    if not isinstance(on_skip, Quietly):
        warn(warning)
    if on_skip is not None:
        on_skip(warning)
    return warning


class Quietly:
    """An ``on_skip`` that keeps what is skipped without warning the user: for a second
    look at data whose damage a reader has reported already (finding where reading is
    after damage).

    >>> quiet = Quietly()
    >>> _ = report_skip(quiet, "bad CRC", path="f", offset=40, records_lost=3)
    >>> [w.records_lost for w in quiet.skipped]
    [3]
    """

    def __init__(self) -> None:
        self.skipped: list[CorruptDataWarning] = []

    def __call__(self, warning: CorruptDataWarning) -> None:
        self.skipped.append(warning)


@dataclass(frozen=True)
class ChunkInfo:
    """A chunk header as the index sees it: where it is and how many records it has."""

    offset: int
    num_records: int
    stored_size: int


class RecordWriter(abc.ABC):
    """Writes records into one open file; :meth:`close` flushes (the file stays open).

    A writer of a format with chunk headers (:attr:`Format.chunk_header_bytes`) may report
    each chunk as it writes it out, in :attr:`chunks`: whoever wrote a file then knows its
    chunk index without reading the file back (``convert`` builds the set's chunk side
    file from it). A writer that doesn't report leaves :attr:`chunks` ``None``.
    """

    num_records: int = 0
    #: ``(offset, records)`` of each chunk written out so far, in file order; ``offset``
    #: counts from the first byte this writer wrote. ``None``: not reported
    chunks: list[tuple[int, int]] | None = None

    @abc.abstractmethod
    def write(self, record: bytes) -> None:
        """Append one record."""

    def write_many(self, records: Sequence[bytes]) -> None:
        """Append ``records``, in order: the same bytes as :meth:`write` of each (a writer
        may do it with less work per record). What ``write`` raises for a record is raised
        with ``position``, that record's place in ``records``, set on it."""
        write = self.write
        for position, record in enumerate(records):
            try:
                write(record)
            except Exception as err:
                err.position = position  # type: ignore[attr-defined]
                raise

    def write_framed(self, buffer: np.ndarray, starts: np.ndarray,
                     lengths: np.ndarray) -> None:
        """Append the records ``buffer[starts[i]:starts[i] + lengths[i]]``, in order: the
        same bytes as :meth:`write_many` of them, with its errors. ``buffer`` (uint8)
        holds them as a chunk's payload would, framed as the format's
        :attr:`~Format.record_framing` says (:meth:`Format.frame_records` filled the
        framing), so a writer may take runs of records from it whole. The default cuts
        each record out and calls :meth:`write_many`."""
        view = buffer.data
        self.write_many([bytes(view[start : start + length]) for start, length
                         in zip(starts.tolist(), lengths.tolist(), strict=True)])

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
    """A container format, registered under :attr:`name` (see the module docstring)."""

    name: ClassVar[str] = ""
    #: the ``compressor=`` names this format accepts
    compressors: ClassVar[tuple[str, ...]] = ()
    #: what ``compressor=`` defaults to
    default_compressor: ClassVar[str] = "none"
    #: the fewest bytes one record takes in a file, uncompressed (framing counted): what
    #: a record count read from an untrusted place (a manifest, a header) is checked with
    min_record_bytes: ClassVar[int] = 1
    #: whether every chunk names its own compression: readers then ignore
    #: ``compressor=`` (else one compression covers the file, and a reader may be told it)
    per_chunk_compressor: ClassVar[bool] = False
    #: the size of a chunk header, for a format whose files are chunks with headers that
    #: give each chunk's record count (:meth:`scan_chunks` finds them, and a reader may
    #: start at any of them); ``0``: no chunk headers. Sets of such a format get a chunk
    #: index side file (:mod:`recprep.storage.chunkindex`) when ``convert`` commits them.
    chunk_header_bytes: ClassVar[int] = 0
    #: the record index kept beside each shard (``.{shard}{suffix}``), or None
    record_index: ClassVar[type[RecordIndex] | None] = None
    #: ``(before, after)``: the bytes a chunk's payload puts before and after each record
    #: when its records lie back to back in it (RecordIO: a record's 4-byte length before
    #: it), filled by :meth:`frame_records`; a writer then takes records laid out ahead in
    #: one buffer (:meth:`RecordWriter.write_framed`). ``None``: records are handed over
    #: as ``bytes``, one each
    record_framing: ClassVar[tuple[int, int] | None] = None

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
        compressor: str | None = None,
    ) -> Iterator[Chunk]:
        """Yield the chunks of ``file`` from its current position (its start, or a
        chunk's or indexed record's offset), verifying checksums.

        ``compressor`` is what the manifest or the user says the file was written with
        (``None``: detect it); a format that records it per chunk ignores it. With
        ``on_corrupt="raise"``, damage raises
        :class:`~recprep.errors.CorruptDataError` naming ``path`` and the byte offset; with
        ``"skip"``, the damaged chunk is dropped with a
        :class:`~recprep.errors.CorruptDataWarning` (file, offset, records lost; see
        :func:`report_skip`, which also hands it to ``on_skip``) and reading goes on. A
        damaged record is never yielded. Finding the next sound data after damage costs
        time linear in the bytes passed over.
        """

    def frame_records(self, buffer: np.ndarray, starts: np.ndarray,
                      lengths: np.ndarray) -> None:
        """Fill in ``buffer`` (uint8) the framing of the records laid at ``starts`` with
        ``lengths``, each with the room :attr:`record_framing` says around it: what
        :meth:`RecordWriter.write_framed` takes. Only a format with a
        :attr:`record_framing` is asked."""
        raise NotImplementedError(f"format {self.name!r} has no record_framing")

    def concatenable(self, compressor: str) -> bool:
        """Whether two files written with ``compressor`` joined byte for byte are one valid
        file (RecordIO: always; a zlib stream: no). Assembling shards from pieces relies on
        it; when it doesn't hold, the pieces' records are written again instead."""
        return True

    def scan_chunks(
        self,
        file: Source,
        *,
        path: str,
        max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
        on_corrupt: str = "raise",
        on_skip: OnSkip | None = None,
    ) -> tuple[list[int], list[int]] | None:
        """Each chunk's offset and record count, from the chunk headers of the whole
        ``file`` (no payload decoded; no count more than its chunk's bytes can hold), or
        None when the format has no chunk headers (:attr:`chunk_header_bytes` ``0``).
        Damage raises or is skipped as in :meth:`read_chunks`."""
        return None

    def index_records(
        self,
        file: Source,
        *,
        path: str,
        compressor: str | None = None,
        max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
    ) -> RecordIndex | None:
        """The :attr:`record_index` of the whole ``file``, by reading it once (every
        checksum verified; damage raises), or None when the format keeps none.
        ``compressor`` ``None``: the one :meth:`describe` finds."""
        kind = self.record_index
        if kind is None:
            return None
        found = compressor or self.describe(file, path=path).get("compressor")
        found = found or self.default_compressor
        file.seek(0)
        lengths = [np.fromiter(map(len, chunk.records), np.int64, len(chunk.records))
                   for chunk in self.read_chunks(file, path=path, compressor=found,
                                                 max_chunk_bytes=max_chunk_bytes)]
        size = file.seek(0, io.SEEK_END)
        joined = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
        return kind.from_lengths(joined, size, found)

    def describe(self, file: Source, *, path: str) -> dict[str, str]:
        """What the start of ``file`` says about it, for tools (``recprep ls`` of a set
        without a manifest): ``"format"`` (a variant's name) and ``"compressor"``, when
        the format can tell; nothing that can't be told is made up. Reads from the start
        and leaves the position anywhere."""
        return {"format": self.name}

    @classmethod
    def sniff(cls, head: bytes) -> bool:
        """Whether a file starting with ``head`` (up to :data:`SNIFF_BYTES` bytes) looks
        like this format."""
        return False
