"""Shard names, and turning what users pass to a reader into ordered shard sets.

A shard set is ``name_prefix-aaaaa-of-bbbbb``: a five-digit shard index and the
five-digit *largest* index (``num_shards - 1``), as in the PaddlePaddle design; both
widen together past 99999 shards.

Directories written by Spark (Spark-TFRecord, the Spark-TensorFlow-Connector, or
``recprep.spark`` with ``partition_by``) read too: their ``part-*`` files (any suffix) in
sorted order, with ``_SUCCESS``, ``_``-prefixed, ``.crc`` and hidden files left out, and
Hive-style partition directories (``number=8/``) read recursively, in sorted path order.

Example
-------
>>> shard_name("imagenet", 7, 1000)
'imagenet-00007-of-00999'
>>> parse_shard_name("imagenet-00007-of-00999")
ShardName(prefix='imagenet', index=7, last=999)
>>> shard_name("big", 3, 200_000)
'big-000003-of-199999'
>>> [is_data_name(n) for n in ("part-00000.tfrecord.gz", "_SUCCESS", ".part-00000.crc")]
[True, False, False]
>>> is_partition_dir("number=8"), is_partition_dir("_temporary")
(True, False)
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .errors import AmbiguousPathError, InvalidArgumentError, MissingShardsError, NotFoundError

MANIFEST_SUFFIX = ".manifest.json"
SUCCESS_NAME = "_SUCCESS"
CRC_SUFFIX = ".crc"
_SHARD_RE = re.compile(r"^(?P<prefix>.+)-(?P<index>\d{5,})-of-(?P<last>\d{5,})$")
_BAD_PREFIX_CHARS = set("/\\*?[]{}\n\r\t")
_GLOB_CHARS = set("*?[")


class ShardName(NamedTuple):
    """The parts of a shard file name."""

    prefix: str
    index: int  # type: ignore[assignment]  # the field shadows tuple.index, on purpose
    last: int


def shard_width(num_shards: int) -> int:
    """Digits used for the index and the largest index: 5, or more past 99999."""
    return max(5, len(str(num_shards - 1)))


def shard_name(prefix: str, index: int, num_shards: int) -> str:
    """The file name of shard ``index`` of ``num_shards``."""
    width = shard_width(num_shards)
    return f"{prefix}-{index:0{width}d}-of-{num_shards - 1:0{width}d}"


def parse_shard_name(name: str) -> ShardName | None:
    """The parts of a shard file name, or None when ``name`` isn't one."""
    match = _SHARD_RE.match(name)
    if match is None:
        return None
    index, last = match["index"], match["last"]
    if len(index) != len(last) or int(index) > int(last):
        return None
    return ShardName(match["prefix"], int(index), int(last))


def manifest_name(prefix: str) -> str:
    """The manifest file of a shard set: ``{prefix}.manifest.json``."""
    return prefix + MANIFEST_SUFFIX


def check_prefix(prefix: Any) -> str:
    """Raise unless ``prefix`` can name a shard set (no path or glob characters)."""
    if not isinstance(prefix, str) or not prefix:
        raise InvalidArgumentError(f"name_prefix must be a non-empty str, got {prefix!r}")
    bad = sorted(_BAD_PREFIX_CHARS.intersection(prefix))
    if bad or prefix.startswith("."):
        raise InvalidArgumentError(
            f"name_prefix {prefix!r} can't contain {bad or ['a leading .']}: it becomes part "
            "of file names and globs; use letters, digits, '-', '_' or '.'"
        )
    return prefix


def has_magic(pattern: str) -> bool:
    """Whether ``pattern`` contains glob characters."""
    return not _GLOB_CHARS.isdisjoint(pattern)


def is_data_name(name: str) -> bool:
    """Whether a file named ``name`` may hold records, rather than bookkeeping.

    Hidden files (``.x``: staging, locks, Hadoop's ``.crc`` siblings, TFRecord indexes),
    manifests and ``_SUCCESS`` never do; nor, as for Spark and Hadoop, other names starting
    with ``_`` (``_committed_...``) or ending with ``.crc`` — unless they are shard names.
    """
    if name.startswith(".") or name.endswith(MANIFEST_SUFFIX) or name == SUCCESS_NAME:
        return False
    if parse_shard_name(name) is not None:
        return True
    return not name.startswith("_") and not name.endswith(CRC_SUFFIX)


def is_partition_dir(name: str) -> bool:
    """Whether ``name`` is a Hive-style partition directory (``key=value``)."""
    key, sep, _ = name.partition("=")
    return bool(sep and key) and not name.startswith((".", "_"))


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
    present = {posixpath.basename(p) for p in fs.ls(shard_set.directory, detail=False)}
    expected = [
        posixpath.join(shard_set.directory, shard_name(first.prefix, i, first.last + 1))
        for i in range(first.last + 1)
    ]
    missing = [p for p in expected if posixpath.basename(p) not in present]
    if missing:
        raise MissingShardsError(pattern, missing, first.last + 1 - len(missing))


def list_directory(fs: Any, directory: str) -> tuple[list[str], list[str], list[str]]:
    """The data files, the (visible) manifests and the partition subdirectories of
    ``directory``, each sorted."""
    files, manifests, subdirs = [], [], []
    for entry in fs.ls(directory, detail=True):
        path = entry["name"].rstrip("/")
        name = posixpath.basename(path)
        if entry["type"] == "directory":
            if is_partition_dir(name):
                subdirs.append(path)
        elif name.endswith(MANIFEST_SUFFIX) and not name.startswith("."):
            manifests.append(path)
        elif is_data_name(name):
            files.append(path)
    return sorted(files), sorted(manifests), sorted(subdirs)


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
    matches = fs.glob(pattern, detail=True)
    files, subdirs = [], []
    for path, info in sorted(matches.items()):
        name = posixpath.basename(path.rstrip("/"))
        if info.get("type") == "directory":
            if is_partition_dir(name):
                subdirs.append(path.rstrip("/"))
        elif is_data_name(name):
            files.append(path)
    sets = _group(files)
    for subdir in subdirs:
        sets.extend(_directory_sets(fs, subdir, subdir))
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
