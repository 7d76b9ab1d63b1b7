"""TFRecord: TensorFlow's record framing, optionally inside one gzip or zlib stream.

Each record is framed as ``uint64 length``, ``uint32 masked_crc32c(the 8 length bytes)``,
``length`` bytes of data, ``uint32 masked_crc32c(data)`` (little-endian), where
``masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8`` modulo 2**32. With ``"gzip"`` or
``"zlib"`` the whole file is one compressed stream of those frames, as TensorFlow
writes it (``compression_type="GZIP"`` / ``"ZLIB"``); nothing else is in a file, and a
file without records is empty.

Writing streams through ``zlib.compressobj`` (memory level 9, as TensorFlow), so the
bytes are TensorFlow's own. Reading detects the compression from the first bytes (a
plain first frame whose length CRC holds; else gzip's magic ``1f 8b``; else a zlib
header), inflates with a bounded output size, verifies both CRCs of every record, and
yields the records in :class:`~recprep.containers.Chunk` batches of about 1 MiB. A
chunk's ``offset`` (and an error's) is the byte offset of its first record in the
*uncompressed* stream, which for a plain file is the file offset. A TFRecord file has no
index: counting its records takes a scan.

This module holds the writer and the format; the framing (CRCs, frame headers found at
once, compression sniffing) is :mod:`~recprep.containers.tfrecord_framing`'s, the parser
that walks a stream's frames and resyncs after damage is
:mod:`~recprep.containers.tfrecord_parser`'s, and the record index side file's layout is
:mod:`~recprep.containers.tfrecord_index`'s.

Example
-------
>>> import io
>>> from recprep.containers import get_format
>>> fmt, buf = get_format("tfrecord"), io.BytesIO()
>>> w = fmt.writer(buf, "none", chunk_bytes=1 << 20)
>>> for r in (b"a", b"", b"bc"):
...     w.write(r)
>>> w.close()
>>> buf.getvalue()[:16].hex(" ")
'01 00 00 00 00 00 00 00 01 75 de 41 61 78 6e e4'
>>> _ = buf.seek(0)
>>> [list(c.records) for c in fmt.read_chunks(buf, path="mem")]
[[b'a', b'', b'bc']]
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from .._core.records import Chunk
from ..errors import CorruptDataError, InvalidArgumentError
from .base import (
    DEFAULT_MAX_CHUNK_BYTES,
    SNIFF_BYTES,
    Format,
    OnSkip,
    RecordWriter,
    Sink,
    Source,
    report_skip,
)
from .tfrecord_framing import (
    _FRAME,
    _WBITS,
    _inflated_head_ok,
    detect_compression,
    masked_crc32c,
)
from .tfrecord_index import FRAME_BYTES, TFRecordIndex
from .tfrecord_parser import _FrameParser, _InflatedStream, _TFRecordDamage

__all__ = ["TFRecordFormat", "detect_compression", "masked_crc32c", "read_from", "scan"]

_MEM_LEVEL = 9  # TensorFlow's: the same settings give the same bytes
_pack_i = struct.Struct("<I").pack
_pack_q = struct.Struct("<Q").pack


class _TFRecordWriter(RecordWriter):
    """Frames records, buffers up to ``chunk_bytes``, compresses the stream if asked."""

    def __init__(self, file: Sink, compressor: str, chunk_bytes: int) -> None:
        self._file = file
        self._wbits = _WBITS.get(compressor)
        self._deflate: zlib._Compress | None = None  # made on the first write: an empty
        self._parts: list[bytes] = []  # shard stays a zero-byte file, as TensorFlow reads
        self._size = 0
        self._limit = max(1, chunk_bytes)
        self.num_records = 0

    def write(self, record: bytes) -> None:
        if type(record) is not bytes:
            record = bytes(record)
        size = len(record)
        length = _pack_q(size)
        self._parts += (length, _pack_i(masked_crc32c(length)), record,
                        _pack_i(masked_crc32c(record)))
        self._size += size + _FRAME
        self.num_records += 1
        if self._size >= self._limit:
            self._flush()

    def _flush(self) -> None:
        if not self._parts:
            return
        data = b"".join(self._parts)
        self._parts, self._size = [], 0
        if self._wbits is not None:
            if self._deflate is None:
                self._deflate = zlib.compressobj(
                    zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, self._wbits, _MEM_LEVEL
                )
            data = self._deflate.compress(data)
        if data:
            self._file.write(data)

    def close(self) -> None:
        self._flush()
        if self._deflate is not None:
            self._file.write(self._deflate.flush())
            self._deflate = None



class TFRecordFormat(Format):
    """TensorFlow's TFRecord files, uncompressed or as one gzip or zlib stream."""

    name = "tfrecord"
    compressors = ("none", "gzip", "zlib")
    default_compressor = "none"
    min_record_bytes = FRAME_BYTES
    record_index = TFRecordIndex

    def writer(self, file: Sink, compressor: str, chunk_bytes: int) -> RecordWriter:
        if compressor not in self.compressors:
            raise InvalidArgumentError(
                f"format 'tfrecord' has no compressor {compressor!r}; valid compressors are "
                f"{list(self.compressors)}"
            )
        return _TFRecordWriter(file, compressor, chunk_bytes)

    def concatenable(self, compressor: str) -> bool:
        """Plain files and gzip members join; zlib streams don't (TensorFlow reads only the
        first one)."""
        return compressor != "zlib"

    def read_chunks(
        self,
        file: Source,
        *,
        path: str,
        max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
        on_corrupt: str = "raise",
        on_skip: OnSkip | None = None,
        compressor: str | None = None,
        frames: np.ndarray | None = None,
    ) -> Iterator[Chunk]:
        """Yield the records of ``file`` in batches, verifying both CRCs of each.

        ``compressor`` ``None`` detects it. ``frames``, the file's side index's
        :meth:`~TFRecordIndex.bounds`, spares the walk from one record's length to the
        next where the file's lengths agree with it (they are checked against it, all
        at once): a hint that never changes what is read, nor what a damaged file
        raises — a file that doesn't match it is walked as without one. A record over
        ``max_chunk_bytes`` raises :class:`~recprep.errors.ChunkTooLargeError` before it
        is read. Damage raises :class:`~recprep.errors.CorruptDataError` (offsets in the
        uncompressed stream); with ``on_corrupt="skip"`` the damaged bytes are skipped, with a
        :class:`~recprep.errors.CorruptDataWarning` (also handed to ``on_skip``), up to
        the next valid record (or the end, if the compressed stream itself is damaged or
        the file is cut off).
        """
        if on_corrupt not in ("raise", "skip"):
            raise InvalidArgumentError(
                f"on_corrupt must be 'raise' or 'skip', got {on_corrupt!r}"
            )
        if compressor is not None and compressor not in self.compressors:
            raise InvalidArgumentError(
                f"format 'tfrecord' has no compressor {compressor!r}; valid compressors are "
                f"{list(self.compressors)}"
            )
        origin = file.tell()
        head = file.read(SNIFF_BYTES) or b""
        if not head:
            return
        found = compressor or detect_compression(head)
        stream = _InflatedStream(file, head, found or "none", path)
        parser = _FrameParser(stream, path, max_chunk_bytes, frames)
        if (found or "none") == "none":
            parser.base = origin  # offsets in a plain file are file offsets
        while True:
            try:
                for offset, batch in parser.records():
                    yield Chunk(offset, batch)
                return
            except _TFRecordDamage as damage:
                caught = damage
                err = damage.error
                if found is None and err.offset == origin:  # nothing looked like TFRecord
                    caught.error = CorruptDataError(
                        f"{err.detail}; or this is not a TFRecord file at all (it starts "
                        f"with {head[:12].hex()})",
                        path=path,
                        offset=origin,
                    )
                if on_corrupt == "raise":
                    raise caught.error from None
            if not _skip_tfrecord_damage(parser, caught, path, on_skip):
                return

    def describe(self, file: Source, *, path: str) -> dict[str, str]:
        """The compression, from the first bytes (see :func:`detect_compression`)."""
        file.seek(0)
        found = detect_compression(file.read(SNIFF_BYTES) or b"")
        return {"format": self.name} if found is None else {
            "format": self.name, "compressor": found}

    @classmethod
    def sniff(cls, head: bytes) -> bool:
        """A plain first frame with a valid length CRC, or a gzip/zlib stream that
        inflates to one (as far as ``head`` goes)."""
        kind = detect_compression(head)
        if kind in _WBITS:
            return _inflated_head_ok(head, _WBITS[kind])
        return kind == "none"


