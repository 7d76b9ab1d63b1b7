"""RecordIO chunks read for random access: one chunk whose offset and record count an
index gives, taken as it is only when everything about it is sound.

:func:`sound_chunk_records` gives a chunk's records; :func:`sound_record` one record of
it, decompressing and cutting the chunk only as far as that record (a lookup that keeps
nothing). Both return None at anything unexpected — a header that isn't the index's, a
checksum that fails, a payload that doesn't decompress or cut — and the caller then reads
the chunk the careful way (:func:`~recprep.containers.recordio_reading.iter_chunks`),
which raises, or skips, what is wrong: so an error is always the careful reader's.

Example
-------
>>> import io
>>> from recprep.containers import get_format
>>> buf = io.BytesIO()
>>> w = get_format("recordio").writer(buf, "snappy", chunk_bytes=1 << 20)
>>> for n in range(100):
...     w.write(b"rec:" + str(n).encode())
>>> w.close()
>>> data = buf.getvalue()
>>> sound_record(data, 100, 42, 1 << 20), len(sound_chunk_records(data, 100, 1 << 20))
(b'rec:42', 100)
>>> sound_record(data, 99, 42, 1 << 20) is None  # not the count the index says
True
"""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Sequence

import cramjam
import google_crc32c
import numpy as np

from .._core.records import Records
from ..errors import CorruptDataError, LocatedError
from .compression import SNAPPY_STREAM, get_compression, snappy_frames
from .recordio_framing import (
    _HEADER,
    GO,
    HEADER_SIZE,
    LEGACY,
    MAGIC,
    _u32_unpack_from,
    record_heads,
    split_payload,
)

__all__ = ["MARK_BYTES", "MAX_MARKS", "WALK_MAX", "ChunkMarks", "record_in_prefix",
           "snappy_block", "snappy_blocks", "sound_chunk_records", "sound_record"]


def _sound_payload(data: bytes, count: int, limit: int) -> tuple[bytes, str, int] | None:
    """The payload of the chunk ``data`` begins with, its compression and its checksum,
    when its header (of either variant) says ``count`` records and a payload within
    ``data`` and ``limit``, and its checksum holds; else None."""
    if len(data) < HEADER_SIZE:
        return None
    fields = _HEADER.unpack_from(data)
    if fields[0] != MAGIC:
        return None
    stored = len(data) - HEADER_SIZE
    for dialect in (GO, LEGACY):
        crc, comp, size, number = dialect.unpack(fields)
        if comp not in dialect.ids or size > stored or number != count or size > limit:
            continue
        payload = data[HEADER_SIZE:HEADER_SIZE + size] if size < stored else data[HEADER_SIZE:]
        if dialect.checksum(payload) == crc:
            return payload, dialect.ids[comp], crc
    return None


def sound_chunk_records(data: bytes, count: int, limit: int) -> Records | None:
    """The ``count`` records of the chunk ``data`` begins with (its bytes from the offset
    an index gives, to the next chunk's), when everything about it is sound — a header of
    either variant saying ``count`` records and a payload within ``data``, its checksum
    holding, its payload decompressing within ``limit`` and splitting into ``count``
    records; else None, and the caller reads the chunk the careful way
    (:func:`iter_chunks`), which raises or skips what is wrong. One chunk read for one
    lookup, with nothing but the work on its bytes.

    >>> import io
    >>> buf = io.BytesIO()
    >>> from recprep.containers import get_format
    >>> w = get_format("recordio").writer(buf, "snappy", chunk_bytes=1 << 20)
    >>> for r in (b"ab", b"cd", b"e"):
    ...     w.write(r)
    >>> w.close()
    >>> data = buf.getvalue()
    >>> list(sound_chunk_records(data, 3, 1 << 20))
    [b'ab', b'cd', b'e']
    >>> sound_chunk_records(data, 2, 1 << 20) is None  # not the count the index says
    True
    >>> sound_chunk_records(data[:-1] + b"?", 3, 1 << 20) is None  # checksum fails
    True
    """
    found = _sound_payload(data, count, limit)
    if found is None:
        return None
    payload, compression, _ = found
    try:
        if compression == "snappy-framed":  # block by block (a quarter faster)
            blocks = snappy_blocks(payload, limit)[0]
            return split_payload(b"".join([snappy_block(payload, b) for b in blocks]), count)
        return split_payload(get_compression(compression).decompress(payload, limit), count)
    except LocatedError:
        return None


