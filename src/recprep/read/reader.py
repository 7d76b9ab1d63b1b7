"""``RecordIO``: a reader creator over shard sets, for training loops.

``RecordIO(pattern)`` resolves its files once; every call returns a fresh iterator over
the instances. Without shuffling, the shards of a set are read round-robin, which gives
back exactly the order ``convert`` was fed. The reader decodes and puts things together;
the rest lives in small modules:

* :mod:`recprep.read.files` — the files, their record counts, chunk indexes and chunks;
* :mod:`recprep.read.ranks` — which files / record ranges this rank (and worker) reads;
* :mod:`recprep.read.shuffling` — seeded orders per epoch and the bounded shuffle buffer;
* :mod:`recprep.read.fileindex` — chunk indexes and reading records ``start:end`` of a file;
* :mod:`recprep.read.decoding` — chunks into instances, errors located;
* :mod:`recprep.read.prefetch` — background threads that read and decode chunks ahead.
"""

from __future__ import annotations

import copy
import os
import threading
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import groupby
from operator import length_hint
from typing import TYPE_CHECKING, Any

import numpy as np

from .._core.arguments import checked
from .._core.batching import check_batch_size
from .._core.names import CodecName, CompressorName, FormatName, OnCorrupt, SplitMode
from ..codecs import Codec, get_codec
from ..codecs.schema import codec_with_schema
from ..containers import DEFAULT_MAX_CHUNK_BYTES, Gap, get_format
from ..errors import CorruptDataWarning, InvalidArgumentError, RecordRangeError, warn
from ..storage.discovery import ShardSet, resolve_shard_sets
from ..storage.fs import display, resolve
from ..storage.manifest import Manifest
from .blocks import Block, cut, flatten, pick
from .blocks import interleave as interleave_runs
from .cache import ShardCache
from .checkpoint import (
    STATE_VERSION,
    ResumeWarning,
    check_state,
    combine,
    covered,
    remaining,
    slot_range,
)
from .cpugate import CpuGate, storage_waits, usable_cores
from .decoding import BATCH_BYTES, decoded
from .files import Sources
from .prefetch import check_threads, prefetched
from .ranks import (
    SPLIT_MODES,
    Blocks,
    Piece,
    Task,
    check_part,
    make_tasks,
    skip_pieces,
    split,
)
from .shuffling import check_buffer, check_seed, fresh_seed, permutation, rng

if TYPE_CHECKING:
    from .dataset import MapDataset

__all__ = ["RecordIO"]

_ORDER_STREAM, _TASKS_STREAM, _BUFFER_STREAM = range(3)  # independent random streams
DEFAULT_SHUFFLE_BUFFER = 10_000
#: with threads, what the batches of shards read round-robin may hold together: each
#: shard's batch is smaller when there are many (never less than a chunk)
INTERLEAVED_BYTES = 64 << 20


@dataclass
class Skipped:
    """What a reader with ``on_corrupt="skip"`` has left out so far (every skip is also a
    :class:`~recprep.errors.CorruptDataWarning`): ``events`` (damaged chunks, torn tails,
    damaged manifests), ``records`` (records known lost) and ``unknown`` (events whose
    loss could not be counted)."""

    events: int = 0
    records: int = 0
    unknown: int = 0

    def add(self, warning: CorruptDataWarning) -> None:
        self.events += 1
        if warning.records_lost is None:
            self.unknown += 1
        else:
            self.records += warning.records_lost


@dataclass
class _Progress:
    """Where the latest pass of a reader is: its epoch, the positions consumed before it
    started (``base``, shuffled passes) and the instances it has handed out: ``counted``
    of them, less what is left in ``items``, the iterator over the block being handed
    out one at a time (counting per block costs nothing per instance)."""

    epoch: int
    base: list[tuple[int, int]] = field(default_factory=list)
    counted: int = 0
    done: bool = False
    items: Iterator[Any] | None = None

    @property
    def yielded(self) -> int:
        return self.counted - (0 if self.items is None else length_hint(self.items))


def _instances(runs: Iterator[Block], progress: _Progress) -> Iterator[Any]:
    """The instances of ``runs``, one at a time, counted in ``progress`` (with the places
    of records lost to damage, so that a resumed pass starts where this one was)."""
    try:
        for run in runs:
            if isinstance(run, Gap):
                progress.counted += run.n
                continue
            values = flatten(run)
            progress.items = items = iter(values)
            progress.counted += len(values)
            yield from items
        progress.items = None
        progress.done = True
    finally:
        runs.close()  # type: ignore[attr-defined]


def _batches(runs: Iterator[Block], size: int, drop_last: bool, progress: _Progress
             ) -> Iterator[Any]:
    """The batches of ``runs``, counted (by instance, and the places of records lost to
    damage among them) in ``progress``."""
    lost = [0]  # places of lost records passed since the last batch handed out

    def present() -> Iterator[Block]:
        for run in runs:
            if isinstance(run, Gap):
                lost[0] += run.n
            else:
                yield run

    try:
        for batch in cut(present(), size, drop_last):
            progress.counted += _batch_len(batch) + lost[0]
            lost[0] = 0
            yield batch
        progress.counted += lost[0]
        progress.done = True
    finally:
        runs.close()  # type: ignore[attr-defined]


