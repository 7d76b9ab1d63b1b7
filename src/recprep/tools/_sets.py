"""What the tools work on: the shard sets a path names, with what storage says about them.

A path given to ``recprep ls``, ``verify`` or ``cp`` is one of

* a **directory**: every shard set in it (shards and/or a manifest);
* a **glob**: the matching files, shards grouped into their set, other data files as
  lone files (what is data, a set's file, or hidden is :mod:`recprep.storage.listing`'s
  rule). A glob names one set: files of several sets (or of a set and other data files)
  raise :class:`~recprep.errors.AmbiguousPathError`, as for the reader;
* a **prefix** ``dir/name``: the shard set ``name`` of ``dir`` (``dir/name-*-of-*`` and
  ``dir/name.manifest.json``), even when no file is called ``dir/name``;
* a **file**: a manifest stands for its whole set; a shard or any other file for itself.

A path that names some shards of a set only (one shard, a glob of a few) is that part of
the set (``FoundSet.whole`` is False); shards that are all the set's shards storage holds
are the set. Several paths naming files of one set (an unquoted glob, which the shell
turns into a list of files) are one set, once (:func:`find_all`).

For each set, :func:`find_sets` reads the manifest (once) and lists the shards the set
should have that storage doesn't hold. Listings are taken fresh (a filesystem's cached
listings are dropped first). Paths are filesystem paths (no protocol); show them with
:func:`recprep.storage.display`.

Example
-------
>>> from recprep import convert
>>> from recprep.storage import resolve
>>> _ = convert("memory://doc/sets", [1, 2, 3], 2, "p")
>>> fs, path = resolve("memory://doc/sets")
>>> [(s.prefix, len(s.shards), s.missing, s.manifest.num_records) for s in find_sets(fs, path)]
[('p', 2, [], 3)]
>>> [(s.whole, s.shards) for s in find_sets(fs, path + "/p-00001-of-00001")]
[(False, ['/doc/sets/p-00001-of-00001'])]
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import CorruptDataError, NotFoundError
from ..storage.discovery import committed_set, forget_listings, one_set
from ..storage.fs import display
from ..storage.listing import DirectoryEntry, Kind, classify, list_entries
from ..storage.manifest import Manifest, read_manifest_bytes
from ..storage.shardnames import has_magic, manifest_name, parse_shard_name, shard_name
from ..storage.writers import explained

_SET_FILES = (Kind.SHARD, Kind.MANIFEST)


@dataclass
class FoundSet:
    """A shard set (or a lone file) and what storage holds of it.

    ``shards`` are the present files to work on, in shard order; ``sizes`` their byte
    sizes from the listing. ``missing`` are the paths of shards the set should have
    (per its manifest, else per the shard names) that storage doesn't hold;
    ``unexpected`` are shards of the prefix that its manifest doesn't list;
    ``side_files`` the set's own side files (its chunk index) with their sizes.
    """

    directory: str
    prefix: str | None
    shards: list[str] = field(default_factory=list)
    sizes: dict[str, int] = field(default_factory=dict)
    manifest_path: str | None = None
    manifest: Manifest | None = None
    manifest_error: CorruptDataError | None = None
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    side_files: dict[str, int] = field(default_factory=dict)  # of the set: path -> size
    whole: bool = True  # False when the user named some of the shards storage holds
    #: False for a set found by its manifest alone (no listing: ``sizes`` and
    #: ``side_files`` are the manifest's, and shards it lists that storage lacks show
    #: only when they are read)
    listed: bool = True
    #: the manifest's bytes as read, for a set found by its manifest alone (None else)
    manifest_data: bytes | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        """``dir/prefix`` for a set, the path for a lone file."""
        if self.prefix is None:
            return self.shards[0]
        return posixpath.join(self.directory, self.prefix)


def visible_files(entries: Iterable[DirectoryEntry]) -> dict[str, DirectoryEntry]:
    """The files of a listing that aren't hidden, by path."""
    return {e.path: e for e in entries if not e.is_dir and not e.hidden}


