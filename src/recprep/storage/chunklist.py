"""A chunk index side file's shard entries held as three arrays, not as ``json``'s dicts.

A set's ``.{prefix}.chunks`` (:mod:`recprep.storage.chunkindex`) lists every shard's chunk
offsets (delta-encoded) and record counts. Read by ``json``, a side file of 100,000 shards
of a few chunks each is some 80 MB of dicts, lists and ints, made in 3 s of CPU, and held
by every worker that reads a shard by range. :class:`PackedChunks` keeps the same numbers
as three ``int64`` arrays (each shard's run of chunks in ``bounds``), about 6 MB there.

:func:`pack_lean` reads the list as :func:`~recprep.storage.chunkindex.encode` writes it
(compact JSON, one entry after another, names without escapes, non-negative ints of at
most 18 digits) straight from the bytes, one entry at a time, and checks it against the
manifest's shards (the same names in order, the same sizes and CRC-32C); anything else
returns None, and the side file is read by ``json`` (:func:`pack_entries`), which says
what is wrong. Both give the same arrays for any side file both read.

Example
-------
>>> text = (b'{"recprep_chunks":1,"name_prefix":"p","format":"recordio","shards":['
...         b'{"name":"p-0","bytes":90,"crc32c":7,"offsets":[0,40],"counts":[2,1]}]}')
>>> rest, packed = pack_lean(text, ["p-0"], [90], [7])
>>> rest
b'{"recprep_chunks":1,"name_prefix":"p","format":"recordio"}'
>>> packed.entry(0)
(array([ 0, 40]), array([2, 1]))
>>> careful = pack_entries([{"offsets": [0, 40], "counts": [2, 1]}])
>>> all(np.array_equal(a, b) for a, b in zip(packed.entry(0), careful.entry(0)))
True
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["PackedChunks", "pack_entries", "pack_lean"]

_CHUNKS_LIST = b',"shards":['
#: entries whose numbers are read at once (their texts held meanwhile)
_AT_ONCE = 4096
_INT = rb"(?:0|[1-9]\d{0,17})"  # as JSON writes a non-negative int (below 10**18)
_NUMBERS = rb"((?:" + _INT + rb"(?:," + _INT + rb")*)?)"
_CHUNKS_ENTRY = re.compile(
    rb'\{"name":"([^"\\]*)","bytes":(' + _INT + rb'),"crc32c":(' + _INT + rb'),"offsets":\['
    + _NUMBERS + rb'\],"counts":\[' + _NUMBERS + rb"\]\}")


class PackedChunks:
    """Every shard's chunk offsets (as the side file writes them: deltas) and record
    counts, end to end in two ``int64`` arrays; shard ``i``'s are ``bounds[i]`` to
    ``bounds[i + 1]``. ``bad``: the shards whose entry isn't a list of numbers each (the
    reason; their runs are empty)."""

    __slots__ = ("bad", "bounds", "counts", "deltas")

    def __init__(self, bounds: np.ndarray, deltas: np.ndarray, counts: np.ndarray,
                 bad: dict[int, str] | None = None) -> None:
        self.bounds, self.deltas, self.counts = bounds, deltas, counts
        self.bad = bad or {}

    def __len__(self) -> int:
        return len(self.bounds) - 1

    def entry(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """Shard ``index``'s ``(deltas, counts)``; ``ValueError`` for a bad entry."""
        if index in self.bad:
            raise ValueError(self.bad[index])
        start, stop = int(self.bounds[index]), int(self.bounds[index + 1])
        return self.deltas[start:stop], self.counts[start:stop]


def _numbers(parts: list[bytes]) -> np.ndarray:
    """The comma-separated ints of ``parts`` (each ``_NUMBERS``), end to end."""
    joined = b",".join(p for p in parts if p)
    return np.fromstring(joined, dtype=np.int64, sep=",") if joined else (
        np.zeros(0, np.int64))


def pack_lean(text: bytes, names: Callable[[int], str] | Sequence[str],
              sizes: Sequence[int] | np.ndarray, crcs: Sequence[int] | np.ndarray
              ) -> tuple[bytes, PackedChunks] | None:
    """``(rest, packed)``: the side file's JSON ``text`` without its shard list (the
    document's other keys, for ``json``), and the list's entries packed; None when the
    list isn't laid out as ``encode`` writes it, or isn't the manifest's shards
    (``names(i)`` or ``names[i]``, ``sizes``, ``crcs``: shard ``i``'s, in order)."""
    start = text.rfind(_CHUNKS_LIST)
    if start < 0 or not text.endswith(b"]}"):
        return None
    name_of = names if callable(names) else names.__getitem__
    count, pos, end = len(sizes), start + len(_CHUNKS_LIST), len(text) - 2
    texts: tuple[list[bytes], list[bytes], list[bytes]] = ([], [], [])  # facts, offsets, counts
    arrays: tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]] = ([], [], [])
    runs = np.zeros(count + 1, np.int64)
    for i in range(count):
        if i:
            if text[pos:pos + 1] != b",":
                return None
            pos += 1
        found = _CHUNKS_ENTRY.match(text, pos)
        if found is None:
            return None
        name, size, crc, deltas, chunk_counts = found.groups()
        n = deltas.count(b",") + 1 if deltas else 0
        if name != name_of(i).encode() or n != (
                chunk_counts.count(b",") + 1 if chunk_counts else 0):
            return None  # (json's reading says which entry is bad)
        texts[0].extend((size, crc))
        texts[1].append(deltas)
        texts[2].append(chunk_counts)
        runs[i + 1] = n
        pos = found.end()
        if len(texts[1]) == _AT_ONCE or i + 1 == count:  # a few thousand entries' texts
            for kept, parts in zip(arrays, texts, strict=True):
                kept.append(_numbers(parts))
                parts.clear()
    facts, deltas_all, counts_all = (np.concatenate(a) if a else np.zeros(0, np.int64)
                                     for a in arrays)
    facts = facts.reshape(-1, 2)
    if pos != end or not (np.array_equal(facts[:, 0], np.asarray(sizes, np.int64))
                          and np.array_equal(facts[:, 1], np.asarray(crcs, np.int64))):
        return None
    packed = PackedChunks(np.cumsum(runs), deltas_all, counts_all)
    if len(packed.deltas) != packed.bounds[-1] or len(packed.counts) != packed.bounds[-1]:
        return None
    return text[:start] + b"}", packed


def pack_entries(entries: Sequence[Any]) -> PackedChunks:
    """The side file's shard entries as ``json`` read them, packed: each entry's
    ``offsets`` and ``counts`` as ``numpy`` takes lists of ints; an entry that isn't
    (not a dict, a key missing, not numbers, their lengths differing) is marked bad."""
    runs = np.zeros(len(entries) + 1, np.int64)
    deltas: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    bad: dict[int, str] = {}
    for i, entry in enumerate(entries):
        try:
            d = np.asarray(entry["offsets"], dtype=np.int64)
            c = np.asarray(entry["counts"], dtype=np.int64)
            if d.ndim != 1 or d.shape != c.shape:
                raise ValueError(f"{d.size} offsets but {c.size} counts")
        except (KeyError, TypeError, ValueError, OverflowError) as err:
            bad[i] = str(err)
            continue
        runs[i + 1] = len(d)
        deltas.append(d)
        counts.append(c)
    empty = np.zeros(0, np.int64)
    return PackedChunks(np.cumsum(runs), np.concatenate(deltas) if deltas else empty,
                        np.concatenate(counts) if counts else empty, bad)