def _batch_len(batch: Any) -> int:
    while isinstance(batch, (tuple, dict)):
        batch = batch[0] if isinstance(batch, tuple) else next(iter(batch.values()))
    return len(batch)


class RecordIO:
    """A reader creator over RecordIO shard sets (and single files).

    Parameters
    ----------
    pattern
        A glob (``out/train-*-of-*``), a directory, a single file, or a list of them;
        local paths or fsspec URLs. A glob that matches part of a shard set whose other
        shards are missing raises :class:`~recprep.errors.MissingShardsError`.
    codec
        How records are decoded. ``None`` takes it from the set's manifest, or uses
        ``"recprep"`` (whose tag byte makes a wrong guess fail loudly).
    allow_pickle
        Unpickle pickled values. Off by default: unpickling runs code chosen by whoever
        wrote the file.
    storage_options
        Passed to fsspec.
    max_chunk_bytes
        The most one chunk may claim or decompress to (256 MiB); larger is reported as
        damage. Raise it for files with unusually large chunks.
    format
        Force a container format instead of taking it from the manifest or detecting it
        from the bytes.
    compressor
        With ``format``: force a whole-file compression (TFRecord's ``"gzip"``/``"zlib"``)
        instead of detecting it. RecordIO names its compressor in every chunk.
    on_corrupt
        ``"raise"`` (default): damage stops the read with a
        :class:`~recprep.errors.CorruptDataError` naming the file and byte offset.
        ``"skip"``: a damaged chunk (or manifest) is left out with a
        :class:`~recprep.errors.CorruptDataWarning` (file, offset, records lost), counted
        in :attr:`skipped`, and reading goes on; a damaged record is never yielded.
    shuffle
        Shuffle each pass: the records, cut into blocks of ``shuffle_buffer`` (runs
        within files), the blocks in a new order each epoch and the records of each block
        too. That *epoch order* depends on the seed, the epoch and the data only; ranks
        and workers read contiguous slices of it (see :mod:`recprep.read.checkpoint`). Off:
        files are read in order, the shards of a set round-robin (the original order).
    seed
        The shuffle's seed: the same seed and epoch give the same order. ``None`` draws
        one (kept in :attr:`seed`).
    shuffle_buffer
        Records permuted together, the size of a block (memory: that many decoded
        instances). ``0`` or ``1``: blocks of 10,000 records in a new order, each read
        in order.
    rank, world_size
        Read only this rank's share: the ranks ``0 .. world_size - 1`` together read every
        instance exactly once per epoch. Unshuffled, files are dealt out whole when there
        are at least as many as ranks, otherwise split into record ranges (``split``),
        and a rank's share is the same every epoch. Shuffled, rank ``r`` reads slice
        ``r`` of the epoch order (the ranks within one instance of each other). ``len``
        is the same every epoch.
    num_threads
        Background threads that read, check, decompress and decode chunks ahead of the
        loop, so that remote storage and decoding don't stall it (memory: about
        ``2 * num_threads`` MiB of instances ahead, plus a chunk per shard of a set read
        round-robin). The order is the same as with ``0`` (no threads, the default). See
        ``docs/reading.md`` for what they buy.
    split
        For unshuffled passes: ``"auto"`` (by file when there are enough files, else by
        record range),
        ``"shard"`` (always whole files) or ``"range"`` (always record ranges: every rank
        gets the same number of instances, to within one).
    cache_dir, cache_bytes
        Keep local copies of the shards of committed remote sets in the directory
        ``cache_dir`` (at most ``cache_bytes`` bytes, least recently used removed first),
        each checked against its manifest's size and CRC-32C, so that later epochs read
        locally (see :mod:`recprep.read.cache`). Local sets and files without a manifest entry
        are read where they are. Default: no cache.

    Examples
    --------
    >>> from recprep import convert, RecordIO
    >>> _ = convert("memory://doc/reader", [(i, str(i)) for i in range(5)], 2, "ds")
    >>> read = RecordIO("memory://doc/reader/ds-*-of-*")
    >>> list(read())
    [(0, '0'), (1, '1'), (2, '2'), (3, '3'), (4, '4')]
    >>> len(read)
    5
    >>> [b[0].tolist() for b in read.batches(2)]  # batches: columns, stacked
    [[0, 1], [2, 3], [4]]

    Two ranks split the set, shuffled (the same seed and epoch give the same order):

    >>> ranks = [RecordIO("memory://doc/reader/ds-*", rank=r, world_size=2, shuffle=True,
    ...                   seed=7) for r in (0, 1)]
    >>> [len(r) for r in ranks], sorted(x for r in ranks for x, _ in r())
    ([3, 2], [0, 1, 2, 3, 4])

    ElasticDL-style tasks, each read by seeking through the chunk index:

    >>> tasks = read.tasks(records_per_task=2)
    >>> [(t.path.rsplit("/", 1)[1], t.start, t.end) for t in tasks]
    [('ds-00000-of-00001', 0, 2), ('ds-00000-of-00001', 2, 3), ('ds-00001-of-00001', 0, 2)]
    >>> list(read.read_range(*tasks[1]))
    [(4, '4')]
    """

    @checked
    def __init__(
        self,
        pattern: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        codec: CodecName | str | Codec | None = None,
        allow_pickle: bool = False,
        storage_options: Mapping[str, Any] | None = None,
        max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
        format: FormatName | str | None = None,
        on_corrupt: OnCorrupt = "raise",
        shuffle: bool = False,
        seed: int | None = None,
        shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER,
        rank: int = 0,
        world_size: int = 1,
        num_threads: int = 0,
        split: SplitMode = "auto",
        compressor: CompressorName | str | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_bytes: int | None = None,
    ) -> None:
        given: list[Any] = (
            [pattern] if isinstance(pattern, (str, os.PathLike)) else list(pattern)
        )
        if not given or not all(isinstance(p, (str, os.PathLike)) for p in given):
            raise InvalidArgumentError(
                f"pattern must be a path, URL or glob (str or pathlib.Path) or a non-empty "
                f"list of them, got {pattern!r}"
            )
        patterns = [os.fspath(p) for p in given]
        if not isinstance(max_chunk_bytes, int) or max_chunk_bytes < 1:
            raise InvalidArgumentError(
                f"max_chunk_bytes must be a positive int, got {max_chunk_bytes!r}"
            )
        if on_corrupt not in ("raise", "skip"):
            raise InvalidArgumentError(
                f"on_corrupt must be 'raise' or 'skip', got {on_corrupt!r}"
            )
        if split not in SPLIT_MODES:
            raise InvalidArgumentError(f"split must be one of {list(SPLIT_MODES)}, got {split!r}")
        check_part(rank, world_size)
        self.on_corrupt = on_corrupt
        self._codec = None if codec is None else get_codec(codec)
        self._codecs: dict[int, Codec] = {}
        self.allow_pickle = allow_pickle
        self.max_chunk_bytes = max_chunk_bytes
        self.shuffle = bool(shuffle)
        self.seed: int = fresh_seed() if seed is None else check_seed(seed)
        self.shuffle_buffer = check_buffer(shuffle_buffer)
        self.num_threads = check_threads(num_threads)
        self.split = split
        self.rank, self.world_size = rank, world_size
        self._worker = (0, 1, 1)  # (worker, num_workers, align): see for_worker
        self._epoch: int | None = None
        self._passes = 0
        self._progress: _Progress | None = None  # of the latest pass
        self._resume: dict[str, Any] | None = None  # a loaded state, for the next pass
        self._blocks: Blocks | None = None
        self.fs, _ = resolve(patterns[0], storage_options)
        paths = [resolve(p, storage_options)[1] for p in patterns]
        self.shard_sets: list[ShardSet] = resolve_shard_sets(self.fs, paths)
        container = None if format is None else get_format(format)
        if compressor is not None and (
            container is None or compressor not in container.compressors
        ):
            valid = "pass format= too" if container is None else list(container.compressors)
            raise InvalidArgumentError(
                f"compressor={compressor!r} needs a format that has it ({valid})"
            )
        if cache_bytes is not None and cache_dir is None:
            raise InvalidArgumentError("cache_bytes bounds a cache: pass cache_dir too")
        cache = None if cache_dir is None else ShardCache(cache_dir, cache_bytes)
        self.skipped = Skipped()
        self._sources = Sources(
            self.fs, self.shard_sets, format=container, compressor=compressor,
            max_chunk_bytes=max_chunk_bytes, on_corrupt=on_corrupt,
            on_skip=self.skipped.add, cache=cache,
        )

    def __repr__(self) -> str:
        sets = []
        for shard_set, manifest in zip(self.shard_sets, self.manifests, strict=True):
            where = display(self.fs, shard_set.directory)
            if shard_set.prefix is None:
                sets.append(display(self.fs, shard_set.paths[0]))
                continue
            described = f"{where}/{shard_set.prefix}: {len(shard_set.paths)} shards"
            if manifest is not None:
                described += (f", {manifest.num_records} instances, {manifest.format}/"
                              f"{manifest.codec}/{manifest.compressor}")
            sets.append(described)
        options = [f"rank={self.rank}/{self.world_size}"] if self.world_size > 1 else []
        if self.shuffle:
            options.append(f"shuffle(seed={self.seed})")
        if self._codec is not None:
            options.append(f"codec={self._codec.name!r}")
        if self.on_corrupt != "raise":
            options.append(f"on_corrupt={self.on_corrupt!r}")
        shown = "; ".join(sets[:5]) + (f"; ... ({len(sets)} sets)" if len(sets) > 5 else "")
        return f"RecordIO({shown}{''.join(', ' + o for o in options)})"

    # -- what is read ---------------------------------------------------------------------

    @property
    def paths(self) -> list[str]:
        """Every file this reader reads, in reading order of sets (shard order within)."""
        return [f.shown for f in self._sources.files]

    @property
    def manifests(self) -> list[Manifest | None]:
        """The manifest of each shard set (``None`` for files without one)."""
        return list(self._sources.manifests)

    @property
    def cache(self) -> ShardCache | None:
        """The local cache of remote shards (``cache_dir``), or None."""
        return self._sources.cache

    @property
    def epoch(self) -> int:
        """The epoch the next pass shuffles for: the one :meth:`set_epoch` set, or else the
        number of passes made so far."""
        return self._passes if self._epoch is None else self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Shuffle every following pass for ``epoch`` (same seed and epoch, same order).

        Call it at the start of every epoch, on every rank, as with PyTorch's
        ``DistributedSampler``. Until it is called, pass ``n`` uses epoch ``n``.
        """
        self._epoch = check_seed(epoch, "epoch")

    def _next_pass(self, epoch: int, fixed: bool) -> None:
        """Make the next pass one of ``epoch``: as :meth:`set_epoch` does (``fixed``), or
        counting passes from it (the pass after it is then of ``epoch + 1``)."""
        if fixed:
            self.set_epoch(epoch)
        else:
            self._epoch, self._passes = None, check_seed(epoch, "epoch")

    def codec_for(self, index: int) -> Codec:
        """The codec used for shard set ``index``.

        The codec passed to the reader, else the one the set's manifest names, else
        ``"recprep"``. A codec with no schema of its own (a name, or an object without
        features) takes the schema the manifest records when the manifest names that same
        codec, so naming the codec the manifest names changes nothing; a codec object with
        its own schema (an ``ExampleCodec`` with features) wins over the manifest.
        """
        cached = self._codecs.get(index)
        if cached is not None:
            return cached
        manifest = self._sources.manifests[index]
        codec = self._codec
        if codec is None:
            codec = get_codec("recprep" if manifest is None else manifest.codec)
        if manifest is not None and manifest.codec == codec.name and not codec.schema():
            codec = codec_with_schema(  # a bad schema is a damaged manifest
                codec, manifest.schema, self._sources.shard_sets[index].manifest_path
            )
        self._codecs[index] = codec
        return codec

    def written_with(self, index: int) -> str | None:
        """The codec the manifest of shard set ``index`` names (None without one): a
        decode error of another codec passed to the reader suggests it first."""
        manifest = self._sources.manifests[index]
        return None if manifest is None else manifest.codec

    def for_rank(self, rank: int, world_size: int) -> RecordIO:
        """A copy of this reader that reads the share of ``rank`` of ``world_size``."""
        check_part(rank, world_size)
        other = copy.copy(self)
        other.rank, other.world_size = rank, world_size
        return other

    def for_worker(
        self, worker_id: int, num_workers: int, *, batch_size: int | None = None
    ) -> RecordIO:
        """A copy that reads worker ``worker_id``'s part of this rank's share.

        The ``num_workers`` workers of a rank together read the rank's share exactly once;
        :class:`recprep.torch.RecordIODataset` calls this in each DataLoader worker. With
        ``batch_size``, each worker's part is a whole number of batches of that size (all
        but the last non-empty part; unshuffled, the share is then cut by record ranges),
        so the workers together cut exactly as many batches (``batches(batch_size)``) as
        one reader of the whole share would.

        >>> from recprep import convert, RecordIO
        >>> _ = convert("memory://doc/workers", list(range(10)), 2, "w")
        >>> read = RecordIO("memory://doc/workers/w-*")
        >>> [len(read.for_worker(w, 2, batch_size=4)) for w in (0, 1)]
        [4, 6]
        """
        check_part(worker_id, num_workers, "worker_id", "num_workers")
        align = 1 if batch_size is None or num_workers == 1 else check_batch_size(batch_size)
        other = copy.copy(self)
        other._worker = (worker_id, num_workers, align)
        return other

    # -- passes -----------------------------------------------------------------------------

    def __call__(self) -> Iterator[Any]:
        """A fresh pass over this reader's instances (this rank's and worker's share).

        After :meth:`load_state_dict`, the first pass of the state's epoch continues the
        interrupted one instead."""
        epoch, base, skip, progress = self._start()
        return _instances(self._pass(epoch, base, skip), progress)

    def _start(self) -> tuple[int, list[tuple[int, int]], int, _Progress]:
        """A pass begins: its epoch, consumed positions, instances to skip, progress."""
        epoch = self.epoch
        if self._epoch is None:
            self._passes += 1
        base, skip = self._take_resume(epoch)
        progress = self._progress = _Progress(epoch, base, skip)
        return epoch, base, skip, progress

    __iter__ = __call__

    @checked
    def batches(self, batch_size: int, *, drop_last: bool = False) -> Iterator[Any]:
        """A fresh pass, as :meth:`__call__` gives it, in batches of ``batch_size``.

        Every option of the reader holds (shuffle, epoch, rank, worker, split, threads,
        ``on_corrupt``): the instances are those of ``read()`` in the same order, cut into
        runs of ``batch_size`` (the last one shorter, or left out with ``drop_last``),
        each made columns by :func:`recprep.batching.collate` — tuples of columns for
        tuple instances, dicts for dicts; numbers and equal-shape arrays stacked into one
        numpy array (dtype kept), ``str``/``bytes`` an object array, other columns a list.
        :func:`recprep.batching.unbatch` gives the instances back (stacked values as numpy
        values). Chunks the codec decodes whole move through the pass as columns, and
        each batch is copied out of them once (see :mod:`recprep.read.blocks`).

        >>> from recprep import convert, RecordIO
        >>> _ = convert("memory://doc/batches", [(i, f"w{i}") for i in range(5)], 2, "b")
        >>> [(ids.tolist(), words.tolist()) for ids, words in
        ...  RecordIO("memory://doc/batches/b-*").batches(2)]
        [([0, 1], ['w0', 'w1']), ([2, 3], ['w2', 'w3']), ([4], ['w4'])]
        """
        size = check_batch_size(batch_size)
        epoch, base, skip, progress = self._start()
        runs = self._pass(epoch, base, skip, columnar=True)
        return _batches(runs, size, drop_last, progress)

    def __len__(self) -> int:
        """How many instances a pass yields — this rank's (and worker's) share — from
        manifests or chunk headers, without decoding."""
        if self.shuffle:
            lo, hi = slot_range(int(self._layout().records.sum()), self.rank,
                                self.world_size, *self._worker)
            return hi - lo
        return sum(p.size(self._sources.count) for p in self._plan(self.epoch))

    def _plan(self, epoch: int) -> list[Piece]:
        """An unshuffled pass: this rank's share (the same every epoch), then this
        worker's part of it."""
        count = self._sources.count
        files = [Piece(n) for n in range(len(self._sources.files))]
        pieces = split(files, self.rank, self.world_size, count, self.split)
        worker, num_workers, align = self._worker
        return split(pieces, worker, num_workers, count, self.split, align)

    def _pass(self, epoch: int, base: list[tuple[int, int]], skip: int,
              columnar: bool = False) -> Iterator[Block]:
        """The pass's instances as blocks (see :mod:`recprep.read.blocks`); with
        ``columnar``, chunks the codec decodes whole come as their columns."""
        if self.shuffle:
            return self._shuffled(epoch, base, skip, columnar)
        return self._runs(self._plan(epoch), interleave=True, skip=skip, columnar=columnar)

    # -- shuffled passes: blocks of the epoch order (see recprep.read.checkpoint) ---------------

    def _block_size(self) -> int:
        return self.shuffle_buffer if self.shuffle_buffer > 1 else DEFAULT_SHUFFLE_BUFFER

    def _layout(self) -> Blocks:
        """The files cut into blocks (from record counts; built once)."""
        if self._blocks is None:
            counts = [self._sources.count(n) for n in range(len(self._sources.files))]
            self._blocks = Blocks.cut(counts, self._block_size())
        return self._blocks

    def _whole_or_range(self, file: int, start: int, end: int) -> Piece:
        if start == 0 and end == self._sources.count(file):
            return Piece(file)  # read front to back, without an index
        return Piece(file, start, end)

    def _shuffled(self, epoch: int, base: list[tuple[int, int]], skip: int,
                  columnar: bool) -> Iterator[Block]:
        """This slot's slice of the epoch order, without positions ``base``, from its
        ``skip``-th instance on: the blocks it touches, each read once (only the records
        wanted of it, as one record range), each permuted by its own seeded stream."""
        blocks = self._layout()
        order = permutation(len(blocks.file), self.seed, epoch, _ORDER_STREAM)
        sizes = blocks.records[order]
        ends = np.cumsum(sizes)
        total = int(ends[-1]) if len(ends) else 0
        starts = ends - sizes
        lo, hi = slot_range(total - covered(base), self.rank, self.world_size, *self._worker)
        segments: list[tuple[int, int, int]] = []  # (position in order, from, to)
        for a, b in remaining(base, total, lo + skip, hi):
            first, last = np.searchsorted(ends, [a, b - 1], side="right").tolist()
            for j in range(first, last + 1):
                at = int(starts[j])
                segments.append((j, max(a, at) - at, min(b, int(ends[j])) - at))
        permuted = self.shuffle_buffer > 1
        pieces: list[Piece] = []
        picks: list[np.ndarray | None] = []
        for j, run in groupby(segments, key=lambda s: s[0]):
            block = int(order[j])
            file, start = int(blocks.file[block]), int(blocks.start[block])
            if permuted:
                shuffled = permutation(int(sizes[j]), self.seed, epoch, _BUFFER_STREAM, block)
                wanted = np.concatenate([shuffled[a:b] for _, a, b in run])
                first_record = int(wanted.min())
                pieces.append(self._whole_or_range(
                    file, start + first_record, start + int(wanted.max()) + 1))
                picks.append(wanted - first_record)
            else:
                for _, a, b in run:
                    pieces.append(self._whole_or_range(file, start + a, start + b))
                    picks.append(None)
        with self._streams(pieces, list(range(len(pieces))), columnar) as streams:
            for stream, rows in zip(streams, picks, strict=True):
                if rows is None:
                    yield from stream
                    continue
                held = list(stream)  # one block (at most shuffle_buffer instances)
                yield from pick(held, rows)  # lost records (Gaps) keep their places

    # -- reading pieces ---------------------------------------------------------------------

    def _groups(self, pieces: Sequence[Piece], interleave: bool) -> list[int]:
        """A group number per piece: consecutive pieces of one set share one when they
        are read round-robin (``interleave``)."""
        sets = [self._sources.files[piece.file].set_index for piece in pieces]
        groups: list[int] = []
        for k, set_index in enumerate(sets):
            if k == 0:
                groups.append(0)
            else:
                same = interleave and set_index == sets[k - 1]
                groups.append(groups[-1] + (not same))
        return groups

    def _read(
        self, pieces: Sequence[Piece], *, interleave: bool, skip: int = 0
    ) -> Iterator[Any]:
        """The instances of ``pieces``, as :meth:`_runs` orders them (outside any pass:
        their count is kept by the caller)."""
        return _instances(self._runs(pieces, interleave=interleave, skip=skip), _Progress(0))

    def _runs(
        self, pieces: Sequence[Piece], *, interleave: bool, skip: int = 0,
        columnar: bool = False,
    ) -> Iterator[Block]:
        """The instances of ``pieces`` as blocks: those of one set round-robin
        (``interleave``), or one piece after the other; the first ``skip`` of them left
        out unread."""
        groups = self._groups(pieces, interleave)
        if skip:
            pieces, groups = skip_pieces(pieces, groups, skip, self._sources.count)
        with self._streams(pieces, groups, columnar) as streams:
            start = 0
            for end in range(1, len(pieces) + 1):
                if end == len(pieces) or groups[end] != groups[start]:
                    yield from interleave_runs(streams[start:end])
                    start = end

    @contextmanager
    def _streams(
        self, pieces: Sequence[Piece], groups: Sequence[int], columnar: bool = False
    ) -> Iterator[Sequence[Iterator[Block]]]:
        """The blocks of each piece, decoded (and prefetched, with threads) ahead."""
        sets = [self._sources.files[piece.file].set_index for piece in pieces]
        threads = self.num_threads
        widest = max(Counter(groups).values(), default=1)  # shards read round-robin
        batch_bytes = min(BATCH_BYTES, INTERLEAVED_BYTES // widest) if threads else 0
        gate = CpuGate(usable_cores() - 1) if threads else None
        wrap = gate.wrap if gate is not None and storage_waits(self.fs) else None
        decoding = threading.Lock() if threads > 1 else None
        sources = [
            decoded(
                self._sources.chunks(piece, wrap),
                self.codec_for(sets[k]),
                self._sources.files[piece.file].shown,
                allow_pickle=self.allow_pickle,
                batch_bytes=batch_bytes,
                decoding=decoding,
                columnar=columnar,
                written_with=self.written_with(sets[k]),
            )
            for k, piece in enumerate(pieces)
        ]
        with prefetched(sources, groups, threads, gate=gate) as streams:
            yield streams

    # -- checkpoints ------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The state of the pass in progress: a small JSON-serialisable ``dict``.

        It holds the seed, the epoch and the position (no data); :meth:`load_state_dict`
        on a reader of the same set and options makes its next pass yield exactly the
        instances this pass has not yielded yet, in the same order. An instance counts as
        consumed once the pass has handed it to its caller (see ``docs/reading.md``).
        Taken before a pass starts, it is the start of the next pass; taken after one
        has ended, it says so (``"done"``), and a reader loaded with it goes on with the
        next epoch (when epochs are counted by passes; with :meth:`set_epoch`, by the
        epoch set). Shuffled states of all ranks combine (:meth:`combine_states`) into one that
        any ``world_size`` resumes from.

        >>> from recprep import convert, RecordIO
        >>> _ = convert("memory://doc/state", list(range(6)), 2, "s")
        >>> read = RecordIO("memory://doc/state/s-*", shuffle=True, seed=3, shuffle_buffer=4)
        >>> stream = read()
        >>> head = [next(stream), next(stream)]
        >>> state = read.state_dict()
        >>> again = RecordIO("memory://doc/state/s-*", shuffle=True, shuffle_buffer=4)
        >>> again.load_state_dict(state)
        >>> rest = list(again())
        >>> rest == list(stream), sorted(head + rest)
        (True, [0, 1, 2, 3, 4, 5])
        """
        resume = self._resume
        if resume is not None:
            base = [tuple(i) for i in resume.get("base", [])]
            split = resume.get("rank") is not None
            yielded = resume["yielded"] if split else 0
            return self._state(resume["epoch"], base, yielded, resume["epoch_set"],
                               split and resume["done"])
        progress = self._progress
        if progress is None:
            return self._state(self.epoch, [], 0, self._epoch is not None)
        return self._state(progress.epoch, progress.base, progress.yielded,
                           self._epoch is not None, progress.done)

    def _state(
        self, epoch: int, base: Sequence[tuple[int, int]], yielded: int, epoch_set: bool,
        done: bool = False,
    ) -> dict[str, Any]:
        blocks = self._layout()
        state: dict[str, Any] = {
            "recprep_state": STATE_VERSION, "shuffle": self.shuffle, "seed": self.seed,
            "epoch": epoch, "epoch_set": epoch_set, "records": int(blocks.records.sum()),
            "files": len(self._sources.files),
        }
        if self.shuffle:
            state.update(block=self._block_size(), permuted=self.shuffle_buffer > 1,
                         base=[list(i) for i in base])
        worker, num_workers, align = self._worker
        state.update(rank=self.rank, world_size=self.world_size, worker=worker,
                     num_workers=num_workers, yielded=yielded, done=done)
        if align > 1:
            state["align"] = align
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Make the next pass continue the one ``state`` (from :meth:`state_dict` or
        :meth:`combine_states`) describes.

        The reader takes the state's seed and epoch; it must read the same files with
        the same ``shuffle`` and ``shuffle_buffer``. A state of one rank loads into the
        same ``rank``/``world_size`` (and worker); a combined state into any. Nothing is
        read here, and the next pass decodes nothing the interrupted one had consumed.

        Every field of the state is checked (it is read back from a checkpoint: untrusted
        input), against the others and against this reader: its type and range, the set
        (records and files), the shuffle, the split, and that ``yielded`` is at most this
        reader's share. A state that fails leaves the reader as it was.

        Raises
        ------
        InvalidArgumentError
            When the state is damaged, of another recprep version, or of another set,
            shuffle or split; the message names the field, what was expected and what was
            found.
        """
        state = self._checked_state(state)
        self.seed = state["seed"]
        self._progress = None
        self._resume = state
        if state["epoch_set"]:
            self._epoch = state["epoch"]
        elif state.get("done"):  # counting passes: the next one is the next epoch
            self._epoch, self._passes, self._resume = None, state["epoch"] + 1, None
        else:
            self._epoch, self._passes = None, state["epoch"]

    def _checked_state(self, state: Any) -> dict[str, Any]:
        """``state`` checked for loading into this reader (see :meth:`load_state_dict`),
        normalised; nothing is changed."""
        checked: dict[str, Any] = check_state(state)
        state = checked
        mine = self._state(0, [], 0, False)
        differs = [
            f"{key} (the state's {state[key]!r}, this reader's {mine[key]!r})"
            for key in ("shuffle", "records", "files", "block", "permuted")
            if key in mine and state.get(key, mine[key]) != mine[key]
        ]
        if differs:
            raise InvalidArgumentError(
                "the state is of another pass than this reader makes: it differs in "
                + ", ".join(differs) + " (the same files, shuffle and shuffle_buffer "
                "are needed)"
            )
        self._check_split(state)
        if not state["shuffle"] and state["yielded"] > (share := len(self)):
            raise InvalidArgumentError(
                f"a reader state's 'yielded' must be at most {share}, the share of rank "
                f"{self.rank} of {self.world_size} (worker {state['worker']} of "
                f"{state['num_workers']}), found {state['yielded']}"
            )
        return checked

    def _check_split(self, state: Mapping[str, Any]) -> None:
        if state.get("rank") is None:
            return
        worker, num_workers, align = self._worker
        theirs = (state["rank"], state["world_size"], state["worker"], state["num_workers"],
                  state.get("align", 1))
        if theirs != (self.rank, self.world_size, worker, num_workers, align):
            aligned = "" if theirs[4] == align else (
                f"; the state's workers split the share in batches of {theirs[4]}, this "
                f"reader's in batches of {align}"
            )
            raise InvalidArgumentError(
                f"the state is of rank {theirs[0]} of {theirs[1]} (worker {theirs[2]} of "
                f"{theirs[3]}), this reader is rank {self.rank} of {self.world_size} "
                f"(worker {worker} of {num_workers}){aligned}: load a state into the "
                "reader that took it, or combine the states of all ranks with "
                "RecordIO.combine_states(states) (shuffle=True) and load that into every "
                "rank of the new world"
            )

    def _take_resume(self, epoch: int) -> tuple[list[tuple[int, int]], int]:
        """``(base, skip)`` for a pass of ``epoch``: those of a loaded state, once."""
        state, self._resume = self._resume, None
        if state is None:
            return [], 0
        base = [(int(a), int(b)) for a, b in state.get("base", [])]
        skip = 0 if state.get("rank") is None else int(state["yielded"])
        if state["epoch"] != epoch:
            if (base or skip) and not state.get("done"):
                warn(ResumeWarning(
                    f"the loaded reader state (epoch {state['epoch']}, {skip} instances "
                    f"yielded) is not used: this pass is of epoch {epoch}"
                ))
            return [], 0
        self._check_split(state)
        return base, skip

    @staticmethod
    def combine_states(states: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """One state from the states of every rank (and worker) of a shuffled job.

        Load it into every rank of the new job, whatever its ``world_size``: together
        they read, this epoch, every instance none of the old ranks had consumed,
        exactly once, and none that any had. A rank whose state is missing counts as
        having consumed nothing. The states must be of one pass (set, seed, epoch).

        >>> from recprep import convert, RecordIO
        >>> _ = convert("memory://doc/elastic", list(range(10)), 3, "e")
        >>> old = [RecordIO("memory://doc/elastic/e-*", shuffle=True, seed=1, rank=r,
        ...                 world_size=2) for r in (0, 1)]
        >>> streams = [r() for r in old]
        >>> seen = [next(streams[0]), next(streams[0]), next(streams[1])]
        >>> both = RecordIO.combine_states([r.state_dict() for r in old])
        >>> new = [RecordIO("memory://doc/elastic/e-*", shuffle=True, rank=r, world_size=3)
        ...        for r in range(3)]
        >>> for reader in new:
        ...     reader.load_state_dict(both)
        >>> rest = [x for reader in new for x in reader()]
        >>> sorted(seen + rest)
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
        """
        return combine(states)

    # -- ranges and tasks -------------------------------------------------------------------

    def read_range(self, path: str, start: int, end: int) -> Iterator[Any]:
        """The instances of records ``start`` to ``end`` (exclusive) of the file ``path``.

        ``path`` is one of :attr:`paths` (as :meth:`tasks` gives it). On a RecordIO file the
        chunk index (built once, by hopping chunk headers) leads straight to the chunk that
        holds ``start``; earlier chunks are neither read nor decompressed. Formats without
        an index are read from the start. Records come in file order, never shuffled, and
        the range is read whatever this reader's rank.

        Raises
        ------
        RecordRangeError
            (a ``ValueError`` and ``IndexError``) unless ``0 <= start <= end <=`` the
            file's record count; raised by the call, before any reading.
        """
        number = self._sources.number(path)
        count = self._sources.count(number)
        shown = self._sources.files[number].shown
        for name, value in (("start", start), ("end", end)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise RecordRangeError(shown, start, end, count, f"{name} must be an int")
        if start < 0 or end < start or end > count:
            detail = "start is negative" if start < 0 else (
                "end is before start" if end < start else "end is past the last record"
            )
            raise RecordRangeError(shown, start, end, count, detail)
        if start == end:
            return iter(())
        piece = Piece(number) if (start, end) == (0, count) else Piece(number, start, end)
        return self._read([piece], interleave=False)

    def tasks(self, records_per_task: int) -> list[Task]:
        """ElasticDL-style tasks covering every record of every file once.

        Each task is ``(path, start, end)`` (a :class:`~recprep.read.ranks.Task`), ``end``
        exclusive, for :meth:`read_range`: the files in order, each cut into runs of
        ``records_per_task`` records (the last one of a file may be shorter). Counts come
        from manifests or chunk headers; nothing is decoded. Tasks are for a master that
        hands them out, so they cover all files whatever this reader's rank; with
        ``shuffle=True`` their order is shuffled for the current :attr:`epoch`.
        """
        counts = [self._sources.count(n) for n in range(len(self._sources.files))]
        tasks = make_tasks(self.paths, counts, records_per_task)
        if self.shuffle:
            rng(self.seed, self.epoch, _TASKS_STREAM).shuffle(tasks)
        return tasks

    # -- random access ----------------------------------------------------------------------

    def dataset(self, *, cache_chunks: int = 64) -> MapDataset:
        """A map-style view: ``len()`` and instance ``[i]``, ``[i:j]`` or
        ``[array_of_indexes]`` of the global order (the sets in order, each as an
        unshuffled pass reads it: the order ``convert`` was fed), through the chunk index
        and an LRU of ``cache_chunks`` chunks (their records decoded when first asked for,
        and kept). A ``torch.utils.data.Dataset`` for any sampler and a Grain
        ``RandomAccessDataSource``; see :mod:`recprep.read.dataset`.

        >>> from recprep import convert, RecordIO
        >>> _ = convert("memory://doc/random", list(range(10)), 3, "r")
        >>> ds = RecordIO("memory://doc/random/r-*").dataset()
        >>> len(ds), ds[7], ds[[9, 0]], ds[::4]
        (10, 7, [9, 0], [0, 4, 8])
        """
        from .dataset import MapDataset

        return MapDataset(self, cache_chunks=cache_chunks)
