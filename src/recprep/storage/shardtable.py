"""A set's shards held as a table, not an object per shard: what a manifest read from a
file holds (:meth:`~recprep.storage.manifest.Manifest.from_json`), and the paths of a
set whose shards are all there (:class:`SetPaths`).

A manifest's shard names are its prefix's (``{prefix}-NNNNN-of-NNNNN``, in order: a
manifest naming others is refused), so :class:`ShardTable` keeps the prefix, and each
shard's records, bytes and CRC-32C in three numpy arrays, each as narrow as its values
allow (and the ETags in a list, when the manifest records some); a :class:`ShardInfo` is
made when one is asked for. At 100,000 shards that is about 1 MB, where a list of entries
is some 16 MB of 200,000 objects — held by the trainer's reader, by every DataLoader
worker, and pickled for each spawned one (``benchmarks/RESULTS-memory.md``). A table
compares equal to the list of its entries.

Example
-------
>>> table = ShardTable.of("p", [ShardInfo("p-00000-of-00001", 3, 60, 7),
...                             ShardInfo("p-00001-of-00001", 2, 40, 8, '"e"')])
>>> len(table), table[1], table.find("p-00001-of-00001"), table.find("p-1")
(2, ShardInfo(name='p-00001-of-00001', records=2, bytes=40, crc32c=8, etag='"e"'), 1, None)
>>> table == list(table), table.total("records"), table.name(0)
(True, 5, 'p-00000-of-00001')
>>> paths = SetPaths("/d", "p", 2)
>>> list(paths), paths == ["/d/p-00000-of-00001", "/d/p-00001-of-00001"]
(['/d/p-00000-of-00001', '/d/p-00001-of-00001'], True)
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np

from .shardnames import shard_name, shard_width

__all__ = ["SetPaths", "ShardInfo", "ShardTable", "shard_finder", "shard_total"]


@dataclass(frozen=True, slots=True)
class ShardInfo:
    """One shard of a set, as the manifest records it. ``etag``: the object's ETag under
    its final name, recorded at commit on stores that give one (None elsewhere, and in
    sets written before ETags were recorded); a reader pins its reads of the shard to it.
    """

    name: str
    records: int
    bytes: int
    crc32c: int
    etag: str | None = None

    def to_doc(self) -> dict[str, Any]:
        """The shard's entry in the manifest file (``etag`` only when there is one, so a
        manifest without ETags keeps its bytes)."""
        doc: dict[str, Any] = {"name": self.name, "records": self.records,
                               "bytes": self.bytes, "crc32c": f"{self.crc32c:08x}"}
        if self.etag is not None:
            doc["etag"] = self.etag
        return doc

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled as its fields: a frozen dataclass with slots otherwise unpickles
        # through a __setstate__ that looks its fields up again for every shard
        return ShardInfo, (self.name, self.records, self.bytes, self.crc32c, self.etag)


class _Named:
    """The names ``{prefix}-NNNNN-of-NNNNN`` of the ``count`` shards of a set, made on
    demand; :meth:`find` tells a name's index without a lookup table."""

    __slots__ = ("_count", "_head", "_prefix", "_tail", "_width")

    def __init__(self, prefix: str, count: int) -> None:
        self._prefix, self._count = prefix, count
        # shard_name's parts, worked out once: "{prefix}-" {index, width digits} "-of-NNNNN"
        last = shard_name(prefix, 0, count)
        self._width = shard_width(count)
        self._head, self._tail = f"{prefix}-", last[len(prefix) + 1 + self._width:]

    def __len__(self) -> int:
        return self._count

    def name(self, index: int) -> str:
        """The name of shard ``index`` (``shard_name(prefix, index, count)``)."""
        return f"{self._head}{index:0{self._width}d}{self._tail}"

    def find(self, name: str) -> int | None:
        """The index of the shard named ``name``, or None when it is none of these."""
        head, width = len(self._head), self._width
        digits = name[head:head + width]
        if len(name) != head + width + len(self._tail) or not name.startswith(
                self._head) or not name.endswith(self._tail) or not (
                digits.isascii() and digits.isdigit()):
            return None
        index = int(digits)  # any `width` digits are the index's own (zero-padded)
        return index if index < self._count else None

    def _index(self, index: int) -> int:
        if not -self._count <= index < self._count:
            raise IndexError(f"shard {index} of {self._count}")
        return index % self._count

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        mine: Iterable[Any] = self  # type: ignore[assignment]  # (a sequence below)
        return len(other) == len(self) and all(a == b for a, b in zip(mine, other,
                                                                       strict=True))

    __hash__ = None  # type: ignore[assignment]  # a sequence, compared by content


