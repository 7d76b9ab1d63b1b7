"""Shard-set discovery: which shard sets the files, directories and globs a user names
hold.

:func:`resolve_shard_sets` expands what a reader is given into :class:`ShardSet` values
(the rules are in its docstring): a directory's one set, a glob's matches grouped into one
set, ``dir/prefix``, a manifest standing for its set; incomplete or ambiguous sets raise,
after one fresh listing (:func:`forget_listings`: a cached listing taken mid-commit is not
the set now). :func:`one_set` is the check that a glob names one set, said by the reader
and by ``recprep ls/head/verify/cp``.

What each name in a directory is (shard, manifest, side file, marker, data...) is decided
by one rule in :mod:`recprep.storage.listing` (:func:`classify`), re-exported here.

Example
-------
>>> import fsspec
>>> from recprep import convert
>>> _ = convert("memory://doc/discovery", list(range(4)), 2, "p")
>>> fs = fsspec.filesystem("memory")
>>> [(s.prefix, [p.rsplit("/", 1)[1] for p in s.paths])
...  for s in resolve_shard_sets(fs, ["/doc/discovery"])]
[('p', ['p-00000-of-00001', 'p-00001-of-00001'])]
"""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import AmbiguousPathError, CorruptDataError, MissingShardsError, NotFoundError
from .fs import display, is_local
from .listing import (
    SET_KINDS,
    SUCCESS_NAME,
    WORK_PREFIX,
    DirectoryEntry,
    Kind,
    Name,
    SideFileKind,
    classify,
    is_data_name,
    is_partition_dir,
    list_directory,
    list_entries,
    set_files,
    side_file_kinds,
)
from .manifest import ManifestFile, fetch_manifest
from .shardnames import (
    MANIFEST_SUFFIX,
    glob_root,
    has_magic,
    manifest_name,
    parse_shard_name,
    shard_name,
)
from .writers import explained

__all__ = [
    "SET_KINDS",
    "SUCCESS_NAME",
    "WORK_PREFIX",
    "DirectoryEntry",
    "Kind",
    "Name",
    "ShardSet",
    "SideFileKind",
    "classify",
    "committed_set",
    "explained",
    "forget_listings",
    "is_data_name",
    "is_partition_dir",
    "list_directory",
    "list_entries",
    "missing_shards",
    "one_set",
    "relist",
    "resolve_shard_sets",
    "set_files",
    "side_file_kinds",
]


@dataclass
class ShardSet:
    """Files read together, in order: the shards of one set, or one lone file.

    ``paths`` are in shard-index order; a reader interleaves them round-robin, which
    gives back the order ``convert`` saw the instances in. ``pattern`` is what the user
    named that resolved to this set (to list it again, see :func:`relist`).
    ``manifest_file``: the set's manifest, when it was read to find the set (its paths are
    then the manifest's shards, not a listing's; a reader reads it from here, once).
    """

    directory: str
    prefix: str | None
    paths: Sequence[str] = field(default_factory=list)
    pattern: str | None = None
    manifest_file: ManifestFile | None = field(default=None, repr=False, compare=False)

    @property
    def named_alone(self) -> bool:
        """The user named this one file (not a set, a directory or a glob)."""
        return self.paths == [self.pattern]

    @property
    def manifest_path(self) -> str | None:
        if self.prefix is None:
            return None
        return posixpath.join(self.directory, manifest_name(self.prefix))


def _group_shard_sets(paths: Iterable[str]) -> list[ShardSet]:
    sets: dict[tuple[str, str, int], ShardSet] = {}
    indexed: dict[tuple[str, str, int], list[tuple[int, str]]] = {}
    result: list[ShardSet] = []
    for path in paths:
        directory, name = posixpath.split(path)
        parsed = parse_shard_name(name)
        if parsed is None:
            result.append(ShardSet(directory, None, [path]))
            continue
        key = (directory, parsed.prefix, parsed.last)
        if key not in sets:
            sets[key] = ShardSet(directory, parsed.prefix)
            indexed[key] = []
            result.append(sets[key])
        indexed[key].append((parsed.index, path))
    for key, shard_set in sets.items():
        shard_set.paths = [p for _, p in sorted(indexed[key])]
    return result


