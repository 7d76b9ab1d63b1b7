"""What each name in a directory is, and a directory's listing classified.

A directory is listed once (:func:`list_entries`, each entry a :class:`DirectoryEntry`)
and each name classified once (:func:`classify`). That answers every discovery question
recprep asks: which sets a reader reads
(:func:`~recprep.storage.discovery.resolve_shard_sets`), which sets
``recprep ls/head/verify/cp`` work on (:mod:`recprep.tools._sets`), which files
``convert`` replaces or refuses to overwrite (:func:`set_files`), and which files and
partition directories a Spark dataset holds (:mod:`recprep.spark.layout`).

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
import os
import posixpath
from collections.abc import Callable, Container, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from .shardnames import MANIFEST_SUFFIX, parse_shard_name

__all__ = [
    "SET_KINDS",
    "SUCCESS_NAME",
    "WORK_PREFIX",
    "DirectoryEntry",
    "Kind",
    "Name",
    "SideFileKind",
    "classify",
    "is_data_name",
    "is_partition_dir",
    "list_directory",
    "list_entries",
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


def _side_file_name(name: str) -> Name | None:
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
    side = _side_file_name(name)
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
class DirectoryEntry:
    """One listed file or directory, classified."""

    path: str
    is_dir: bool
    size: int
    what: Name

    @classmethod
    def of(cls, info: Mapping[str, Any]) -> DirectoryEntry:
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


def list_entries(fs: Any, directory: str) -> list[DirectoryEntry]:
    """Every entry of ``directory``, classified, in sorted path order (one listing)."""
    return sorted((DirectoryEntry.of(info) for info in _listed(fs, directory)),
                  key=lambda e: e.path)


def _listed(fs: Any, directory: str) -> Iterator[Mapping[str, Any]]:
    """``fs.ls(directory, detail=True)``, one file's facts at a time on the local
    filesystem (as fsspec's ``LocalFileSystem.ls`` makes them: its ``info`` of each
    entry of ``os.scandir``), not all at once: the facts of 100,000 files take some
    90 MB, which the allocator keeps once they are freed."""
    from fsspec.implementations.local import LocalFileSystem

    if type(fs).ls is not LocalFileSystem.ls:
        yield from fs.ls(directory, detail=True)
        return
    path = fs._strip_protocol(directory)
    path_info = fs.info(path)
    if path_info["type"] != "directory":
        yield path_info
        return
    with os.scandir(path) as found:
        for entry in found:
            try:
                info = fs.info(entry)
            except FileNotFoundError:
                continue
            yield info


def set_files(fs: Any, directory: str, prefix: str) -> list[DirectoryEntry]:
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
