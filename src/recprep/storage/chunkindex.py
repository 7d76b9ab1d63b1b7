"""A set's chunk indexes, in one side file written when ``convert`` commits.

For a format with chunk headers
(:attr:`~recprep.containers.base.Format.chunk_header_bytes`, RecordIO), reading a range
of a shard, or one instance of it, needs the shard's chunk index
(:class:`~recprep.containers.fileindex.FileIndex`): built without this file by hopping
from chunk header to chunk header, one read per chunk. ``convert`` writes every shard's
index into one hidden file beside the set, ``.{prefix}.chunks`` (hidden: never taken for
data), committed with the shards before the manifest; opening a set of 10,000 shards
then reads one file and no chunk header.

The file is one line of JSON (version 1, see ``docs/format.md``) and a line with its
CRC-32C in hex: per shard its name, its bytes and CRC-32C (as the manifest lists them),
its chunk offsets delta-encoded, and its chunk record counts. **The manifest vouches for
it**: it lists the side file's size and SHA-256 (``side_files``), and a reader uses the
side file only when it is exactly that file — a side file rewritten to point instance
numbers at other records, however consistent with itself, is refused
(:class:`~recprep.errors.CorruptDataError`). It is still checked against the manifest
(offsets starting at 0, increasing and inside the file, counts summing to the
manifest's), and a reader checks every chunk it reads against it.

Example
-------
>>> import fsspec
>>> from recprep.storage.manifest import Manifest, ShardInfo
>>> fs = fsspec.filesystem("memory")
>>> m = Manifest(name_prefix="s", format="recordio", codec="raw", compressor="none",
...              shards=[ShardInfo("s-00000-of-00001", 5, 400, 7)], schema=None)
>>> data = write_table(fs, "/doc/ci/.s.chunks", m,
...                    {"s-00000-of-00001": ([0, 120, 300], [2, 2, 1])})
>>> load_table(fs, "/doc/ci", m) is None  # the manifest doesn't vouch for it (yet)
True
>>> m.side_files.append(binding(fs, "/doc/ci/.s.chunks"))
>>> table = load_table(fs, "/doc/ci", m)
>>> index = table.index("s-00000-of-00001")
>>> index.offsets.tolist(), index.num_records
([0, 120, 300], 5)
"""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import google_crc32c
import numpy as np

from ..containers import get_format
from ..containers.fileindex import FileIndex
from ..errors import CorruptDataError, CorruptDataWarning, warn
from .chunklist import PackedChunks, pack_entries, pack_lean
from .fs import display, read_regular
from .manifest import Manifest, ShardInfo, SideFileInfo
from .shardtable import ShardTable, shard_finder

log = logging.getLogger("recprep")

__all__ = [
    "CHUNKS_SUFFIX", "ChunkTable", "binding", "chunks_name", "load_table", "write_table",
]

#: the side file is named ``.{prefix}`` and this
CHUNKS_SUFFIX = ".chunks"
_VERSION = 1
_MAX_BYTES = 1 << 30  # a side file bigger than this is not ours


def chunks_name(prefix: str) -> str:
    """The side file of the set ``prefix``.

    >>> chunks_name("train")
    '.train.chunks'
    """
    return f".{prefix}{CHUNKS_SUFFIX}"


def encode(manifest: Manifest, chunks: Mapping[str, tuple[Sequence[int], Sequence[int]]]) -> bytes:
    """The side file's bytes: per shard of ``manifest``, ``chunks[name]`` = (offsets,
    record counts)."""
    shards = []
    for s in manifest.shards:
        offsets, counts = chunks[s.name]
        deltas = np.diff(np.asarray(offsets, dtype=np.int64), prepend=0)
        shards.append({"name": s.name, "bytes": s.bytes, "crc32c": s.crc32c,
                       "offsets": deltas.tolist(), "counts": [int(c) for c in counts]})
    body = {"recprep_chunks": _VERSION, "name_prefix": manifest.name_prefix,
            "format": manifest.format, "shards": shards}
    data = json.dumps(body, separators=(",", ":")).encode()
    return data + b"\n" + b"%08x\n" % google_crc32c.value(data)


def write_table(
    fs: Any, path: str, manifest: Manifest,
    chunks: Mapping[str, tuple[Sequence[int], Sequence[int]]],
) -> bytes:
    """Write the side file of ``manifest``'s set at ``path`` (see :func:`encode`); the
    bytes written."""
    data = encode(manifest, chunks)
    with fs.open(path, "wb") as f:
        f.write(data)
    return data


