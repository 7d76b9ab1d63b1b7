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
:class:`_Writer`); every reader of either variant reads such mixed files.

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

import importlib
import io
import struct
import zlib
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

import google_crc32c
import numpy as np

from .._core.records import Chunk, Records
from ..errors import (
    ChunkTooLargeError,
    CorruptDataError,
    EncodeError,
    InvalidArgumentError,
    LocatedError,
)
from .base import (
    DEFAULT_MAX_CHUNK_BYTES,
    ChunkInfo,
    Format,
    OnSkip,
    RecordWriter,
    Sink,
    Source,
    max_records,
    report_skip,
)
from .compression import Compression, get_compression

MAGIC = 0x01020304
HEADER_SIZE = 20
#: a record takes at least its 4-byte length in a decompressed payload
MIN_RECORD_BYTES = 4
#: the header's 32-bit size field: the most a chunk's stored payload can be
MAX_PAYLOAD = 0xFFFFFFFF
#: a snappy chunk is stored compressed only below this share of its uncompressed size
#: (``benchmarks/RESULTS.md``, "Compression that saves nothing"); else stored as "none"
SNAPPY_KEEP_BELOW = 1.0
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


def _fastest_crc32() -> Callable[[bytes], int]:
    """CRC-32 (IEEE): isal's (PCLMUL/ARM CRC, ~10x CPython's zlib here: see
    ``benchmarks/RESULTS.md``) where it is installed, else zlib's. Same values."""
    try:
        crc32: Callable[[bytes], int] = importlib.import_module("isal.isal_zlib").crc32
    except ImportError:
        return zlib.crc32
    return crc32


crc32 = _fastest_crc32()

