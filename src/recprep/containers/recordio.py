"""RecordIO: the Go/PaddlePaddle/ElasticDL format and the pyrecordio 0.0.4 variant.

A file is a sequence of chunks, each a 20-byte header and a payload; the payload,
decompressed, is ``num_records`` times ``[uint32 length][bytes]`` (little-endian). The
two variants (``docs/format.md``) share the magic and header size and differ in field
order, checksum and compressor ids:

====================  =====================================  =================================
field                 ``recordio`` (Go, default)             ``recordio-legacy`` (0.0.4)
====================  =====================================  =================================
header                magic, crc, compressor, size, count    magic, count, crc, compressor, size
checksum              CRC-32 IEEE of the stored payload      CRC-32C of the stored payload
compressor ids        0 none, 1 snappy, 2 gzip               1 none, 2 snappy, 3 gzip
snappy flavour        framing format                         raw block
====================  =====================================  =================================

Reading tells the variants apart per file, from the first chunk whose reading has a
compressor in range and a matching checksum, and the compressor per chunk. Writing with
``"snappy"`` stores a chunk that snappy would not make smaller as "none" (see
:class:`_RecordIOWriter`); every reader of either variant reads such mixed files.

This module holds the writer and the two formats; the chunk's bytes (header, checksums,
payload) are :mod:`~recprep.containers.recordio_framing`'s, walking a file's chunks
(damage, resync, the fast index scan) is :mod:`~recprep.containers.recordio_reading`'s.

Example
-------
>>> import io
>>> from recprep.containers import get_format
>>> fmt, buf = get_format("recordio"), io.BytesIO()
>>> w = fmt.writer(buf, "snappy", chunk_bytes=1 << 20)
>>> for r in (b"a", b"", b"bc"):
...     w.write(r)
>>> w.close()
>>> _ = buf.seek(0)
>>> [list(c.records) for c in fmt.read_chunks(buf, path="mem")]
[[b'a', b'', b'bc']]
"""

from __future__ import annotations

import io
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from itertools import accumulate

import numpy as np

from .._core.records import Chunk
from ..errors import EncodeError
from .base import (
    DEFAULT_MAX_CHUNK_BYTES,
    Format,
    OnSkip,
    RecordWriter,
    Sink,
    Source,
)
from .compression import Compression, get_compression
from .recordio_framing import (
    _HEADER,
    _U32,
    AT_ONCE_MIN_RECORDS,
    GO,
    HEADER_SIZE,
    LEGACY,
    MAGIC,
    MAX_PAYLOAD,
    MIN_RECORD_BYTES,
    Dialect,
    _u32_pack,
    crc32,
    encode_payload,
    frame_lengths,
    split_payload,
)
from .recordio_reading import (
    _first_chunk,
    _read_exact,
    hop_chunk_headers,
    iter_chunks,
    scan_index,
)

__all__ = [
    "AT_ONCE_MIN_RECORDS",
    "GO",
    "HEADER_SIZE",
    "LEGACY",
    "MAGIC",
    "MAX_PAYLOAD",
    "MIN_RECORD_BYTES",
    "SNAPPY_KEEP_BELOW",
    "Dialect",
    "LegacyRecordIOFormat",
    "RecordIOFormat",
    "crc32",
    "encode_payload",
    "frame_lengths",
    "iter_chunks",
    "scan_index",
    "split_payload",
]


#: a snappy chunk is stored compressed only below this share of its uncompressed size
#: (``benchmarks/RESULTS.md``, "Compression that saves nothing"); else stored as "none"
SNAPPY_KEEP_BELOW = 1.0


