"""The last phase of a write: each partition directory's shard set committed, then
``_SUCCESS``.

Everything a write produces sits in one hidden staging directory at the top of the
dataset (``.recprep-staging-spark-{run}/``) until the commit. Then, with ``_SUCCESS``
removed first (the dataset is being changed), each directory is committed with the core
protocol (:class:`recprep.storage.staging.Staging`, ``docs/format.md`` §3): the manifest and a
journal are staged (the journal in the directory's ``.recprep-staging-{prefix}/``, where
readers look for it), the old set (with ``overwrite``) is uncommitted, the new shards and
their TFRecord indexes are moved to their final names, the old files go, and the manifest
is moved in last — a directory's commit point. With ``partition_overwrite="static"`` the
directories the write didn't touch are removed afterwards. ``_SUCCESS`` is written last of
all: it marks a complete write.

What goes in each directory's manifest ``schema``::

    {"features": [...],                        # codec="example", when no value was null
     "spark": {"columns": [{"name": "word", "type": "string", "nullable": true}],
               "partition_columns": [{"name": "number", "type": "bigint"}]}}

``features`` are those of the Example codec (``docs/format.md`` §7), so ``RecordIO`` reads
the set with their dtypes; they are left out of a set where some value was null (that
Example lacks the feature), and ``RecordIO`` then gives dicts of 1-D arrays.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..codecs import get_codec
from ..storage.chunkindex import binding
from ..storage.listing import SUCCESS_NAME, DirectoryEntry, Kind, list_entries
from ..storage.manifest import Manifest, ShardInfo
from ..storage.shardnames import shard_name
from ..storage.staging import FileFacts, Staging
from ..write.options import WriteOptions
from .columns import ColumnSpec, features

__all__ = ["DirectoryOutput", "commit_dataset", "manifest_schema"]

log = logging.getLogger("recprep")


@dataclass
class DirectoryOutput:
    """One directory's new shard set, staged: final name -> staged path."""

    rel: str  # relative to the dataset root ("" for the root itself)
    key: tuple[Any, ...]
    shards: list[FileFacts]
    indexes: list[str | None] = field(default_factory=list)


def manifest_schema(
    codec: str,
    data: Sequence[ColumnSpec],
    partitions: Sequence[ColumnSpec],
    nulls: Iterable[str] = (),
) -> dict[str, Any]:
    """The manifest ``schema`` of a directory's set (see the module docstring)."""
    schema: dict[str, Any] = {}
    if not set(nulls):  # what a codec declaring features records of them
        schema.update(get_codec(codec).with_features(features(data)).schema())
    schema["spark"] = {
        "columns": [c.to_json() for c in data],
        "partition_columns": [{"name": c.name, "type": c.type} for c in partitions],
    }
    return schema


def _files_of(fs: Any, directory: str) -> list[DirectoryEntry]:
    """Every file in ``directory`` but recprep's hidden staging and locks."""
    if not fs.isdir(directory):
        return []
    return [e for e in list_entries(fs, directory) if not e.is_dir and e.kind is not Kind.WORK]


def _manifest(prefix: str, options: WriteOptions, output: DirectoryOutput,
              schema: Mapping[str, Any]) -> tuple[Manifest, dict[str, str]]:
    count = len(output.shards)
    names = [shard_name(prefix, i, count) for i in range(count)]
    staged = {name: f.path for name, f in zip(names, output.shards, strict=True)}
    kind = options.container().record_index
    for name, index in zip(names, output.indexes, strict=False):
        if index is not None and kind is not None:
            staged[kind.name_for(name)] = index
    shards = [ShardInfo(n, f.records, f.bytes, f.crc32c)
              for n, f in zip(names, output.shards, strict=True)]
    manifest = Manifest(prefix, options.format, options.codec.name, options.compressor,
                        shards, dict(schema))
    return manifest, staged


def commit_dataset(
    fs: Any,
    root: str,
    staging: str,
    prefix: str,
    options: WriteOptions,
    outputs: Sequence[DirectoryOutput],
    schemas: Mapping[str, Mapping[str, Any]],
    *,
    overwrite: bool,
    static: bool,
) -> dict[str, Manifest]:
    """Commit every directory's staged set (``schemas`` by ``rel``), prune what a static
    overwrite replaces, and write ``_SUCCESS``. Returns the manifests by directory."""
    success = posixpath.join(root, SUCCESS_NAME)
    if fs.exists(success):
        fs.rm(success)
    manifests: dict[str, Manifest] = {}
    for output in sorted(outputs, key=lambda o: o.rel):
        directory = posixpath.join(root, output.rel) if output.rel else root
        fs.makedirs(directory, exist_ok=True)
        manifest, staged = _manifest(prefix, options, output, schemas[output.rel])
        manifest.side_files = [binding(fs, path, name) for name, path in staged.items()
                               if name.startswith(".")]  # the shards' record indexes
        replaced = _files_of(fs, directory) if overwrite else []
        for old in replaced:  # uncommit other sets before their shards go
            if old.kind is Kind.MANIFEST and old.prefix != prefix:
                fs.rm(old.path)
        # the journal goes where readers look for it (``.recprep-staging-{prefix}`` of the
        # directory: a set mid-commit is refused, never read as a mix); the staged files
        # stay in the dataset's staging directory
        commit = Staging(fs, directory, prefix, area=staging)
        commit.create(keep=False)
        commit.commit(staged, manifest.to_json(),
                      replaced=[e.path for e in replaced if fs.exists(e.path)])
        manifests[output.rel] = manifest
    if static:
        _prune(fs, root, {o.rel for o in outputs})
    with fs.open(success, "wb"):
        pass
    return manifests


def _prune(fs: Any, root: str, written: set[str]) -> None:
    """Remove what isn't part of this write (a static overwrite): directories off the
    written ones' paths, and files outside the written directories."""
    ancestors = {""}
    for rel in written:
        parts = rel.split("/") if rel else []
        ancestors.update("/".join(parts[:k]) for k in range(len(parts)))

    def walk(rel: str) -> None:
        directory = posixpath.join(root, rel) if rel else root
        for entry in list_entries(fs, directory):
            child = f"{rel}/{entry.name}" if rel else entry.name
            if entry.kind is Kind.WORK or (not rel and entry.name == SUCCESS_NAME):
                continue
            if entry.is_dir:
                if child in written:
                    continue
                if child in ancestors:
                    walk(child)
                    continue
            elif rel in written:
                continue
            log.info("recprep: static overwrite removes %s", entry.path)
            fs.rm(entry.path, recursive=entry.is_dir)

    walk("")
