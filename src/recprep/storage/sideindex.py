"""Record index side files through fsspec: find, load, build, write; counts and ranges.

A format that keeps a record index beside each shard
(:attr:`~recprep.containers.base.Format.record_index`, TFRecord's ``.{shard}.tfindex``)
describes its bytes and arithmetic in ``containers/``, which never opens a file; this
module is where those side files meet storage. :func:`load_index` checks a side file
against its data file (size, stream, CRC) and ignores an unusable one with a logged
warning, so a file without a usable index still reads, by a scan.

``container`` is the format whose record index is meant (default: the registered format
that keeps one, the first by name if several — TFRecord, among the built-ins).

Example
-------
>>> import fsspec
>>> from recprep.containers import get_format
>>> fs = fsspec.filesystem("memory")
>>> with fs.open("/doc/tfindex/a.tfrecord", "wb") as f:
...     w = get_format("tfrecord").writer(f, "none", 1 << 20)
...     for r in (b"x", b"", b"yz"):
...         w.write(r)
...     w.close()
>>> count_records(fs, "/doc/tfindex/a.tfrecord")       # no index yet: a scan
3
>>> index = build_side_index(fs, "/doc/tfindex/a.tfrecord")  # writes .a.tfrecord.tfindex
>>> index.offsets.tolist(), index.lengths().tolist()
([0, 17, 33], [1, 0, 2])
>>> read_records(fs, "/doc/tfindex/a.tfrecord", 1, 3)   # seeks to record 1
[b'', b'yz']
"""

from __future__ import annotations

import io
import logging
from typing import Any

import numpy as np

from ..containers import DEFAULT_MAX_CHUNK_BYTES, Format, indexing_formats
from ..containers.base import NO_LIMIT
from ..containers.record_index import RecordIndex
from ..errors import CorruptDataError, CorruptDataWarning, InvalidArgumentError, warn
from .fs import open_regular, read_regular
from .manifest import SideFileInfo

__all__ = [
    "build_side_index",
    "count_records",
    "load_index",
    "read_records",
    "record_offsets",
    "write_index",
]

log = logging.getLogger("recprep")


def _kind(container: Format | None) -> tuple[Format, type[RecordIndex]]:
    if container is None:
        keeping = indexing_formats()
        if not keeping:
            raise InvalidArgumentError("no registered format keeps a record index")
        container = min(keeping, key=lambda f: f.name)
    kind = container.record_index
    if kind is None:
        raise InvalidArgumentError(f"format {container.name!r} keeps no record index")
    return container, kind


def build_side_index(
    fs: Any,
    path: str,
    *,
    container: Format | None = None,
    index_file: str | None = None,
    compressor: str | None = None,
    max_chunk_bytes: int | None = None,
) -> RecordIndex:
    """Scan the file at ``path`` (:meth:`~recprep.containers.base.Format.index_records`)
    and write its side index.

    The index goes to ``index_file``, by default beside ``path``
    (:meth:`~recprep.containers.record_index.RecordIndex.path_for`); a staged
    file is indexed into the index's staged path, then both are moved to their final
    names. Returns the index. ``max_chunk_bytes`` ``None`` bounds no record: for a file
    recprep itself just wrote (a reader's bound is for files from elsewhere).
    """
    fmt, kind = _kind(container)
    limit = NO_LIMIT if max_chunk_bytes is None else max_chunk_bytes
    with open_regular(fs, path) as file:
        index = fmt.index_records(file, path=path, compressor=compressor,
                                  max_chunk_bytes=limit)
    assert index is not None
    write_index(fs, index, index_file or kind.path_for(path))
    return index


def write_index(fs: Any, index: RecordIndex, index_file: str) -> None:
    """Write ``index`` to ``index_file``."""
    with fs.open(index_file, "wb") as out:
        out.write(index.to_bytes())