def _check_complete(fs: Any, pattern: str, shard_set: ShardSet) -> None:
    """Raise if shards of ``shard_set`` are missing from storage (not merely unmatched):
    a directory under a shard's name is no shard."""
    first = parse_shard_name(posixpath.basename(shard_set.paths[0]))
    assert first is not None
    if len(shard_set.paths) == first.last + 1:
        return
    listed = list_entries(fs, shard_set.directory)
    present = {e.name for e in listed if not e.is_dir}
    expected = [
        posixpath.join(shard_set.directory, shard_name(first.prefix, i, first.last + 1))
        for i in range(first.last + 1)
    ]
    missing = [p for p in expected if posixpath.basename(p) not in present]
    if missing:
        raise MissingShardsError(display(fs, pattern), [display(fs, p) for p in missing],
                                 first.last + 1 - len(missing),
                                 manifest=manifest_name(first.prefix) in present)


def _counts(fs: Any, directory: str, sets: Iterable[ShardSet]) -> tuple[
        dict[str, int], dict[str, str]]:
    """Per set of one prefix with several shard counts: its name, shard count and glob."""
    counts, paths = {}, {}
    for s in sets:
        last = parse_shard_name(posixpath.basename(s.paths[0]))
        assert last is not None and s.prefix is not None
        glob = f"{s.prefix}-*-of-{shard_name(s.prefix, 0, last.last + 1).rsplit('-', 1)[1]}"
        counts[glob] = len(s.paths)
        paths[glob] = display(fs, posixpath.join(directory, glob))
    return counts, paths


#: why a listing holds shards of one prefix with several shard counts
_SEVERAL_COUNTS = ("shards of one prefix with different shard counts (two sets under one "
                   "name, or leftovers of an earlier one)")


def _directory_sets(fs: Any, directory: str, shown: str) -> list[ShardSet]:
    """The shard set of ``directory`` — or, when it holds none, its data files one by one
    (a Spark output directory) — then those of its partition subdirectories, recursively.

    A directory holding more than one shard set is ambiguous: reading them all as one
    stream would mix, say, train and test. It raises :class:`AmbiguousPathError`.
    """
    files, manifests, subdirs = list_directory(fs, directory)
    groups = _group_shard_sets(files)
    sets = [s for s in groups if s.prefix is not None] or groups
    prefixes = sorted({s.prefix for s in sets if s.prefix is not None} | {
        posixpath.basename(m)[: -len(MANIFEST_SUFFIX)] for m in manifests
    })
    where = display(fs, directory)
    shard_sets = [s for s in sets if s.prefix is not None]
    if len(prefixes) == 1 and len(shard_sets) > 1:
        counts, paths = _counts(fs, directory, shard_sets)
        raise AmbiguousPathError(shown, where, counts, _SEVERAL_COUNTS, paths=paths)
    if len(prefixes) > 1:
        counts = {p: sum(len(s.paths) for s in sets if s.prefix == p) for p in prefixes}
        raise AmbiguousPathError(shown, where, counts)
    for subdir in subdirs:
        sets.extend(_directory_sets(fs, subdir, display(fs, subdir)))
    return sets


def _prefix_sets(fs: Any, directory: str, prefix: str) -> list[ShardSet]:
    """The shard set ``prefix`` of ``directory`` (``directory/prefix-*-of-*``), or [] when
    it has no shard there and no manifest."""
    if not fs.isdir(directory):
        return []
    files, manifests, _ = list_directory(fs, directory)
    sets = [s for s in _group_shard_sets(files) if s.prefix == prefix]
    has_manifest = posixpath.join(directory, manifest_name(prefix)) in manifests
    if len(sets) > 1:
        counts, paths = _counts(fs, directory, sets)
        raise AmbiguousPathError(display(fs, posixpath.join(directory, prefix)),
                                 display(fs, directory), counts, _SEVERAL_COUNTS, paths=paths)
    if not sets and has_manifest:
        raise NotFoundError(
            display(fs, posixpath.join(directory, prefix)),
            "the set's manifest is there but none of its shards",
        )
    return sets