GO = Dialect(
    "recordio",
    crc32,
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


def split_payload(payload: bytes, count: int) -> Records:
    """The ``count`` records of a decompressed payload; raises on any inconsistency.

    >>> list(split_payload(encode_payload([b"ab", b"", b"c"]), 3))
    [b'ab', b'', b'c']
    """
    if count >= AT_ONCE_MIN_RECORDS and len(payload) < AT_ONCE_BELOW_BYTES * count:
        found = _split_at_once(payload, count)
        if found is not None:
            return found
    ends: list[int] = []
    append = ends.append
    pos = 0
    try:  # the sound case, record by record at the least cost; damage: the careful walk
        for _ in range(count):
            pos += 4 + _u32_unpack_from(payload, pos)[0]
            append(pos)
    except struct.error:
        pos = -1
    if pos != len(payload):
        _check_payload(payload, count)
    ends_array = np.array(ends, dtype=np.int64)
    starts = np.empty_like(ends_array)
    if count:
        starts[0] = 4
        starts[1:] = ends_array[:-1] + 4
    return Records(payload, starts, ends_array)


#: payloads of at least this many records averaging under this many bytes are first cut
#: with numpy (:func:`_split_at_once`): for small records a walk costs more per byte
AT_ONCE_MIN_RECORDS = 64
AT_ONCE_BELOW_BYTES = 128


def _split_at_once(payload: bytes, count: int) -> Records | None:
    """The records of a sound payload whose records all begin with the first record's
    first four bytes (records of one codec and layout do), found with numpy; None when
    that guess doesn't hold exactly.

    Every place where those four bytes follow a 4-byte word is a candidate record; the
    guess holds only if the candidates are exactly a chain — the first at 0, each
    record's length leading to the next candidate, the last ending the payload, ``count``
    of them. A chain from 0 is the payload's one way of being cut, so a payload that
    passes is cut exactly as the record-by-record walk cuts it; any other (stray matches
    inside values, records that begin otherwise, damage) goes record by record.

    >>> records = [b"ABCD" + b"x" * n for n in range(70)]
    >>> list(_split_at_once(encode_payload(records), 70)) == records
    True
    >>> _split_at_once(encode_payload([b"ABCD" + b"ABCD" * n for n in range(70)]), 70)
    >>> # ^ None: marks inside values (the walk cuts that one)
    """
    size = len(payload)
    if size < 8 or _u32_unpack_from(payload, 0)[0] < 4:
        return None
    mark = _u32_unpack_from(payload, 4)[0]
    found = []
    for shift in range(4):  # the marks at positions 4 + shift + 4i, one word view each
        words = np.frombuffer(payload, "<u4", (size - 4 - shift) // 4, 4 + shift)
        found.append(np.flatnonzero(words == mark) * 4 + shift)
    heads = np.sort(np.concatenate(found))
    if len(heads) != count or heads[0] != 0:
        return None
    u8 = np.frombuffer(payload, np.uint8)
    lengths = (u8[heads].astype(np.int64) | u8[heads + 1].astype(np.int64) << 8
               | u8[heads + 2].astype(np.int64) << 16 | u8[heads + 3].astype(np.int64) << 24)
    ends = heads + 4 + lengths
    if int(ends[-1]) != size or not (ends[:-1] == heads[1:]).all():
        return None
    return Records(payload, heads + 4, ends)


def _check_payload(payload: bytes, count: int) -> None:
    """Raise what is wrong with a payload that doesn't hold ``count`` records exactly."""
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
    raise CorruptDataError(
        f"{end - pos} stray bytes after the chunk's {count} records (expected none)"
    )


class _Writer(RecordWriter):
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
        self._pending: list[bytes] = []
        self._pending_bytes = 0
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
        pending = self._pending_bytes + MIN_RECORD_BYTES * len(self._pending)
        if self._pending and (
            self._pending_bytes + size > self._limit
            or pending + size + MIN_RECORD_BYTES > MAX_PAYLOAD
        ):
            self._flush()
        self._pending.append(record)
        self._pending_bytes += size
        self.num_records += 1

    def write_many(self, records: Sequence[bytes]) -> None:
        """:meth:`write` of each record, with the chunk cuts found by bisecting the
        records' running sizes instead of one test per record.

        >>> import io
        >>> one, many = io.BytesIO(), io.BytesIO()
        >>> records = [bytes(n % 7) for n in range(100)]
        >>> a, b = _Writer(one, GO, "none", 40), _Writer(many, GO, "none", 40)
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
        if (max(sizes) > MAX_PAYLOAD - MIN_RECORD_BYTES or self._limit > MAX_PAYLOAD // 2
                or (len(self._pending) + len(sizes)) * MIN_RECORD_BYTES
                > MAX_PAYLOAD - self._limit):  # where a chunk's framing could overflow
            super().write_many(records)  # what write says of each: its errors, its cuts
            return
        ends = list(accumulate(sizes))
        pending = self._pending
        at, n = 0, len(records)
        while at < n:
            if not pending:  # a chunk takes its first record whatever its size
                pending.append(records[at])
                self._pending_bytes = sizes[at]
                at += 1
                continue
            before = ends[at - 1] if at else 0
            stop = bisect_right(ends, before + self._limit - self._pending_bytes, at)
            if stop > at:
                pending.extend(records[at:stop])
                self._pending_bytes += ends[stop - 1] - before
                at = stop
            if at < n:
                self._flush()
                pending = self._pending
        self.num_records += n

    def _flush(self) -> None:
        records = self._pending
        if not records:
            return
        data = encode_payload(records)
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
                f"a chunk of {len(records)} record(s) compresses to {len(payload)} bytes, "
                f"more than RecordIO's 32-bit chunk size field can hold ({MAX_PAYLOAD}); "
                "write smaller records, or format='tfrecord'"
            )
        header = self._dialect.pack(
            self._dialect.checksum(payload), comp, len(payload), len(records)
        )
        self._file.write(header)
        self._file.write(payload)
        self.chunks.append((self._written, len(records)))
        self._written += len(header) + len(payload)
        self._pending = []
        self._pending_bytes = 0

    def close(self) -> None:
        self._flush()


def _read_exact(file: Source, size: int) -> bytes:
    data = file.read(size)
    return data if data is not None else b""


def _candidates(fields: tuple[int, ...], dialect: Dialect | None) -> list[Dialect]:
    """The variants whose reading of ``fields`` has a known compressor id (once a file's
    variant is known, only that one)."""
    options = (GO, LEGACY) if dialect is None else (dialect,)
    return [d for d in options if d.unpack(fields)[1] in d.ids]


def _implausible(dialect: Dialect, fields: tuple[int, ...], limit: int) -> str | None:
    """Why a header's record count can't be right (more records than its stored bytes,
    decompressed within ``limit``, can hold), or None. No checksum covers the count: this
    keeps an index from being sized by a number nothing vouches for."""
    _, comp, size, count = dialect.unpack(fields)
    compression = dialect.ids[comp]
    bound = max_records(size, compression, MIN_RECORD_BYTES, limit)
    if count <= bound:
        return None
    return (
        f"the chunk header claims {count} records, but its {size} stored bytes "
        f"({compression}, at most max_chunk_bytes={limit} decompressed) can hold at most "
        f"{bound} (a record takes at least {MIN_RECORD_BYTES} bytes)"
    )


class _Damage(Exception):
    """Internal: a damaged chunk, and how reading can go on after it."""

    def __init__(self, error: CorruptDataError, kind: str, lost: int | None = None,
                 resume: int | None = None) -> None:
        super().__init__(str(error))
        self.error, self.kind, self.lost, self.resume = error, kind, lost, resume


class _Budget:
    """What the search for sound data after damage may read and checksum in one file:
    four times the bytes it has passed over, plus the file's size. However many false
    starts a crafted file holds (each a magic, a plausible header and a payload that
    reaches far), resyncing costs time linear in the file's size; a sound chunk found
    after ordinary damage is always within the budget."""

    def __init__(self, origin: int, end: int) -> None:
        self.origin, self.base, self.spent = origin, max(end - origin, 0), 0

    def allow(self, position: int, cost: int) -> bool:
        if self.spent + cost > 4 * (position - self.origin) + self.base:
            return False
        self.spent += cost
        return True


def _read_chunk(
    file: Source,
    offset: int,
    dialect: Dialect | None,
    limit: int,
    path: str,
    decode: bool,
    end: int,
    budget: _Budget | None = None,
) -> tuple[ChunkInfo, Chunk | None, Dialect] | None:
    """Read the chunk at ``offset``; None at the end of the file; damage raises _Damage.

    ``kind`` of the damage: ``"torn"`` (the file ends inside the chunk), ``"payload"`` (the
    header is sound, so reading can resume after the chunk), ``"header"`` (the next chunk
    must be searched for). ``end`` is the file's size; ``budget`` is charged with what
    decompressing costs (while resyncing).
    """
    where: dict[str, Any] = {"path": path, "offset": offset}
    file.seek(offset)
    head = _read_exact(file, HEADER_SIZE)
    if not head:
        return None
    if len(head) < HEADER_SIZE:
        raise _Damage(CorruptDataError(
            f"chunk header cut off after {len(head)} of {HEADER_SIZE} bytes "
            "(a torn last chunk: was the writer stopped?)", **where), "torn")
    fields = _HEADER.unpack(head)
    if fields[0] != MAGIC:
        raise _Damage(CorruptDataError(
            f"expected the RecordIO chunk magic 0x{MAGIC:08x}, found 0x{fields[0]:08x}",
            **where), "header")
    options = _candidates(fields, dialect)
    if not options:
        raise _Damage(CorruptDataError(
            f"unknown compressor id in the chunk header (fields {list(fields[1:])}); "
            "expected 0-2 (Go RecordIO) or 1-3 (pyrecordio 0.0.4)", **where), "header")
    if not decode and dialect is not None:
        _, _, size, count = dialect.unpack(fields)
        problem = _implausible(dialect, fields, limit)
        if problem is not None:
            raise _Damage(CorruptDataError(problem, **where), "header")
        if offset + HEADER_SIZE + size > end:
            raise _Damage(CorruptDataError(
                f"chunk payload cut off: header says {size} bytes, file has "
                f"{max(end - offset - HEADER_SIZE, 0)} (a torn last chunk: was the writer "
                "stopped?)", **where), "torn", count)
        return ChunkInfo(offset, count, size), None, dialect
    try:
        chosen, payload = _read_payload(file, fields, options, offset, limit, path)
    except CorruptDataError as err:
        _, _, size, count = options[0].unpack(fields)
        lost = None if _implausible(options[0], fields, limit) else count
        if isinstance(err, ChunkTooLargeError):
            raise _Damage(err, "header") from None
        if "cut off" in err.detail:
            raise _Damage(err, "torn", lost) from None
        raise _Damage(err, "payload", lost, offset + HEADER_SIZE + size) from None
    _, comp, size, count = chosen.unpack(fields)
    resume = offset + HEADER_SIZE + size
    problem = _implausible(chosen, fields, limit)
    if problem is not None:
        raise _Damage(CorruptDataError(problem, **where), "payload", None, resume)
    info = ChunkInfo(offset, count, size)
    if not decode:
        return info, None, chosen
    try:
        data = get_compression(chosen.ids[comp]).decompress(payload, limit)
        if budget is not None:
            budget.spent += len(data)
        records = split_payload(data, count)
    except LocatedError as err:  # the payload is sound (its CRC holds): the count is wrong,
        located = err.located(**where)  # so how many records it held is not known
        assert isinstance(located, CorruptDataError)
        raise _Damage(located, "payload", None, resume) from None
    return info, Chunk(offset, records), chosen


_MAGIC_BYTES = _U32.pack(MAGIC)
_RESYNC_BLOCK = 1 << 20


def _cost(head: bytes, at: int, dialect: Dialect | None, limit: int, end: int) -> int | None:
    """What checking a chunk that starts with ``head`` at byte ``at`` would read, or None
    when its header alone rules it out (O(1): no payload is read)."""
    if len(head) < HEADER_SIZE:
        return None
    fields = _HEADER.unpack(head)
    sizes = [
        d.unpack(fields)[2] for d in _candidates(fields, dialect)
        if not _implausible(d, fields, limit)
    ]
    sizes = [size for size in sizes if size <= limit and at + HEADER_SIZE + size <= end]
    return max(sizes) if sizes else None


def _resync(
    file: Source, start: int, dialect: Dialect | None, limit: int, path: str, end: int,
    budget: _Budget,
) -> int | None:
    """The offset of the next sound chunk at or after ``start``, or None.

    Magics are found with ``bytes.find`` a block at a time; a candidate is checked (its
    payload read and checksummed) only if its header is plausible and ``budget`` allows.
    """
    pos = start
    while pos + HEADER_SIZE <= end:
        file.seek(pos)
        block = _read_exact(file, _RESYNC_BLOCK)
        if len(block) < HEADER_SIZE:
            return None
        hit = block.find(_MAGIC_BYTES)
        while hit != -1:
            at = pos + hit
            if hit + HEADER_SIZE <= len(block):
                head = block[hit : hit + HEADER_SIZE]
            else:
                file.seek(at)
                head = _read_exact(file, HEADER_SIZE)
            cost = _cost(head, at, dialect, limit, end)
            if cost is not None and budget.allow(at, cost):
                try:
                    if _read_chunk(file, at, dialect, limit, path, True, end, budget):
                        return at
                except _Damage:
                    pass
            hit = block.find(_MAGIC_BYTES, hit + 1)
        pos += len(block) - len(_MAGIC_BYTES) + 1
    return None


def iter_chunks(
    file: Source,
    *,
    path: str,
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
    decode: bool = True,
    on_corrupt: str = "raise",
    on_skip: OnSkip | None = None,
) -> Iterator[tuple[ChunkInfo, Chunk | None]]:
    """Walk a RecordIO file of either variant from its current position.

    Yields each chunk's :class:`ChunkInfo` and, with ``decode``, its records (checksum
    verified, payload decompressed within ``max_chunk_bytes``). With ``decode=False`` the
    payload is skipped by seeking (an index scan, no checksum work), but a record count
    more than the chunk's bytes can hold, or a chunk that runs past the end of the file,
    is damage all the same.

    ``on_corrupt="raise"`` stops at the first damage with a
    :class:`~recprep.errors.CorruptDataError`; ``"skip"`` gives a
    :class:`~recprep.errors.CorruptDataWarning` naming the file, the offset and the
    records lost (also handed to ``on_skip``), drops the damaged chunk and goes on with
    the next sound one (found by its magic and checksum when the header itself is
    damaged, in time linear in the bytes passed over). It never yields a record from a
    damaged chunk.
    """
    if on_corrupt not in ("raise", "skip"):
        raise InvalidArgumentError(f"on_corrupt must be 'raise' or 'skip', got {on_corrupt!r}")
    dialect: Dialect | None = None
    offset = file.tell()
    file.seek(0, io.SEEK_END)
    end = file.tell()
    budget = _Budget(offset, end)
    while True:
        try:
            found = _read_chunk(file, offset, dialect, max_chunk_bytes, path, decode, end)
        except _Damage as damage:
            if on_corrupt == "raise":
                raise damage.error from None
            offset = _skip(file, damage, offset, dialect, max_chunk_bytes, path, end, budget,
                           on_skip)
            if offset < 0:
                return
            continue
        if found is None:
            return
        info, chunk, dialect = found
        offset = info.offset + HEADER_SIZE + info.stored_size
        yield info, chunk


def _skip(file: Source, damage: _Damage, offset: int, dialect: Dialect | None,
          limit: int, path: str, end: int, budget: _Budget, on_skip: OnSkip | None) -> int:
    """Report what ``damage`` loses; the offset to go on from, or -1 to stop."""
    detail = damage.error.detail
    if damage.kind == "payload" and damage.resume is not None:
        report_skip(on_skip, f"damaged chunk: {detail}", path=path, offset=offset,
                    records_lost=damage.lost)
        return damage.resume
    if damage.kind == "torn":
        report_skip(on_skip, f"the file ends in a torn chunk: {detail}", path=path,
                    offset=offset, records_lost=damage.lost)
        return -1
    resume = _resync(file, offset + 1, dialect, limit, path, end, budget)
    until = "the end of the file" if resume is None else f"byte {resume}"
    report_skip(on_skip, f"{detail}; skipped from byte {offset} to {until}", path=path,
                offset=offset, records_lost=None)
    return -1 if resume is None else resume


def _read_payload(
    file: Source,
    fields: tuple[int, ...],
    options: list[Dialect],
    offset: int,
    limit: int,
    path: str,
) -> tuple[Dialect, bytes]:
    """Read the payload under each plausible variant; keep the one whose checksum fits."""
    where: dict[str, Any] = {"path": path, "offset": offset}
    start = file.tell()
    problems: list[CorruptDataError] = []
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


def scan_index(file: Source, *, path: str) -> list[ChunkInfo]:
    """The chunk index of a file: each chunk's offset and record count, by hopping headers.

    The first chunk's checksum is checked to tell the variant; the others are not read.
    """
    return [info for info, _ in iter_chunks(file, path=path, decode=False)]


class RecordIOFormat(Format):
    """The Go/PaddlePaddle/ElasticDL RecordIO format (recprep's default); reads the
    pyrecordio 0.0.4 variant too (told apart per file, from the first chunk)."""

    name = "recordio"
    compressors = ("none", "snappy", "gzip")
    default_compressor = "snappy"
    min_record_bytes = MIN_RECORD_BYTES
    per_chunk_compressor = True
    chunk_header_bytes = HEADER_SIZE
    dialect = GO

    def writer(self, file: Sink, compressor: str, chunk_bytes: int) -> RecordWriter:
        return _Writer(file, self.dialect, compressor, chunk_bytes)

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
        """Hop from header to header. The first chunk's checksum tells the variant; then
        a tight loop reads only headers. At anything unexpected (bad magic, an unknown
        compressor, a record count the chunk's bytes can't hold, a chunk past the end of
        the file, a cut header) the careful walk of :func:`iter_chunks` starts over, and
        raises or skips as ``on_corrupt`` says."""
        end = file.seek(0, io.SEEK_END)
        first = _first_chunk(file, path, max_chunk_bytes, end)
        if first is not None and first[0] is None:
            return [], []
        if first is not None:
            info, dialect = first
            assert info is not None
            offsets, counts = [info.offset], [info.num_records]
            pos = info.offset + HEADER_SIZE + info.stored_size
            seek, read, unpack = file.seek, file.read, _HEADER.unpack
            while True:
                seek(pos)
                head = read(HEADER_SIZE)
                if not head:
                    return offsets, counts
                if len(head) < HEADER_SIZE:
                    break
                fields = unpack(head)
                _, comp, size, count = dialect.unpack(fields)
                if fields[0] != MAGIC or comp not in dialect.ids or (
                    pos + HEADER_SIZE + size > end
                ) or count > max_records(
                    size, dialect.ids[comp], MIN_RECORD_BYTES, max_chunk_bytes
                ):
                    break
                offsets.append(pos)
                counts.append(count)
                pos += HEADER_SIZE + size
        file.seek(0)
        infos = [i for i, _ in iter_chunks(
            file, path=path, decode=False, on_corrupt=on_corrupt,
            max_chunk_bytes=max_chunk_bytes, on_skip=on_skip)]
        return [i.offset for i in infos], [i.num_records for i in infos]

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


def _first_chunk(
    file: Source, path: str, limit: int, end: int
) -> tuple[ChunkInfo | None, Dialect] | None:
    """The first chunk's header and the variant its checksum says (the one place the
    variant is told: :func:`_read_payload`); ``(None, GO)`` for an empty file, None when
    the first chunk is damaged."""
    try:
        found = _read_chunk(file, 0, None, limit, path, False, end)
    except _Damage:
        return None
    if found is None:
        return None, GO
    return found[0], found[2]


class LegacyRecordIOFormat(RecordIOFormat):
    """The pyrecordio 0.0.4 variant (raw snappy blocks, CRC-32C)."""

    name = "recordio-legacy"
    dialect = LEGACY