def load_index(
    fs: Any, path: str, container: Format | None = None, *,
    vouched: SideFileInfo | None = None, on_corrupt: str = "raise", size: int | None = None,
) -> RecordIndex | None:
    """The side index of the file at ``path``, if there is a valid one for the file as it
    is now (same size); ``None`` otherwise, with a warning when one is there but can't be
    used.

    ``vouched``: what the set's manifest says of the side index (size, SHA-256); a side
    index that is not that file is forged or damaged: :class:`~recprep.errors.CorruptDataError`,
    or with ``on_corrupt="skip"`` a :class:`~recprep.errors.CorruptDataWarning` and None
    (the file is scanned instead; nothing is lost).

    ``size``: the file's size where already known (its manifest's). With both it and
    ``vouched``, loading the index costs one read of it and nothing else (no ``HEAD``
    of either file on an object store)."""
    _, kind = _kind(container)
    side = kind.path_for(path)
    side_size = 0
    if vouched is None:
        try:
            side_size = fs.size(side)
        except FileNotFoundError:
            return None
    size = int(fs.size(path)) if size is None else size
    most = kind.max_side_bytes(size)  # before reading it: no more offsets than records
    if vouched is None and side_size > most:
        log.warning("recprep: %s has %d bytes, more than an index of the %d-byte file can "
                    "need (%d); scanning the file instead", side, side_size, size, most)
        return None
    limit = most if vouched is None else min(most, vouched.bytes)
    try:  # a regular file of at most ``limit`` bytes (it may have grown since its size)
        data = read_regular(fs, side, limit, what="a record index of this file")
    except FileNotFoundError:
        return None
    except (OSError, CorruptDataError) as err:
        detail = getattr(err, "detail", err)
        if vouched is not None:
            _not_vouched(f"the side index {side} is not the file the manifest vouches "
                         f"for: {detail}", path, on_corrupt)
            return None
        log.warning("recprep: %s; scanning %s instead", err, path)
        return None
    problem = None if vouched is None else vouched.mismatch(data)
    if problem is not None:
        _not_vouched(f"the side index {side}: {problem}", path, on_corrupt)
        return None
    try:
        index = kind.from_bytes(data, path=side)
    except CorruptDataError as err:
        log.warning("recprep: %s; scanning %s instead", err, path)
        return None
    problem = index.mismatch(size)
    if problem is not None:
        log.warning("recprep: %s: %s; scanning the file instead", side, problem)
        return None
    return index


def _not_vouched(detail: str, path: str, on_corrupt: str) -> None:
    """A side index that is not the one its manifest vouches for: raise, or (``skip``)
    warn and go without it."""
    if on_corrupt != "skip":
        raise CorruptDataError(detail, path=path)
    warn(CorruptDataWarning(detail + "; scanning the file instead", path=path, offset=None,
                            records_lost=0))


def _load_or_scan_index(fs: Any, path: str, container: Format | None,
                        max_chunk_bytes: int) -> RecordIndex:
    """The file's side index if it has a usable one, else its index by a scan."""
    fmt, _ = _kind(container)
    index = load_index(fs, path, fmt)
    if index is None:
        with open_regular(fs, path) as file:
            index = fmt.index_records(file, path=path, max_chunk_bytes=max_chunk_bytes)
        assert index is not None
    return index


def record_offsets(
    fs: Any, path: str, *, container: Format | None = None,
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
) -> np.ndarray:
    """The offsets of the records of the file at ``path``, in its uncompressed stream
    (the file offsets, for a plain file): from the side index, else by a scan."""
    return _load_or_scan_index(fs, path, container, max_chunk_bytes).offsets


def count_records(
    fs: Any, path: str, *, container: Format | None = None,
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
) -> int:
    """The number of records of the file at ``path``: from the side index, else by a
    scan (which verifies every record's checksums)."""
    return _load_or_scan_index(fs, path, container, max_chunk_bytes).num_records


def read_records(
    fs: Any,
    path: str,
    start: int,
    end: int,
    *,
    container: Format | None = None,
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
) -> list[bytes]:
    """Records ``start:end`` of the file at ``path``, checksums verified.

    A file with an index that :meth:`~recprep.containers.record_index.RecordIndex.seeks`
    is read from record ``start``'s offset, and only up to record ``end``; otherwise (no
    index, or a compressed stream) the stream is read from its start. Raises
    :class:`~recprep.errors.InvalidArgumentError` unless ``0 <= start <= end <= count``.
    """
    fmt, kind = _kind(container)
    index = _load_or_scan_index(fs, path, fmt, max_chunk_bytes)
    count = index.num_records
    if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end <= count):
        raise InvalidArgumentError(
            f"{path}: can't read records [{start!r}, {end!r}); the file holds {count} "
            f"records, so ask for 0 <= start <= end <= {count}"
        )
    if start == end:
        return []
    span = index.span(start, end)
    if span is None:
        records: list[bytes] = []
        with open_regular(fs, path) as file:
            for chunk in fmt.read_chunks(file, path=path, compressor=index.compressor,
                                         max_chunk_bytes=max_chunk_bytes):
                records.extend(chunk.records)
                if len(records) >= end:
                    break
        return records[start:end]
    first, stop = span
    with open_regular(fs, path) as file:
        file.seek(first)
        data = file.read(stop - first)
    try:
        records = [r for chunk in fmt.read_chunks(io.BytesIO(data), path=path,
                                                  compressor=index.compressor,
                                                  max_chunk_bytes=max_chunk_bytes)
                   for r in chunk.records]
    except CorruptDataError as err:
        raise CorruptDataError(
            f"records {start}:{end} should be bytes {first}:{stop} by the side index, but "
            f"there: {err.detail}; the file is damaged or does not match its side index "
            f"{kind.path_for(path)} (delete it: a scan replaces it)",
            path=path, offset=(err.offset or 0) + first,
        ) from None
    kind.check(index.bounds(), first, records, path, start)
    return records