class _RecordIOWriter(RecordWriter):
    """Buffers records into chunks of about ``chunk_bytes``; each chunk is written whole.

    With ``compressor="snappy"`` a chunk is stored compressed only if that makes it
    smaller than :data:`SNAPPY_KEEP_BELOW` of its size, and uncompressed (compressor id
    "none" in its header) otherwise. The choice depends on the chunk's bytes alone, so the
    output stays the same whatever the executor and wherever the writer is cut. Each
    chunk is reported in :attr:`~recprep.containers.base.RecordWriter.chunks` as it is
    written.
    """

    def __init__(self, file: Sink, dialect: Dialect, compressor: str, chunk_bytes: int):
        self._file = file
        self._dialect = dialect
        self._id = dialect.names[compressor]
        self._compression: Compression = get_compression(dialect.ids[self._id])
        #: the id a snappy chunk that wouldn't shrink is stored under ("none"); None: never
        self._fallback = dialect.names["none"] if compressor == "snappy" else None
        self._limit = chunk_bytes
        #: the pending chunk's payload so far, in pieces (framed records), and its records
        self._parts: list[bytes | memoryview] = []
        self._count = 0
        self._pending_bytes = 0  # the pending records' bytes, without their framing
        self.num_records = 0
        self.chunks: list[tuple[int, int]] = []  # reported as flushed (RecordWriter)
        self._written = 0  # bytes written out by this writer

    def write(self, record: bytes) -> None:
        size = len(record)
        if size > MAX_PAYLOAD - MIN_RECORD_BYTES:
            raise EncodeError(
                f"a record of {size} bytes is too large for RecordIO, whose chunk size field "
                f"has 32 bits: a record can hold at most {MAX_PAYLOAD - MIN_RECORD_BYTES} "
                "bytes (4 GiB - 5); split the instance, or write format='tfrecord'"
            )
        count = self._count
        if count and (
            self._pending_bytes + size > self._limit
            or self._pending_bytes + MIN_RECORD_BYTES * (count + 1) + size > MAX_PAYLOAD
        ):
            self._flush()
        parts = self._parts
        parts.append(_u32_pack(size))
        parts.append(record)
        self._count += 1
        self._pending_bytes += size
        self.num_records += 1

    def write_many(self, records: Sequence[bytes]) -> None:
        """:meth:`write` of each record, with the chunk cuts found by bisecting the
        records' running sizes instead of one test per record.

        >>> import io
        >>> one, many = io.BytesIO(), io.BytesIO()
        >>> records = [bytes(n % 7) for n in range(100)]
        >>> a, b = _RecordIOWriter(one, GO, "none", 40), _RecordIOWriter(many, GO, "none", 40)
        >>> for r in records:
        ...     a.write(r)
        >>> b.write_many(records[:3]); b.write_many(records[3:])
        >>> a.close(); b.close()
        >>> one.getvalue() == many.getvalue(), a.num_records == b.num_records == 100
        (True, True)
        """
        sizes = list(map(len, records))
        if not sizes:
            return
        if not self._cuts_fit(max(sizes), len(sizes)):
            super().write_many(records)  # what write says of each: its errors, its cuts
            return
        ends = list(accumulate(sizes))
        at, n = 0, len(records)
        while at < n:
            before = ends[at - 1] if at else 0
            stop = self._chunk_stop(at, before, bisect_right(
                ends, before + self._limit - self._pending_bytes, at))
            if stop > at:
                self._parts.append(encode_payload(records[at:stop]))
                self._count += stop - at
                self._pending_bytes += ends[stop - 1] - before
                at = stop
            if at < n:
                self._flush()
        self.num_records += n

    def write_framed(self, buffer: np.ndarray, starts: np.ndarray,
                     lengths: np.ndarray) -> None:
        """:meth:`write_many` of the records ``buffer[starts[i]:][:lengths[i]]`` laid back
        to back in ``buffer`` with their 4-byte lengths before them (as
        :meth:`RecordIOFormat.frame_records` fills them): a chunk's payload is then taken
        from ``buffer`` in runs of records, with no step per record.

        >>> import io
        >>> records = [bytes([n]) * (n % 7) for n in range(100)]
        >>> buffer = np.frombuffer(encode_payload(records), np.uint8)
        >>> lengths = np.array(list(map(len, records)))
        >>> starts = np.cumsum(lengths + 4) - lengths
        >>> one, laid = io.BytesIO(), io.BytesIO()
        >>> a, b = _RecordIOWriter(one, GO, "none", 40), _RecordIOWriter(laid, GO, "none", 40)
        >>> a.write_many(records); b.write_framed(buffer, starts, lengths)
        >>> a.close(); b.close()
        >>> one.getvalue() == laid.getvalue(), a.chunks == b.chunks
        (True, True)
        """
        n = len(lengths)
        if not n:
            return
        ends = np.cumsum(lengths)  # the records' running sizes, as write_many's
        total = int(ends[-1])
        if not self._cuts_fit(total if total <= MAX_PAYLOAD else int(lengths.max()), n):
            super().write_framed(buffer, starts, lengths)  # what write says of each
            return
        view = buffer.data
        at = 0
        while at < n:
            before = int(ends[at - 1]) if at else 0
            stop = self._chunk_stop(at, before, int(ends.searchsorted(
                before + self._limit - self._pending_bytes, "right")))
            if stop > at:
                last = stop - 1
                self._parts.append(view[int(starts[at]) - MIN_RECORD_BYTES
                                        : int(starts[last]) + int(lengths[last])])
                self._count += stop - at
                self._pending_bytes += int(ends[last]) - before
                at = stop
            if at < n:
                self._flush()
        self.num_records += n

    def _cuts_fit(self, largest: int, count: int) -> bool:
        """Whether records of at most ``largest`` bytes, ``count`` of them, are cut into
        chunks by their running sizes alone (:meth:`write_many`): no record too large,
        no chunk whose framing could overflow the size field."""
        return not (largest > MAX_PAYLOAD - MIN_RECORD_BYTES or self._limit > MAX_PAYLOAD // 2
                    or (self._count + count) * MIN_RECORD_BYTES > MAX_PAYLOAD - self._limit)

    def _chunk_stop(self, at: int, before: int, found: int) -> int:
        """Where the records from ``at`` that join the pending chunk end: those whose
        running sizes stay within the limit (``found``, bisected), or at least record
        ``at`` when no chunk is pending (a chunk takes its first record whatever its
        size)."""
        if not self._count:
            return max(found, at + 1)
        return max(found, at)

    def _flush(self) -> None:
        count = self._count
        if not count:
            return
        data = b"".join(self._parts)
        payload: bytes | None
        comp = self._id
        if self._fallback is None:
            payload = self._compression.compress(data)
        else:
            payload = self._compression.compress_below(data, SNAPPY_KEEP_BELOW)
            if payload is None:
                payload, comp = data, self._fallback
        if len(payload) > MAX_PAYLOAD:
            raise EncodeError(
                f"a chunk of {count} record(s) compresses to {len(payload)} bytes, "
                f"more than RecordIO's 32-bit chunk size field can hold ({MAX_PAYLOAD}); "
                "write smaller records, or format='tfrecord'"
            )
        header = self._dialect.pack(self._dialect.checksum(payload), comp, len(payload), count)
        self._file.write(header)
        self._file.write(payload)
        self.chunks.append((self._written, count))
        self._written += len(header) + len(payload)
        self._parts = []
        self._count = 0
        self._pending_bytes = 0

    def close(self) -> None:
        self._flush()