class ShardTable(_Named, Sequence[ShardInfo]):
    """The shards of the set ``prefix`` (shard ``i`` named ``shard_name(prefix, i,
    len(records))``) as arrays: ``records``, ``sizes`` and ``crcs`` (each in the narrowest
    unsigned type that holds its values, else ``int64``), and ``etags`` (one per shard,
    or None when no shard has one)."""

    __slots__ = ("crcs", "etags", "records", "sizes")

    def __init__(self, prefix: str, records: np.ndarray, sizes: np.ndarray,
                 crcs: np.ndarray, etags: list[str | None] | None = None) -> None:
        super().__init__(prefix, len(records))
        self.records, self.sizes, self.crcs = _narrow(records), _narrow(sizes), _narrow(crcs)
        self.etags = etags if etags is not None and any(e is not None for e in etags) else None

    @classmethod
    def of(cls, prefix: str, shards: Iterable[ShardInfo]) -> ShardTable:
        """The table of ``shards`` (named as the prefix's shards are, in order)."""
        listed = list(shards)
        return cls(prefix, np.array([s.records for s in listed], dtype=np.int64),
                   np.array([s.bytes for s in listed], dtype=np.int64),
                   np.array([s.crc32c for s in listed], dtype=np.uint32),
                   [s.etag for s in listed])

    @overload
    def __getitem__(self, index: int) -> ShardInfo: ...

    @overload
    def __getitem__(self, index: slice) -> list[ShardInfo]: ...

    def __getitem__(self, index: int | slice) -> ShardInfo | list[ShardInfo]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._count))]
        i = self._index(index)
        return ShardInfo(self.name(i), int(self.records[i]), int(self.sizes[i]),
                         int(self.crcs[i]), None if self.etags is None else self.etags[i])

    def __iter__(self) -> Iterator[ShardInfo]:
        etags = self.etags or [None] * self._count
        for i, (records, size, crc) in enumerate(zip(
                self.records.tolist(), self.sizes.tolist(), self.crcs.tolist(), strict=True)):
            yield ShardInfo(self.name(i), records, size, crc, etags[i])

    def entry(self, name: str) -> ShardInfo | None:
        """The entry of the shard named ``name``, or None."""
        index = self.find(name)
        return None if index is None else self[index]

    def names(self) -> Iterator[str]:
        """The shards' names, in order."""
        return (self.name(i) for i in range(self._count))

    def total(self, field: str) -> int:
        """The sum of ``records`` or ``bytes`` over the shards (exact: the high and the
        low 32 bits of each value are added apart, which can't overflow ``int64``)."""
        values = (self.records if field == "records" else self.sizes).astype(np.int64)
        return int((values >> 32).sum()) * (1 << 32) + int((values & 0xFFFFFFFF).sum())

    def __repr__(self) -> str:
        return f"ShardTable({self._prefix!r}, {self._count} shards)"

    def __reduce__(self) -> tuple[Any, ...]:
        return ShardTable, (self._prefix, self.records, self.sizes, self.crcs, self.etags)


def _narrow(values: np.ndarray) -> np.ndarray:
    """``values`` (non-negative ints below 2**63) in the narrowest unsigned type that
    holds them all (``uint8`` to ``uint32``), else as ``int64``: a set's counts and sizes
    are mostly small."""
    top = int(values.max()) if len(values) else 0
    for kind in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(kind).max:
            return values.astype(kind, copy=False)
    return values.astype(np.int64, copy=False)


def shard_finder(shards: Sequence[ShardInfo]) -> Callable[[str], int | None]:
    """Where in ``shards`` the shard of a name is (None: none of them): a table works it
    out from the name; a list of entries is looked up in a dict made once, here.

    >>> find = shard_finder([ShardInfo("a", 1, 2, 3), ShardInfo("b", 1, 2, 3)])
    >>> find("b"), find("c")
    (1, None)
    """
    if isinstance(shards, ShardTable):
        return shards.find
    return {s.name: i for i, s in enumerate(shards)}.get


def shard_total(shards: Sequence[ShardInfo], field: str) -> int:
    """The sum of the shards' ``records`` or ``bytes`` (a table adds its arrays up)."""
    if isinstance(shards, ShardTable):
        return shards.total(field)
    return sum(getattr(s, field) for s in shards)


class SetPaths(_Named, Sequence[str]):
    """The paths of all ``count`` shards of the set ``prefix`` in ``directory``, in
    order, made on demand (a set's listing, once it is found to be exactly these)."""

    __slots__ = ("_directory",)

    def __init__(self, directory: str, prefix: str, count: int) -> None:
        super().__init__(prefix, count)
        self._directory = directory

    @classmethod
    def matching(cls, directory: str, prefix: str, paths: Sequence[str]) -> SetPaths | None:
        """The paths ``paths`` are, when they are every shard of ``prefix`` in
        ``directory`` in order (else None)."""
        made = cls(directory, prefix, len(paths))
        return made if paths and made == paths else None

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._count))]
        return posixpath.join(self._directory, self.name(self._index(index)))

    def __iter__(self) -> Iterator[str]:
        join, directory = posixpath.join, self._directory
        return (join(directory, self.name(i)) for i in range(self._count))

    def index_of(self, path: str) -> int | None:
        """The index of the shard at ``path``, or None."""
        directory, name = posixpath.split(path)
        return self.find(name) if directory == self._directory else None

    def __repr__(self) -> str:
        return f"SetPaths({self._directory!r}, {self._prefix!r}, {self._count})"

    def __reduce__(self) -> tuple[Any, ...]:
        return SetPaths, (self._directory, self._prefix, self._count)