def _set_of_prefix(
    fs: Any, directory: str, prefix: str, entries: Sequence[DirectoryEntry],
    chosen: set[str] | None,
) -> FoundSet:
    """The set ``prefix`` of ``directory`` (listed: ``entries``); ``chosen`` limits the
    shards to work on (a choice of every shard storage holds is the whole set)."""
    mine = {e.path: e for e in entries if e.prefix == prefix and not e.is_dir}
    present = {p: parse_shard_name(e.name) for p, e in mine.items() if e.kind is Kind.SHARD}
    if chosen is not None and present and set(present) <= chosen:
        chosen = None
    found = FoundSet(directory, prefix, whole=chosen is None)
    found.side_files = {p: e.size for p, e in mine.items() if e.kind is Kind.SET_SIDE}
    manifest_path = posixpath.join(directory, manifest_name(prefix))
    if any(e.path == manifest_path for e in entries):  # a directory there is damage too
        found.manifest_path = manifest_path
        try:  # its bytes kept: a copy of the set needn't fetch them again
            read = read_manifest_bytes(fs, manifest_path)
            if read is not None:
                found.manifest, found.manifest_data = read
        except CorruptDataError as err:
            found.manifest_error = err.located(path=display(fs, manifest_path))
    if found.manifest is not None:
        expected = [posixpath.join(directory, s.name) for s in found.manifest.shards]
    else:
        lasts = sorted({p.last for p in present.values() if p is not None})
        expected = [
            posixpath.join(directory, shard_name(prefix, i, last + 1))
            for last in lasts
            for i in range(last + 1)
        ]
    order = {path: i for i, path in enumerate(expected)}
    if chosen is None:
        found.missing = [p for p in expected if p not in present]
        found.unexpected = sorted(p for p in present if p not in order)
        picked = [p for p in present if p in order]
    else:  # the shards named, those the manifest doesn't list too
        found.unexpected = sorted(p for p in present if p in chosen and p not in order)
        picked = [p for p in present if p in chosen]
    found.shards = sorted(picked, key=lambda p: (order.get(p, len(order)), p))
    found.sizes = {p: mine[p].size for p in found.shards}
    return found


def _sets_of_named(
    fs: Any, directory: str, entries: Sequence[DirectoryEntry],
    named: Iterable[DirectoryEntry], whole: bool,
) -> list[FoundSet]:
    """Sets of the shard and manifest files ``named`` (in ``directory``, whose listing is
    ``entries``)."""
    prefixes: dict[str, set[str]] = {}
    manifests: set[str] = set()
    for entry in named:
        if entry.kind in _SET_FILES and entry.prefix is not None:
            prefixes.setdefault(entry.prefix, set()).add(entry.path)
            if entry.kind is Kind.MANIFEST:
                manifests.add(entry.prefix)
    result = []
    for prefix, paths in sorted(prefixes.items()):
        chosen = None if whole or prefix in manifests else paths
        result.append(_set_of_prefix(fs, directory, prefix, entries, chosen))
    return result


def sets_in(fs: Any, directory: str, entries: Sequence[DirectoryEntry]) -> list[FoundSet]:
    """The sets of ``directory`` whose listing is ``entries`` (each whole, its manifest
    read once): a caller that has listed the directory lists nothing again."""
    return _sets_of_named(fs, directory, entries, entries, whole=True)


def _lone(path: str, size: int) -> FoundSet:
    directory = posixpath.dirname(path)
    return FoundSet(directory, None, shards=[path], sizes={path: size}, whole=False)


def find_sets(fs: Any, path: str, *, lone_files: bool = True) -> list[FoundSet]:
    """The shard sets (and, with ``lone_files``, other data files) that ``path`` names.

    Raises :class:`~recprep.errors.NotFoundError` when it names nothing (saying so when
    a conversion is writing there), :class:`~recprep.errors.AmbiguousPathError` when a
    glob names several sets.
    """
    forget_listings(fs, path)
    try:
        return _find(fs, path, lone_files)
    except NotFoundError as err:
        raise explained(fs, path, err) from None