class RecordIOFormat(Format):
    """The Go/PaddlePaddle/ElasticDL RecordIO format (recprep's default); reads the
    pyrecordio 0.0.4 variant too (told apart per file, from the first chunk)."""

    name = "recordio"
    compressors = ("none", "snappy", "gzip")
    default_compressor = "snappy"
    min_record_bytes = MIN_RECORD_BYTES
    per_chunk_compressor = True
    chunk_header_bytes = HEADER_SIZE
    record_framing = (MIN_RECORD_BYTES, 0)  # a record's uint32 length before it
    dialect = GO

    def writer(self, file: Sink, compressor: str, chunk_bytes: int) -> RecordWriter:
        return _RecordIOWriter(file, self.dialect, compressor, chunk_bytes)

    def frame_records(self, buffer: np.ndarray, starts: np.ndarray,
                      lengths: np.ndarray) -> None:
        frame_lengths(buffer, starts, lengths)

    def read_chunks(
        self,
        file: Source,
        *,
        path: str,
        max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
        on_corrupt: str = "raise",
        on_skip: OnSkip | None = None,
        compressor: str | None = None,
    ) -> Iterator[Chunk]:
        # ``compressor`` is for whole-file formats; RecordIO names its own in every chunk
        chunks = iter_chunks(
            file, path=path, max_chunk_bytes=max_chunk_bytes, on_corrupt=on_corrupt,
            on_skip=on_skip,
        )
        for _, chunk in chunks:
            assert chunk is not None
            yield chunk

    def scan_chunks(
        self,
        file: Source,
        *,
        path: str,
        max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
        on_corrupt: str = "raise",
        on_skip: OnSkip | None = None,
    ) -> tuple[list[int], list[int]]:
        """Hop from header to header (:func:`~.recordio_reading.hop_chunk_headers`): the
        first chunk's checksum tells the variant, then only headers are read; at anything
        unexpected the careful walk of :func:`iter_chunks` starts over, and
        raises or skips as ``on_corrupt`` says."""
        return hop_chunk_headers(file, path=path, max_chunk_bytes=max_chunk_bytes,
                                 on_corrupt=on_corrupt, on_skip=on_skip)

    def describe(self, file: Source, *, path: str) -> dict[str, str]:
        """The variant and the compressor of the first chunk (whose checksum tells the
        variant); only the format's name when the first chunk is damaged."""
        end = file.seek(0, io.SEEK_END)
        first = _first_chunk(file, path, DEFAULT_MAX_CHUNK_BYTES, end)
        if first is None or first[0] is None:
            return {"format": self.name}
        info, dialect = first
        file.seek(0)
        comp = dialect.unpack(_HEADER.unpack(_read_exact(file, HEADER_SIZE)))[1]
        return {"format": dialect.name,
                "compressor": {v: k for k, v in dialect.names.items()}[comp]}

    @classmethod
    def sniff(cls, head: bytes) -> bool:
        return len(head) >= 4 and _U32.unpack_from(head)[0] == MAGIC



class LegacyRecordIOFormat(RecordIOFormat):
    """The pyrecordio 0.0.4 variant (raw snappy blocks, CRC-32C)."""

    name = "recordio-legacy"
    dialect = LEGACY
