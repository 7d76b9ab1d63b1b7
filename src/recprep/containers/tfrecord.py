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
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import google_crc32c
import numpy as np

from .._core.records import Chunk, Records
from ..errors import ChunkTooLargeError, CorruptDataError, InvalidArgumentError
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
from .tfrecord_index import FRAME_BYTES, TFRecordIndex

__all__ = ["TFRecordFormat", "detect_compression", "masked_crc32c", "read_from", "scan"]

_WBITS = {"gzip": 31, "zlib": 15}
_MEM_LEVEL = 9  # TensorFlow's: the same settings give the same bytes
_BLOCK = 1 << 20  # bytes read (or inflated) at a time
_INPUT = 64 << 10  # compressed bytes fed to the inflater at a time
_BATCH = 1 << 20  # a Chunk holds about this many bytes of records (framing counted)
_FRAME = FRAME_BYTES  # framing bytes per record
_crc = google_crc32c.value
_QI = struct.Struct("<QI")
_q_i = _QI.unpack_from
_q = struct.Struct("<Q").unpack_from
_I = struct.Struct("<I")
_i = _I.unpack_from
_pack_i = _I.pack
_pack_q = struct.Struct("<Q").pack


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC-32C of ``data``.

    >>> hex(masked_crc32c(b""))
    '0xa282ead8'
    """
    c = _crc(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _crc_tables() -> tuple[np.ndarray, int]:
    """CRC-32C of 8 bytes as XORs of per-position table entries (a CRC is affine in its
    input): ``crc(w) == c0 ^ t[0][w[0]] ^ ... ^ t[7][w[7]]``."""
    c0 = _crc(bytes(8))
    tables = np.zeros((8, 256), np.uint32)
    for i in range(8):
        for v in range(1, 256):
            tables[i, v] = _crc(bytes(i) + bytes((v,)) + bytes(7 - i)) ^ c0
    return tables, c0


_TABLES: tuple[np.ndarray, int] | None = None


def _mask(crc: np.ndarray) -> np.ndarray:
    """TFRecord's masking of CRC-32C values (uint32 arrays; sums wrap)."""
    return ((crc >> np.uint32(15)) | (crc << np.uint32(17))) + np.uint32(0xA282EAD8)


def _length_crcs(byte: Callable[[int], np.ndarray], tables: np.ndarray, c0: int
                 ) -> np.ndarray:
    """The masked CRC-32C of 8-byte words whose byte ``i`` is ``byte(i)`` (one array
    each), by table lookup: no Python call per word."""
    crc = tables[0][byte(0)]
    for i in range(1, 8):
        crc ^= tables[i][byte(i)]
    crc ^= np.uint32(c0)
    return _mask(crc)


def _u32_at(byte: Callable[[int], np.ndarray], at: int) -> np.ndarray:
    """The little-endian uint32s whose byte ``i`` is ``byte(at + i)``."""
    out = byte(at).astype(np.uint32)
    for i in range(1, 4):
        out |= byte(at + i).astype(np.uint32) << np.uint32(8 * i)
    return out


def _tables() -> tuple[np.ndarray, int]:
    global _TABLES
    if _TABLES is None:
        _TABLES = _crc_tables()
    return _TABLES


