"""A reader's files without an object per file: the table of :class:`SourceFile` values
and the record counts of :class:`~recprep.read.sources.Sources`.

The reader numbers a set's files without objects of its own: :class:`FileTable` makes a
file's :class:`SourceFile` when it is asked for, from the set's paths (of a whole set, a
rule: :func:`compact_paths`) and an array of where each set starts, and :class:`Counts`
keeps the record counts in one ``int64`` array (copied from the manifest's table:
:func:`listed_counts`). What a reader holds per shard, and what it pickles for each
spawned DataLoader worker, is then some 17 bytes in arrays, not a dozen Python objects
(``benchmarks/RESULTS-memory.md``).

Example
-------
>>> from recprep.storage.discovery import ShardSet
>>> sets = [ShardSet("/d", "a", ["/d/a-0", "/d/a-1"]), ShardSet("/d", None, ["/d/x"])]
>>> table = FileTable(lambda path: "file://" + path, sets)
>>> len(table), table[2]
(3, SourceFile(set_index=1, path='/d/x', shown='file:///d/x'))
>>> [f.path for f in table[:2]], table.number("file:///d/a-1"), table.number("/d/x")
(['/d/a-0', '/d/a-1'], 1, 2)
>>> counts = Counts(3)
>>> counts[1] = 7
>>> counts.get(1), counts.get(0), 1 in counts
(7, None, True)
>>> checked = Marks(3)
>>> checked.add(2)
>>> 2 in checked, 0 in checked
(True, False)
"""

from __future__ import annotations

import bisect
import itertools
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np

from ..storage.discovery import ShardSet
from ..storage.manifest import Manifest, ShardInfo
from ..storage.shardtable import SetPaths, ShardTable, shard_finder

__all__ = ["CountArray", "Counts", "FileTable", "Marks", "SourceFile", "checked_counts",
           "compact_paths", "listed_counts", "number_files"]


@dataclass(frozen=True)
class SourceFile:
    """One file of a reader: its shard set, its path, and the path as users write it."""

    set_index: int
    path: str  # as the filesystem knows it
    shown: str  # as the user writes it (a URL for remote storage)


class FileTable(Sequence[SourceFile]):
    """The files of ``shard_sets`` in reading order (set after set, each set's paths in
    order), as a sequence of :class:`SourceFile` made on demand; ``shown`` turns a
    filesystem path into the one users write. The sets' ``paths`` lists are read, not
    copied: a set listed again (its ``paths`` replaced in place) before the table is
    made is numbered as it is then."""

    def __init__(self, shown: Callable[[str], str], shard_sets: Sequence[ShardSet]) -> None:
        self._shown = shown
        self._sets = list(shard_sets)
        #: where each set's files start, and after the last one, the number of files
        self._starts = list(itertools.accumulate((len(s.paths) for s in self._sets),
                                                 initial=0))
        self._numbers: dict[str, int] | None = None  # made on the first number()

    def __len__(self) -> int:
        return self._starts[-1]

    @overload
    def __getitem__(self, number: int) -> SourceFile: ...

    @overload
    def __getitem__(self, number: slice) -> list[SourceFile]: ...

    def __getitem__(self, number: int | slice) -> SourceFile | list[SourceFile]:
        if isinstance(number, slice):
            return [self[n] for n in range(*number.indices(len(self)))]
        total = len(self)
        if not -total <= number < total:
            raise IndexError(f"file {number} of a reader of {total} files")
        number %= total
        set_index = self.set_of(number)
        path = self._sets[set_index].paths[number - self._starts[set_index]]
        return SourceFile(set_index, path, self._shown(path))

    def __iter__(self) -> Iterator[SourceFile]:
        for set_index, shard_set in enumerate(self._sets):
            for path in shard_set.paths:
                yield SourceFile(set_index, path, self._shown(path))

    def set_of(self, number: int) -> int:
        """The shard set of file ``number``."""
        return 0 if len(self._sets) == 1 else bisect.bisect_right(self._starts, number) - 1

    def span(self, set_index: int) -> tuple[int, int]:
        """The file numbers of set ``set_index``: ``first``, and one past its last."""
        return self._starts[set_index], self._starts[set_index + 1]

    def set_indexes(self) -> np.ndarray:
        """Each file's shard set, by file number (one array)."""
        return np.repeat(np.arange(len(self._sets)), np.diff(self._starts))

    def number(self, path: str) -> int | None:
        """The number of the file at ``path`` (as users write it, or the filesystem's
        path), or None. The first call makes the lookup (it is for ``tasks()`` and
        ranges by path, not for reading)."""
        if self._numbers is None:
            numbers: dict[str, int] = {}
            for n, file in enumerate(self):
                numbers[file.shown] = numbers[file.path] = n
            self._numbers = numbers
        return self._numbers.get(path)

    def __getstate__(self) -> dict[str, object]:
        return {**self.__dict__, "_numbers": None}  # made again where it is needed


