"""Record indexes: where each record of a file starts, kept in a side file beside a shard.

A format whose files have no chunk headers (TFRecord) can't count its records or find
record ``k`` without a scan; it may keep a :class:`RecordIndex` beside each shard, named
``.{shard name}{suffix}`` (the leading ``.`` keeps it out of every shard glob). The
index lists the offset of each record's frame **in the uncompressed stream** of records,
each frame being the record and :attr:`RecordIndex.frame_bytes` of framing; for an
uncompressed file (:meth:`RecordIndex.seeks`) those are file offsets, a reader may start
at any of them, and the bytes from one record's start to another's are a valid file.

This module is the arithmetic over offsets, the same for every such format; a format's
subclass gives the side file's bytes (:meth:`~RecordIndex.to_bytes`,
:meth:`~RecordIndex.from_bytes`). Nothing here opens a file: :mod:`recprep.storage.sideindex`
reads and writes the side files.

Example
-------
>>> from recprep.containers.tfrecord_index import TFRecordIndex
>>> index = TFRecordIndex.from_lengths([1, 0, 2], 51)
>>> index.offsets.tolist(), index.bounds().tolist(), index.lengths().tolist()
([0, 17, 33], [0, 17, 33, 51], [1, 0, 2])
>>> index.span(1, 3), TFRecordIndex.name_for("s-00000-of-00001")
((17, 51), '.s-00000-of-00001.tfindex')
"""

from __future__ import annotations

import abc
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, TypeVar

import numpy as np

from .._core.records import Records
from ..errors import CorruptDataError, InvalidArgumentError
from .base import MAX_EXPANSION, ChunkInfo, max_records

__all__ = ["RecordIndex"]

_Index = TypeVar("_Index", bound="RecordIndex")


