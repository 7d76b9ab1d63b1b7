"""A pass's stack: from the pieces of its plan to what the caller gets, drawn once.

::

    PassPlan (read.passes): pieces, their groups, shuffled picks
      │
      ├─ Sources.chunks(piece)       read.sources: the file opened and checked, read chunk by
      │                              chunk (seeking through its index for a range)
      ├─ place_chunks / read_range_chunks
      │                              read.placing: each chunk at its proven record number,
      │                              a Gap for records lost to damage
      ├─ decoded()                   read.decoding: chunks → lists of instances, or a
      │                              chunk's Columns (batches)
      ├─ prefetched()                read.prefetch: threads run the pieces ahead, in order
      │                              (with num_threads=0: nothing)
      ├─ interleave() / pick()       read.blocks: the shards of a set round-robin, a run
      │                              at a time; a shuffle block's records picked
      └─ instances() / batches()     here: one instance at a time, or batches cut from the
                                     blocks, each counted into the pass's PassProgress

Every layer passes *blocks* (:mod:`recprep.read.blocks`), never single instances, until
the last. :class:`Reading` is what the layers read with: the reader's files, each set's
codec and the reader's :class:`~recprep.read.options.ReadOptions`.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..codecs import Codec
from ..containers import Gap
from .blocks import Block, cut, flatten, interleave, pick
from .checkpoint import PassProgress
from .cpugate import CpuGate, storage_waits, usable_cores
from .decoding import BATCH_BYTES, decoded
from .gather import arrow_empty
from .options import ReadOptions
from .passes import PassPlan
from .prefetch import prefetched
from .ranks import Piece
from .readstats import PassWatch, ReadCounter, Setup
from .sources import Sources

__all__ = ["INTERLEAVED_BYTES", "Reading", "batches", "blocks", "instances"]

#: with threads, what the batches of shards read round-robin may hold together: each
#: shard's batch is smaller when there are many (never less than a chunk)
INTERLEAVED_BYTES = 64 << 20


@dataclass(frozen=True)
class Reading:
    """What a pass reads with: the files (``sources``), the codec of each shard set
    (``codec(set)``, and the one its manifest names: ``written_with(set)``), the
    reader's options and what counts its chunks (``counter``)."""

    sources: Sources
    codec: Callable[[int], Codec]
    written_with: Callable[[int], str | None]
    options: ReadOptions
    counter: ReadCounter | None = None


def blocks(plan: PassPlan, reading: Reading, columnar: bool | str = False
           ) -> Iterator[Block]:
    """The instances of ``plan`` as blocks, in its order: the pieces of a group
    round-robin, and, shuffled, each piece's picks. With ``columnar``, chunks the codec
    decodes whole come as their columns."""
    with _opened(plan, reading, columnar) as streams:
        if plan.picks is None:
            start = 0
            groups = plan.groups
            for end in range(1, len(plan.pieces) + 1):
                if end == len(plan.pieces) or groups[end] != groups[start]:
                    yield from interleave(streams[start:end], _expected_places(
                        plan.pieces[start:end], reading.sources) if end - start > 1 else None)
                    start = end
            return
        for stream, rows in zip(streams, plan.picks, strict=True):
            if rows is None:
                yield from stream
                continue
            held = list(stream)  # one block (at most shuffle_buffer instances)
            yield from pick(held, rows)  # lost records (Gaps) keep their places