class Counts:
    """Record counts by file number, known or not: a dict's ``get``, ``in``, item
    assignment and deletion, over one ``int64`` array (-1: not known)."""

    def __init__(self, n: int) -> None:
        self._counts = np.full(n, -1, dtype=np.int64)

    def get(self, number: int) -> int | None:
        count = int(self._counts[number])
        return None if count < 0 else count

    def __contains__(self, number: int) -> bool:
        return bool(self._counts[number] >= 0)

    def __setitem__(self, number: int, count: int) -> None:
        self._counts[number] = count

    def __delitem__(self, number: int) -> None:
        self._counts[number] = -1


class Marks:
    """A set of file numbers (``in``, ``add``) as one boolean array: what a reader has
    checked of its files travels to its workers as a byte per file, not an int each."""

    def __init__(self, n: int) -> None:
        self._marked = np.zeros(n, dtype=bool)

    def __contains__(self, number: int) -> bool:
        return bool(self._marked[number])

    def add(self, number: int) -> None:
        self._marked[number] = True


#: a reader's record counts, by file number
CountArray = np.ndarray


def checked_counts(counts: Counts, checked: Marks, table: FileTable,
                   manifests: Sequence[Manifest | None], count: Callable[[int], int],
                   local: bool, later_up_to: int = 0) -> CountArray:
    """Every file's record count, as ``count(number)`` gives it (a manifest's count
    checked against what the file's size can hold), in one array.

    A manifest's count of 1 to ``later_up_to`` records is left to be checked when the
    file is opened (:meth:`~recprep.read.committed.CommittedSets.open` checks its size
    against the manifest's, which was checked to hold the count when the manifest was
    read): what is sized by it — a shuffled pass's layout, one block a file — is sized
    the same whatever such a count says. With ``local`` files, the other manifest counts
    not checked yet are checked together: a ``stat`` each (no filesystem layer per file)
    and one comparison for all, marked in ``checked``; a file that fails (or can't be
    ``stat``-ed) goes through ``count`` like every other file, which raises or reports
    what is wrong with it as it always does.

    >>> from recprep.storage.discovery import ShardSet
    >>> table = FileTable(str, [ShardSet("/d", None, ["/d/a", "/d/b"])])
    >>> counts, checked = Counts(2), Marks(2)
    >>> checked_counts(counts, checked, table, [None], lambda n: 3 + n, local=True).tolist()
    [3, 4]
    """
    known, marked = counts._counts, checked._marked
    later = (known > 0) & (known <= later_up_to)
    if local:
        for set_index, manifest in enumerate(manifests):
            if manifest is not None:
                _check_sizes(counts, checked, table, set_index, manifest, later)
    out = known.copy()
    for number in np.flatnonzero(((known < 0) | ~marked) & ~later).tolist():
        out[number] = count(number)  # counted, or checked, one by one
    return out