def one_set(fs: Any, pattern: str, matched: Iterable[str]) -> None:
    """Raise :class:`~recprep.errors.AmbiguousPathError` unless the files a glob
    ``pattern`` matched (``matched``: shards, manifests, data files) name one shard set —
    or, when no shard set, only data files of no set. A glob that matches files of two
    sets (``dir/train*`` over ``train`` and ``train_list``, or ``train`` shards of two
    shard counts) would read both as one stream; several sets are read on purpose by
    passing a list of them. Said by the reader and by ``recprep ls/head/verify/cp``.

    >>> import fsspec
    >>> fs = fsspec.filesystem("memory")
    >>> one_set(fs, "/d/train*", ["/d/train-00000-of-00001", "/d/train-00001-of-00001"])
    >>> one_set(fs, "/d/train*", ["/d/train-00000-of-00000", "/d/train.manifest.json",
    ...                           "/d/train_list-00000-of-00000"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    recprep.errors.AmbiguousPathError: memory:///d/train*: the pattern matches files of \
several shard sets: train (1 shard), train_list (1 shard). Name one set: 'memory:///d/train' \
(the directory and the set's prefix), ...; to read several sets as one stream on purpose, \
pass a list of them: ['memory:///d/train', 'memory:///d/train_list']
    """
    sets: dict[tuple[str, str], dict[int, int]] = {}  # (directory, prefix) -> last -> shards
    lone: list[str] = []
    for path in matched:
        directory, name = posixpath.split(path)
        what = classify(name)
        if what.kind is Kind.SHARD and what.prefix is not None:
            parsed = parse_shard_name(name)
            assert parsed is not None
            counts = sets.setdefault((directory, what.prefix), {})
            counts[parsed.last] = counts.get(parsed.last, 0) + 1
        elif what.kind is Kind.MANIFEST and what.prefix is not None:
            sets.setdefault((directory, what.prefix), {})
        elif what.kind is Kind.DATA:
            lone.append(path)
    several_counts = any(len(counts) > 1 for counts in sets.values())
    if len(sets) + (1 if sets and lone else 0) <= 1 and not several_counts:
        return
    directories = {d for d, _ in sets} | {posixpath.dirname(p) for p in lone}
    common = posixpath.commonpath(sorted(directories)) if len(directories) > 1 else next(
        iter(directories))
    named: dict[str, int] = {}
    paths: dict[str, str] = {}
    for (directory, prefix), counts in sorted(sets.items()):
        if len(counts) > 1:
            for last, found in sorted(counts.items()):
                glob = f"{prefix}-*-of-{shard_name(prefix, 0, last + 1).rsplit('-', 1)[1]}"
                name = posixpath.relpath(posixpath.join(directory, glob), common)
                named[name], paths[name] = found, display(fs, posixpath.join(directory, glob))
            continue
        name = posixpath.relpath(posixpath.join(directory, prefix), common)
        named[name] = sum(counts.values())
        paths[name] = display(fs, posixpath.join(directory, prefix))
    files = []
    for path in sorted(lone):
        name = posixpath.relpath(path, common)
        named[name], paths[name] = 1, display(fs, path)
        files.append(name)
    detail = _SEVERAL_COUNTS if several_counts and len(sets) == 1 and not lone else (
        "the pattern matches files of "
        + ("several shard sets" if len(sets) > 1 else "a shard set")
        + (" and other data files" if lone else ""))
    raise AmbiguousPathError(display(fs, pattern), display(fs, common), named, detail,
                             paths=paths, files=files)


