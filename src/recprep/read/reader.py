"""``RecordIO``: a reader creator over shard sets, for training loops.

``RecordIO(pattern)`` resolves its files once; every call returns a fresh iterator over
the instances. Without shuffling, the shards of a set are read round-robin, which gives
back exactly the order ``convert`` was fed. The reader is a face: what it does lives in
modules of their own —

* :mod:`recprep.read.options` — how files become instances (:class:`ReadOptions`);
* :mod:`recprep.read.passes` — which records a pass reads, in which order (plans made
  from record counts, no I/O);
* :mod:`recprep.read.streams` — the stack a pass's records go through, drawn once;
* :mod:`recprep.read.sources` — the files, their record counts, chunk indexes and chunks;
* :mod:`recprep.read.checkpoint` — the epochs of its passes and their states;
* :mod:`recprep.read.dataset` — random access; :mod:`recprep.read.arrowout` — Arrow out.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .._core.arguments import checked
from .._core.batching import BatchFormat, check_batch_size
from .._core.names import CodecName, CompressorName, FormatName, OnCorrupt, SplitMode
from ..codecs import Codec
from ..containers import DEFAULT_MAX_CHUNK_BYTES
from ..errors import InvalidArgumentError
from ..storage.fetch import FetchOptions
from ..storage.manifest import Manifest
from .arrowout import ArrowOut, as_format
from .cache import ShardCache
from .checkpoint import Fingerprint, PassState, check_split, checked_for, combine
from .decoding import SetCodecs
from .opening import Skipped, open_sources
from .options import ReadOptions
from .passes import (
    DEFAULT_SHUFFLE_BUFFER,
    TASKS_STREAM,
    Share,
    layout,
    ranged,
    share_size,
    shuffled,
    unshuffled,
)
from .ranks import SPLIT_MODES, Blocks, Piece, Task, check_part, make_tasks
from .readstats import ReadCounter, StatsOut
from .shuffling import check_buffer, check_seed, fresh_seed, rng
from .streams import Reading, batches, blocks, instances

if TYPE_CHECKING:
    from .dataset import MapDataset

__all__ = ["DEFAULT_SHUFFLE_BUFFER", "RecordIO"]


class RecordIO(ArrowOut, StatsOut):
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
    storage_options, fetch
        Passed to fsspec; how object stores are streamed (:class:`~recprep.FetchOptions`).
    max_chunk_bytes
        The most one chunk may claim or decompress to (256 MiB); larger is reported as
        damage. Raise it for files with unusually large chunks.
    format, compressor
        Force a container format (else the manifest's, or detected from the bytes); with
        it, a whole-file compression (TFRecord's ``"gzip"``/``"zlib"``).
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
        ``r`` of the epoch order (the ranks within one instance of each other).
    num_threads
        Background threads that read, check, decompress and decode chunks ahead of the
        loop, so that remote storage and decoding don't stall it (memory: about
        ``2 * num_threads`` MiB of instances ahead, plus a chunk per shard of a set read
        round-robin). The order is the same as with ``0`` (no threads, the default).
    split
        For unshuffled passes: ``"auto"`` (by file when there are enough files, else by
        record range), ``"shard"`` (always whole files) or ``"range"`` (always record
        ranges: every rank gets the same number of instances, to within one).
    cache_dir, cache_bytes
        Keep local copies of the shards of committed remote sets in the directory
        ``cache_dir`` (at most ``cache_bytes`` bytes, least recently used removed first),
        each checked against its manifest's size and CRC-32C, so that later epochs read
        locally (see :mod:`recprep.read.cache`). Local sets and files without a manifest entry
        are read where they are. Default: no cache.
    stall_warning
        Warn (:class:`~recprep.errors.DataStallWarning`, with a hint) when the consumer
        waited for data more than this share of a pass (0.5: most of it). Default: none.

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
        fetch: FetchOptions | None = None,
        stall_warning: float | None = None,
    ) -> None:
        self.options = ReadOptions.checked(
            codec=codec, allow_pickle=allow_pickle, max_chunk_bytes=max_chunk_bytes,
            on_corrupt=on_corrupt, format=format, compressor=compressor,
            cache_dir=cache_dir, cache_bytes=cache_bytes, num_threads=num_threads,
            fetch=fetch)
        if split not in SPLIT_MODES:
            raise InvalidArgumentError(f"split must be one of {list(SPLIT_MODES)}, got {split!r}")
        check_part(rank, world_size)
        self.share = Share(bool(shuffle), fresh_seed() if seed is None else check_seed(seed),
                           check_buffer(shuffle_buffer), rank, world_size, split=split)
        self.skipped = Skipped()
        self._sources = open_sources(pattern, storage_options, self.options,
                                     self.skipped.add)
        self._codecs = SetCodecs(self._sources.manifests, self._sources.shard_sets,
                                 self.options.codec)
        self._passes = PassState()
        self._blocks: Blocks | None = None
        self._counter = ReadCounter(stall_warning)  # shared by copies (_with)

    def __repr__(self) -> str:
        sets = [self._sources.describe_set(k) for k in range(len(self.shard_sets))]
        share, options = self.share, self.options
        shown = [f"rank={share.rank}/{share.world_size}"] if share.world_size > 1 else []
        shown += [f"shuffle(seed={share.seed})"] if share.shuffle else []
        shown += [f"codec={options.codec.name!r}"] if options.codec is not None else []
        if options.on_corrupt != "raise":
            shown.append(f"on_corrupt={options.on_corrupt!r}")
        listed = "; ".join(sets[:5]) + (f"; ... ({len(sets)} sets)" if len(sets) > 5 else "")
        return f"RecordIO({listed}{''.join(', ' + o for o in shown)})"

    # -- what is read ---------------------------------------------------------------------

    shuffle = property(lambda self: self.share.shuffle, doc="Whether passes are shuffled.")
    seed = property(lambda self: self.share.seed, doc="The shuffle's seed.")
    rank = property(lambda self: self.share.rank, doc="This reader's rank.")
    world_size = property(lambda self: self.share.world_size, doc="The ranks in all.")
    shuffle_buffer = property(lambda self: self.share.shuffle_buffer)
    split = property(lambda self: self.share.split)
    on_corrupt = property(lambda self: self.options.on_corrupt)
    allow_pickle = property(lambda self: self.options.allow_pickle)
    max_chunk_bytes = property(lambda self: self.options.max_chunk_bytes)
    num_threads = property(lambda self: self.options.num_threads)

    fs = property(lambda self: self._sources.fs, doc="The fsspec filesystem of the files.")
    shard_sets = property(lambda self: self._sources.shard_sets, doc="What the pattern "
                          "resolved to: the shard sets (and lone files), in order.")

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

    epoch = property(lambda self: self._passes.epoch, doc="The epoch the next pass "
                     "shuffles for: the one :meth:`set_epoch` set, else the passes made.")

    def set_epoch(self, epoch: int) -> None:
        """Shuffle every following pass for ``epoch`` (same seed and epoch, same order);
        call it at the start of every epoch, on every rank, as with PyTorch's
        ``DistributedSampler``. Until it is called, pass ``n`` uses epoch ``n``."""
        self._passes.set_epoch(epoch)

    def codec_for(self, index: int) -> Codec:
        """The codec used for shard set ``index``: the one passed to the reader, else the
        one the set's manifest names (with the schema it records), else ``"recprep"``
        (see :class:`~recprep.read.decoding.SetCodecs`)."""
        return self._codecs.codec(index)

    def written_with(self, index: int) -> str | None:
        """The codec the manifest of shard set ``index`` names (None without one)."""
        return self._codecs.written_with(index)

    def for_rank(self, rank: int, world_size: int) -> RecordIO:
        """A copy of this reader that reads the share of ``rank`` of ``world_size``."""
        check_part(rank, world_size)
        return self._with(rank=rank, world_size=world_size)

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
        return self._with(worker=worker_id, num_workers=num_workers, align=align)

    def _with(self, **share: Any) -> RecordIO:
        """A copy reading another share: the same files, its own passes."""
        other = copy.copy(self)
        other.share = replace(self.share, **share)
        other._passes = copy.copy(self._passes)
        return other

    # -- passes -----------------------------------------------------------------------------

    def __call__(self) -> Iterator[Any]:
        """A fresh pass over this reader's instances (this rank's and worker's share).

        After :meth:`load_state_dict`, the first pass of the state's epoch continues the
        interrupted one instead."""
        progress = self._passes.start(self._check_split)
        return instances(self._pass(progress.epoch, progress.base, progress.counted),
                         progress, self._watch())

    __iter__ = __call__

    @checked
    def batches(self, batch_size: int, *, drop_last: bool = False,
                format: BatchFormat = "numpy", schema: Any = None) -> Iterator[Any]:
        """A fresh pass, as :meth:`__call__` gives it, in batches of ``batch_size``.

        Every option of the reader holds (shuffle, epoch, rank, worker, split, threads,
        ``on_corrupt``): the instances of ``read()`` in its order, cut into runs of
        ``batch_size`` (the last one shorter, or left out with ``drop_last``), each made
        columns by :func:`recprep.batching.collate` (tuples of columns for tuples, dicts
        for dicts; numbers and equal-shape arrays stacked, ``str``/``bytes`` an object
        array, other columns a list; :func:`~recprep.batching.unbatch` undoes it), copied
        once out of the chunks decoded whole (:mod:`recprep.read.blocks`). With
        ``format="arrow"``, each batch is a ``pyarrow.RecordBatch``, all of one schema
        (``schema``, else the first batch's); ``"pandas"``, a ``pandas.DataFrame`` of it
        (see :mod:`recprep.read.arrowout`).

        >>> from recprep import convert, RecordIO
        >>> _ = convert("memory://doc/batches", [(i, f"w{i}") for i in range(5)], 2, "b")
        >>> [(ids.tolist(), words.tolist()) for ids, words in
        ...  RecordIO("memory://doc/batches/b-*").batches(2)]
        [([0, 1], ['w0', 'w1']), ([2, 3], ['w2', 'w3']), ([4], ['w4'])]
        """
        made = as_format(format, schema)
        return made(self._batch_trees(batch_size, drop_last, arrow=format != "numpy"))

    def _batch_trees(self, batch_size: int, drop_last: bool = False, arrow: bool = False
                     ) -> Iterator[Any]:
        size = check_batch_size(batch_size)
        progress = self._passes.start(self._check_split)
        runs = self._pass(progress.epoch, progress.base, progress.counted,
                          columnar="arrow" if arrow else True)
        return batches(runs, size, drop_last, progress, self._watch(), arrow)

    def __len__(self) -> int:
        """How many instances a pass yields — this rank's (and worker's) share — from
        manifests or chunk headers, without decoding."""
        sources = self._sources
        blocks_ = self._layout() if self.share.shuffle else None
        return share_size(len(sources.files), sources.count, self.share, blocks_)

    def _pass(self, epoch: int, base: list[tuple[int, int]], skip: int,
              columnar: bool | str = False) -> Iterator[Any]:
        """The pass's instances as blocks (see :mod:`recprep.read.streams`)."""
        sources = self._sources
        if self.share.shuffle:
            plan = shuffled(self._layout(), self.share, epoch, base, skip)
        else:
            plan = unshuffled(len(sources.files), sources.set_of, sources.count, self.share,
                              skip)
        return blocks(plan, self._reading(), columnar)

    def _read(self, pieces: Sequence[Piece], *, interleave: bool, skip: int = 0
              ) -> Iterator[Any]:
        """The instances of ``pieces`` (outside any pass: not counted here)."""
        plan = ranged(pieces, self._sources.set_of, self._sources.count,
                      interleave=interleave, skip=skip)
        return instances(blocks(plan, self._reading()), PassState().start(lambda s: None),
                         self._watch())

    def _reading(self) -> Reading:
        return Reading(self._sources, self._codecs.codec, self._codecs.written_with,
                       self.options, self._counter)

    def _layout(self) -> Blocks:
        """The files cut into the blocks of a shuffled pass (from record counts; once)."""
        if self._blocks is None:
            counts = self._sources.all_counts(later_up_to=self.share.block_size)  # a file
            self._blocks = layout(counts, self.share)  # of a block: checked as it is opened
        return self._blocks

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
        any ``world_size`` resumes from. An example: :mod:`recprep.read.checkpoint`.
        """
        return self._passes.state_dict(self._fingerprint())

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Make the next pass continue the one ``state`` (from :meth:`state_dict` or
        :meth:`combine_states`) describes.

        The reader takes the state's seed and epoch; it must read the same files with
        the same ``shuffle`` and ``shuffle_buffer``. A state of one rank loads into the
        same ``rank``/``world_size`` (and worker); a combined state into any. Nothing is
        read here, and the next pass decodes nothing the interrupted one had consumed.
        Every field is checked (a checkpoint is untrusted input): its type and range, the
        set, the shuffle, the split, and that ``yielded`` is at most this reader's share.
        A state that fails (:class:`~recprep.errors.InvalidArgumentError`, naming the
        field, what was expected and what was found) leaves the reader as it was.
        """
        state = self._checked_state(state)
        self.share = replace(self.share, seed=state["seed"])
        self._passes.load(state)

    def _checked_state(self, state: Any) -> dict[str, Any]:  # normalised; nothing changes
        return checked_for(state, self._fingerprint(), self.__len__)

    def _check_split(self, state: Mapping[str, Any]) -> None:
        check_split(state, self.share)

    def _fingerprint(self) -> Fingerprint:
        return Fingerprint(self.share, int(self._layout().records.sum()),
                           len(self._sources.files))

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

    # -- ranges, tasks, random access -------------------------------------------------------

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
        piece = self._sources.range_piece(path, start, end)
        return iter(()) if piece is None else self._read([piece], interleave=False)

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
            rng(self.seed, self.epoch, TASKS_STREAM).shuffle(tasks)
        return tasks

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