def scan(
    file: Any,
    *,
    path: str,
    compressor: str | None = None,
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
) -> TFRecordIndex:
    """Index the open TFRecord ``file`` by reading it once (every CRC is verified):
    :meth:`TFRecordFormat.index_records`. Damage raises
    :class:`~recprep.errors.CorruptDataError`."""
    index = TFRecordFormat().index_records(file, path=path, compressor=compressor,
                                           max_chunk_bytes=max_chunk_bytes)
    assert isinstance(index, TFRecordIndex)
    return index


def read_from(
    file: Any,
    offset: int,
    path: str,
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
    on_corrupt: str = "raise",
    on_skip: OnSkip | None = None,
    *,
    expected: np.ndarray | None = None,
) -> Iterator[Chunk]:
    """The records of a plain TFRecord file from the record at byte ``offset`` on, in
    chunks whose ``offset`` is the file offset of their first record.

    ``expected``, a side index's :meth:`~TFRecordIndex.bounds`: every record read must
    start where it says, else :class:`~recprep.errors.CorruptDataError` (whatever
    ``on_corrupt`` says: the index, not the data, is wrong).
    """
    file.seek(offset)
    chunks = TFRecordFormat().read_chunks(file, path=path, max_chunk_bytes=max_chunk_bytes,
                                          on_corrupt=on_corrupt, on_skip=on_skip,
                                          compressor="none", frames=expected)
    for chunk in chunks:
        if expected is not None:
            TFRecordIndex.check(expected, chunk.offset, chunk.records, path)
        yield chunk


def _skip_tfrecord_damage(parser: _FrameParser, damage: _TFRecordDamage, path: str,
                          on_skip: OnSkip | None) -> bool:
    """Pass over ``damage`` (``on_corrupt="skip"``), reporting what it loses: whether
    reading goes on (False: the rest of the file is lost)."""
    err, resumable = damage.error, damage.resumable
    at = err.offset
    if damage.skip:  # a record whose length CRC holds, over max_chunk_bytes: pass over it
        if parser.discard(damage.skip):
            report_skip(on_skip, f"{err.detail}; skipped that record", path=path,
                        offset=at, records_lost=1)
            return True
        resumable = False
    resumed = parser.resync() if resumable else None
    if resumed is None:
        torn = "torn last record" in err.detail
        report_skip(on_skip, f"{err.detail}; skipped the rest of the file",
                    path=path, offset=at, records_lost=1 if torn else None)
        return False
    if resumed == damage.frame_end:  # the frame's length held: one record lost
        report_skip(on_skip, f"{err.detail}; skipped that record", path=path,
                    offset=at, records_lost=1)
        return True
    report_skip(on_skip, f"{err.detail}; skipped {resumed - (at or 0)} bytes to the "
                f"next valid record at byte {resumed}", path=path, offset=at,
                records_lost=None)
    return True
