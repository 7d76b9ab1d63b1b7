"""The second phase of a balanced write: pieces into shards of equal record counts.

With ``num_shards`` or ``records_per_shard``, a directory's records — its pieces in task
order — are cut into ``N`` consecutive runs, shard ``s`` taking records
``[s * n // N, (s + 1) * n // N)``: sizes differ by at most one record, and reading the
shards in order gives the rows in the order of the DataFrame's partitions. Each shard is
made by one task on an executor (:func:`assemble_shard`):

* a piece wholly inside the shard is copied byte for byte (its CRC-32C checked), as
  RecordIO chunks, plain TFRecord frames and gzip members concatenate;
* a plain TFRecord piece cut by a shard boundary is copied from one record offset to
  another (the piece's index says where records start);
* any other cut piece (RecordIO, gzip) has the records of its run written again, framing
  only — no row is decoded — and a zlib TFRecord shard, which must be one stream, is
  written record by record throughout.

Example
-------
>>> from recprep.writing import FileFacts
>>> pieces = [Piece((), 0, 0, FileFacts("a", 5, 50, 0)), Piece((), 1, 0, FileFacts("b", 2, 20, 0))]
>>> [[(s.piece.facts.path, s.start, s.end) for s in shard] for shard in plan_shards(pieces, 3)]
[[('a', 0, 2)], [('a', 2, 4)], [('a', 4, 5), ('b', 0, 2)]]
>>> shard_count(7, num_shards=None, records_per_shard=3)
3
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import google_crc32c
import numpy as np

from ..containers.tfrecord import TFRecordFormat
from ..containers.tfrecord_index import TFRecordIndex, write_index
from ..errors import CorruptDataError, WriteError
from ..storage import ChecksumWriter
from ..writing import FileFacts, WriteOptions
from .pieces import Piece

__all__ = ["Segment", "assemble_shard", "plan_shards", "shard_count"]

_BLOCK = 8 << 20


@dataclass(frozen=True)
class Segment:
    """Records ``start:end`` of one piece."""

    piece: Piece
    start: int
    end: int

    @property
    def whole(self) -> bool:
        return self.start == 0 and self.end == self.piece.facts.records


def shard_count(records: int, *, num_shards: int | None, records_per_shard: int | None) -> int:
    """How many shards a directory of ``records`` records gets."""
    if num_shards is not None:
        return num_shards
    assert records_per_shard is not None
    return max(1, math.ceil(records / records_per_shard))


def plan_shards(pieces: Sequence[Piece], num_shards: int) -> list[list[Segment]]:
    """For each of ``num_shards`` shards, the runs of pieces (in order) it is made of."""
    total = sum(p.facts.records for p in pieces)
    bounds = [s * total // num_shards for s in range(num_shards + 1)]
    shards: list[list[Segment]] = [[] for _ in range(num_shards)]
    first = 0  # the number of the piece's first record in the directory
    shard = 0
    for piece in pieces:
        count = piece.facts.records
        start = 0
        while start < count:
            while bounds[shard + 1] <= first + start:
                shard += 1
            end = min(count, bounds[shard + 1] - first)
            shards[shard].append(Segment(piece, start, end))
            start = end
        first += count
    return shards


def _piece_index(fs: Any, piece: Piece) -> TFRecordIndex:
    assert piece.index is not None
    return TFRecordIndex.from_bytes(bytes(fs.cat_file(piece.index)), path=piece.index)


def _copy(fs: Any, path: str, out: ChecksumWriter, start: int, size: int) -> int:
    """Copy ``size`` bytes of ``path`` from ``start``; the CRC-32C of what was copied."""
    crc = 0
    with fs.open(path, "rb") as src:
        src.seek(start)
        left = size
        while left and (block := src.read(min(left, _BLOCK))):
            out.write(block)
            crc = google_crc32c.extend(crc, block)
            left -= len(block)
    if left:
        raise CorruptDataError(f"staged piece is {left} bytes shorter than when it was "
                               "written", path=path)
    return crc


def _records(fs: Any, segment: Segment, options: WriteOptions) -> Iterator[bytes]:
    """The records of ``segment``, read (CRC-checked) from its piece."""
    container = options.container()
    path = segment.piece.facts.path
    seen = 0
    with fs.open(path, "rb") as src:
        if isinstance(container, TFRecordFormat):
            chunks = container.read_chunks(src, path=path, compressor=options.compressor)
        else:
            chunks = container.read_chunks(src, path=path)
        for chunk in chunks:
            n = len(chunk.records)
            lo, hi = max(segment.start - seen, 0), min(segment.end - seen, n)
            if lo < hi:
                yield from chunk.records[lo:hi]
            seen += n
            if seen >= segment.end:
                return
    raise CorruptDataError(f"staged piece ends after {seen} records, {segment.end} were "
                           "expected", path=path)


def assemble_shard(
    fs: Any,
    path: str,
    segments: Sequence[Segment],
    options: WriteOptions,
    index_path: str | None = None,
) -> tuple[FileFacts, str | None]:
    """Write the shard ``path`` from ``segments``; with ``index_path`` (TFRecord), its
    record index too. Returns the shard's facts and the index's path."""
    container = options.container()
    concatenable = container.concatenable(options.compressor)
    plain = options.format == "tfrecord" and options.compressor == "none"
    lengths: list[np.ndarray] = []
    records = 0
    try:
        with fs.open(path, "wb") as raw:
            out = ChecksumWriter(raw)
            writer = None if concatenable else container.writer(
                out, options.compressor, options.chunk_bytes
            )
            for segment in segments:
                piece = segment.piece
                index = _piece_index(fs, piece) if index_path or (
                    plain and not segment.whole) else None
                if index is not None:
                    lengths.append(index.lengths()[segment.start:segment.end])
                records += segment.end - segment.start
                if writer is None and segment.whole:
                    crc = _copy(fs, piece.facts.path, out, 0, piece.facts.bytes)
                    if crc != piece.facts.crc32c:
                        raise CorruptDataError(
                            f"staged piece changed after it was written: CRC-32C "
                            f"0x{crc:08x}, expected 0x{piece.facts.crc32c:08x}",
                            path=piece.facts.path,
                        )
                elif writer is None and plain:
                    assert index is not None
                    first = int(index.offsets[segment.start])
                    stop = (int(index.offsets[segment.end]) if segment.end < index.num_records
                            else index.stream_size)
                    _copy(fs, piece.facts.path, out, first, stop - first)
                else:
                    one = writer or container.writer(out, options.compressor,
                                                     options.chunk_bytes)
                    for record in _records(fs, segment, options):
                        one.write(record)
                    if writer is None:
                        one.close()
            if writer is not None:
                writer.close()
    except OSError as err:
        raise WriteError(path, err) from err
    facts = FileFacts(path, records, out.size, out.crc32c)
    if index_path is None:
        return facts, None
    all_lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    write_index(fs, TFRecordIndex.from_lengths(all_lengths, facts.bytes, options.compressor),
                index_path)
    return facts, index_path