@dataclass(frozen=True, eq=False)
class RecordIndex(abc.ABC):
    """The record offsets of one file.

    ``offsets[k]`` is where record ``k``'s frame starts in the uncompressed stream;
    ``stream_size`` is the stream's length (where a next record would start),
    ``file_size`` the file's size as stored and ``compressor`` its compression.
    """

    #: the side file's name is ``.{shard}`` and this
    suffix: ClassVar[str] = ".index"
    #: framing bytes around each record in the stream
    frame_bytes: ClassVar[int] = 0
    #: what the stream is called in messages
    label: ClassVar[str] = "record"

    offsets: np.ndarray
    stream_size: int
    file_size: int
    compressor: str = "none"

    # -- the side file ---------------------------------------------------------------

    @classmethod
    def name_for(cls, shard: str) -> str:
        """The side file's name for the shard (file) named ``shard``."""
        return f".{shard}{cls.suffix}"

    @classmethod
    def path_for(cls, path: str) -> str:
        """The side file's path for the file at ``path`` (same directory)."""
        directory, name = posixpath.split(path)
        return posixpath.join(directory, cls.name_for(name))

    @abc.abstractmethod
    def to_bytes(self) -> bytes:
        """The side file's bytes."""

    @classmethod
    @abc.abstractmethod
    def from_bytes(cls: type[_Index], data: bytes, path: str | None = None) -> _Index:
        """Parse a side file; anything malformed raises ``CorruptDataError``."""

    @classmethod
    def max_side_bytes(cls, file_size: int) -> int:
        """The most bytes a side file of a ``file_size``-byte file can need (a side file
        is refused before it is read when it is bigger): 8 bytes per record and 1 KiB."""
        return 1024 + 8 * max_records(file_size, "gzip", max(cls.frame_bytes, 1))

    def mismatch(self, file_size: int) -> str | None:
        """Why this index can't be the one of a ``file_size``-byte file as it is now
        (another size: the file was rewritten; a stream its bytes can't hold), or None."""
        if file_size != self.file_size:
            return (f"it is stale (it indexes {self.file_size} bytes, the file has "
                    f"{file_size})")
        ratio = MAX_EXPANSION.get(self.compressor, MAX_EXPANSION["gzip"])
        if self.stream_size > file_size * ratio or (
            self.seeks(self.compressor) and self.stream_size != file_size
        ):
            return (f"it does not match the file (it indexes a {self.stream_size}-byte "
                    f"record stream, the {self.compressor} file has {file_size} bytes)")
        return None

    # -- offsets -----------------------------------------------------------------------

    @classmethod
    def seeks(cls, compressor: str) -> bool:
        """Whether the index of a file written with ``compressor`` gives random access:
        its offsets are file offsets (no compression), so a reader can start at any
        record, and a run of records is a byte range (:meth:`span`). A compressed
        stream can't be entered in the middle; its index still gives counts."""
        return compressor == "none"

    @property
    def num_records(self) -> int:
        return len(self.offsets)

    def bounds(self) -> np.ndarray:
        """Where each record starts, then where the last one ends (``num_records + 1``
        offsets): what reading through the index checks records against."""
        return np.append(self.offsets, self.stream_size)

    def lengths(self) -> np.ndarray:
        """Each record's length (without its framing)."""
        ends = np.append(self.offsets[1:], self.stream_size)
        return ends - self.offsets - self.frame_bytes

    @classmethod
    def from_lengths(
        cls: type[_Index], lengths: Sequence[int] | np.ndarray, file_size: int,
        compressor: str = "none",
    ) -> _Index:
        """The index of a file whose records have these ``lengths``, in order (what a
        writer knows without reading the file back)."""
        frames = np.asarray(lengths, dtype=np.int64) + cls.frame_bytes
        offsets = np.zeros(len(frames), dtype=np.int64)
        np.cumsum(frames[:-1], out=offsets[1:])
        return cls(offsets, int(frames.sum()), int(file_size), compressor)

    def span(self, start: int, end: int) -> tuple[int, int] | None:
        """The bytes ``[first, stop)`` of the file that hold records ``start:end``, a
        valid file by themselves; None when the file is compressed (:meth:`seeks`)."""
        if not self.seeks(self.compressor):
            return None
        first = int(self.offsets[start]) if start < self.num_records else self.stream_size
        stop = int(self.offsets[end]) if end < self.num_records else self.stream_size
        return first, stop

    def runs(self, chunk_bytes: int = 1 << 20) -> list[ChunkInfo]:
        """The records grouped into runs of about ``chunk_bytes`` (framing counted), as a
        reader's chunk index lists chunks: where each run starts, how many records it
        holds, its size. Only for a file a reader can seek in (:meth:`seeks`)."""
        if not self.seeks(self.compressor):
            raise InvalidArgumentError(
                f"a {self.compressor} {self.label} stream can't be entered in the middle: "
                "read it from its start"
            )
        infos: list[ChunkInfo] = []
        offsets = self.offsets.tolist()
        ends = [*offsets[1:], self.stream_size]
        start = 0
        while start < len(offsets):
            stop = start + 1
            while stop < len(offsets) and ends[stop] - offsets[start] <= chunk_bytes:
                stop += 1
            infos.append(ChunkInfo(offsets[start], stop - start,
                                   ends[stop - 1] - offsets[start]))
            start = stop
        return infos

    @classmethod
    def check(
        cls, expected: np.ndarray, offset: int, records: Sequence[bytes], path: str,
        number: int | None = None,
    ) -> int:
        """Check that ``records``, read from byte ``offset`` on, start where ``expected``
        (an index's :meth:`bounds`) says, and the last ends there too; return the number
        of the first. O(1) Python work per call (numpy compares the offsets). A mismatch
        raises :class:`~recprep.errors.CorruptDataError`: the index, or the file, is
        not what it should be."""
        k = int(np.searchsorted(expected, offset)) if number is None else number
        n = len(records)
        starts = np.empty(n + 1, np.int64)
        starts[0] = offset
        lens = (records.ends - records.starts if isinstance(records, Records)
                else np.fromiter(map(len, records), np.int64, n))
        np.cumsum(lens + cls.frame_bytes, out=starts[1:])
        starts[1:] += offset
        want = expected[k : k + n + 1]
        if len(want) == n + 1 and np.array_equal(starts, want):
            return k
        bad = int(np.argmax(starts[: len(want)] != want)) if len(want) else 0
        if bad >= len(want) or starts[bad] == want[bad]:
            found = (f"the file holds a record at byte {int(starts[len(want)])}, past the "
                     f"{len(expected) - 1} records the index lists")
        else:
            found = (f"the index says record {k + bad} starts at byte {int(want[bad])}, the "
                     f"file's record there starts at byte {int(starts[bad])}")
        raise CorruptDataError(
            f"the file does not match its side index {cls.path_for(path)}: {found}; delete "
            "the side index (a scan replaces it) or copy the set again",
            path=path, offset=int(starts[min(bad, n)]),
        )