def sound_record(data: bytes, count: int, p: int, limit: int,
                 marks: ChunkMarks | None = None) -> bytes | None:
    """Record ``p`` alone of the chunk ``data`` begins with, sound as for
    :func:`sound_chunk_records` (header, count and checksum), decompressed and cut only as
    far as record ``p``: a snappy-framed payload (Go RecordIO's) block by block, until
    the blocks hold it (each block's own CRC-32C checked), and its records found by the
    chain of lengths from record 0 (:func:`record_in_prefix`; a chain that guess doesn't
    find is walked record by record). The checksum of the stored payload vouches for
    the rest, which is neither decompressed nor split. None where that doesn't hold:
    the caller reads the whole chunk.

    ``marks``: what earlier lookups in this chunk learned (:class:`ChunkMarks`), used
    and added to: the chain is then followed from the last record known at or before
    ``p`` (a record whose chain from record 0 a lookup proved), in the block that holds
    it — a later lookup decompresses the block (or two) its record is in, and walks the
    few records before it, not every record from 0.

    >>> import io
    >>> buf = io.BytesIO()
    >>> from recprep.containers import get_format
    >>> w = get_format("recordio").writer(buf, "snappy", chunk_bytes=1 << 20)
    >>> for n in range(100):
    ...     w.write(b"rec:" + str(n).encode())
    >>> w.close()
    >>> sound_record(buf.getvalue(), 100, 42, 1 << 20)
    b'rec:42'
    >>> marks = ChunkMarks()
    >>> [sound_record(buf.getvalue(), 100, p, 1 << 20, marks) for p in (99, 98)]
    [b'rec:99', b'rec:98']
    """
    found = _sound_payload(data, count, limit)
    if found is None or not 0 <= p < count:
        return None
    payload, compression, crc = found
    state = None if marks is None else marks.state
    try:
        if state is None or state[0] != crc:  # learned anew (or not kept)
            state = crc, _layout(payload, compression, limit), _NOTHING_KNOWN
        layout, (records, offsets) = state[1], state[2]
        source = payload
        if not layout[0]:  # decompressed whole: one block of kind 2
            source = get_compression(compression).decompress(payload, limit)
            layout = [(2, 0, len(source), len(source))], [0], len(source)
        known = bisect_right(records, p) - 1
        r, at = records[known], offsets[known]
        prefix = _Prefix(source, layout, at)
        # a chunk's first lookup finds every record (marks for the lookups to come)
        got = _from_mark(prefix, at, count - 1, count, walk=False) if (
            marks is not None and len(records) == 1) else None
        got = _from_mark(prefix, at, p - r, count) if got is None else got
    except LocatedError:
        return None
    if got is None:
        return None
    view, base, heads = got
    if marks is not None:
        marks.learn(state, layout[1:], known, at, heads)
    head = base + int(heads[p - r]) + 4
    return bytes(view[head:head + _u32_unpack_from(view, head - 4)[0]])


def _layout(payload: bytes, compression: str, limit: int) -> _Layout:
    """The snappy blocks of a snappy-framed ``payload`` (:func:`snappy_blocks`), where
    each one's data begins in the decompressed payload, and their total; for any other
    compression, no blocks (the payload is decompressed whole)."""
    if compression != "snappy-framed":
        return [], [0], 0
    blocks, total = snappy_blocks(payload, limit)
    starts = [0]
    for block in blocks[:-1]:
        starts.append(starts[-1] + block[3])
    return blocks, starts, total


#: a chain of at most this many records from a known one is walked record by record;
#: a longer one is first looked for with numpy (:func:`_chain`)
WALK_MAX = 96


