"""The second phase of a balanced write: pieces into shards of equal record counts.

With ``num_shards`` or ``records_per_shard``, a directory's records — its pieces in task
order — are cut into ``N`` consecutive runs, shard ``s`` taking records
``[s * n // N, (s + 1) * n // N)``: sizes differ by at most one record, and reading the
shards in order gives the rows in the order of the DataFrame's partitions. Each shard is
made by one task on an executor (:func:`assemble_shard`), the way ``convert`` makes its
shards (:mod:`recprep.write.assembly`):

* a piece wholly inside the shard is copied byte for byte (its CRC-32C checked), as
  RecordIO chunks, plain TFRecord frames and gzip members concatenate;
* a piece cut by a shard boundary whose record index seeks (plain TFRecord) is copied
  from one record offset to another;
* any other cut piece (RecordIO, gzip) has the records of its run written again, framing
  only — no row is decoded — and a zlib TFRecord shard, which must be one stream, is
  written record by record throughout.

Example
-------
>>> from recprep.storage.staging import FileFacts
>>> pieces = [PieceFile((), 0, 0, FileFacts("a", 5, 50, 0)),
...           PieceFile((), 1, 0, FileFacts("b", 2, 20, 0))]
>>> [[(s.piece.facts.path, s.start, s.end) for s in shard] for shard in plan_shards(pieces, 3)]
[[('a', 0, 2)], [('a', 2, 4)], [('a', 4, 5), ('b', 0, 2)]]
>>> shard_count(7, num_shards=None, records_per_shard=3)
3
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..storage.staging import FileFacts
from ..write.assembly import PieceSlice, build_shard
from ..write.options import WriteOptions
from .pieces import PieceFile

__all__ = ["Segment", "assemble_shard", "plan_shards", "shard_count"]

@dataclass(frozen=True)
class Segment:
    """Records ``start:end`` of one piece."""

    piece: PieceFile
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


def plan_shards(pieces: Sequence[PieceFile], num_shards: int) -> list[list[Segment]]:
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


def assemble_shard(
    fs: Any,
    path: str,
    segments: Sequence[Segment],
    options: WriteOptions,
    index_path: str | None = None,
) -> tuple[FileFacts, str | None]:
    """Write the shard ``path`` from ``segments`` (:func:`recprep.write.assembly.build_shard`);
    with ``index_path`` (a format with a record index), its record index too. Returns the
    shard's facts and the index's path."""
    runs = [PieceSlice(s.piece.facts, s.start, s.end, s.piece.index) for s in segments]
    return build_shard(fs, path, runs, options, index_path=index_path), index_path