def _check_sizes(counts: Counts, checked: Marks, table: FileTable, set_index: int,
                 manifest: Manifest, later: np.ndarray) -> None:
    """Mark the files of set ``set_index`` whose manifest count their size can hold
    (not those checked ``later``)."""
    first, end = table.span(set_index)
    claimed = counts._counts[first:end]
    todo = np.flatnonzero((claimed >= 0) & ~checked._marked[first:end] & ~later[first:end])
    if not todo.size:
        return
    paths = table._sets[set_index].paths
    sizes = np.fromiter((_local_size(paths[k]) for k in todo.tolist()), np.int64, len(todo))
    claimed = claimed[todo]
    most = manifest.max_records(sizes)  # type: ignore[arg-type]
    holds = (sizes >= 0) & (claimed <= most) & ((claimed > 0) | (sizes == 0))
    checked._marked[first + todo[holds]] = True


def _local_size(path: str) -> int:
    """The size of the local file ``path`` (-1: it can't be ``stat``-ed here)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return -1


def compact_paths(shard_set: ShardSet) -> Sequence[str]:
    """``shard_set``'s paths, as :class:`~recprep.storage.shardtable.SetPaths` (made on
    demand) when they are every shard of its prefix in its directory, in order (a whole
    set's listing); else as they are.

    >>> compact_paths(ShardSet("/d", "p", ["/d/p-00000-of-00001", "/d/p-00001-of-00001"]))
    SetPaths('/d', 'p', 2)
    >>> compact_paths(ShardSet("/d", "p", ["/d/p-00001-of-00001"]))
    ['/d/p-00001-of-00001']
    """
    paths = shard_set.paths
    if shard_set.prefix is None or isinstance(paths, SetPaths):
        return paths
    return SetPaths.matching(shard_set.directory, shard_set.prefix, paths) or paths


def listed_counts(counts: Counts, span: tuple[int, int], paths: Sequence[str],
                  shards: Sequence[ShardInfo]) -> None:
    """Note in ``counts`` the record counts a set's manifest entries ``shards`` give its
    files ``paths`` (numbered from ``span[0]``): one array copy when the paths are the
    table's shards, else a lookup by name each.

    >>> table = ShardTable.of("p", [ShardInfo("p-00000-of-00001", 3, 60, 7),
    ...                             ShardInfo("p-00001-of-00001", 2, 40, 8)])
    >>> counts = Counts(3)
    >>> listed_counts(counts, (1, 3), SetPaths("/d", "p", 2), table)
    >>> [counts.get(n) for n in range(3)]
    [None, 3, 2]
    >>> listed_counts(counts, (0, 1), ["/d/p-00001-of-00001"], table); counts.get(0)
    2
    """
    first, end = span
    if isinstance(shards, ShardTable) and isinstance(paths, SetPaths) and (
            len(paths) == len(shards) and paths.name(0) == shards.name(0)):
        counts._counts[first:end] = shards.records
        return
    find = shard_finder(shards)
    held: Sequence[int] = shards.records.tolist() if isinstance(shards, ShardTable) else [
        s.records for s in shards]
    for number, path in enumerate(paths, first):
        index = find(path.rsplit("/", 1)[-1])
        if index is not None:
            counts[number] = int(held[index])


def number_files(shown: Callable[[str], str], shard_sets: Sequence[ShardSet],
                 manifests: Sequence[Manifest | None]) -> tuple[FileTable, Counts]:
    """A reader's files (each whole set's paths made a rule first: :func:`compact_paths`)
    and the record counts their sets' manifests give them."""
    for shard_set in shard_sets:
        shard_set.paths = compact_paths(shard_set)
    table = FileTable(shown, shard_sets)
    counts = Counts(len(table))
    for set_index, manifest in enumerate(manifests):
        if manifest is not None:
            listed_counts(counts, table.span(set_index), shard_sets[set_index].paths,
                          manifest.shards)
    return table, counts