def _from_mark(prefix: _Prefix, at: int, m: int, count: int, walk: bool = True
               ) -> tuple[memoryview, int, Sequence[int] | np.ndarray] | None:
    """The chain of the ``m + 1`` records from the one known to start at offset ``at``
    of the decompressed payload: ``(data, base, heads)``, the payload decompressed from
    the block holding ``at`` on (as far as the record needs), where ``at`` is in it, and
    the records' starts (from ``base``); None when the records aren't there (or, not
    ``walk``, when numpy doesn't find them)."""
    base = at - prefix.start
    if m > WALK_MAX or not walk:
        total = prefix.total
        want = at + (m + 1) * total // count * 9 // 8 + 64  # where the record likely ends
        data = prefix.upto(want)
        # records are looked for as far as the record likely ends, then further
        end = min(len(data), want - prefix.start)
        heads = _chain(data[base:end], m)
        if heads is None and end < len(data):
            heads = _chain(data[base:], m)
        if heads is None and prefix.start + len(data) < total:
            data = prefix.upto(total)
            heads = _chain(data[base:], m)
        if heads is not None:
            return data, base, heads
    return _walk_chain(prefix, base, m) if walk else None


def _walk_chain(prefix: _Prefix, base: int, m: int) -> tuple[memoryview, int, list[int]] | None:
    """:func:`_from_mark` record by record: each record's length leads to the next."""
    data = prefix.upto(prefix.start + base + 4)
    pos, heads = base, []
    for _ in range(m + 1):
        heads.append(pos - base)
        if pos + 4 > len(data):
            data = prefix.upto(prefix.start + pos + 4)
            if pos + 4 > len(data):
                return None
        pos += 4 + _u32_unpack_from(data, pos)[0]
    if pos > len(data):
        data = prefix.upto(prefix.start + pos)
        if pos > len(data):
            return None
    return data, base, heads


class _Prefix:
    """A payload decompressed from the block holding an offset on, as far as asked:
    blocks of a :data:`_Layout` decompressed one at a time, each into its place in a
    buffer the thread reuses (:func:`_scratch`: a fresh buffer of some 100 kB a lookup
    costs more in page faults than decompressing into it)."""

    __slots__ = ("_buffer", "_layout", "_next", "_source", "data", "start", "total")

    def __init__(self, source: bytes, layout: _Layout, at: int) -> None:
        self._source, self._layout = source, layout
        b = bisect_right(layout[1], at) - 1
        self.start, self.total, self._next = layout[1][b], layout[2], b
        self.data = memoryview(b"")
        self._buffer: np.ndarray | None = None

    def upto(self, end: int) -> memoryview:
        """The data from :attr:`start` on, to offset ``end`` of the payload at least
        (or its end)."""
        blocks, starts, total = self._layout
        if self.start + len(self.data) >= end or self._next >= len(blocks):
            return self.data
        if blocks[0][0] == 2:  # decompressed whole
            self._next, self.data = 1, memoryview(self._source)
            return self.data
        if self._buffer is None:
            self._buffer = _scratch(total - self.start)
        n = self._next
        while n < len(blocks):
            stop = (starts[n + 1] if n + 1 < len(starts) else total) - self.start
            _snappy_block_into(self._source, blocks[n], self._buffer[starts[n] - self.start:stop])
            n += 1
            if self.start + stop >= end:
                break
        self._next = n
        self.data = memoryview(self._buffer)[:stop]  # type: ignore[arg-type]
        return self.data


#: the largest buffer :func:`_scratch` keeps for a thread (a larger one is made anew)
SCRATCH_BYTES = 4 << 20
_scratches = threading.local()


def _scratch(size: int) -> np.ndarray:
    """A buffer of at least ``size`` bytes that this thread reuses (no more than
    :data:`SCRATCH_BYTES` kept), for data copied out of it before the next use."""
    buffer: np.ndarray | None = getattr(_scratches, "buffer", None)
    if buffer is not None and len(buffer) >= size:
        return buffer
    buffer = np.empty(max(size, 1 << 18), np.uint8)
    if size <= SCRATCH_BYTES:
        _scratches.buffer = buffer
    return buffer


