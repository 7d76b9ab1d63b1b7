"""A set's chunk indexes, in one side file written when ``convert`` commits.

For a format with chunk headers
(:attr:`~recprep.containers.base.Format.chunk_header_bytes`, RecordIO), reading a range of
a shard, or one instance of it, needs the shard's chunk index
(:class:`~recprep.read.fileindex.FileIndex`): built without this file by hopping from chunk header
to chunk header, one read per chunk. ``convert`` writes every shard's index into one hidden
file beside the set, ``.{prefix}.chunks`` (hidden: never taken for data), committed with
the shards before the manifest; opening a set of 10,000 shards then reads one file and no
chunk header.

The file is one line of JSON (version 1, see ``docs/format.md``) and a line with its
CRC-32C in hex: per shard its name, its bytes and
CRC-32C (as the manifest lists them: a side file of another set, or of an earlier set of
the same name, doesn't match), its chunk offsets delta-encoded, and its chunk record
counts. It is untrusted input: :meth:`ChunkTable.index` checks it against the manifest
(offsets increasing and inside the file, counts summing to the manifest's), and a reader
still checks every chunk header it reads against it.

Example
-------
>>> import fsspec
>>> from recprep.storage.manifest import Manifest, ShardInfo
>>> fs = fsspec.filesystem("memory")
>>> m = Manifest(name_prefix="s", format="recordio", codec="raw", compressor="none",
...              shards=[ShardInfo("s-00000-of-00001", 5, 400, 7)], schema=None)
>>> write_table(fs, "/doc/ci/.s.chunks", m, {"s-00000-of-00001": ([0, 120, 300], [2, 2, 1])})
>>> table = load_table(fs, "/doc/ci", m)
>>> index = table.index("s-00000-of-00001")
>>> index.offsets.tolist(), index.num_records
([0, 120, 300], 5)
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import google_crc32c
import numpy as np

from ..containers import get_format
from ..errors import CorruptDataError, CorruptDataWarning
from ..read.fileindex import FileIndex
from .fs import display, read_regular
from .manifest import Manifest, ShardInfo

__all__ = ["CHUNKS_SUFFIX", "ChunkTable", "chunks_name", "load_table", "write_table"]

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
) -> None:
    """Write the side file of ``manifest``'s set at ``path`` (see :func:`encode`)."""
    data = encode(manifest, chunks)
    with fs.open(path, "wb") as f:
        f.write(data)


@dataclass
class ChunkTable:
    """A set's side file, read and matched to its manifest; shards checked when asked."""

    path: str  # as users write it
    entries: dict[str, dict[str, Any]]
    shards: dict[str, ShardInfo]
    #: the format's chunk header size: the least one chunk's offset is past the previous
    header_bytes: int = 1

    def index(self, name: str) -> FileIndex | None:
        """The index of shard ``name``, or None (with a
        :class:`~recprep.errors.CorruptDataWarning`) when its entry is bad."""
        entry = self.entries.get(name)
        info = self.shards.get(name)
        if entry is None or info is None:
            return None
        try:
            deltas = np.asarray(entry["offsets"], dtype=np.int64)
            counts = np.asarray(entry["counts"], dtype=np.int64)
            if deltas.ndim != 1 or deltas.shape != counts.shape:
                raise ValueError(f"{deltas.size} offsets but {counts.size} counts")
            offsets = np.cumsum(deltas)
            header = self.header_bytes
            if deltas.size and (deltas[0] < 0 or (deltas[1:] < header).any()):
                raise ValueError("chunk offsets don't increase by at least a header")
            if offsets.size and offsets[-1] + header > info.bytes:
                raise ValueError(f"a chunk starts at {int(offsets[-1])}, past the end of "
                                 f"the {info.bytes} bytes of the file")
            if (counts < 0).any() or int(counts.sum()) != info.records:
                raise ValueError(f"the chunks count {int(counts.sum())} records, the "
                                 f"manifest {info.records}")
        except (KeyError, TypeError, ValueError, OverflowError) as err:
            _distrust(self.path, f"its entry for {name} is bad ({err})")
            return None
        return FileIndex.from_counts(offsets.tolist(), counts.tolist(), True)


def _distrust(path: str, why: str) -> None:
    from warnings import warn

    warn(CorruptDataWarning(
        f"the chunk index side file is not usable: {why}; indexing the shards from their "
        "chunk headers instead", path=path, offset=None, records_lost=0,
    ), stacklevel=3)


def load_table(fs: Any, directory: str, manifest: Manifest) -> ChunkTable | None:
    """The side file of ``manifest``'s set in ``directory``: None when there is none
    (silently) or when it is not this set's or is damaged (with a
    :class:`~recprep.errors.CorruptDataWarning`)."""
    path = posixpath.join(directory, chunks_name(manifest.name_prefix))
    shown = display(fs, path)
    try:  # a regular file, at most _MAX_BYTES + 1 bytes read (remote: one bounded GET)
        data = read_regular(fs, path, _MAX_BYTES, what="a chunk index")
    except (FileNotFoundError, IsADirectoryError):
        return None
    except (OSError, CorruptDataError) as err:
        _distrust(shown, f"it can't be read ({getattr(err, 'detail', err)})")
        return None
    try:
        if len(data) > _MAX_BYTES:
            raise ValueError(f"it is bigger than {_MAX_BYTES} bytes")
        text, _, crc = data.rstrip(b"\n").rpartition(b"\n")
        if crc != b"%08x" % google_crc32c.value(text):
            raise ValueError("its CRC-32C doesn't match its bytes (damaged)")
        body = json.loads(text)
        if not isinstance(body, dict) or body.get("recprep_chunks") != _VERSION:
            raise ValueError(f"not a version {_VERSION} chunk index")
        if body.get("name_prefix") != manifest.name_prefix or (
            body.get("format") != manifest.format
        ):
            raise ValueError(f"it is for the {body.get('format')} set "
                             f"{body.get('name_prefix')!r}")
        entries = {e["name"]: e for e in body["shards"]}
        listed = [(e["name"], e["bytes"], e["crc32c"]) for e in body["shards"]]
    except (KeyError, TypeError, ValueError) as err:
        _distrust(shown, f"{err}")
        return None
    shards = {s.name: s for s in manifest.shards}
    if listed != [(s.name, s.bytes, s.crc32c) for s in manifest.shards]:
        _distrust(shown, "its shards (names, sizes, CRC-32C) are not the manifest's: it "
                         "belongs to another set")
        return None
    header = get_format(manifest.format).chunk_header_bytes
    return ChunkTable(shown, entries, shards, max(header, 1))
