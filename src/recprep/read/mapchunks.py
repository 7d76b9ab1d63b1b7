"""The chunks a :class:`~recprep.read.dataset.MapDataset` holds: each record decoded the
first time it is asked for and kept (:class:`DecodedChunk`), and the records a batch of
indexes asks of many chunks decoded in one call (:func:`decode_together`).

>>> from recprep.codecs import get_codec
>>> codec = get_codec("recprep")
>>> chunk = DecodedChunk([codec.encode(i) for i in range(4)], 0, "f", codec, False, 0)
>>> chunk.take([2, 0]), chunk.pending
([2, 0], 2)
"""

from __future__ import annotations

import threading
from typing import Any

from ..codecs import Codec
from ..containers import Chunk, Records
from ..errors import LocatedError, RecordsLostError
from .decoding import decoded

__all__ = ["DecodedChunk", "decode_together"]

#: held while decoded values are kept in a chunk (one lock for all: a batch fills many
#: chunks a value or two each, so taking one lock per chunk would cost more than filling)
_KEEPING = threading.Lock()


class DecodedChunk:
    """One chunk's records, each decoded the first time it is asked for and kept;
    ``None`` for a record lost to damage (skipped with ``on_corrupt="skip"``), which
    raises :class:`~recprep.errors.RecordsLostError` when asked for."""

    def __init__(
        self, records: Records | list[bytes | None], offset: int, path: str, codec: Codec,
        allow_pickle: bool, first: int, written_with: str | None = None,
    ) -> None:
        self.records, self.offset, self.path = records, offset, path
        self.codec, self.allow_pickle, self.first = codec, allow_pickle, first
        self.written_with = written_with
        self.values: list[Any] = [None] * len(records)
        self.done = bytearray(len(records))  # 1 where values[p] is decoded
        self.pending = len(records)  # records not decoded yet
        # a chunk read whole is a Records (its records cut out when decoded); one pieced
        # together from parts, a list with None in the places of records lost to damage
        self.lost = None if isinstance(records, Records) or None not in records else [
            r is None for r in records]
        self._spans: tuple[Any, list[int], list[int]] | None = None  # made when needed
        # a chunk kept in the cache lists its records' spans once; one read for a lookup
        # and dropped (no cache) cuts its record with numpy indexes instead
        self.listed = True

    def cut(self, need: list[int]) -> list[bytes]:
        """The records at positions ``need``, as bytes."""
        return list(map(self.cut_one, need))

    def cut_one(self, p: int) -> bytes:
        """The record at position ``p``, as bytes."""
        spans = self._spans
        if spans is None:
            records = self.records
            if not isinstance(records, Records):
                return records[p]  # type: ignore[return-value]
            if not self.listed:
                return records[p]
            spans = self._spans = (records.payload_bytes(), records.starts.tolist(),
                                   records.ends.tolist())
        return spans[0][spans[1][p]:spans[2][p]]

    def take(self, positions: list[int]) -> list[Any]:
        """The instances at ``positions`` of the chunk (those not decoded yet decoded
        together, once)."""
        self.check_lost(positions)
        if self.pending:
            need = self.missing(positions)
            if need:
                self.fill(need, self._decode(need))
        return list(map(self.values.__getitem__, positions))

    def check_lost(self, positions: list[int]) -> None:
        """Raise :class:`~recprep.errors.RecordsLostError` if a record at ``positions``
        was lost to damage."""
        if self.lost is not None:
            bad = [p for p in positions if self.lost[p]]
            if bad:
                raise RecordsLostError(
                    f"record {self.first + bad[0]} of the file was lost to damage (skipped "
                    "with on_corrupt='skip'): it can't be read", path=self.path,
                    offset=self.offset,
                )

    def missing(self, positions: list[int]) -> list[int]:
        """The positions among ``positions`` not decoded yet, sorted, once each."""
        done = self.done
        return sorted({p for p in positions if not done[p]})

    def fill(self, need: list[int], values: list[Any]) -> None:
        """Keep ``values``, the decoded records at positions ``need`` (those another
        thread didn't keep first: ``pending`` counts each position once, so that 0 means
        every value is there)."""
        with _KEEPING:
            for p, value in zip(need, values, strict=True):
                if not self.done[p]:
                    self.values[p] = value
                    self.done[p] = 1  # after the value: a reader that sees 1 finds it
                    self.pending -= 1

    def _decode(self, need: list[int]) -> list[Any]:
        wanted = self.cut(need)
        try:
            return self.codec.decode_many(wanted, allow_pickle=self.allow_pickle)
        except LocatedError:
            for p, record in zip(need, wanted, strict=True):  # name the one that fails
                list(decoded([(Chunk(self.offset, [record]), p)], self.codec,
                             self.path, allow_pickle=self.allow_pickle,
                             written_with=self.written_with))
            raise


def decode_together(chunks: list[DecodedChunk], places: list[int], distinct: list[DecodedChunk],
                     again: set[int]) -> None:
    """Decode the records at ``places`` of ``chunks`` not decoded yet (pairs: the chunk
    of each index of a batch and the record's place in it; ``distinct``: those chunks
    once each; ``again``: the pairs that repeat the one before) in one ``decode_many``
    call per codec, not one per chunk: a batch of random indexes touches many chunks for
    a record or two each, so nothing here is done per chunk. A failure is decoded again
    chunk by chunk, so that the error names the record."""
    todo = [i for i, (chunk, p) in enumerate(zip(chunks, places, strict=True))
            if chunk.pending and not chunk.done[p] and i not in again]
    if not todo:
        return
    groups: dict[tuple[int, bool], list[int]] = {}
    if len({(id(c.codec), c.allow_pickle) for c in distinct}) == 1:
        groups[0, False] = todo
    else:
        for i in todo:
            chunk = chunks[i]
            groups.setdefault((id(chunk.codec), chunk.allow_pickle), []).append(i)
    for members in groups.values():
        first = chunks[members[0]]
        wanted = [chunks[i].cut_one(places[i]) for i in members]
        try:
            values = first.codec.decode_many(wanted, allow_pickle=first.allow_pickle)
        except LocatedError:
            for i in members:
                chunks[i].take([places[i]])
            raise
        with _KEEPING:
            for i, value in zip(members, values, strict=True):
                chunk, p = chunks[i], places[i]
                if not chunk.done[p]:  # twice in the batch, or another thread was first
                    chunk.values[p] = value
                    chunk.done[p] = 1
                    chunk.pending -= 1