def _snappy_block_into(payload: bytes, block: tuple[int, int, int, int], out: np.ndarray
                       ) -> None:
    """The data of one block of :func:`snappy_blocks`, decompressed (or copied) into
    ``out``, which the header of a snappy block says it fills, its CRC-32C checked;
    anything else raises :class:`~recprep.errors.CorruptDataError`."""
    kind, start, stop, _ = block
    body = memoryview(payload)[start + 4:stop]
    if kind == 0:
        try:
            filled = cramjam.snappy.decompress_raw_into(body, out)  # type: ignore[arg-type]
        except Exception as err:  # cramjam's DecompressionError
            raise CorruptDataError(f"snappy block doesn't decompress: {err}") from None
    else:
        filled = len(body)
        if filled == len(out):
            out[:] = np.frombuffer(body, np.uint8)
    if filled != len(out):
        raise CorruptDataError("snappy block of another size than its header says")
    view = out.view()
    view.flags.writeable = False  # (google_crc32c takes read-only buffers alone)
    crc = google_crc32c.value(view)
    masked = ((crc >> 15 | crc << 17) + 0xA282EAD8) & 0xFFFFFFFF
    if masked != _u32_unpack_from(payload, start)[0]:
        raise CorruptDataError("snappy block checksum mismatch")


#: lookups note a record start every this many bytes of a decompressed payload (and at
#: each snappy block's start), :data:`MAX_MARKS` at most: a later lookup walks about
#: this much before its record
MARK_BYTES = 2 << 10
MAX_MARKS = 128

#: a chunk's snappy blocks (``(kind, start, end, size)``), where each one's data begins
#: in the decompressed payload, and their total; no blocks: the payload is decompressed
#: whole
_Layout = tuple[list[tuple[int, int, int, int]], list[int], int]
#: what :class:`ChunkMarks` holds: the stored payload's checksum, its layout, and the
#: records known to start where (record numbers and offsets, sorted, record 0 first)
_State = tuple[int, _Layout, tuple["array[int]", "array[int]"]]
_NOTHING_KNOWN = (array("q", [0]), array("q", [0]))