def set_by_manifest(fs: Any, path: str) -> FoundSet | None:
    """The set ``path`` names when it is ``dir/prefix`` or a manifest, found by reading
    the manifest alone on a store where a listing is a request
    (:func:`~recprep.storage.discovery.committed_set`): None otherwise."""
    sets = committed_set(fs, path)
    if not sets or sets[0].manifest_file is None or sets[0].prefix is None:
        return None
    shard_set = sets[0]
    assert shard_set.manifest_file is not None and shard_set.prefix is not None
    manifest = shard_set.manifest_file.parse()
    found = FoundSet(shard_set.directory, shard_set.prefix, list(shard_set.paths),
                     manifest_path=shard_set.manifest_path, manifest=manifest, listed=False,
                     manifest_data=shard_set.manifest_file.data)
    found.sizes = {p: s.bytes for p, s in zip(shard_set.paths, manifest.shards, strict=True)}
    found.side_files = {posixpath.join(found.directory, f.name): f.bytes
                        for f in manifest.side_files
                        if classify(f.name).kind is Kind.SET_SIDE}
    return found


def _find(fs: Any, path: str, lone_files: bool) -> list[FoundSet]:
    shown = display(fs, path)
    found = set_by_manifest(fs, path)
    if found is not None:
        return [found]
    if has_magic(path):
        matched = visible_files(DirectoryEntry.of({**info, "name": p})
                                for p, info in fs.glob(path, detail=True).items())
        if not matched:
            raise NotFoundError(shown, "no file matches this pattern")
        one_set(fs, path, (p for p, e in matched.items()
                           if e.kind in _SET_FILES or e.kind is Kind.DATA))
        result: list[FoundSet] = []
        for directory in sorted({posixpath.dirname(p) for p in matched}):
            here = [e for p, e in sorted(matched.items()) if posixpath.dirname(p) == directory]
            listed = list_entries(fs, directory)
            result.extend(_sets_of_named(fs, directory, listed, here, whole=False))
            if lone_files:  # data files only: not _SUCCESS, .crc, ...
                result.extend(_lone(e.path, e.size) for e in here if e.kind is Kind.DATA)
        return result
    if fs.isdir(path):
        entries = list_entries(fs, path)
        sets = _sets_of_named(fs, path, entries, entries, whole=True)
        if not sets:
            raise NotFoundError(shown, "the directory holds no shard set")
        return sets
    directory, name = posixpath.split(path)
    if fs.isfile(path):
        named = DirectoryEntry.of({"name": path, "type": "file"})
        if named.kind in _SET_FILES:
            return _sets_of_named(fs, directory, list_entries(fs, directory), [named], whole=False)
        if not lone_files:
            raise NotFoundError(shown, "not a shard set, its manifest, or a directory of sets")
        return [_lone(path, int(fs.size(path)))]
    if directory and fs.isdir(directory):
        entries = list_entries(fs, directory)
        mine = [e for e in visible_files(entries).values()
                if e.kind in _SET_FILES and e.prefix == name]
        if mine:
            return _sets_of_named(fs, directory, entries, mine, whole=True)
    raise NotFoundError(shown, "no such file, directory, glob match or shard set prefix")


def find_all(
    named: Iterable[tuple[Any, str]], *, lone_files: bool = True
) -> list[tuple[Any, FoundSet]]:
    """:func:`find_sets` of each ``(fs, path)``, with the sets that several paths name
    parts of (the files of an unquoted glob, say) joined into one, in the order first
    named: shards named by any of the paths, the whole set when together they name every
    shard storage holds."""
    result: list[tuple[Any, FoundSet]] = []
    where: dict[tuple[str, str], int] = {}  # (directory URL, prefix) -> index in result
    for fs, path in named:
        for found in find_sets(fs, path, lone_files=lone_files):
            if found.prefix is None:
                if all(display(f, s.shards[0]) != display(fs, found.shards[0])
                       for f, s in result if s.prefix is None):
                    result.append((fs, found))
                continue
            key = (display(fs, found.directory), found.prefix)
            if key not in where:
                where[key] = len(result)
                result.append((fs, found))
                continue
            index = where[key]
            first = result[index][1]
            if first.whole or found.whole:
                result[index] = (fs, first if first.whole else found)
                continue
            chosen = set(first.shards) | set(found.shards)
            entries = list_entries(fs, found.directory)
            result[index] = (fs, _set_of_prefix(fs, found.directory, found.prefix, entries, chosen))
    return result
