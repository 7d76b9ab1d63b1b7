"""What the tools work on: the shard sets a path names, with what storage says about them.

A path given to ``recprep ls``, ``verify`` or ``cp`` is one of

* a **directory**: every shard set in it (shards and/or a manifest);
* a **glob**: the matching files, shards grouped into their sets, others as lone files;
* a **prefix** ``dir/name``: the shard set ``name`` of ``dir`` (``dir/name-*-of-*`` and
  ``dir/name.manifest.json``), even when no file is called ``dir/name``;
* a **file**: a manifest stands for its whole set; a shard or any other file for itself.

For each set, :func:`find_sets` reads the manifest (once) and lists the shards the set
should have that storage doesn't hold. Paths are filesystem paths (no protocol); show
them with :func:`recprep.storage.display`.

Example
-------
>>> from recprep import convert
>>> from recprep.storage import resolve
>>> _ = convert("memory://doc/sets", [1, 2, 3], 2, "p")
>>> fs, path = resolve("memory://doc/sets")
>>> [(s.prefix, len(s.shards), s.missing, s.manifest.num_records) for s in find_sets(fs, path)]
[('p', 2, [], 3)]
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import CorruptDataError, NotFoundError
from ..manifest import Manifest, read_manifest
from ..shards import MANIFEST_SUFFIX, has_magic, manifest_name, parse_shard_name, shard_name
from ..storage import display


@dataclass
class FoundSet:
    """A shard set (or a lone file) and what storage holds of it.

    ``shards`` are the present files to work on, in shard order; ``sizes`` their byte
    sizes from the listing. ``missing`` are the paths of shards the set should have
    (per its manifest, else per the shard names) that storage doesn't hold;
    ``unexpected`` are shards of the prefix that its manifest doesn't list.
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
    whole: bool = True  # False when the user named some shards of the set only

    @property
    def label(self) -> str:
        """``dir/prefix`` for a set, the path for a lone file."""
        if self.prefix is None:
            return self.shards[0]
        return posixpath.join(self.directory, self.prefix)


def is_hidden(path: str) -> bool:
    """Whether a path's last part starts with ``.`` (staging, temporaries)."""
    return posixpath.basename(path.rstrip("/")).startswith(".")


def _files(entries: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Visible regular files of a listing: path -> size."""
    return {
        e["name"].rstrip("/"): int(e.get("size") or 0)
        for e in entries
        if e.get("type") == "file" and not is_hidden(e["name"])
    }


def list_files(fs: Any, directory: str) -> dict[str, int]:
    """The visible files directly in ``directory``: path -> size."""
    return _files(fs.ls(directory, detail=True))


def _prefix_of(name: str) -> str | None:
    if name.endswith(MANIFEST_SUFFIX):
        return name[: -len(MANIFEST_SUFFIX)] or None
    parsed = parse_shard_name(name)
    return parsed.prefix if parsed is not None else None


def _build(
    fs: Any, directory: str, prefix: str, listing: dict[str, int], chosen: set[str] | None
) -> FoundSet:
    """The set ``prefix`` of ``directory``; ``chosen`` limits the shards to work on."""
    found = FoundSet(directory, prefix, whole=chosen is None)
    present = {}
    for path in listing:
        parsed = parse_shard_name(posixpath.basename(path))
        if parsed is not None and parsed.prefix == prefix and posixpath.dirname(path) == directory:
            present[path] = parsed
    manifest_path = posixpath.join(directory, manifest_name(prefix))
    if manifest_path in listing:
        found.manifest_path = manifest_path
        try:
            found.manifest = read_manifest(fs, manifest_path)
        except CorruptDataError as err:
            found.manifest_error = err.located(path=display(fs, manifest_path))
    if found.manifest is not None:
        expected = [posixpath.join(directory, s.name) for s in found.manifest.shards]
    else:
        lasts = sorted({p.last for p in present.values()})
        expected = [
            posixpath.join(directory, shard_name(prefix, i, last + 1))
            for last in lasts
            for i in range(last + 1)
        ]
    order = {path: i for i, path in enumerate(expected)}
    found.missing = [p for p in expected if p not in present]
    found.unexpected = sorted(p for p in present if p not in order)
    picked = [p for p in present if p in order and (chosen is None or p in chosen)]
    found.shards = sorted(picked, key=order.__getitem__)
    found.sizes = {p: listing[p] for p in found.shards}
    return found


def _group(
    fs: Any, directory: str, listing: dict[str, int], names: Iterable[str], whole: bool
) -> list[FoundSet]:
    """Sets of the shard and manifest files ``names`` (paths in ``directory``)."""
    prefixes: dict[str, set[str]] = {}
    for path in names:
        prefix = _prefix_of(posixpath.basename(path))
        if prefix is not None:
            prefixes.setdefault(prefix, set()).add(path)
    result = []
    for prefix, paths in sorted(prefixes.items()):
        by_manifest = any(p.endswith(MANIFEST_SUFFIX) for p in paths)
        chosen = None if whole or by_manifest else paths
        result.append(_build(fs, directory, prefix, listing, chosen))
    return result


def _lone(path: str, size: int) -> FoundSet:
    directory = posixpath.dirname(path)
    return FoundSet(directory, None, shards=[path], sizes={path: size}, whole=False)


def find_sets(fs: Any, path: str, *, lone_files: bool = True) -> list[FoundSet]:
    """The shard sets (and, with ``lone_files``, other files) that ``path`` names.

    Raises :class:`~recprep.errors.NotFoundError` when it names nothing.
    """
    shown = display(fs, path)
    if has_magic(path):
        matched = _files(fs.glob(path, detail=True).values())
        if not matched:
            raise NotFoundError(shown, "no file matches this pattern")
        result: list[FoundSet] = []
        for directory in sorted({posixpath.dirname(p) for p in matched}):
            here = [p for p in matched if posixpath.dirname(p) == directory]
            listing = list_files(fs, directory)
            result.extend(_group(fs, directory, listing, here, whole=False))
            if lone_files:
                others = [p for p in here if _prefix_of(posixpath.basename(p)) is None]
                result.extend(_lone(p, matched[p]) for p in others)
        return result
    if fs.isdir(path):
        listing = list_files(fs, path)
        sets = _group(fs, path, listing, listing, whole=True)
        if not sets:
            raise NotFoundError(shown, "the directory holds no shard set")
        return sets
    directory, name = posixpath.split(path)
    if fs.isfile(path):
        if _prefix_of(name) is not None:
            listing = list_files(fs, directory)
            sets = _group(fs, directory, listing, [path], whole=False)
            if not name.endswith(MANIFEST_SUFFIX):  # one shard, named alone: just that file
                one = sets[0]
                one.missing, one.unexpected = [], []
                one.shards, one.sizes = [path], {path: int(fs.size(path))}
            return sets
        if not lone_files:
            raise NotFoundError(shown, "not a shard set, its manifest, or a directory of sets")
        return [_lone(path, int(fs.size(path)))]
    if directory and fs.isdir(directory):
        listing = list_files(fs, directory)
        mine = [p for p in listing if _prefix_of(posixpath.basename(p)) == name]
        if mine:
            return _group(fs, directory, listing, mine, whole=True)
    raise NotFoundError(shown, "no such file, directory, glob match or shard set prefix")