class ChunkMarks:
    """What lookups in one chunk learned, for the lookups after them: its payload's
    layout (:func:`snappy_blocks`) and records whose start a chain from record 0 proved,
    one every :data:`MARK_BYTES` of the decompressed payload and at each block's start.
    Bound to the stored payload's checksum: a chunk found with another is learned anew.
    Threads may share one: its state is replaced whole (a race loses a mark, no more).

    >>> marks = ChunkMarks()
    >>> marks.state is None  # nothing learned yet
    True
    """

    __slots__ = ("state",)

    def __init__(self) -> None:
        self.state: _State | None = None

    def learn(self, state: _State, starts_total: tuple[list[int], int], known: int,
              at: int, heads: Sequence[int] | np.ndarray) -> None:
        """Note records proven to start at ``at + heads``, from the one of ``state``'s
        known record numbers at index ``known`` on (``state``: what the lookup that
        proved them started from; ``starts_total``: where the payload's blocks begin,
        and its size): the first at or after each multiple of :data:`MARK_BYTES` (fewer
        in a large payload) and each block's start. They are all after ``known`` and
        before the next one known (the lookup started from the last one known before
        its record)."""
        crc, layout, (records, offsets) = state
        starts, total = starts_total
        step = max(MARK_BYTES, total // MAX_MARKS + 1)
        last = at + int(heads[-1])
        grid = [g - at for g in range(at - at % step + step, last + 1, step)]
        grid += [s - at for s in starts if at < s <= last]
        if not grid:
            if self.state is not state:
                self.state = state
            return
        if isinstance(heads, np.ndarray):
            found = np.searchsorted(heads, grid)
            places = sorted(set(found.tolist()))
            offsets_found = (heads[places] + at).tolist()
        else:
            places = sorted({bisect_left(heads, g) for g in grid})
            offsets_found = [at + heads[i] for i in places]
        r, cut = records[known], known + 1
        self.state = crc, layout, (
            records[:cut] + array("q", [r + i for i in places]) + records[cut:],
            offsets[:cut] + array("q", offsets_found) + offsets[cut:])


def record_in_prefix(prefix: bytes | memoryview, p: int) -> tuple[int, int] | None:
    """``(start, end)`` of record ``p`` of a decompressed payload that begins with
    ``prefix``, found by the chain of lengths from record 0 — with numpy, as
    :func:`_split_at_once` finds every record, but over the prefix alone and trusting
    only the chain up to ``p``: the candidates up to ``p`` must be exactly records 0 to
    ``p`` (the first at 0, each one's length leading to the next), which makes candidate
    ``p`` record ``p`` whatever follows. None when ``prefix`` ends before record ``p``
    does, or the guess doesn't hold (the caller splits the whole payload).

    >>> from recprep.containers.recordio_framing import encode_payload
    >>> payload = encode_payload([b"ABCD" + b"x" * n for n in range(70)])
    >>> start, end = record_in_prefix(payload, 5)
    >>> payload[start:end]
    b'ABCDxxxxx'
    >>> record_in_prefix(payload[:40], 5) is None  # record 5 ends further on
    True
    """
    heads = _chain(prefix, p)
    if heads is None:
        return None
    start = int(heads[-1]) + 4
    return start, start + _u32_unpack_from(prefix, start - 4)[0]


def _chain(prefix: bytes | memoryview, p: int) -> np.ndarray | None:
    """The starts of records 0 to ``p`` of a payload that begins with ``prefix``, when
    the candidates up to ``p`` are exactly that chain (:func:`record_in_prefix`) and
    record ``p`` ends within ``prefix``; else None."""
    found = record_heads(prefix)
    if found is None:
        return None
    heads, words = found
    heads = heads[:p + 1]
    if len(heads) <= p or heads[0] != 0:
        return None
    ends = heads + 4 + words[heads].astype(np.int64)
    if int(ends[-1]) > len(prefix) or not (ends[:-1] == heads[1:]).all():
        return None
    return heads


def snappy_blocks(payload: bytes, limit: int) -> tuple[list[tuple[int, int, int, int]], int]:
    """The blocks of a snappy framing stream, each ``(kind, start, end, size)``: 0 (raw
    snappy) or 1 (stored), where its body starts (a masked CRC-32C of its data first) and
    ends, and its data's size; and their data's total size. Raises
    :class:`~recprep.errors.CorruptDataError` at anything else (reserved frame types, a
    stream past ``limit``...); the careful decoder then says what."""
    if not payload.startswith(SNAPPY_STREAM):
        raise CorruptDataError("not a snappy framing stream")
    blocks = snappy_frames(payload)
    total = sum(block[3] for block in blocks)
    if total > limit:
        raise CorruptDataError(f"snappy stream of {total} bytes, over {limit}")
    return blocks, total


def snappy_block(payload: bytes, block: tuple[int, int, int, int]) -> bytes:
    """The data of one block of :func:`snappy_blocks`, its CRC-32C checked (a mismatch
    raises :class:`~recprep.errors.CorruptDataError`)."""
    kind, start, stop, _ = block
    body = memoryview(payload)[start + 4:stop]
    try:
        data = bytes(cramjam.snappy.decompress_raw(body)) if kind == 0 else bytes(body)
    except Exception as err:  # cramjam's DecompressionError
        raise CorruptDataError(f"snappy block doesn't decompress: {err}") from None
    crc = google_crc32c.value(data)
    masked = ((crc >> 15 | crc << 17) + 0xA282EAD8) & 0xFFFFFFFF
    if masked != _u32_unpack_from(payload, start)[0]:
        raise CorruptDataError("snappy block checksum mismatch")
    return data