def _glob_sets(fs: Any, pattern: str) -> list[ShardSet]:
    """The files a glob matches, grouped into one shard set (or lone data files, each a
    set of its own); matched partition directories read like directories."""
    matched = sorted((DirectoryEntry.of({**info, "name": path})
                      for path, info in fs.glob(pattern, detail=True).items()),
                     key=lambda e: e.path)
    one_set(fs, pattern, (e.path for e in matched if e.is_data or e.kind is Kind.MANIFEST))
    sets = _group_shard_sets(e.path for e in matched if e.is_data)
    for entry in matched:
        if entry.kind is Kind.PARTITION:
            sets.extend(_directory_sets(fs, entry.path, display(fs, entry.path)))
    return sets


def committed_set(fs: Any, pattern: str) -> list[ShardSet]:
    """The set ``dir/prefix`` (or ``dir/prefix.manifest.json``) names, found by reading
    its manifest directly, on a store where a listing is a request: its shards are the
    ones the manifest lists (the commit point says which they are). [] when there is no
    manifest there, or one that is damaged or not this prefix's: the caller lists."""
    directory, name = posixpath.split(pattern)
    prefix = name[: -len(MANIFEST_SUFFIX)] if name.endswith(MANIFEST_SUFFIX) else name
    if is_local(fs) or has_magic(pattern) or not prefix or prefix.startswith(".") or (
            parse_shard_name(name) is not None):
        return []
    try:
        found = fetch_manifest(fs, posixpath.join(directory, manifest_name(prefix)))
        manifest = None if found is None else found.parse()
    except (CorruptDataError, OSError):
        return []
    if manifest is None or manifest.name_prefix != prefix or not manifest.shards:
        return []
    paths = [posixpath.join(directory, s.name) for s in manifest.shards]
    forget_listings(fs, directory)  # a listing cached before a commit would hide its shards
    return [ShardSet(directory, prefix, paths, manifest_file=found)]


def missing_shards(fs: Any, shard_set: ShardSet) -> MissingShardsError | None:
    """The error naming the shards of ``shard_set`` that storage doesn't hold (a fresh
    listing of its directory), or None when it holds them all: for a set found by its
    manifest, whose shards were not listed, when one of them turns out missing."""
    assert shard_set.prefix is not None
    forget_listings(fs, shard_set.directory)
    try:
        present = {e.name for e in list_entries(fs, shard_set.directory) if not e.is_dir}
    except FileNotFoundError:
        present = set()
    missing = [p for p in shard_set.paths if posixpath.basename(p) not in present]
    if not missing:
        return None
    return MissingShardsError(
        display(fs, shard_set.pattern or posixpath.join(shard_set.directory, shard_set.prefix)),
        [display(fs, p) for p in missing], len(shard_set.paths) - len(missing),
        manifest=manifest_name(shard_set.prefix) in present)


def _resolve_pattern(fs: Any, pattern: str) -> list[ShardSet]:
    """The shard sets one pattern names (see :func:`resolve_shard_sets`)."""
    directory, name = posixpath.split(pattern)
    shown = display(fs, pattern)
    committed = committed_set(fs, pattern)
    if committed:
        return committed
    if has_magic(pattern):
        sets = _glob_sets(fs, pattern)
        if not sets:
            raise NotFoundError(shown, "no file matches this pattern")
    elif fs.isdir(pattern):
        sets = _directory_sets(fs, pattern, shown)
        if not sets:
            raise NotFoundError(
                shown, "the directory holds no shard set, data file or partition"
            )
    elif name.endswith(MANIFEST_SUFFIX) and fs.isfile(pattern):
        sets = _prefix_sets(fs, directory, name[: -len(MANIFEST_SUFFIX)])
    elif fs.isfile(pattern):
        parsed = parse_shard_name(name)
        return [ShardSet(directory, parsed.prefix if parsed else None, paths=[pattern])]
    else:
        sets = _prefix_sets(fs, directory, name) if name else []
        if not sets:
            raise NotFoundError(
                shown, "no such file or directory, nor a shard set of that prefix"
            )
    for shard_set in sets:
        if shard_set.prefix is not None:
            _check_complete(fs, pattern, shard_set)
    return sets