def frame_starts(buf: bytes, start: int, stop: int, limit: int) -> np.ndarray:
    """The offsets ``j`` in ``[start, stop)`` where ``buf[j:j+12]`` is a frame header whose
    length CRC holds and whose length is at most ``limit`` (numpy over the whole window:
    the resync after damage runs at tens of MB/s, not a byte at a time).

    >>> frame = bytes.fromhex("0100000000000000 0175de41 61 786ee428")
    >>> frame_starts(b"xyz" + frame, 0, 4, 1 << 20).tolist()
    [3]
    """
    stop = min(stop, len(buf) - 11)
    if stop <= start:
        return np.zeros(0, np.int64)
    tables, c0 = _tables()
    a = np.frombuffer(buf, np.uint8, stop - start + 11, start)
    n = stop - start
    width = max(1, (int(limit).bit_length() + 7) // 8)
    keep = np.ones(n, bool)
    for i in range(width, 8):  # the length's high bytes: zero for a length within limit
        keep &= a[i : i + n] == 0
    at = np.flatnonzero(keep)
    if 8 * len(at) > n:  # dense (zeros, say): whole-window slices beat gathers
        def byte(i: int) -> np.ndarray:
            return a[i : i + n]
    else:
        def byte(i: int) -> np.ndarray:
            return a[at + i]
    hits = _length_crcs(byte, tables, c0) == _u32_at(byte, 8)
    if 8 * len(at) > n:
        return np.flatnonzero(hits & keep) + start
    return at[hits] + start


def _plain_head_ok(head: bytes) -> bool:
    return len(head) >= 12 and masked_crc32c(head[:8]) == _i(head, 8)[0]


def _zlib_header(head: bytes) -> bool:
    return len(head) >= 2 and head[0] & 0x0F == 8 and head[0] >> 4 <= 7 and not (
        (head[0] << 8 | head[1]) % 31
    )


def detect_compression(head: bytes) -> str | None:
    """``"none"``, ``"gzip"`` or ``"zlib"`` for a file starting with ``head``; ``None`` if
    it starts like none of them. (A zlib guess is confirmed by the first record's CRC.)

    >>> detect_compression(bytes.fromhex("1f8b08")), detect_compression(b"\\x78\\x9c")
    ('gzip', 'zlib')
    """
    if _plain_head_ok(head):  # first: a plain length may begin with 1f 8b or 78 9c
        return "none"
    if head[:3] == b"\x1f\x8b\x08":
        return "gzip"
    if _zlib_header(head):
        return "zlib"
    return None


def _inflated_head_ok(head: bytes, wbits: int) -> bool:
    """Whether ``head`` inflates to a valid first frame header (True if too short to tell)."""
    try:
        start = zlib.decompressobj(wbits).decompress(head, 12)
    except zlib.error:
        return False
    return len(start) < 12 or _plain_head_ok(start)


# -------------------------------------------------------------------------- writing


class _Writer(RecordWriter):
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


# -------------------------------------------------------------------------- reading


class _Source:
    """The uncompressed bytes of a file, a block at a time (``b""`` at the end).

    Inflating never produces more than one block per call, whatever the input claims.
    """

    def __init__(self, file: Source, head: bytes, compression: str, path: str) -> None:
        self._file = file
        self._pending = head
        self.compression = self._kind = compression
        self._wbits = _WBITS.get(compression)
        self._inflate = zlib.decompressobj(self._wbits) if self._wbits else None
        self._path = path
        self.inflated = 0  # uncompressed bytes produced so far

    def _read(self) -> bytes:
        size = _BLOCK if self._inflate is None else _INPUT  # small input: errors stay local
        data = self._pending or self._file.read(size) or b""
        self._pending = b""
        return data

    def read_block(self) -> bytes:
        if self._inflate is None:
            data = self._read()
            self.inflated += len(data)
            return data
        while True:
            inflate = self._inflate
            if inflate.eof:
                rest = inflate.unused_data or self._read()
                if not rest:
                    return b""
                if self._kind != "gzip":
                    raise self._error(
                        f"{len(rest)}+ stray bytes after the end of the zlib stream "
                        "(TensorFlow would ignore them and their records: was this file made "
                        "by concatenating zlib files?)"
                    )
                self._inflate = zlib.decompressobj(_WBITS["gzip"])  # another gzip member
                self._pending = rest
                continue
            data = inflate.unconsumed_tail or self._read()
            if not data:
                raise self._error(
                    f"the {self._kind} stream is cut off (a torn file: was the writer stopped?)"
                )
            try:
                out = inflate.decompress(data, _BLOCK)
            except zlib.error as err:
                raise self._error(f"the {self._kind} stream does not inflate: {err}") from None
            if out:
                self.inflated += len(out)
                return out

    def _error(self, detail: str) -> CorruptDataError:
        return CorruptDataError(
            f"{detail} (past uncompressed byte {self.inflated})", path=self._path
        )


class _Damage(Exception):
    """Internal: a record at ``offset`` is damaged; ``error`` says how."""

    def __init__(self, error: CorruptDataError, resumable: bool, skip: int = 0,
                 frame_end: int | None = None) -> None:
        self.error = error
        self.resumable = resumable
        self.skip = skip  # a whole frame to pass over (a record over the size limit)
        #: where the damaged frame ends, when its length CRC holds (its data doesn't):
        #: a sound record found there means exactly that one record was lost
        self.frame_end = frame_end


class _Parser:
    """Walks the frames of the uncompressed stream, verifying both CRCs of each."""

    def __init__(self, source: _Source, path: str, limit: int) -> None:
        self.source = source
        self.path = path
        self.limit = limit
        self.spent = 0  # data bytes checksummed by resync, against its budget
        self.buf = b""
        self.pos = 0
        self.base = 0  # stream offset of buf[0]
        self.ended = False
        self.stream_error: CorruptDataError | None = None
        self.note = "" if source.compression == "none" else (
            f" (offsets count bytes of the inflated {source.compression} stream)"
        )

    def ensure(self, n: int) -> bool:
        """Make ``buf[pos:pos + n]`` available; False if the stream ends before."""
        have = len(self.buf) - self.pos
        if have >= n:
            return True
        parts = [self.buf[self.pos :]]
        while have < n and not self.ended:
            try:
                block = self.source.read_block()
            except CorruptDataError as err:  # the compressed stream is damaged
                self.stream_error = err
                block = b""
            if not block:
                self.ended = True
                break
            parts.append(block)
            have += len(block)
        self.base += self.pos
        self.buf, self.pos = b"".join(parts), 0
        return have >= n

    def damage(self, detail: str, offset: int, resumable: bool = True) -> _Damage:
        if self.stream_error is not None:  # the stream broke, not the framing
            return _Damage(self.stream_error.located(offset=offset), False)
        err = CorruptDataError(detail + self.note, path=self.path, offset=offset)
        return _Damage(err, resumable)

    def bulk(self) -> tuple[int, Records] | None:
        """The whole, sound frames the buffer holds from ``pos`` on (about ``_BATCH``
        bytes of them), checked all at once — the length CRCs by table lookup, the data
        CRCs in one pass of C calls — as spans of the buffer; ``pos`` moves past them.
        None when not even the first frame is whole and sound here: :meth:`records`
        then reads it the careful way, which says what is wrong."""
        buf, pos = self.buf, self.pos
        size, limit = len(buf), self.limit
        starts: list[int] = []
        ends: list[int] = []
        at, stop = pos, pos + _BATCH
        while at + 12 <= size and at < stop:
            end = at + 12 + _q(buf, at)[0]
            if end + 4 > size or end - at - 12 > limit:
                break
            starts.append(at + 12)
            ends.append(end)
            at = end + 4
        if not starts:
            return None
        first, last = np.array(starts, np.int64), np.array(ends, np.int64)
        a = np.frombuffer(buf, np.uint8)
        tables, c0 = _tables()
        heads = first - 12
        good = _length_crcs(lambda i: a[heads + i], tables, c0) == _u32_at(
            lambda i: a[heads + i], 8)
        crcs = np.fromiter(map(_crc, map(buf.__getitem__, map(slice, starts, ends))),
                           np.uint32, len(starts))
        good &= _mask(crcs) == _u32_at(lambda i: a[last + i], 0)
        keep = len(starts) if good.all() else int(np.argmin(good))
        if not keep:
            return None
        self.pos = int(last[keep - 1]) + 4
        return self.base + pos, Records(buf, first[:keep], last[:keep])

    def records(self) -> Iterator[tuple[int, Sequence[bytes]]]:
        """Yield ``(offset of the first, records)`` batches; raise _Damage on damage.

        Whole frames in the buffer are taken in bulk (:meth:`bulk`); a frame that runs
        past the buffer, or is damaged, is read on its own, record by record."""
        batch: list[bytes] = []
        start = size = 0
        limit = self.limit
        while True:
            self.ensure(_BATCH)  # whole frames for bulk(), up to the end of the stream
            found = self.bulk()
            if found is not None:
                if batch:
                    yield start, batch
                    batch, size = [], 0
                yield found
                continue
            buf, pos = self.buf, self.pos
            if len(buf) - pos < 12 and not self.ensure(12):
                if batch:
                    yield start, batch
                if self.pos < len(self.buf) or self.stream_error is not None:
                    raise self.damage(
                        f"record header cut off after {len(self.buf) - self.pos} of 12 bytes "
                        "(a torn last record: was the writer stopped?)",
                        self.base + self.pos,
                        False,
                    )
                return
            buf, pos = self.buf, self.pos
            length, length_crc = _q_i(buf, pos)
            if masked_crc32c(buf[pos : pos + 8]) != length_crc:
                if batch:
                    yield start, batch
                raise self.damage(
                    f"record length CRC mismatch: the frame says 0x{length_crc:08x}, its "
                    f"length bytes give 0x{masked_crc32c(buf[pos : pos + 8]):08x}",
                    self.base + pos,
                )
            if length > limit:
                if batch:
                    yield start, batch
                err = ChunkTooLargeError(length, limit, path=self.path, offset=self.base + pos)
                raise _Damage(err, True, skip=length + _FRAME)
            end = pos + 12 + length
            if end + 4 > len(buf):
                if not self.ensure(length + _FRAME):
                    if batch:
                        yield start, batch
                    raise self.damage(
                        f"record data cut off: the frame says {length} bytes, the stream "
                        f"has {len(self.buf) - self.pos - 12} (a torn last record: was the "
                        "writer stopped?)",
                        self.base + self.pos,
                        False,
                    )
                buf, pos = self.buf, self.pos
                end = pos + 12 + length
            data = buf[pos + 12 : end]
            data_crc = _i(buf, end)[0]
            if masked_crc32c(data) != data_crc:
                if batch:
                    yield start, batch
                damage = self.damage(
                    f"record data CRC mismatch: the frame says 0x{data_crc:08x}, its "
                    f"{length} bytes give 0x{masked_crc32c(data):08x}",
                    self.base + pos,
                )
                damage.frame_end = self.base + end + 4
                raise damage
            if not batch:
                start = self.base + pos
            batch.append(data)
            size += length + _FRAME
            self.pos = end + 4
            if size >= _BATCH:
                yield start, batch
                batch, size = [], 0

    def discard(self, n: int) -> bool:
        """Pass over ``n`` bytes without holding them; False if the stream ends first."""
        have = len(self.buf) - self.pos
        if have >= n:
            self.pos += n
            return True
        n -= have
        self.base += len(self.buf)
        self.buf, self.pos = b"", 0
        while n:
            if not self.ensure(1):
                return False
            step = min(n, len(self.buf))
            self.pos, n = step, n - step
        return True

    def resync(self) -> int | None:
        """Skip to the next offset where a whole valid record starts; None at the end.

        A damage path only: after the damaged frame, candidates (a length within the
        limit and its CRC) are found with numpy a block at a time, then each one's data
        CRC is checked (two CRCs must hold, so a false start is a 1 in 2**64 event).
        Checking data costs at most four times the bytes passed over plus one record of
        ``limit``, so a crafted stream full of false starts still takes linear time.
        """
        self.pos += 1
        origin = self.base + self.pos
        while self.ensure(12):
            window_end = self.base + min(len(self.buf) - 11, self.pos + _BLOCK)
            found = frame_starts(self.buf, self.pos, window_end - self.base, self.limit)
            for at in (found + self.base).tolist():
                self.pos = at - self.base
                length = _q_i(self.buf, self.pos)[0]
                if self.spent + length > 4 * (at - origin) + self.limit:
                    continue
                self.spent += length
                if self.ensure(length + _FRAME):
                    buf, pos = self.buf, self.pos
                    data = buf[pos + 12 : pos + 12 + length]
                    if masked_crc32c(data) == _i(buf, pos + 12 + length)[0]:
                        return at
            self.pos = window_end - self.base
        return None


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
        return _Writer(file, compressor, chunk_bytes)

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
    ) -> Iterator[Chunk]:
        """Yield the records of ``file`` in batches, verifying both CRCs of each.

        ``compressor`` ``None`` detects it. A record over ``max_chunk_bytes`` raises
        :class:`~recprep.errors.ChunkTooLargeError` before it is read. Damage raises
        :class:`~recprep.errors.CorruptDataError` (offsets in the uncompressed stream);
        with ``on_corrupt="skip"`` the damaged bytes are skipped, with a
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
        parser = _Parser(_Source(file, head, found or "none", path), path, max_chunk_bytes)
        if (found or "none") == "none":
            parser.base = origin  # offsets in a plain file are file offsets
        while True:
            try:
                for offset, batch in parser.records():
                    yield Chunk(offset, batch)
                return
            except _Damage as damage:
                err, resumable, skip = damage.error, damage.resumable, damage.skip
                frame_end = damage.frame_end
                if found is None and err.offset == origin:  # nothing looked like TFRecord
                    err = CorruptDataError(
                        f"{err.detail}; or this is not a TFRecord file at all (it starts "
                        f"with {head[:12].hex()})",
                        path=path,
                        offset=origin,
                    )
                if on_corrupt == "raise":
                    raise err from None
            at = err.offset
            if skip:  # a record whose length CRC holds, over max_chunk_bytes: pass over it
                if parser.discard(skip):
                    report_skip(on_skip, f"{err.detail}; skipped that record", path=path,
                                offset=at, records_lost=1)
                    continue
                resumable = False
            resumed = parser.resync() if resumable else None
            if resumed is None:
                torn = "torn last record" in err.detail
                report_skip(on_skip, f"{err.detail}; skipped the rest of the file",
                            path=path, offset=at, records_lost=1 if torn else None)
                return
            if resumed == frame_end:  # the frame's length held: one record lost
                report_skip(on_skip, f"{err.detail}; skipped that record", path=path,
                            offset=at, records_lost=1)
                continue
            report_skip(on_skip, f"{err.detail}; skipped {resumed - (at or 0)} bytes to the "
                        f"next valid record at byte {resumed}", path=path, offset=at,
                        records_lost=None)

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
                                          compressor="none")
    for chunk in chunks:
        if expected is not None:
            TFRecordIndex.check(expected, chunk.offset, chunk.records, path)
        yield chunk
