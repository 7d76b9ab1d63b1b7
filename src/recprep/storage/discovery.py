"""Shard-set discovery: what each name in a directory is, and which shard sets it holds.

A directory is listed once (:func:`list_entries`) and each name classified once
(:func:`classify`). That answers every discovery question recprep asks: which sets a
reader reads (:func:`resolve_shard_sets`), which sets ``recprep ls/head/verify/cp`` work
on (:mod:`recprep.tools._sets`), which files ``convert`` replaces or refuses to overwrite
(:func:`set_files`), and which files and partition directories a Spark dataset holds
(:mod:`recprep.spark.layout`).

The rule, in order (the first that fits decides a name's :class:`Kind`)::

    .recprep-…                   work        recprep's staging directories (a commit's
                                             journal), locks and copy temporaries
    .{shard}.tfindex             shard-side  a side file of one shard (and of its set)
    .{prefix}.chunks             set-side    a side file of the set ``prefix``
    .… (any other)               hidden      not ours (Hadoop's .crc siblings, .git)
    key=value/ (a directory)     partition   a Hive-style partition directory
    {prefix}.manifest.json       manifest    the manifest of the set ``prefix``
    {prefix}-aaaaa-of-bbbbb      shard       a shard of the set ``prefix``
    _SUCCESS, _…, ….crc          marker      Spark's and Hadoop's bookkeeping
    anything else                data        a file that may hold records (``part-*``)

A directory that is none of ``work``, ``partition``, or a name of a set's file
(``shard``, ``manifest``, side file) is a ``directory``: never read, never recursed
(``_temporary/``). Only ``shard`` and ``data`` files hold records; names starting with
``.`` are hidden: never listed to a user and never copied on their own (side files
travel with their set). Side-file names come from :func:`side_file_kinds`.

Examples
--------
>>> for name in ["p-00000-of-00002", "p.manifest.json", ".p-00000-of-00002.tfindex",
...              ".p.chunks", ".recprep-lock-p", ".part-0.crc", "part-0.tfrecord.gz",
...              "part-0.crc", "_SUCCESS", "_committed_1", "a-00000-of-00001-00000-of-00000"]:
...     print(f"{name:32} {classify(name)}")
p-00000-of-00002                 shard p
p.manifest.json                  manifest p
.p-00000-of-00002.tfindex        shard-side p (of p-00000-of-00002)
.p.chunks                        set-side p
.recprep-lock-p                  work
.part-0.crc                      hidden
part-0.tfrecord.gz               data
part-0.crc                       marker
_SUCCESS                         marker
_committed_1                     marker
a-00000-of-00001-00000-of-00000  shard a-00000-of-00001
>>> for name in ["number=8", "_temporary", ".recprep-staging-p", "p-00000-of-00001"]:
...     print(f"{name + '/':32} {classify(name, directory=True)}")
number=8/                        partition
_temporary/                      directory
.recprep-staging-p/              work
p-00000-of-00001/                shard p
"""

from __future__ import annotations

import contextlib
import enum
import functools
import posixpath
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..errors import AmbiguousPathError, MissingShardsError, NotFoundError
from .fs import display
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
    "Entry",
    "Kind",
    "Name",
    "ShardSet",
    "SideFileKind",
    "classify",
    "explained",
    "forget_listings",
    "is_data_name",
    "is_partition_dir",
    "list_directory",
    "list_entries",
    "one_set",
    "relist",
    "resolve_shard_sets",
    "set_files",
    "side_file_kinds",
]

SUCCESS_NAME = "_SUCCESS"
CRC_SUFFIX = ".crc"
#: recprep's own working names (staging directories, locks, copy temporaries)
WORK_PREFIX = ".recprep-"


class Kind(enum.Enum):
    """What a name in a directory is (see the module docstring)."""

    SHARD = "shard"
    MANIFEST = "manifest"
    SHARD_SIDE = "shard-side"
    SET_SIDE = "set-side"
    WORK = "work"
    HIDDEN = "hidden"
    MARKER = "marker"
    DATA = "data"
    PARTITION = "partition"
    DIRECTORY = "directory"


#: the kinds that name a file of a set (with its ``prefix``)
SET_KINDS = frozenset({Kind.SHARD, Kind.MANIFEST, Kind.SHARD_SIDE, Kind.SET_SIDE})
_DATA_KINDS = frozenset({Kind.SHARD, Kind.DATA})


