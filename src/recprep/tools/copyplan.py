"""Planning a copy: what ``recprep cp`` copies, into which destination set, replacing what.

The sources are expanded (see :mod:`recprep.tools._sets`) into :class:`CopyItem` values,
manifests last: a directory copies every visible file in it; a glob its matches;
``dir/prefix`` or a manifest the whole set, its side files with it. Copying every shard of
a set copies its manifest too; copying some shards of a set doesn't (the destination would
claim shards it hasn't got). :func:`items_by_set` groups the items by the destination set
they commit with, and :func:`replaced_files` names what the copy would replace.

Example
-------
>>> from recprep import convert
>>> _ = convert("memory://doc/cp-plan", list(range(5)), 2, "p")
>>> items = plan_copy(["memory://doc/cp-plan"], None)
>>> [(it.name, it.is_manifest) for it in items]
[('.p.chunks', False), ('p-00000-of-00001', False), ('p-00001-of-00001', False), \
('p.manifest.json', True)]
>>> sorted(items_by_set(items))
['p']
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Container, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..errors import (
    InvalidArgumentError,
    MissingShardsError,
    NotFoundError,
    PartialCopyWarning,
    warn,
)
from ..storage.fs import display, is_local, resolve
from ..storage.listing import SET_KINDS, DirectoryEntry, Kind, classify, list_entries
from ..storage.shardnames import has_magic, parse_shard_name
from ._sets import FoundSet, find_all, set_by_manifest, sets_in, visible_files

__all__ = ["CopyItem", "is_manifest_or_side_file", "items_by_set", "plan_copy",
           "replaced_files", "replaced_in"]

log = logging.getLogger("recprep")


@dataclass(frozen=True)
class CopyItem:
    """One file to copy: where it is, its size, and the CRC-32C its manifest lists;
    ``data``: its bytes, when planning read them already (a manifest: not read again)."""

    fs: Any
    path: str
    size: int
    expected_crc: int | None  # from the manifest, when it lists the file
    is_manifest: bool
    data: bytes | None = field(default=None, repr=False, compare=False)

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)



def _set_items(fs: Any, found: FoundSet, whole_directory: bool) -> list[CopyItem]:
    manifest = found.manifest
    crcs = {s.name: s.crc32c for s in manifest.shards} if manifest is not None else {}
    items = [
        CopyItem(fs, p, found.sizes[p], crcs.get(posixpath.basename(p)), False)
        for p in found.shards
    ]
    if found.manifest_error is not None and not whole_directory:
        raise found.manifest_error  # the set can't be copied as a set without it
    if found.missing and found.whole and not whole_directory:  # a set named: it all
        raise MissingShardsError(display(fs, found.label),
                                 [display(fs, p) for p in found.missing], len(found.shards),
                                 manifest=found.manifest is not None)
    if found.missing:
        log.warning(
            "recprep: %s lacks %d shard(s) of its set (%s...)", display(fs, found.label),
            len(found.missing), display(fs, found.missing[0]),
        )
    if not found.whole and not whole_directory:  # some shards named: not a set's copy
        total = manifest.num_shards if manifest is not None else (
            len(found.shards) + len(found.missing))
        parsed = parse_shard_name(posixpath.basename(found.shards[0]))
        if manifest is None and parsed is not None:
            total = parsed.last + 1
        warn(PartialCopyWarning(display(fs, found.label), len(items), total))
        return items
    if found.manifest_path is None:
        return items
    complete = manifest is not None and not found.missing and len(items) == manifest.num_shards
    if complete or whole_directory:
        data = found.manifest_data  # (found by its manifest: its bytes are at hand)
        size = int(fs.size(found.manifest_path)) if data is None else len(data)
        items.append(CopyItem(fs, found.manifest_path, size, None, True, data))
        if manifest is not None:  # the set's side files go with it (in its commit)
            items += [CopyItem(fs, p, size, None, False) for p, size in found.side_files.items()]
    return items


def _named_items(named: Sequence[tuple[Any, str]]) -> list[CopyItem]:
    """The files that sources other than directories name: sets whose files several
    sources name (an unquoted glob's files) taken as one (see ``_sets.find_all``)."""
    items = []
    for fs, found in find_all(named):
        if found.prefix is None:
            items.append(CopyItem(fs, found.shards[0], found.sizes[found.shards[0]], None, False))
        else:
            items.extend(_set_items(fs, found, whole_directory=False))
    return items


def _directory_items(fs: Any, path: str) -> list[CopyItem]:
    """The files a directory source names: every visible file, sets with their side files."""
    entries = list_entries(fs, path)
    listing = visible_files(entries)
    if not listing:
        raise NotFoundError(display(fs, path), "the directory holds no file to copy")
    sets = sets_in(fs, path, entries)  # from this listing: none asked for again
    items = [it for found in sets for it in _set_items(fs, found, whole_directory=True)]
    taken = {it.path for it in items}
    items += [CopyItem(fs, p, e.size, None, e.kind is Kind.MANIFEST) for p, e in
              sorted(listing.items()) if p not in taken]
    skipped = [e for e in entries if e.is_dir]
    if skipped:
        log.info("recprep: cp doesn't recurse; skipped %d subdirectories", len(skipped))
    return items


def _is_dir_or_set(fs: Any, path: str) -> tuple[bool, FoundSet | None]:
    """Whether ``path`` is a directory, and the set it names when it is ``dir/prefix`` or
    a manifest found by reading the manifest alone: on a store, both asked at once (one
    round trip; a set so named is not listed, nor its manifest asked about again)."""
    if has_magic(path):
        return False, None
    if is_local(fs):
        return bool(fs.isdir(path)), None
    with ThreadPoolExecutor(2) as pool:
        by_manifest = pool.submit(set_by_manifest, fs, path)
        is_dir = pool.submit(fs.isdir, path)
        found = by_manifest.result()
        return (False if found is not None else bool(is_dir.result())), found


def plan_copy(sources: Sequence[str], storage_options: Mapping[str, Any] | None) -> list[CopyItem]:
    """The files ``sources`` name, as :class:`CopyItem` values, manifests last."""
    items: dict[str, CopyItem] = {}
    expanded: list[CopyItem] = []
    named = []
    for source in sources:
        fs, path = resolve(source, storage_options)
        is_dir, found = _is_dir_or_set(fs, path)
        if found is not None:
            expanded.extend(_set_items(fs, found, whole_directory=False))
        elif is_dir:
            expanded.extend(_directory_items(fs, path))
        else:
            named.append((fs, path))
    expanded.extend(_named_items(named))
    for item in expanded:
        seen = items.get(item.name)
        here = display(item.fs, item.path)
        if seen is not None and display(seen.fs, seen.path) != here:
            raise InvalidArgumentError(
                f"two sources have the name {item.name!r} ({display(seen.fs, seen.path)} "
                f"and {here}); copy them into different destinations"
            )
        items[item.name] = item
    # manifests last; otherwise in a stable order
    return sorted(items.values(), key=lambda it: (it.is_manifest, it.name))



def items_by_set(items: Sequence[CopyItem]) -> dict[str | None, list[CopyItem]]:
    """The items by the destination set they belong to (None: files of no set)."""
    groups: dict[str | None, list[CopyItem]] = {}
    for item in items:
        name = classify(item.name)
        groups.setdefault(name.prefix if name.kind in SET_KINDS else None, []).append(item)
    return groups



def replaced_files(dfs: Any, dpath: str, items: Sequence[CopyItem], finals: Mapping[str, str]
                   ) -> list[str]:
    """Destination files the copy would replace: same names, and the manifests of the sets
    whose shards it copies."""
    if not dfs.isdir(dpath):
        return []
    return replaced_in(list_entries(dfs, dpath), items, finals)


def replaced_in(entries: Sequence[DirectoryEntry], items: Sequence[CopyItem],
                finals: Mapping[str, str]) -> list[str]:
    """:func:`replaced_files` of the destination's listing ``entries``."""
    names = {it.name for it in items}
    prefixes = {n.prefix for it in items if (n := classify(it.name)).kind is Kind.SHARD}
    return [e.path for e in entries if e.name in finals
            or any(is_manifest_or_side_file(e.name, p, names) for p in prefixes if p is not None)]


def is_manifest_or_side_file(name: str, prefix: str, shards: Container[str]) -> bool:
    """Whether ``name`` is the manifest or a side file of the set ``prefix`` (a shard's
    side file: of one of ``shards``)."""
    what = classify(name)
    return what.kind is not Kind.SHARD and what.of_set(prefix, shards)

