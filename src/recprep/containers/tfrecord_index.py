"""TFRecord's record index side file, ``.{shard name}.tfindex``: its byte layout.

A TFRecord file has no chunk index (``docs/format.md`` §4.4), so counting its records
or finding record ``k`` takes a scan. recprep keeps the offsets in a side file next to
each TFRecord shard (a :class:`~recprep.containers.record_index.RecordIndex`, whose
arithmetic it inherits); its leading ``.`` keeps it out of every shard glob (and out of
``RecordIO(directory)``), and TensorFlow never sees it. :mod:`recprep.storage.sideindex` reads
and writes these files; a file without one still reads (a scan,
:meth:`~recprep.containers.base.Format.index_records`).

Offsets are byte offsets of each record's frame **in the uncompressed stream**. For a
plain file that is the file offset, so a range of records is read by seeking. For a gzip
or zlib file, the offsets give counts and record sizes, but a deflate stream can't be
entered in the middle: reading a range inflates from the start.

Side file layout (little-endian)::

    offset   size  field
    0        8     magic b"RPTFIDX1"
    8        8     u64  size of the TFRecord file as stored (its compressed size)
    16       8     u64  size of the uncompressed record stream
    24       8     u64  number of records n
    32       1     u8   compression: 0 none, 1 gzip, 2 zlib
    33       7     zero
    40       8n    u64  offset of each record's frame in the uncompressed stream
    40+8n    4     u32  CRC-32C of bytes [0, 40+8n)

An index whose magic, CRC or length is wrong, whose recorded file size is not the
file's size (the file was rewritten), or that claims more records than the file can hold,
is ignored with a logged warning, and the file is scanned instead. An index that passes
these checks is still not trusted blindly: reading through it checks that every record
read starts where the index says (:meth:`~recprep.containers.record_index.RecordIndex.check`),
so an index that doesn't match its file raises :class:`~recprep.errors.CorruptDataError`
rather than give other records.

Example
-------
>>> index = TFRecordIndex.from_lengths([1, 0, 2], 49)
>>> data = index.to_bytes()
>>> data[:8], len(data)
(b'RPTFIDX1', 68)
>>> TFRecordIndex.from_bytes(data).offsets.tolist()
[0, 17, 33]
>>> index_name("part-00000-of-00003")
'.part-00000-of-00003.tfindex'
"""

from __future__ import annotations

import struct

import google_crc32c
import numpy as np

from ..errors import CorruptDataError, InvalidArgumentError
from .base import ChunkInfo, max_records
from .record_index import RecordIndex

__all__ = ["FRAME_BYTES", "INDEX_SUFFIX", "TFRecordIndex", "chunk_infos", "index_name",
           "index_path"]

INDEX_SUFFIX = ".tfindex"
FRAME_BYTES = 16  # length, its CRC, and the data CRC around each record
_MAGIC = b"RPTFIDX1"
_INDEX_HEAD = struct.Struct("<8sQQQB7x")
_CRC = struct.Struct("<I")
_HEADER_BYTES = _INDEX_HEAD.size + _CRC.size
_COMPRESSION = ("none", "gzip", "zlib")


class TFRecordIndex(RecordIndex):
    """The record offsets of one TFRecord file (see
    :class:`~recprep.containers.record_index.RecordIndex`), with the ``.tfindex`` layout
    of the module docstring."""

    suffix = INDEX_SUFFIX
    frame_bytes = FRAME_BYTES
    label = "TFRecord"

    def to_bytes(self) -> bytes:
        """The side file's bytes."""
        if self.compressor not in _COMPRESSION:
            raise InvalidArgumentError(
                f"compression must be one of {list(_COMPRESSION)}, got {self.compressor!r}"
            )
        head = _INDEX_HEAD.pack(_MAGIC, self.file_size, self.stream_size, self.num_records,
                          _COMPRESSION.index(self.compressor))
        body = head + self.offsets.astype("<u8").tobytes()
        return body + _CRC.pack(google_crc32c.value(body))

    @classmethod
    def from_bytes(cls, data: bytes, path: str | None = None) -> TFRecordIndex:
        """Parse a side file; anything malformed raises ``CorruptDataError``."""
        def bad(detail: str) -> CorruptDataError:
            return CorruptDataError(f"not a valid TFRecord index: {detail}", path=path)

        if len(data) < _INDEX_HEAD.size + _CRC.size:
            raise bad(f"{len(data)} bytes is too short")
        magic, file_size, stream_size, count, compression = _INDEX_HEAD.unpack_from(data)
        if magic != _MAGIC:
            raise bad(f"magic {magic!r}, expected {_MAGIC!r}")
        if len(data) != _INDEX_HEAD.size + 8 * count + _CRC.size:
            raise bad(f"{count} offsets need {_INDEX_HEAD.size + 8 * count + _CRC.size} bytes, "
                      f"the file has {len(data)}")
        (crc,) = _CRC.unpack_from(data, len(data) - _CRC.size)
        if google_crc32c.value(data[: -_CRC.size]) != crc:
            raise bad("CRC-32C mismatch")
        if compression >= len(_COMPRESSION):
            raise bad(f"unknown compression id {compression}")
        offsets = np.frombuffer(data, "<u8", count, _INDEX_HEAD.size).astype(np.int64)
        steps = np.diff(np.append(offsets, stream_size))
        if count and (offsets[0] != 0 or (steps < FRAME_BYTES).any()):
            raise bad("offsets are not those of consecutive records")
        return cls(offsets, stream_size, file_size, _COMPRESSION[compression])

    @classmethod
    def max_side_bytes(cls, file_size: int) -> int:
        """The header and 8 bytes per record the file could hold."""
        return _HEADER_BYTES + 8 * max_records(file_size, "gzip", FRAME_BYTES)


def index_name(name: str) -> str:
    """The side index's file name for the TFRecord file ``name``.

    >>> index_name("part-00000-of-00003")
    '.part-00000-of-00003.tfindex'
    """
    return TFRecordIndex.name_for(name)


def index_path(path: str) -> str:
    """The side index's path for the TFRecord file at ``path`` (same directory)."""
    return TFRecordIndex.path_for(path)


def chunk_infos(index: RecordIndex, chunk_bytes: int = 1 << 20) -> list[ChunkInfo]:
    """The records of a plain file grouped into runs of about ``chunk_bytes``
    (:meth:`~recprep.containers.record_index.RecordIndex.runs`).

    >>> [(c.offset, c.num_records) for c in chunk_infos(
    ...     TFRecordIndex.from_lengths([4, 4, 4, 4, 4], 100), chunk_bytes=40)]
    [(0, 2), (40, 2), (80, 1)]
    """
    return index.runs(chunk_bytes)