class Name(NamedTuple):
    """A classified name: its kind, the set it belongs to, the shard a side file serves."""

    kind: Kind
    prefix: str | None = None
    shard: str | None = None

    def __str__(self) -> str:
        text = self.kind.value if self.prefix is None else f"{self.kind.value} {self.prefix}"
        return text if self.shard is None else f"{text} (of {self.shard})"

    def of_set(self, prefix: str, shards: Container[str] | None = None) -> bool:
        """Whether this names a file of the set ``prefix``: a shard, the manifest, a side
        file (of the set, or of one of ``shards`` when given).

        >>> classify(".p-00000-of-00001.tfindex").of_set("p", shards=["p-00000-of-00002"])
        False
        """
        if self.kind not in SET_KINDS or self.prefix != prefix:
            return False
        return shards is None or self.kind is not Kind.SHARD_SIDE or self.shard in shards


@dataclass(frozen=True)
class SideFileKind:
    """A kind of side file: named after a shard (``of_shard``) or after a set's prefix."""

    of_shard: bool
    name: Callable[[str], str]  # shard name (or prefix) -> side file name

    @functools.cached_property
    def _around(self) -> tuple[str, str]:
        before, _, after = self.name("\0").partition("\0")
        return before, after

    def owner(self, name: str) -> str | None:
        """The shard name (or prefix) whose side file ``name`` is, or None."""
        before, after = self._around
        if len(name) > len(before) + len(after) and name.startswith(before) and (
                name.endswith(after)):
            return name[len(before): len(name) - len(after)]
        return None


def side_file_kinds() -> tuple[SideFileKind, ...]:
    """The side files recprep writes beside shard sets: the record index of each
    registered format that keeps one (named after its shard), and a set's chunk index.
    Asked of the format registry, so a format registered later is seen too.

    >>> [k.name("x") for k in side_file_kinds()]
    ['.x.tfindex', '.x.chunks']
    """
    from ..containers import available_formats

    return _side_kinds(tuple(available_formats()))


@functools.cache
def _side_kinds(formats: tuple[str, ...]) -> tuple[SideFileKind, ...]:
    """The kinds while the registry holds ``formats`` (the cache key: a format registered
    later gives a new key)."""
    from ..containers import indexing_formats
    from .chunkindex import chunks_name

    # each record index kind once, in registration order
    indexes = dict.fromkeys(f.record_index for f in indexing_formats())
    return (*(SideFileKind(True, kind.name_for) for kind in indexes if kind is not None),
            SideFileKind(False, chunks_name))


def _side(name: str) -> Name | None:
    for kind in side_file_kinds():
        owner = kind.owner(name)
        if owner is None:
            continue
        if not kind.of_shard:
            return Name(Kind.SET_SIDE, owner)
        parsed = parse_shard_name(owner)
        return Name(Kind.SHARD_SIDE, parsed.prefix if parsed else None, owner)
    return None


def _is_partition(name: str) -> bool:
    key, sep, _ = name.partition("=")
    return bool(sep and key) and not name.startswith((".", "_"))


def classify(name: str, *, directory: bool = False) -> Name:
    """What the file (or ``directory``) ``name`` is: the rule of the module docstring."""
    if name.startswith(WORK_PREFIX):
        return Name(Kind.WORK)
    if directory and _is_partition(name):
        return Name(Kind.PARTITION)
    side = _side(name)
    if side is not None:
        return side
    if name.startswith("."):
        return Name(Kind.HIDDEN)
    if name.endswith(MANIFEST_SUFFIX):
        return Name(Kind.MANIFEST, name[: -len(MANIFEST_SUFFIX)])
    parsed = parse_shard_name(name)
    if parsed is not None:
        return Name(Kind.SHARD, parsed.prefix)
    if directory:
        return Name(Kind.DIRECTORY)
    if name.startswith("_") or name.endswith(CRC_SUFFIX):
        return Name(Kind.MARKER)
    return Name(Kind.DATA)


def is_data_name(name: str) -> bool:
    """Whether a file named ``name`` may hold records (a shard or a data file).

    >>> [is_data_name(n) for n in ("part-00000.tfrecord.gz", "_SUCCESS", ".part-00000.crc")]
    [True, False, False]
    """
    return classify(name).kind in _DATA_KINDS


def is_partition_dir(name: str) -> bool:
    """Whether ``name`` is a Hive-style partition directory (``key=value``).

    >>> is_partition_dir("number=8"), is_partition_dir("_temporary")
    (True, False)
    """
    return classify(name, directory=True).kind is Kind.PARTITION