def forget_listings(fs: Any, pattern: str) -> None:
    """Drop what ``fs`` keeps of its listings for ``pattern`` (a path or a glob): of the
    directory holding it and of everything below (s3fs, gcsfs... keep listings for the
    life of the filesystem object, which every reader of the process shares); the next
    listing asks storage again."""
    root = (glob_root(pattern) if has_magic(pattern) else pattern).rstrip("/") or "/"
    for path in (root, posixpath.dirname(root)):
        with contextlib.suppress(Exception):
            fs.invalidate_cache(path)
    cache = getattr(fs, "dircache", None)
    if cache is None:
        return
    with contextlib.suppress(Exception):
        stale = [k for k in list(cache) if k in (root, posixpath.dirname(root))
                 or k.startswith(root + "/")]
        for key in stale:
            cache.pop(key, None)


def relist(fs: Any, shard_set: ShardSet) -> list[str]:
    """The paths of ``shard_set`` from a fresh listing of the pattern it came from (the
    filesystem's cached listings dropped first): empty when the set is gone."""
    assert shard_set.pattern is not None
    forget_listings(fs, shard_set.pattern)
    forget_listings(fs, shard_set.directory)
    fresh = resolve_shard_sets(fs, [shard_set.pattern])
    return next((list(s.paths) for s in fresh if (s.directory, s.prefix) == (
        shard_set.directory, shard_set.prefix)), [])


def resolve_shard_sets(fs: Any, patterns: Iterable[str]) -> list[ShardSet]:
    """Expand files, directories and globs into shard sets, in a stable order.

    * a glob: every matching data file, grouped into one shard set; a set with shards
      missing from storage raises :class:`~recprep.errors.MissingShardsError`; files of
      several sets (or of a set and other data files) raise
      :class:`~recprep.errors.AmbiguousPathError` (:func:`one_set`); data files of no
      set read one by one; a matched partition directory (``number=8``) reads as a
      directory;
    * a directory: every shard set in it (complete sets only, as for a glob); when it
      holds none, its data files, each whole, in sorted order (what Spark writes:
      ``part-*`` files, ``_SUCCESS``, ``.crc`` files); then its Hive-style partition
      subdirectories (``key=value``), recursively, in sorted path order;
    * a file: just that file — but a manifest (``dir/p.manifest.json``) stands for its set;
    * ``dir/prefix`` (no such file): the shard set ``prefix`` of ``dir``, as the command
      line tools take it.

    On a store where a listing is a request (not the local disk), ``dir/prefix`` and
    ``dir/prefix.manifest.json`` are first looked up as a committed set: its manifest is
    read (one GET, which also gives its identity) and its shards are the ones it lists:
    no listing, no request per shard (a shard missing from storage raises
    :class:`~recprep.errors.MissingShardsError` when a reader reaches it). Only when there
    is no manifest there is the path listed, by the rules above.

    A directory that holds several shard sets raises
    :class:`~recprep.errors.AmbiguousPathError` naming them: name one.

    A listing that doesn't make one set (a set missing shards, shards of two shard
    counts, nothing there) is taken again after dropping the filesystem's cached
    listings, once: a listing cached while a commit was under way is not the set now. If
    storage still says so and a commit into the set is under way (its journal is there),
    the set raises :class:`~recprep.errors.SetChangedError`; a set not there because a
    conversion is still writing it says so (who holds the lock, since when).
    """
    result: list[ShardSet] = []
    for pattern in patterns:
        try:
            sets = _resolve_pattern(fs, pattern)
        except (AmbiguousPathError, MissingShardsError, NotFoundError):
            forget_listings(fs, pattern)
            try:
                sets = _resolve_pattern(fs, pattern)
            except (AmbiguousPathError, MissingShardsError, NotFoundError) as err:
                raise explained(fs, pattern, err) from None
        for shard_set in sets:
            shard_set.pattern = pattern
        result.extend(sets)
    return result