@dataclass
class ChunkTable:
    """A set's side file, read and matched to its manifest; shards checked when asked.
    ``shards``: the manifest's, in the side file's order; ``chunks``: their entries,
    packed (:class:`~recprep.storage.chunklist.PackedChunks`)."""

    path: str  # as users write it
    shards: Sequence[ShardInfo]
    chunks: PackedChunks
    #: the format's chunk header size: the least one chunk's offset is past the previous
    header_bytes: int = 1
    on_corrupt: str = "raise"

    def __post_init__(self) -> None:
        self._find = shard_finder(self.shards)

    def index(self, name: str) -> FileIndex | None:
        """The index of shard ``name``, or None (with a
        :class:`~recprep.errors.CorruptDataWarning`) when its entry is bad."""
        number = self._find(name)
        if number is None:
            return None
        info = self.shards[number]
        try:
            deltas, counts = self.chunks.entry(number)
            offsets = np.cumsum(deltas)
            header = self.header_bytes
            if deltas.size and deltas[0] != 0:
                raise ValueError(f"its first chunk is at byte {int(deltas[0])}, not at the "
                                 "start of the file")
            if (deltas[1:] < header).any():
                raise ValueError("chunk offsets don't increase by at least a header")
            if offsets.size and offsets[-1] + header > info.bytes:
                raise ValueError(f"a chunk starts at {int(offsets[-1])}, past the end of "
                                 f"the {info.bytes} bytes of the file")
            if (counts < 0).any() or int(counts.sum()) != info.records:
                raise ValueError(f"the chunks count {int(counts.sum())} records, the "
                                 f"manifest {info.records}")
        except ValueError as err:
            _refuse(self.path, f"its entry for {name} is bad ({err})", self.on_corrupt)
            return None
        return FileIndex.from_counts(offsets.tolist(), counts.tolist(), True)


def _refuse(path: str, why: str, on_corrupt: str) -> None:
    """A side file that is not what it should be: raise, or (``skip``) warn."""
    detail = f"the chunk index side file is not usable: {why}"
    if on_corrupt != "skip":
        raise CorruptDataError(detail, path=path)
    warn(CorruptDataWarning(f"{detail}; indexing the shards from their chunk headers "
                            "instead", path=path, offset=None, records_lost=0))


def load_table(
    fs: Any, directory: str, manifest: Manifest, on_corrupt: str = "raise"
) -> ChunkTable | None:
    """The side file of ``manifest``'s set in ``directory``, when the manifest vouches
    for it (:attr:`~recprep.storage.manifest.Manifest.side_files`: its size and SHA-256)
    and it is this set's.

    None when the manifest vouches for none (a set written before side files were
    bound: its shards are indexed from their chunk headers) or when the file is missing
    (with a logged warning). A file that is not the one the manifest vouches for is
    forged or damaged: :class:`~recprep.errors.CorruptDataError`, or with
    ``on_corrupt="skip"`` a :class:`~recprep.errors.CorruptDataWarning` and None (the
    shards are indexed from their headers; no record is lost).
    """
    name = chunks_name(manifest.name_prefix)
    path = posixpath.join(directory, name)
    shown = display(fs, path)
    bound = manifest.side_file(name)
    if bound is None:
        log.debug("recprep: the manifest vouches for no %s: indexing from chunk headers", shown)
        return None
    try:  # a regular file, no bigger than the one vouched for (remote: one bounded GET)
        data = read_regular(fs, path, min(bound.bytes, _MAX_BYTES),
                            what="the chunk index its manifest vouches for")
    except FileNotFoundError:
        log.warning("recprep: %s is missing (its manifest lists it); indexing the shards "
                    "from their chunk headers", shown)
        return None
    except (OSError, CorruptDataError) as err:
        _refuse(shown, "it is not the file the manifest vouches for: "
                f"{getattr(err, 'detail', err)}", on_corrupt)
        return None
    problem = bound.mismatch(data)
    if problem is not None:
        _refuse(shown, problem, on_corrupt)
        return None
    try:
        text, _, crc = data.rstrip(b"\n").rpartition(b"\n")
        if crc != b"%08x" % google_crc32c.value(text):
            raise ValueError("its CRC-32C doesn't match its bytes (damaged)")
        return _table(shown, text, manifest, on_corrupt)
    except (KeyError, TypeError, ValueError) as err:
        _refuse(shown, f"{err}", on_corrupt)
        return None


def _table(shown: str, text: bytes, manifest: Manifest, on_corrupt: str) -> ChunkTable | None:
    """The side file's JSON ``text``, matched to ``manifest``: its entries packed as they
    are read (:func:`~recprep.storage.chunklist.pack_lean`), else by ``json``."""
    shards = manifest.shards
    if isinstance(shards, ShardTable):
        lean = pack_lean(text, shards.name, shards.sizes, shards.crcs)
    else:
        lean = pack_lean(text, [s.name for s in shards], [s.bytes for s in shards],
                         [s.crc32c for s in shards])
    body = json.loads(text if lean is None else lean[0])
    if not isinstance(body, dict) or body.get("recprep_chunks") != _VERSION:
        raise ValueError(f"not a version {_VERSION} chunk index")
    if body.get("name_prefix") != manifest.name_prefix or (
        body.get("format") != manifest.format
    ):
        raise ValueError(f"it is for the {body.get('format')} set "
                         f"{body.get('name_prefix')!r}")
    if lean is not None:
        packed = lean[1]
    else:
        listed = [(e["name"], e["bytes"], e["crc32c"]) for e in body["shards"]]
        if listed != [(s.name, s.bytes, s.crc32c) for s in shards]:
            _refuse(shown, "its shards (names, sizes, CRC-32C) are not the manifest's: "
                           "it belongs to another set", on_corrupt)
            return None
        packed = pack_entries(body["shards"])
    header = get_format(manifest.format).chunk_header_bytes
    return ChunkTable(shown, shards, packed, max(header, 1), on_corrupt)


def binding(fs: Any, path: str, name: str | None = None) -> SideFileInfo:
    """The manifest's entry for the side file at ``path`` (written just now), to be
    committed as ``name`` (default: its own name): its name, size and SHA-256."""
    return SideFileInfo.of(name or posixpath.basename(path), bytes(fs.cat_file(path)))
