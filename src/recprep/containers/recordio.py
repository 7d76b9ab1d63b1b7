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
compressor in range and a matching checksum, and the compressor per chunk.

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
>>> [c.records for c in fmt.read_chunks(buf, path="mem")]
[[b'a', b'', b'bc']]
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

import google_crc32c

from ..compression import Compression, get_compression
from ..errors import ChunkTooLargeError, CorruptDataError, _Located
from .base import DEFAULT_MAX_CHUNK_BYTES, Chunk, ChunkInfo, Format, RecordWriter

MAGIC = 0x01020304
HEADER_SIZE = 20
_HEADER = struct.Struct("<5I")
_U32 = struct.Struct("<I")
_u32_pack = _U32.pack
_u32_unpack_from = _U32.unpack_from


@dataclass(frozen=True)
class Dialect:
    """How one RecordIO variant lays out and checks a chunk header."""

    name: str
    checksum: Callable[[bytes], int]
    #: on-disk compressor id -> compression, and user-facing name -> id
    ids: dict[int, str]
    names: dict[str, int]

    def pack(self, crc: int, compressor: int, size: int, count: int) -> bytes:
        if self.name == "recordio":
            return _HEADER.pack(MAGIC, crc, compressor, size, count)
        return _HEADER.pack(MAGIC, count, crc, compressor, size)

    def unpack(self, fields: tuple[int, ...]) -> tuple[int, int, int, int]:
        """Return (checksum, compressor id, stored size, record count)."""
        _, a, b, c, d = fields
        if self.name == "recordio":
            return a, b, c, d
        return b, c, d, a


def _crc32c(data: bytes) -> int:
    return google_crc32c.value(data)


GO = Dialect(
    "recordio",
    zlib.crc32,
    {0: "none", 1: "snappy-framed", 2: "gzip"},
    {"none": 0, "snappy": 1, "gzip": 2},
)
LEGACY = Dialect(
    "recordio-legacy",
    _crc32c,
    {1: "none", 2: "snappy-raw", 3: "gzip"},
    {"none": 1, "snappy": 2, "gzip": 3},
)


def encode_payload(records: list[bytes]) -> bytes:
    """``[uint32 length][bytes]`` for each record, joined."""
    parts: list[bytes] = []
    append = parts.append
    for record in records:
        append(_u32_pack(len(record)))
        append(record)
    return b"".join(parts)


def split_payload(payload: bytes, count: int) -> list[bytes]:
    """The ``count`` records of a decompressed payload; raises on any inconsistency."""
    records: list[bytes] = []
    append = records.append
    end = len(payload)
    pos = 0
    for index in range(count):
        if pos + 4 > end:
            raise CorruptDataError(
                f"the chunk says it holds {count} records, but its payload ends "
                f"after {index}",
                record_index=index,
            )
        start = pos + 4
        pos = start + _u32_unpack_from(payload, start - 4)[0]
        if pos > end:
            raise CorruptDataError(
                f"record length {pos - start} runs past the end of its chunk "
                f"({end - start} bytes left)",
                record_index=index,
            )
        append(payload[start:pos])
    if pos != end:
        raise CorruptDataError(
            f"{end - pos} stray bytes after the chunk's {count} records (expected none)"
        )
    return records


class _Writer(RecordWriter):
    def __init__(self, file: BinaryIO, dialect: Dialect, compressor: str, chunk_bytes: int):
        self._file = file
        self._dialect = dialect
        self._id = dialect.names[compressor]
        self._compression: Compression = get_compression(dialect.ids[self._id])
        self._limit = chunk_bytes
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self.num_records = 0

    def write(self, record: bytes) -> None:
        size = len(record)
        if self._pending and self._pending_bytes + size > self._limit:
            self._flush()
        self._pending.append(record)
        self._pending_bytes += size
        self.num_records += 1

    def write_many(self, records: list[bytes]) -> None:
        for record in records:
            self.write(record)

    def _flush(self) -> None:
        records = self._pending
        if not records:
            return
        payload = self._compression.compress(encode_payload(records))
        header = self._dialect.pack(
            self._dialect.checksum(payload), self._id, len(payload), len(records)
        )
        self._file.write(header)
        self._file.write(payload)
        self._pending = []
        self._pending_bytes = 0

    def close(self) -> None:
        self._flush()


def _read_exact(file: BinaryIO, size: int) -> bytes:
    data = file.read(size)
    return data if data is not None else b""


def _candidates(fields: tuple[int, ...], dialect: Dialect | None) -> list[Dialect]:
    if dialect is not None:
        return [dialect]
    return [d for d in (GO, LEGACY) if d.unpack(fields)[1] in d.ids]