@dataclass(frozen=True)
class Entry:
    """One listed file or directory, classified."""

    path: str
    is_dir: bool
    size: int
    what: Name

    @classmethod
    def of(cls, info: Mapping[str, Any]) -> Entry:
        """The entry of an fsspec ``ls``/``glob`` detail record."""
        path = info["name"].rstrip("/")
        is_dir = info.get("type") == "directory"
        what = classify(posixpath.basename(path), directory=is_dir)
        return cls(path, is_dir, int(info.get("size") or 0), what)

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)

    @property
    def kind(self) -> Kind:
        return self.what.kind

    @property
    def prefix(self) -> str | None:
        return self.what.prefix

    @property
    def hidden(self) -> bool:
        """Starts with ``.``: never listed to a user, never copied on its own."""
        return self.name.startswith(".")

    @property
    def is_data(self) -> bool:
        """A file that may hold records: a shard or a data file."""
        return not self.is_dir and self.kind in _DATA_KINDS

    def of_set(self, prefix: str) -> bool:
        """Whether this is a file of the set ``prefix`` (see :meth:`Name.of_set`)."""
        return self.what.of_set(prefix)


def list_entries(fs: Any, directory: str) -> list[Entry]:
    """Every entry of ``directory``, classified, in sorted path order (one listing)."""
    return sorted((Entry.of(info) for info in fs.ls(directory, detail=True)),
                  key=lambda e: e.path)


def set_files(fs: Any, directory: str, prefix: str) -> list[Entry]:
    """What ``directory`` holds of the shard set ``prefix``: its shards, its manifest and
    the side files of the set and of its shards (what an overwrite replaces)."""
    if not fs.isdir(directory):
        return []
    return [e for e in list_entries(fs, directory) if e.of_set(prefix)]


def list_directory(fs: Any, directory: str) -> tuple[list[str], list[str], list[str]]:
    """The data files, the (visible) manifests and the partition subdirectories of
    ``directory``, each sorted."""
    files, manifests, subdirs = [], [], []
    for entry in list_entries(fs, directory):
        if entry.kind is Kind.PARTITION:
            subdirs.append(entry.path)
        elif entry.is_dir:
            continue
        elif entry.kind is Kind.MANIFEST:
            manifests.append(entry.path)
        elif entry.is_data:
            files.append(entry.path)
    return files, manifests, subdirs


@dataclass
class ShardSet:
    """Files read together, in order: the shards of one set, or one lone file.

    ``paths`` are in shard-index order; a reader interleaves them round-robin, which
    gives back the order ``convert`` saw the instances in. ``pattern`` is what the user
    named that resolved to this set (to list it again, see :func:`relist`).
    """

    directory: str
    prefix: str | None
    paths: list[str] = field(default_factory=list)
    pattern: str | None = None

    @property
    def named_alone(self) -> bool:
        """The user named this one file (not a set, a directory or a glob)."""
        return self.paths == [self.pattern]

    @property
    def manifest_path(self) -> str | None:
        if self.prefix is None:
            return None
        return posixpath.join(self.directory, manifest_name(self.prefix))


def _group(paths: Iterable[str]) -> list[ShardSet]:
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
    groups = _group(files)
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
    sets = [s for s in _group(files) if s.prefix == prefix]
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
    matched = sorted((Entry.of({**info, "name": path})
                      for path, info in fs.glob(pattern, detail=True).items()),
                     key=lambda e: e.path)
    one_set(fs, pattern, (e.path for e in matched if e.is_data or e.kind is Kind.MANIFEST))
    sets = _group(e.path for e in matched if e.is_data)
    for entry in matched:
        if entry.kind is Kind.PARTITION:
            sets.extend(_directory_sets(fs, entry.path, display(fs, entry.path)))
    return sets


def _resolve(fs: Any, pattern: str) -> list[ShardSet]:
    """The shard sets one pattern names (see :func:`resolve_shard_sets`)."""
    directory, name = posixpath.split(pattern)
    shown = display(fs, pattern)
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
    return next((s.paths for s in fresh if (s.directory, s.prefix) == (
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
            sets = _resolve(fs, pattern)
        except (AmbiguousPathError, MissingShardsError, NotFoundError):
            forget_listings(fs, pattern)
            try:
                sets = _resolve(fs, pattern)
            except (AmbiguousPathError, MissingShardsError, NotFoundError) as err:
                raise explained(fs, pattern, err) from None
        for shard_set in sets:
            shard_set.pattern = pattern
        result.extend(sets)
    return result
