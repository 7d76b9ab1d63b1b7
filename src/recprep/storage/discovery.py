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

import enum
import functools
import posixpath
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..errors import AmbiguousPathError, MissingShardsError, NotFoundError
from .shardnames import MANIFEST_SUFFIX, has_magic, manifest_name, parse_shard_name, shard_name

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
    "is_data_name",
    "is_partition_dir",
    "list_directory",
    "list_entries",
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
    from ..containers import _REGISTRY

    return _side_kinds(tuple(_REGISTRY.names()))


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
    gives back the order ``convert`` saw the instances in.
    """

    directory: str
    prefix: str | None
    paths: list[str] = field(default_factory=list)

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
    """Raise if shards of ``shard_set`` are missing from storage (not merely unmatched)."""
    first = parse_shard_name(posixpath.basename(shard_set.paths[0]))
    assert first is not None
    if len(shard_set.paths) == first.last + 1:
        return
    present = {e.name for e in list_entries(fs, shard_set.directory)}
    expected = [
        posixpath.join(shard_set.directory, shard_name(first.prefix, i, first.last + 1))
        for i in range(first.last + 1)
    ]
    missing = [p for p in expected if posixpath.basename(p) not in present]
    if missing:
        raise MissingShardsError(pattern, missing, first.last + 1 - len(missing))


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
    if len(prefixes) > 1 or len([s for s in sets if s.prefix is not None]) > 1:
        counts = {p: sum(len(s.paths) for s in sets if s.prefix == p) for p in prefixes}
        raise AmbiguousPathError(shown, directory, counts)
    for subdir in subdirs:
        sets.extend(_directory_sets(fs, subdir, shown))
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
        raise AmbiguousPathError(
            posixpath.join(directory, prefix), directory,
            {posixpath.basename(s.paths[0]): len(s.paths) for s in sets},
            detail="shards of the prefix with different shard counts",
        )
    if not sets and has_manifest:
        raise NotFoundError(
            posixpath.join(directory, prefix),
            "the set's manifest is there but none of its shards",
        )
    return sets


def _glob_sets(fs: Any, pattern: str) -> list[ShardSet]:
    """The files a glob matches, grouped into shard sets; matched partition directories
    read like directories."""
    matched = sorted((Entry.of({**info, "name": path})
                      for path, info in fs.glob(pattern, detail=True).items()),
                     key=lambda e: e.path)
    sets = _group(e.path for e in matched if e.is_data)
    for entry in matched:
        if entry.kind is Kind.PARTITION:
            sets.extend(_directory_sets(fs, entry.path, entry.path))
    return sets


def resolve_shard_sets(fs: Any, patterns: Iterable[str]) -> list[ShardSet]:
    """Expand files, directories and globs into shard sets, in a stable order.

    * a glob: every matching data file, grouped into shard sets; a set with shards
      missing from storage raises :class:`~recprep.errors.MissingShardsError`; a matched
      partition directory (``number=8``) reads as a directory;
    * a directory: every shard set in it (complete sets only, as for a glob); when it
      holds none, its data files, each whole, in sorted order (what Spark writes:
      ``part-*`` files, ``_SUCCESS``, ``.crc`` files); then its Hive-style partition
      subdirectories (``key=value``), recursively, in sorted path order;
    * a file: just that file — but a manifest (``dir/p.manifest.json``) stands for its set;
    * ``dir/prefix`` (no such file): the shard set ``prefix`` of ``dir``, as the command
      line tools take it.

    A directory that holds several shard sets raises
    :class:`~recprep.errors.AmbiguousPathError` naming them: name one.
    """
    result: list[ShardSet] = []
    for pattern in patterns:
        directory, name = posixpath.split(pattern)
        if has_magic(pattern):
            sets = _glob_sets(fs, pattern)
            if not sets:
                raise NotFoundError(pattern, "no file matches this pattern")
        elif fs.isdir(pattern):
            sets = _directory_sets(fs, pattern, pattern)
            if not sets:
                raise NotFoundError(
                    pattern, "the directory holds no shard set, data file or partition"
                )
        elif name.endswith(MANIFEST_SUFFIX) and fs.isfile(pattern):
            sets = _prefix_sets(fs, directory, name[: -len(MANIFEST_SUFFIX)])
        elif fs.isfile(pattern):
            result.append(ShardSet(directory, None, paths=[pattern]))
            parsed = parse_shard_name(name)
            if parsed is not None:
                result[-1].prefix = parsed.prefix
            continue
        else:
            sets = _prefix_sets(fs, directory, name) if name else []
            if not sets:
                raise NotFoundError(
                    pattern, "no such file or directory, nor a shard set of that prefix"
                )
        for shard_set in sets:
            if shard_set.prefix is not None:
                _check_complete(fs, pattern, shard_set)
        result.extend(sets)
    return result
