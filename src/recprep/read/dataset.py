"""Random access: a map-style view of a reader's instances, in the order ``convert`` saw them.

:class:`MapDataset` (``RecordIO(...).dataset()``) has a ``len()`` and gives instance
``i`` — or a slice, or an array of indexes — of the *global order*: the shard sets of the
reader one after the other, and within a set the order an unshuffled ``read()`` gives,
its shards round-robin (instance ``i`` of a set written by ``convert`` lives in shard
``i % N`` at position ``i // N``; a lone file is a set of one). An index becomes a file
and a record number from record counts (manifests or chunk headers, nothing decoded);
the file's chunk index leads to the one chunk that holds it, which is read once and kept
in a small LRU of chunks; each of its records is decoded the first time it is asked for
and kept with it (decoding a whole chunk for one record made a miss five times slower).
One index whose chunk is cached is found with Python arithmetic alone (bisections over
lists, no numpy call: a few microseconds). Asking for many indexes at once reads each
chunk they need once, decodes what they need of all the chunks in one call, and gives
the instances in the order asked. A chunk that isn't cached is read from its shard, kept
open after the first lookup in it when it is a local RecordIO file and trusted only
while its path and its set's manifest are unchanged (:mod:`~recprep.read.heldfiles`);
with ``cache_chunks=0`` a lookup decompresses and cuts its chunk only as far as its
record.

It is a ``torch.utils.data.Dataset`` for any sampler (``__getitems__`` fetches a
DataLoader batch at once) and a Grain ``RandomAccessDataSource`` (``__len__``,
``__getitem__``). It pickles without open files or cached chunks, so each DataLoader
worker has its own cache.

Example
-------
>>> from recprep import convert, RecordIO
>>> _ = convert("memory://doc/dataset", [(i, str(i)) for i in range(7)], 3, "d")
>>> ds = RecordIO("memory://doc/dataset/d-*").dataset()
>>> len(ds), ds[4], ds[-1]
(7, (4, '4'), (6, '6'))
>>> ds[1:3], ds[[5, 0, 5]]
([(1, '1'), (2, '2')], [(5, '5'), (0, '0'), (5, '5')])
>>> try:
...     ds[7]
... except IndexError as err:  # an InstanceIndexError
...     print(err)
memory:///doc/dataset/d-*: no instance 7: the dataset holds 7 instances, so ask for -7 <= index < 7
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections import OrderedDict, deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from ..containers import Gap, Records
from ..errors import (
    InstanceIndexError,
    InvalidArgumentError,
    RecordsLostError,
)
from .heldfiles import ColdReads
from .mapchunks import DecodedChunk, decode_together
from .ranks import Piece

if TYPE_CHECKING:
    from .reader import RecordIO

__all__ = [
    "DEFAULT_CACHE_CHUNKS",
    "CacheInfo",
    "InstanceIndexError",
    "MapDataset",
    "RecordsLostError",
]

_PENDING = attrgetter("pending")

#: decoded chunks a :class:`MapDataset` keeps by default (a chunk is about 1 MiB of
#: records as ``convert`` writes them)
DEFAULT_CACHE_CHUNKS = 64


@dataclass(frozen=True)
class CacheInfo:
    """What the chunk cache did: ``hits`` and ``misses`` (chunks read and decoded),
    ``size`` and ``max_size`` (in chunks)."""

    hits: int
    misses: int
    size: int
    max_size: int


class _RoundRobin:
    """Where instance ``l`` of a set read round-robin lives: ``(shard, position)``.

    Rounds in which the same shards still hold records form a *segment*; a balanced set
    (``convert``'s) has at most two, whatever its number of shards."""

    def __init__(self, counts: np.ndarray) -> None:
        levels = np.unique(counts[counts > 0])
        self.rounds = np.concatenate([[0], levels[:-1]]).astype(np.int64)  # first round
        self.active = [np.flatnonzero(counts >= level) for level in levels]
        sizes = (levels - self.rounds) * np.array([len(a) for a in self.active], np.int64)
        self.ends = np.cumsum(sizes, dtype=np.int64)
        # the same as Python lists, for one index at a time (no numpy call per lookup)
        self._lists = (self.ends.tolist(), self.rounds.tolist(),
                       [a.tolist() for a in self.active])

    def locate_one(self, local: int) -> tuple[int, int]:
        """:meth:`locate` of one index."""
        ends, rounds, active = self._lists
        m = bisect_right(ends, local)
        offset = local - (ends[m - 1] if m else 0)
        shards = active[m]
        return shards[offset % len(shards)], rounds[m] + offset // len(shards)

    def locate(self, local: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if len(self.active) == 1:  # one segment (all shards as long): no grouping
            width = len(self.active[0])
            return self.active[0][local % width], local // width
        shard = np.empty_like(local)
        position = np.empty_like(local)
        segment = np.searchsorted(self.ends, local, side="right")
        for m in np.unique(segment).tolist():
            at = segment == m
            offset = local[at] - (self.ends[m - 1] if m else 0)
            width = len(self.active[m])
            shard[at] = self.active[m][offset % width]
            position[at] = self.rounds[m] + offset // width
        return shard, position


class _ChunkTable:
    """The chunks of files whose first record numbers are known (``firsts``: per file
    number, its chunks' first records and its record count), in one sorted array: the
    chunk of many ``(file, record)`` pairs found with one ``searchsorted``, not one per
    file. Records are numbered across the files here, each file after the one before."""

    def __init__(self, firsts: dict[int, list[int]], num_files: int) -> None:
        numbers = sorted(n for n, f in firsts.items() if len(f) > 1)
        self.files = len(firsts)
        self.offset = np.full(num_files, -1, np.int64)  # -1: not in the table
        self.first = np.zeros(num_files, np.int64)  # per file: its first record held
        self.end = np.zeros(num_files, np.int64)  # and its record count
        starts, ks, at = [], [], 0
        for n in numbers:
            f = np.array(firsts[n], np.int64)
            self.offset[n], self.first[n], self.end[n] = at - f[0], f[0], f[-1]
            starts.append(f[:-1] + at - f[0])
            ks.append(np.arange(len(f) - 1, dtype=np.int64))
            at += int(f[-1] - f[0])
        self.starts = np.concatenate(starts) if starts else np.zeros(0, np.int64)
        self.chunk = np.concatenate(ks) if ks else np.zeros(0, np.int64)

    def find(self, file: np.ndarray, position: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray] | None:
        """``(chunk, place in it)`` of each record, or None when a file isn't in the
        table or a record isn't among those its chunks hold."""
        if not self.files:
            return None
        offset = self.offset[file]
        if (offset < 0).any() or (position < self.first[file]).any() or (
                position >= self.end[file]).any():
            return None
        number = offset + position
        c = np.searchsorted(self.starts, number, side="right") - 1
        return self.chunk[c], number - self.starts[c]


class MapDataset:
    """Instances of a :class:`~recprep.RecordIO` by index, in the global order.

    Made by :meth:`recprep.RecordIO.dataset`; see the module docs. ``ds[i]`` is an
    instance (negative ``i`` counts from the end); ``ds[i:j]`` (any step) and
    ``ds[array_of_indexes]`` are lists of instances in the order asked. The reader's
    ``codec``, ``allow_pickle``, ``format`` and ``max_chunk_bytes`` hold; its shuffle,
    rank and worker do not (a sampler chooses the indexes). Damage raises
    :class:`~recprep.errors.CorruptDataError`; with ``on_corrupt="skip"`` only an
    instance lost to it does (:class:`~recprep.errors.RecordsLostError`), and every other
    instance keeps its index.

    Instances of a cached chunk are handed out again as they are: copy one before
    changing it in place.
    """

    def __init__(self, reader: RecordIO, *, cache_chunks: int = DEFAULT_CACHE_CHUNKS) -> None:
        if not isinstance(cache_chunks, int) or isinstance(cache_chunks, bool) or (
            cache_chunks < 0
        ):
            raise InvalidArgumentError(
                f"cache_chunks must be an int >= 0 (decoded chunks kept), got {cache_chunks!r}"
            )
        self.reader = reader
        self.cache_chunks = cache_chunks
        sources = reader._sources
        self._files: list[np.ndarray] = []  # per set: its file numbers
        self._sets: list[_RoundRobin] = []
        totals = []
        for set_index in range(len(sources.shard_sets)):
            numbers = [n for n, f in enumerate(sources.files) if f.set_index == set_index]
            # files read round-robin: each file's count places the others' instances, so
            # a count nothing vouches for (no manifest) is proven first, by reading
            count = sources.count if len(numbers) == 1 else sources.proven_count
            counts = np.array([count(n) for n in numbers], dtype=np.int64)
            self._files.append(np.array(numbers, dtype=np.int64))
            self._sets.append(_RoundRobin(counts))
            totals.append(int(counts.sum()))
        self._ends = np.cumsum(np.array(totals, dtype=np.int64))
        self._len = int(self._ends[-1]) if len(self._ends) else 0
        self._lists = (self._ends.tolist(), [f.tolist() for f in self._files])
        self._fresh()

    def _fresh(self) -> None:
        self._cache: OrderedDict[tuple[int, int], DecodedChunk] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = self._misses = 0
        self._firsts: dict[int, list[int]] = {}  # per file: its chunks' first records
        self._lossy = False  # whether a chunk read so far lost records to damage
        self._cold = ColdReads(self.reader)  # chunks read from shards held open
        self._table = _ChunkTable({}, 0)  # the chunks of the files in _firsts, at once

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for key in ("_cache", "_lock", "_hits", "_misses", "_firsts", "_cold", "_table", "_lossy"):
            del state[key]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._fresh()

    def __repr__(self) -> str:
        return f"MapDataset({self._len} instances of {self.reader!r})"

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[Any]:
        for start in range(0, self._len, 4096):
            yield from self._fetch(np.arange(start, min(start + 4096, self._len)))

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            return self._fetch(np.arange(self._len, dtype=np.int64)[key])
        if isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)):
            return self._one(int(key))
        return self._fetch(self._indexes(key))

    def __getitems__(self, indexes: Sequence[int]) -> list[Any]:
        """The instances at ``indexes`` at once (what a torch DataLoader asks for)."""
        return self._fetch(self._indexes(indexes))

    def cache_info(self) -> CacheInfo:
        """Hits and misses of the chunk cache so far (in this process)."""
        return CacheInfo(self._hits, self._misses, len(self._cache), self.cache_chunks)

    @property
    def _where(self) -> str:
        sets = self.reader.shard_sets
        first = sets[0] if sets else None
        if first is None or first.prefix is None:
            return self.reader.paths[0] if self.reader.paths else "(no files)"
        from ..storage.fs import display

        shown = display(self.reader.fs, first.directory) + f"/{first.prefix}-*"
        return shown + (f" (and {len(sets) - 1} more sets)" if len(sets) > 1 else "")

    def _indexes(self, key: Any) -> np.ndarray:
        array = np.asarray(key)
        if array.dtype == np.bool_ or not (
            np.issubdtype(array.dtype, np.integer) or array.size == 0
        ) or array.ndim > 1:
            raise InstanceIndexError(
                self._where, key, self._len,
                f"an index must be an int, a slice or a 1-d array of ints, got {key!r:.80}",
            )
        return array.astype(np.int64).reshape(-1)

    def _one(self, index: int) -> Any:
        """Instance ``index``, found with Python arithmetic alone (a few microseconds
        when its chunk is cached; its chunk read otherwise); a bad index or a lost record
        goes through :meth:`_fetch`, which raises what they raise."""
        if 0 <= index < self._len or -self._len <= index < 0:
            index += self._len if index < 0 else 0
            ends, files = self._lists
            s = bisect_right(ends, index)
            shard, position = self._sets[s].locate_one(index - (ends[s - 1] if s else 0))
            number = files[s][shard]
            firsts = self._firsts.get(number)
            if firsts is None:
                firsts = self._firsts[number] = self.reader._sources.index(
                    number).firsts.tolist()
            if len(firsts) > 1 and firsts[0] <= position < firsts[-1]:  # else: lost
                k = bisect_right(firsts, position) - 1
                with self._lock:
                    entry = self._cache.get((number, k))
                    if entry is not None:
                        self._cache.move_to_end((number, k))
                        self._hits += 1
                if entry is None and not self.cache_chunks and number in self._cold:
                    value = self._cold.instance(number, k, position - firsts[k])
                    if value is not None:
                        with self._lock:
                            self._misses += 1
                        return value[0]
                if entry is None:
                    entry = self._chunks([(number, k)])[0]
                return entry.take([position - firsts[k]])[0]
        return self._fetch(np.array([index], dtype=np.int64))[0]

    def _fetch(self, indexes: np.ndarray) -> list[Any]:
        """The instances at ``indexes``: each chunk they need read once, and what is
        needed of it decoded in one call."""
        if not len(indexes):
            return []
        bad = (indexes < -self._len) | (indexes >= self._len)
        if bad.any():
            first = int(indexes[np.argmax(bad)])
            raise InstanceIndexError(self._where, first, self._len, f"no instance {first}")
        indexes = np.where(indexes < 0, indexes + self._len, indexes)
        file, position = self._locate(indexes)
        found = self._table.find(file, position)
        chunk, within = found if found is not None else self._chunk_of(file, position)
        # the indexes sorted by (file, record): grouped by chunk, each chunk's taken at
        # once, and an index asked twice next to itself (decoded once)
        order = ((file << 40) | position).argsort(kind="stable")
        ordered = (file << 32 | chunk)[order]
        change = ordered[1:] != ordered[:-1]
        cuts = (change.nonzero()[0] + 1).tolist()
        starts, stops = [0, *cuts], [*cuts, len(order)]
        keys = [(k >> 32, k & 0xFFFFFFFF) for k in ordered[starts].tolist()]
        group = self._chunks(keys)
        # the group (chunk) of each index, in the sorted order and in the asked order
        of_sorted = np.zeros(len(order), np.int64)
        change.cumsum(out=of_sorted[1:])
        places: list[int] | None = None
        if self._lossy and any(entry.lost is not None for entry in group):
            places = within[order].tolist()
            for entry, a, b in zip(group, starts, stops, strict=True):
                if entry.lost is not None:
                    entry.check_lost(places[a:b])
        if any(map(_PENDING, group)):  # some records not decoded yet
            places = within[order].tolist() if places is None else places
            per = list(map(group.__getitem__, of_sorted.tolist()))
            again = np.flatnonzero(np.diff(indexes[order]) == 0) + 1
            decode_together(per, places, group, set(again.tolist()))
        of_index = np.empty_like(order)
        of_index[order] = of_sorted
        lists = [entry.values for entry in group]
        return [lists[g][p] for g, p in zip(of_index.tolist(), within.tolist(), strict=True)]

    def _chunk_of(self, file: np.ndarray, position: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
        """The chunk holding record ``position`` of each ``file``, and the record's place
        in it, file by file (a record lost to damage raises); the files' chunks then go
        in the :class:`_ChunkTable` (rebuilt as their number doubles)."""
        sources = self.reader._sources
        chunk = np.empty_like(file)
        within = np.empty_like(file)
        for number in np.unique(file).tolist():
            at = file == number
            firsts = sources.index(number).firsts
            if position[at].max() >= firsts[-1]:  # with on_corrupt="skip": records lost
                raise RecordsLostError(
                    f"record {int(position[at].max())} of the file was asked for (the file "
                    f"is counted as holding {sources.count(number)}), its chunk index holds "
                    f"{int(firsts[-1])} records: the file is damaged or changed after it "
                    "was counted", path=sources.files[number].shown,
                )
            if len(firsts) < 2 or position[at].min() < firsts[0]:  # lost before chunk 0
                raise RecordsLostError(
                    f"record {int(position[at].min())} of the file was lost to damage "
                    "(skipped with on_corrupt='skip'): it can't be read",
                    path=sources.files[number].shown)
            chunk[at] = np.searchsorted(firsts, position[at], side="right") - 1
            within[at] = position[at] - firsts[chunk[at]]
            if number not in self._firsts:
                self._firsts[number] = firsts.tolist()
        known, table = len(self._firsts), self._table.files
        if known > table and (known >= 2 * table or known == len(sources.files)):
            self._table = _ChunkTable(self._firsts, len(self.reader._sources.files))
        return chunk, within

    def _locate(self, indexes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(file number, record number in the file)`` of global ``indexes``."""
        if len(self._sets) == 1:  # one set: no grouping
            shard, position = self._sets[0].locate(indexes)
            return self._files[0][shard], position
        which = np.searchsorted(self._ends, indexes, side="right")
        file = np.empty_like(indexes)
        position = np.empty_like(indexes)
        for s in np.unique(which).tolist():
            at = which == s
            local = indexes[at] - (self._ends[s - 1] if s else 0)
            shard, position[at] = self._sets[s].locate(local)
            file[at] = self._files[s][shard]
        return file, position

    def _chunks(self, keys: list[tuple[int, int]]) -> list[DecodedChunk]:
        """The chunks ``(file, chunk)`` of ``keys`` (each once), in that order: cached, or
        read (:meth:`_read`)."""
        with self._lock:
            cache = self._cache
            got = list(map(cache.get, keys))
            if None not in got:  # all cached (a warm batch): no loop in Python
                deque(map(cache.move_to_end, keys), maxlen=0)
                self._hits += len(keys)
                return got  # type: ignore[return-value]
            missing = [key for key, entry in zip(keys, got, strict=True) if entry is None]
            for key, entry in zip(keys, got, strict=True):
                if entry is not None:
                    cache.move_to_end(key)
            self._hits += len(keys) - len(missing)
            self._misses += len(missing)
        found = self._read(missing)
        if any(entry.lost is not None for entry in found.values()):
            self._lossy = True
        if not self.cache_chunks:
            for key in missing:
                found[key].listed = False
        if self.cache_chunks:
            with self._lock:
                for key in missing:
                    self._cache[key] = found[key]
                    self._cache.move_to_end(key)
                while len(self._cache) > self.cache_chunks:
                    self._cache.popitem(last=False)
        return [found[key] if entry is None else entry for key, entry in zip(keys, got,
                                                                                strict=True)]

    def _read(self, missing: list[tuple[int, int]]) -> dict[tuple[int, int], DecodedChunk]:
        """The chunks ``(file, chunk)`` of ``missing``, read: from a held file when it is
        unchanged and the chunk sound, else the careful way (then the file is held)."""
        found: dict[tuple[int, int], DecodedChunk] = {}
        slow: list[tuple[int, int]] = []
        for key in missing:
            entry = self._cold.chunk(*key) if key[0] in self._cold else None
            if entry is None:
                slow.append(key)
            else:
                found[key] = entry
        for number in sorted({f for f, _ in slow}):
            wanted = [k for f, k in slow if f == number]
            before = self._cold.before(number)
            found.update(((number, k), v) for k, v in self._load(number, wanted))
            if before is not None:
                self._cold.hold(number, *before)
        return found

    def _load(self, number: int, wanted: list[int]) -> Iterator[tuple[int, DecodedChunk]]:
        """Chunks ``wanted`` (sorted) of file ``number``: runs of neighbouring chunks read
        together; a file without a seekable index read once, from its start to the last
        chunk wanted."""
        sources = self.reader._sources
        index = sources.index(number)
        firsts = index.firsts
        source = sources.files[number]
        codec = self.reader.codec_for(source.set_index)
        runs: list[list[int]] = []
        for k in wanted:
            if runs and (k == runs[-1][-1] + 1 or not index.seekable):
                runs[-1].append(k)
            else:
                runs.append([k])
        for run in runs:
            keep = set(run)
            start, end = int(firsts[run[0]]), int(firsts[run[-1] + 1])
            records: Records | list[Any] = []
            k, offset, position = run[0], -1, start
            for item in sources.chunks(Piece(number, start, end)):
                # a lost record's place holds None (the walk places every chunk it yields)
                got = [None] * item.n if isinstance(item, Gap) else item[0].records
                at = 0
                while at < len(got) and k <= run[-1]:
                    take = min(len(got) - at, int(firsts[k + 1]) - position)
                    if k in keep:
                        if offset < 0 and not isinstance(item, Gap):
                            offset = item[0].offset
                        if not records and take == len(got) and isinstance(got, Records):
                            records = got  # the chunk whole: its records stay in its payload
                        else:
                            records = [*records, *got[at:at + take]]
                    at, position = at + take, position + take
                    if position == firsts[k + 1]:
                        if k in keep:
                            yield k, DecodedChunk(records, offset, source.shown, codec,
                                            self.reader.allow_pickle, int(firsts[k]),
                                            self.reader.written_with(source.set_index))
                        k, records, offset = k + 1, [], -1
            if position != end:
                raise RecordsLostError(
                    f"records {start}:{end} of the file were asked for (chunks {run[0]} to "
                    f"{run[-1]} of its index), only {position - start} were read: the "
                    "file changed after it was indexed, or is damaged",
                    path=source.shown,
                )
