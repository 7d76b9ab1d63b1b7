"""Shard names: ``{prefix}-aaaaa-of-bbbbb`` and ``{prefix}.manifest.json``.

A shard set is ``name_prefix-aaaaa-of-bbbbb``: a five-digit shard index and the
five-digit *largest* index (``num_shards - 1``), as in the PaddlePaddle design; both
widen together past 99999 shards.

Which files of a directory belong to which set, and what a reader reads of a path, is
:mod:`recprep.storage.discovery`.

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

import itertools
import re
from typing import Any, NamedTuple

from ..errors import InvalidArgumentError

MANIFEST_SUFFIX = ".manifest.json"
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


def glob_root(pattern: str) -> str:
    """The directory a glob's matches are under: its path up to the first part with glob
    characters (of a plain path, its directory).

    >>> glob_root("bucket/data/train-*-of-*"), glob_root("/d/*/p-*"), glob_root("/d/p")
    ('bucket/data', '/d', '/d')
    """
    parts = pattern.split("/")
    kept = list(itertools.takewhile(lambda part: not has_magic(part), parts))
    return "/".join(kept[:-1] if len(kept) == len(parts) else kept) or "/"
