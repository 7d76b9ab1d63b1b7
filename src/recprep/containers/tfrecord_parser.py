"""Parsing TFRecord: the uncompressed stream of a file, and its frames checked and cut.

:class:`_InflatedStream` gives a file's uncompressed bytes a block at a time (inflating a
gzip or zlib stream with a bounded output size); :class:`_FrameParser` walks its frames,
verifying both CRCs of each: whole buffers of sound frames at once
(:meth:`_FrameParser.bulk`; where a side index's offsets are given, they place the frames
as far as the frames' own lengths agree, sparing the walk from length to length), a frame
that runs past the buffer or is damaged on its own.
Damage raises :class:`_TFRecordDamage`, which says whether and how reading can go on
(:meth:`_FrameParser.resync` finds the next sound frame, in time linear in the bytes
passed over). :meth:`recprep.containers.tfrecord.TFRecordFormat.read_chunks` drives it.

Example
-------
>>> import io
>>> frame = bytes.fromhex("0100000000000000 0175de41 61 786ee428")   # the record b"a"
>>> stream = _InflatedStream(io.BytesIO(), frame * 3, "none", "mem")
>>> [(offset, list(records)) for offset, records in _FrameParser(stream, "mem", 99).records()]
[(0, [b'a', b'a', b'a'])]
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from .._core.native import kernels
from .._core.records import Records
from ..errors import ChunkTooLargeError, CorruptDataError
from .base import Source
from .tfrecord_framing import (
    _FRAME,
    _WBITS,
    _crc,
    _i,
    _length_crcs,
    _mask,
    _q_i,
    _tables,
    _u32_at,
    _unpack_u64,
    frame_starts,
    masked_crc32c,
)

_READ_BLOCK = 1 << 20  # bytes read (or inflated) at a time
_INPUT = 64 << 10  # compressed bytes fed to the inflater at a time
_BATCH = 1 << 20  # a Chunk holds about this many bytes of records (framing counted)


class _InflatedStream:
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
        size = _READ_BLOCK if self._inflate is None else _INPUT  # small input: errors stay local
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
                out = inflate.decompress(data, _READ_BLOCK)
            except zlib.error as err:
                raise self._error(f"the {self._kind} stream does not inflate: {err}") from None
            if out:
                self.inflated += len(out)
                return out

    def _error(self, detail: str) -> CorruptDataError:
        return CorruptDataError(
            f"{detail} (past uncompressed byte {self.inflated})", path=self._path
        )


class _TFRecordDamage(Exception):
    """Internal: a record at ``offset`` is damaged; ``error`` says how."""

    def __init__(self, error: CorruptDataError, resumable: bool, skip: int = 0,
                 frame_end: int | None = None) -> None:
        self.error = error
        self.resumable = resumable
        self.skip = skip  # a whole frame to pass over (a record over the size limit)
        #: where the damaged frame ends, when its length CRC holds (its data doesn't):
        #: a sound record found there means exactly that one record was lost
        self.frame_end = frame_end


class _FrameParser:
    """Walks the frames of the uncompressed stream, verifying both CRCs of each."""

    def __init__(self, source: _InflatedStream, path: str, limit: int,
                 frames: np.ndarray | None = None) -> None:
        self.source = source
        #: the side index's frame offsets in the stream (and where the last frame ends):
        #: a hint that spares the walk over lengths where the file agrees with it
        self.frames = frames
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

    def damage(self, detail: str, offset: int, resumable: bool = True) -> _TFRecordDamage:
        if self.stream_error is not None:  # the stream broke, not the framing
            return _TFRecordDamage(self.stream_error.located(offset=offset), False)
        err = CorruptDataError(detail + self.note, path=self.path, offset=offset)
        return _TFRecordDamage(err, resumable)

    def bulk(self) -> tuple[int, Records] | None:
        """The whole, sound frames the buffer holds from ``pos`` on (about ``_BATCH``
        bytes of them), checked all at once — the lengths against each other and the
        limit, the length CRCs by table lookup, the data CRCs in one list of C calls —
        as spans of the buffer; ``pos`` moves past them. None when not even the first
        frame is whole and sound here: :meth:`records` then reads it the careful way,
        which says what is wrong."""
        buf, pos = self.buf, self.pos
        native = kernels()
        if native is not None:  # the walk and both CRCs of each frame, in one pass in C
            return self._bulk_native(native, buf, pos)
        heads, ends = self._frames(buf, pos)
        if not len(heads):
            return None
        a = np.frombuffer(buf, np.uint8)
        tables, c0 = _tables()
        good = _length_crcs(lambda i: a[heads + i], tables, c0) == _u32_at(
            lambda i: a[heads + i], 8)
        starts = heads + 12
        crcs = [_crc(buf[s:e]) for s, e in zip(starts.tolist(), ends.tolist(), strict=True)]
        good &= _mask(np.array(crcs, np.uint32)) == _u32_at(lambda i: a[ends + i], 0)
        keep = len(heads) if good.all() else int(np.argmin(good))
        if not keep:
            return None
        self.pos = int(ends[keep - 1]) + 4
        return self.base + pos, Records(buf, starts[:keep], ends[:keep])

    def _bulk_native(self, native: Any, buf: bytes, pos: int) -> tuple[int, Records] | None:
        """:meth:`bulk` by the C kernel ``tfrecord_frames``: the same frames, up to the
        first that runs past the buffer or over the limit or fails a CRC."""
        last = min(len(buf) - _FRAME, pos + _BATCH - 1)  # the last start a frame can have
        starts, ends = native.tfrecord_frames(buf, pos, last, self.limit)
        if not starts:
            return None
        starts, ends = np.frombuffer(starts, np.int64), np.frombuffer(ends, np.int64)
        self.pos = int(ends[-1]) + 4
        n = len(starts)  # frames back to back: their data is the span less 16 bytes each
        return self.base + pos, Records(buf, starts, ends,
                                        int(ends[-1]) - int(starts[0]) - _FRAME * (n - 1))

    def _frames(self, buf: bytes, pos: int) -> tuple[np.ndarray, np.ndarray]:
        """Where the frames that start in ``buf[pos:pos + _BATCH]`` start and where their
        data ends, up to the first that runs past the buffer or over the limit (their
        CRCs not checked yet): the offsets of the side index as far as the frames'
        lengths are its steps, then a walk from length to length."""
        size = len(buf)
        placed = self._indexed(buf, pos) if self.frames is not None else None
        at = pos if placed is None else int(placed[-1])
        found: list[int] = []
        add, unpack = found.append, _unpack_u64
        last = min(size - _FRAME, pos + _BATCH - 1)  # the last start a frame can have
        while at <= last:
            add(at)
            at += _FRAME + unpack(buf, at)[0]
        walked = np.array([*found, min(at, size + 1)], np.int64)
        heads = walked if placed is None else np.concatenate([placed[:-1], walked])
        lengths = np.diff(heads) - _FRAME
        fits = (heads[1:] <= size) & (lengths <= self.limit)
        n = len(fits) if fits.all() else int(np.argmin(fits))
        return heads[:n], heads[1 : n + 1] - 4

    def _indexed(self, buf: bytes, pos: int) -> np.ndarray | None:
        """The frame starts from ``pos`` on that the side index gives (``frames``, in
        stream offsets) as far as each one's length field in the buffer is the step to
        the next, then that next one; None when the index places no frame at ``pos``."""
        frames, base = self.frames, self.base
        assert frames is not None
        i = int(np.searchsorted(frames, base + pos))
        if i >= len(frames) - 1 or frames[i] != base + pos:
            return None
        j = int(np.searchsorted(frames, base + pos + _BATCH))
        heads = frames[i : j + 1] - base  # the frames that start in the batch, the next
        apart = np.diff(heads) >= _FRAME  # (an index's offsets are; any array may come)
        heads = heads[: len(heads) if apart.all() else int(np.argmin(apart)) + 1]
        k = int(np.searchsorted(heads[:-1], len(buf) - _FRAME, "right"))  # whole headers
        a = np.frombuffer(buf, np.uint8)
        lengths = a[heads[:k, None] + np.arange(8)].view("<i8")[:, 0]
        same = lengths == heads[1 : k + 1] - heads[:k] - _FRAME
        n = len(same) if same.all() else int(np.argmin(same))
        return heads[: n + 1]

    def records(self) -> Iterator[tuple[int, Sequence[bytes]]]:
        """Yield ``(offset of the first, records)`` batches; raise :class:`_TFRecordDamage`
        on damage.

        Whole frames in the buffer are taken in bulk (:meth:`bulk`); a frame that runs
        past the buffer, or is damaged, is read on its own (:meth:`one_record`)."""
        batch: list[bytes] = []
        start = size = 0
        while True:
            self.ensure(_BATCH)  # whole frames for bulk(), up to the end of the stream
            found = self.bulk()
            if found is not None:
                if batch:
                    yield start, batch
                    batch, size = [], 0
                yield found
                continue
            at = self.base + self.pos
            try:
                data = self.one_record()
            except _TFRecordDamage:
                if batch:
                    yield start, batch
                raise
            if data is None:
                if batch:
                    yield start, batch
                return
            if not batch:
                start = at
            batch.append(data)
            size += len(data) + _FRAME
            if size >= _BATCH:
                yield start, batch
                batch, size = [], 0

    def one_record(self) -> bytes | None:
        """The data of the frame at ``pos``, both CRCs checked (``pos`` moves past it);
        None at the end of the stream. Damage raises :class:`_TFRecordDamage`."""
        if len(self.buf) - self.pos < 12 and not self.ensure(12):
            if self.pos < len(self.buf) or self.stream_error is not None:
                raise self.damage(
                    f"record header cut off after {len(self.buf) - self.pos} of 12 bytes "
                    "(a torn last record: was the writer stopped?)",
                    self.base + self.pos,
                    False,
                )
            return None
        buf, pos = self.buf, self.pos
        length, length_crc = _q_i(buf, pos)
        if masked_crc32c(buf[pos : pos + 8]) != length_crc:
            raise self.damage(
                f"record length CRC mismatch: the frame says 0x{length_crc:08x}, its "
                f"length bytes give 0x{masked_crc32c(buf[pos : pos + 8]):08x}",
                self.base + pos,
            )
        if length > self.limit:
            err = ChunkTooLargeError(length, self.limit, path=self.path,
                                     offset=self.base + pos)
            raise _TFRecordDamage(err, True, skip=length + _FRAME)
        end = pos + 12 + length
        if end + 4 > len(buf):
            if not self.ensure(length + _FRAME):
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
            damage = self.damage(
                f"record data CRC mismatch: the frame says 0x{data_crc:08x}, its "
                f"{length} bytes give 0x{masked_crc32c(data):08x}",
                self.base + pos,
            )
            damage.frame_end = self.base + end + 4
            raise damage
        self.pos = end + 4
        return data

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
            window_end = self.base + min(len(self.buf) - 11, self.pos + _READ_BLOCK)
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
