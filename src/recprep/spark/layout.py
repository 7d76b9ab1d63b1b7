"""Where the files of a Spark dataset are: Hive-style partition directories.

``partition_by=["number"]`` writes one directory per value, ``number=8/``, escaped as Spark
and Hive escape path names (``%XX`` for ``/``, ``=``, ``%``, ``:`` and the like); a null
value (or an empty string) is the directory ``number=__HIVE_DEFAULT_PARTITION__``.

:func:`discover` finds the *leaf* directories of a dataset — the ones holding data files or
manifests — with their partition values and files in reading order: the shards of each
committed set (from its manifest), then any other data file (Spark-TFRecord's ``part-*``),
sorted. ``_SUCCESS``, ``_``-prefixed, ``.crc`` and hidden files are never data (the rule
is :mod:`recprep.storage.listing`'s, the reader's).

Examples
--------
>>> partition_path(["number", "word"], [8, "a/b"])
'number=8/word=a%2Fb'
>>> parse_segment("word=a%2Fb"), parse_segment("number=__HIVE_DEFAULT_PARTITION__")
(('word', 'a/b'), ('number', None))
"""

from __future__ import annotations

import datetime
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidArgumentError, MissingShardsError, NotFoundError
from ..storage.listing import is_partition_dir, list_directory, list_entries
from ..storage.manifest import Manifest, read_manifest

__all__ = [
    "DEFAULT_PARTITION",
    "Leaf",
    "discover",
    "escape",
    "existing_keys",
    "format_value",
    "parse_segment",
    "partition_path",
    "unescape",
    "visible_entries",
]

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_TO_ESCAPE = re.compile(r"[\x01-\x1f\"#%'*/:=?\\\x7f{\[\]^]")  # Spark's ExternalCatalogUtils
_ESCAPED = re.compile(r"%([0-9A-Fa-f]{2})")


def escape(text: str) -> str:
    """``text`` escaped for a path segment, as Spark does (``%`` and two hex digits).

    >>> escape("50%/x=1")
    '50%25%2Fx%3D1'
    """
    return _TO_ESCAPE.sub(lambda m: f"%{ord(m.group()):02X}", text)


def unescape(text: str) -> str:
    """The inverse of :func:`escape`."""
    return _ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), text)


def format_value(value: Any) -> str:
    """A partition value as its directory spells it (before escaping)."""
    if value is None or value == "":
        return DEFAULT_PARTITION
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, str)):
        return str(value)
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return value.isoformat()
    raise InvalidArgumentError(
        f"a partition value must be an int, str, bool or date, got {type(value).__name__}"
    )


def partition_path(keys: Sequence[str], values: Sequence[Any]) -> str:
    """The relative directory of one partition: ``k1=v1/k2=v2``."""
    return "/".join(
        f"{escape(k)}={v if v == DEFAULT_PARTITION else escape(v)}"
        for k, v in zip(keys, map(format_value, values), strict=True)
    )


def parse_segment(name: str) -> tuple[str, str | None] | None:
    """``(key, value)`` of a partition directory name (value ``None`` for null), or None."""
    if not is_partition_dir(name):
        return None
    key, _, value = name.partition("=")
    return unescape(key), None if value == DEFAULT_PARTITION else unescape(value)


@dataclass
class Leaf:
    """A directory holding data: its partition values, manifests and files in order."""

    path: str
    partition: tuple[tuple[str, str | None], ...] = ()
    manifests: list[Manifest] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    #: for each file of a committed set, the index of its manifest in ``manifests``
    manifest_of: dict[str, int] = field(default_factory=dict)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.partition)


def _leaf_of(fs: Any, directory: str, partition: tuple[tuple[str, str | None], ...],
          files: list[str], manifest_paths: list[str]) -> Leaf:
    leaf = Leaf(directory, partition)
    present = set(files)
    for manifest_path in manifest_paths:
        manifest = read_manifest(fs, manifest_path)
        if manifest is None:  # removed since the listing
            continue
        paths = [posixpath.join(directory, s.name) for s in manifest.shards]
        missing = [p for p in paths if p not in present]
        if missing:
            raise MissingShardsError(directory, missing, len(paths) - len(missing))
        for path in paths:
            leaf.manifest_of[path] = len(leaf.manifests)
        leaf.manifests.append(manifest)
        leaf.files.extend(paths)
    leaf.files.extend(p for p in files if p not in leaf.manifest_of)
    return leaf


def discover(fs: Any, root: str) -> list[Leaf]:
    """The leaf directories under ``root`` (itself included), in sorted path order.

    ``root`` may also be a single file (one leaf, that file). Raises
    :class:`~recprep.errors.NotFoundError` when ``root`` doesn't exist, and
    :class:`~recprep.errors.InvalidArgumentError` when leaves are partitioned by
    different columns.
    """
    if not fs.exists(root):
        raise NotFoundError(root, "no such file or directory")
    if fs.isfile(root):
        return [Leaf(posixpath.dirname(root), files=[root])]
    leaves: list[Leaf] = []

    def walk(directory: str, partition: tuple[tuple[str, str | None], ...]) -> None:
        files, manifests, subdirs = list_directory(fs, directory)
        if files or manifests:
            leaves.append(_leaf_of(fs, directory, partition, files, manifests))
        for subdir in subdirs:
            parsed = parse_segment(posixpath.basename(subdir))
            assert parsed is not None
            walk(subdir, (*partition, parsed))

    walk(root, ())
    keys = {leaf.keys for leaf in leaves}
    if len(keys) > 1:
        shown = " and ".join(sorted("/".join(k) or "(none)" for k in keys))
        raise InvalidArgumentError(
            f"{root} mixes partitionings: directories are partitioned by {shown}; read "
            "the partitions of one layout (a subdirectory or a list of them)"
        )
    return leaves


def existing_keys(fs: Any, root: str) -> tuple[str, ...] | None:
    """The partition columns of the data already in ``root``: ``()`` for data files at the
    top, ``None`` when it holds no data."""
    if not fs.isdir(root):
        return None
    files, manifests, subdirs = list_directory(fs, root)
    if subdirs:
        parsed = parse_segment(posixpath.basename(subdirs[0]))
        assert parsed is not None
        return (parsed[0], *(existing_keys(fs, subdirs[0]) or ()))
    return () if files or manifests else None


def visible_entries(fs: Any, root: str) -> list[str]:
    """What ``root`` holds besides hidden entries (staging, locks): files and directories,
    ``_SUCCESS`` included."""
    if not fs.isdir(root):
        return []
    return [e.path for e in list_entries(fs, root) if not e.hidden]