@contextmanager
def _opened(plan: PassPlan, reading: Reading, columnar: bool | str
            ) -> Iterator[Sequence[Iterator[Block]]]:
    """The blocks of each piece of ``plan``, decoded (and prefetched, with threads)."""
    sources, threads = reading.sources, reading.options.num_threads
    widest = max(Counter(plan.groups).values(), default=1)  # shards read round-robin
    batch_bytes = min(BATCH_BYTES, INTERLEAVED_BYTES // widest) if threads else 0
    gate = CpuGate(usable_cores() - 1) if threads else None
    wrap = gate.wrap if gate is not None and storage_waits(sources.fs) else None
    decoding = threading.Lock() if threads > 1 else None
    codecs = {n: reading.codec(n) for n in {sources.files.set_of(p.file) for p in plan.pieces}}

    def stream(piece: Piece) -> Iterator[Block]:
        file = sources.files[piece.file]
        return decoded(
            sources.chunks(piece, wrap), codecs[file.set_index], file.shown,
            allow_pickle=reading.options.allow_pickle, batch_bytes=batch_bytes,
            decoding=decoding, columnar=columnar,
            written_with=reading.written_with(file.set_index), counter=reading.counter,
        )

    # each piece's stack made when the pass reaches it, freed when it ends (not 25,000
    # at once, each kept to the pass's end, for a worker's share of 100,000 shards)
    streams = [_Made(stream, piece) for piece in plan.pieces]
    sources.commits.new_pass()
    _expect_first_group(plan, sources)
    try:
        with prefetched(streams, plan.groups, threads, gate=gate) as prefetching:
            try:
                yield prefetching
            except GeneratorExit:  # the consumer stopped early: the pass is over
                sources.pass_ended()
                raise
        sources.commits.settle()  # a set found changed meanwhile raises here
        sources.pass_ended()  # not when the pass failed: its error says what happened
    finally:
        if sources.fetcher is not None:
            sources.fetcher.drop_expected()
        if sources.cache is not None:
            sources.cache.release_ahead()


def _expected_places(pieces: Sequence[Piece], sources: Sources) -> list[int | None]:
    """The places each of ``pieces`` gives, where they are known without asking storage
    (a shard read round-robin that gave them all is finished at once:
    :func:`~recprep.read.blocks.interleave`)."""
    places: list[int | None] = []
    for piece in pieces:
        count = sources.known_count(piece.file) if piece.end is None else piece.end
        places.append(None if count is None else count - piece.start)
    return places


class _Made(Iterator[Block]):
    """The blocks of ``make(piece)``, made when first asked for and let go when they end
    (an ended generator still holds its frame's room)."""

    __slots__ = ("_make", "_piece", "_blocks")

    def __init__(self, make: Callable[[Piece], Iterator[Block]], piece: Piece) -> None:
        self._make: Callable[[Piece], Iterator[Block]] | None = make
        self._piece = piece
        self._blocks: Iterator[Block] | None = None

    def __next__(self) -> Block:
        if self._blocks is None:
            if self._make is None:
                raise StopIteration
            self._blocks, self._make = self._make(self._piece), None
        try:
            return next(self._blocks)
        except StopIteration:
            self._blocks = None
            raise

    def close(self) -> None:
        blocks, self._blocks, self._make = self._blocks, None, None
        if blocks is not None:
            blocks.close()  # type: ignore[attr-defined]


def _expect_first_group(plan: PassPlan, sources: Sources) -> None:
    """On an object store, start fetching every piece of the pass's first group at once
    (a set's shards are read round-robin but opened one after another: each would
    otherwise wait a round trip for its first bytes in turn). Only shards pinned by
    their manifest's ETag, whose open asks the store nothing first. With a
    ``cache_dir``, each shard's partial is claimed first, in the pass's order, up to the
    first one another reader fills (whose bytes that reader fetches: one download per
    node); cached shards need nothing."""
    fetcher, cache = sources.fetcher, sources.cache
    if fetcher is None or not plan.pieces:
        return
    fetcher.warm()
    expected = []
    for piece, group in zip(plan.pieces, plan.groups, strict=True):
        if group != plan.groups[0]:
            break
        file = sources.files[piece.file]
        entry = sources.commits.pinned(file)
        if entry is None:
            continue
        span = sources.span(piece)
        claim = "store" if cache is None else cache.claim_ahead(file.shown, entry, span)
        if claim == "held":
            break
        if claim != "cached":
            expected.append((file.path, entry.bytes, entry.etag, span))
    fetcher.expect(expected)


def instances(runs: Iterator[Block], progress: PassProgress, watch: PassWatch | None = None
              ) -> Iterator[Any]:
    """The instances of ``runs``, one at a time, counted in ``progress`` (with the places
    of records lost to damage, so that a resumed pass starts where this one was) and
    timed a block at a time by ``watch`` (:class:`~recprep.read.readstats.PassWatch`)."""
    watch = watch or _unwatched()
    now = time.perf_counter
    try:
        asked = now()
        for run in runs:
            if isinstance(run, Gap):
                progress.counted += run.n
                continue
            values = flatten(run)
            progress.items = items = iter(values)
            progress.counted += len(values)
            handed = now()
            watch.handing(handed - asked, handed, len(values), items)
            yield from items
            asked = now()
            watch.taken(asked)
        progress.items = None
        progress.done = True
    finally:
        try:
            runs.close()  # type: ignore[attr-defined]
        finally:
            watch.ended(progress.done)


def batches(runs: Iterator[Block], size: int, drop_last: bool, progress: PassProgress,
            watch: PassWatch | None = None, arrow: bool = False) -> Iterator[Any]:
    """The batches of ``runs``, counted (by instance, and the places of records lost to
    damage among them) in ``progress``, timed a batch at a time by ``watch``; with
    ``arrow``, their arrays in scratch buffers dropped batches hand back
    (:func:`~.gather.arrow_empty`)."""
    lost = [0]  # places of lost records passed since the last batch handed out
    watch = watch or _unwatched()
    now = time.perf_counter
    try:
        asked = now()
        for batch in cut(runs, size, drop_last, lost, arrow_empty if arrow else np.empty):
            n = _batch_len(batch)
            progress.counted += n + lost[0]
            lost[0] = 0
            handed = now()
            watch.handing(handed - asked, handed, n)
            yield batch
            asked = now()
            watch.taken(asked)
        progress.counted += lost[0]
        progress.done = True
    finally:
        try:
            runs.close()  # type: ignore[attr-defined]
        finally:
            watch.ended(progress.done)


def _unwatched() -> PassWatch:
    """A watch that counts into nothing anyone reads."""
    return ReadCounter().watch(lambda: Setup("", 0, False, False))


def _batch_len(batch: Any) -> int:
    while isinstance(batch, (tuple, dict)):
        batch = batch[0] if isinstance(batch, tuple) else next(iter(batch.values()))
    return len(batch)
