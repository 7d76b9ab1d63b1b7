"""Shard names, and turning what users pass to a reader into ordered shard sets.

A shard set is ``name_prefix-aaaaa-of-bbbbb``: a five-digit shard index and the
five-digit *largest* index (``num_shards - 1``), as in the PaddlePaddle design; both
widen together past 99999 shards.

Example
-------
>>> shard_name("imagenet", 7, 1000)
'imagenet-00007-of-00999'
>>> parse_shard_name("imagenet-00007-of-00999")
ShardName(prefix='imagenet', index=7, last=999)
>>> shard_name("big", 3, 200_000)
'big-000003-of-199999'
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .errors import InvalidArgumentError, MissingShardsError, NotFoundError

MANIFEST_SUFFIX = ".manifest.json"
_SHARD_RE = re.compile(r"^(?P<prefix>.+)-(?P<index>\d{5,})-of-(?P<last>\d{5,})$")
_BAD_PREFIX_CHARS = set("/\\*?[]{}\n\r\t")
_GLOB_CHARS = set("*?[")


class ShardName(NamedTuple):
    """The parts of a shard file name."""

    prefix: str
    index: int
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


def _visible(path: str) -> bool:
    name = posixpath.basename(path.rstrip("/"))
    return not name.startswith(".") and not name.endswith(MANIFEST_SUFFIX) and name != "_SUCCESS"


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


def resolve_shard_sets(fs: Any, patterns: Iterable[str]) -> list[ShardSet]:
    """Expand files, directories and globs into shard sets, in a stable order.

    * a glob: every visible matching file, grouped into shard sets; a set with shards
      missing from storage raises :class:`~recprep.errors.MissingShardsError`;
    * a directory: every shard set in it (complete sets only, as for a glob);
    * a file: just that file.
    """
    result: list[ShardSet] = []
    for pattern in patterns:
        if has_magic(pattern):
            matches = sorted(p for p in fs.glob(pattern) if _visible(p) and fs.isfile(p))
            if not matches:
                raise NotFoundError(pattern, "no file matches this pattern")
            sets = _group(matches)
        elif fs.isdir(pattern):
            listing = sorted(fs.ls(pattern, detail=False))
            files = [p for p in listing if _visible(p) and fs.isfile(p)]
            sets = [s for s in _group(files) if s.prefix is not None]
            if not sets:
                raise NotFoundError(pattern, "the directory holds no shard set")
        elif fs.isfile(pattern):
            result.append(ShardSet(*posixpath.split(pattern), paths=[pattern]))
            parsed = parse_shard_name(posixpath.basename(pattern))
            if parsed is not None:
                result[-1].prefix = parsed.prefix
            continue
        else:
            raise NotFoundError(pattern, "no such file or directory")
        for shard_set in sets:
            if shard_set.prefix is not None:
                _check_complete(fs, pattern, shard_set)
        result.extend(sets)
    return result
