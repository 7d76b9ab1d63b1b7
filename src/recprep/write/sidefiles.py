"""The side files a conversion commits with its shards, and the manifest's word for them.

Built in the staging directory once every shard is staged, committed with the shards,
before the manifest — which lists each one's size and SHA-256 (``side_files``): a reader
uses a side file only when it is exactly the one the manifest vouches for.

* a **record index** beside each shard, when the format keeps one that gives random
  access with the compressor (a plain TFRecord shard's ``.{shard}.tfindex``,
  :mod:`recprep.storage.sideindex`);
* the set's **chunk index** (``.{prefix}.chunks``, :mod:`recprep.storage.chunkindex`), for
  a format with chunk headers: every shard's chunk offsets and record counts, as the
  writers reported them while they wrote (:attr:`~recprep.storage.staging.FileFacts.chunks`)
  — no shard is read back for it. A shard whose writers didn't report (a format's writer
  that doesn't tell, a task recorded by an older version and reused by a resume) has its
  chunk headers hopped once instead.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ..containers import Format
from ..containers.fileindex import build_index
from ..errors import WriteError
from ..storage.chunkindex import chunks_name, write_table
from ..storage.fs import display
from ..storage.manifest import Manifest, SideFileInfo
from ..storage.sideindex import build_side_index
from ..storage.staging import FileFacts
from .job import ConvertJob

__all__ = ["SCANS_AT_ONCE", "chunk_index", "record_indexes", "side_files"]

#: staged shards scanned for their record index at once
SCANS_AT_ONCE = 8


def side_files(
    job: ConvertJob, shards: Mapping[str, FileFacts], manifest: Manifest
) -> dict[str, str]:
    """The side files of the staged ``shards`` (final name -> facts), built in staging:
    final name -> staged path; ``manifest`` now lists them (``side_files``), each vouched
    for by the bytes written (nothing is read back)."""
    sides = record_indexes(job, shards)
    sides.update(chunk_index(job, shards, manifest))
    manifest.side_files = [info for _, info in sides.values()]
    return {name: path for name, (path, _) in sides.items()}


def record_indexes(job: ConvertJob, shards: Mapping[str, FileFacts]
                   ) -> dict[str, tuple[str, SideFileInfo]]:
    """Record index side files of the shards, when the format keeps one and it gives
    random access with this compressor (a plain TFRecord shard's ``.{shard}.tfindex``):
    counts and ranges without a scan; hidden names, committed with the shards. Final
    name -> (staged path, the manifest's entry). Each staged shard is scanned for its
    frames, several at once (on an object store each scan is a stream of its own)."""
    options = job.options
    container = options.container()
    kind = container.record_index
    if kind is None or not kind.seeks(options.compressor):
        return {}

    def build(name: str) -> tuple[str, tuple[str, SideFileInfo]]:
        facts, side = shards[name], job.staging.file(kind.name_for(name))
        try:
            index = build_side_index(job.fs, facts.path, container=container,
                                     index_file=side, compressor=options.compressor)
        except WriteError:
            raise
        except OSError as err:
            raise WriteError(display(job.fs, side), err) from err
        info = SideFileInfo.of(posixpath.basename(side), index.to_bytes())
        return kind.name_for(name), (side, info)

    with ThreadPoolExecutor(max(1, min(SCANS_AT_ONCE, len(shards))),
                            thread_name_prefix="recprep-index") as pool:
        return dict(pool.map(build, list(shards)))


def chunk_index(
    job: ConvertJob, shards: Mapping[str, FileFacts], manifest: Manifest
) -> dict[str, tuple[str, SideFileInfo]]:
    """The side file of a set of a format with chunk headers (``.{prefix}.chunks``: every
    shard's chunk offsets and counts, :mod:`recprep.storage.chunkindex`), from the chunks
    the shards' writers reported; committed with the shards, before the manifest. Final
    name -> (staged path, the manifest's entry)."""
    container = job.options.container()
    if not container.chunk_header_bytes:
        return {}
    chunks = {name: _chunks_of(job.fs, facts, container) for name, facts in shards.items()}
    side = job.staging.file(chunks_name(manifest.name_prefix))
    try:
        data = write_table(job.fs, side, manifest, chunks)
    except OSError as err:
        raise WriteError(display(job.fs, side), err) from err
    return {chunks_name(manifest.name_prefix):
            (side, SideFileInfo.of(posixpath.basename(side), data))}


def _chunks_of(fs: Any, facts: FileFacts, container: Format) -> tuple[list[int], list[int]]:
    """A staged shard's chunk offsets and record counts: as its writers reported them, or,
    where they didn't, from its chunk headers, hopped once."""
    if facts.chunks is not None:
        return [offset for offset, _ in facts.chunks], [count for _, count in facts.chunks]
    try:
        with fs.open(facts.path, "rb") as f:
            index = build_index(f, container, path=display(fs, facts.path))
    except OSError as err:
        raise WriteError(display(fs, facts.path), err) from err
    return index.offsets.tolist(), np.diff(index.firsts).tolist()