def iter_chunks(
    file: BinaryIO,
    *,
    path: str,
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
    decode: bool = True,
) -> Iterator[tuple[ChunkInfo, Chunk | None]]:
    """Walk a RecordIO file of either variant from its current position.

    Yields each chunk's :class:`ChunkInfo` and, with ``decode``, its records (checksum
    verified, payload decompressed within ``max_chunk_bytes``). With ``decode=False`` the
    payload is skipped by seeking (an index scan, no checksum work).
    """
    dialect: Dialect | None = None
    offset = file.tell()
    while True:
        head = _read_exact(file, HEADER_SIZE)
        if not head:
            return
        where = {"path": path, "offset": offset}
        if len(head) < HEADER_SIZE:
            raise CorruptDataError(
                f"chunk header cut off after {len(head)} of {HEADER_SIZE} bytes "
                "(a torn last chunk: was the writer stopped?)",
                **where,
            )
        fields = _HEADER.unpack(head)
        if fields[0] != MAGIC:
            raise CorruptDataError(
                f"expected the RecordIO chunk magic 0x{MAGIC:08x}, found 0x{fields[0]:08x}",
                **where,
            )
        options = _candidates(fields, dialect)
        if not options:
            raise CorruptDataError(
                f"unknown compressor id in the chunk header (fields {list(fields[1:])}); "
                "expected 0-2 (Go RecordIO) or 1-3 (pyrecordio 0.0.4)",
                **where,
            )
        if not decode and dialect is not None:
            crc, comp, size, count = dialect.unpack(fields)
            file.seek(size, 1)
            offset += HEADER_SIZE + size
            yield ChunkInfo(offset - HEADER_SIZE - size, count, size), None
            continue
        chosen, payload = _read_payload(file, fields, options, offset, max_chunk_bytes, path)
        dialect = chosen
        crc, comp, size, count = chosen.unpack(fields)
        info = ChunkInfo(offset, count, size)
        offset += HEADER_SIZE + size
        if not decode:
            yield info, None
            continue
        try:
            data = get_compression(chosen.ids[comp]).decompress(payload, max_chunk_bytes)
            records = split_payload(data, count)
        except _Located as err:
            raise err.located(**where) from None
        yield info, Chunk(info.offset, records)


def _read_payload(
    file: BinaryIO,
    fields: tuple[int, ...],
    options: list[Dialect],
    offset: int,
    limit: int,
    path: str,
) -> tuple[Dialect, bytes]:
    """Read the payload under each plausible variant; keep the one whose checksum fits."""
    where = {"path": path, "offset": offset}
    start = file.tell()
    problems = []
    for dialect in options:
        crc, _, size, _ = dialect.unpack(fields)
        if size > limit:
            problems.append(ChunkTooLargeError(size, limit, **where))
            continue
        file.seek(start)
        payload = _read_exact(file, size)
        if len(payload) < size:
            problems.append(
                CorruptDataError(
                    f"chunk payload cut off: header says {size} bytes, file has "
                    f"{len(payload)} (a torn last chunk: was the writer stopped?)",
                    **where,
                )
            )
            continue
        actual = dialect.checksum(payload)
        if actual == crc:
            return dialect, payload
        kind = "CRC-32" if dialect is GO else "CRC-32C"
        problems.append(
            CorruptDataError(
                f"{kind} checksum mismatch: header says 0x{crc:08x}, payload has "
                f"0x{actual:08x}",
                **where,
            )
        )
    raise problems[0]


def scan_index(file: BinaryIO, *, path: str) -> list[ChunkInfo]:
    """The chunk index of a file: each chunk's offset and record count, by hopping headers.

    The first chunk's checksum is checked to tell the variant; the others are not read.
    """
    return [info for info, _ in iter_chunks(file, path=path, decode=False)]


class RecordIOFormat(Format):
    """The Go/PaddlePaddle/ElasticDL RecordIO format (recprep's default)."""

    name = "recordio"
    compressors = ("none", "snappy", "gzip")
    default_compressor = "snappy"
    dialect = GO

    def writer(self, file: BinaryIO, compressor: str, chunk_bytes: int) -> RecordWriter:
        return _Writer(file, self.dialect, compressor, chunk_bytes)

    def read_chunks(
        self, file: BinaryIO, *, path: str, max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES
    ) -> Iterator[Chunk]:
        for _, chunk in iter_chunks(file, path=path, max_chunk_bytes=max_chunk_bytes):
            assert chunk is not None
            yield chunk

    @classmethod
    def sniff(cls, head: bytes) -> bool:
        return len(head) >= 4 and _U32.unpack_from(head)[0] == MAGIC


class LegacyRecordIOFormat(RecordIOFormat):
    """The pyrecordio 0.0.4 variant (raw snappy blocks, CRC-32C)."""

    name = "recordio-legacy"
    dialect = LEGACY
