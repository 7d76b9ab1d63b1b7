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

import cramjam
import google_crc32c
import numpy as np

from .._core.records import Records
from ..errors import CorruptDataError, LocatedError
from .compression import get_compression
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

__all__ = ["record_in_prefix", "snappy_block", "snappy_blocks", "sound_chunk_records",
           "sound_record"]


def _sound_payload(data: bytes, count: int, limit: int) -> tuple[bytes, str] | None:
    """The payload of the chunk ``data`` begins with and its compression, when its header
    (of either variant) says ``count`` records and a payload within ``data`` and
    ``limit``, and its checksum holds; else None."""
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
            return payload, dialect.ids[comp]
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
    payload, compression = found
    try:
        if compression == "snappy-framed":  # block by block (a quarter faster)
            blocks = snappy_blocks(payload, limit)[0]
            return split_payload(b"".join([snappy_block(payload, b) for b in blocks]), count)
        return split_payload(get_compression(compression).decompress(payload, limit), count)
    except LocatedError:
        return None


def sound_record(data: bytes, count: int, p: int, limit: int) -> bytes | None:
    """Record ``p`` alone of the chunk ``data`` begins with, sound as for
    :func:`sound_chunk_records` (header, count and checksum), decompressed and cut only as
    far as record ``p``: a snappy-framed payload (Go RecordIO's) block by block, until
    the blocks hold it (each block's own CRC-32C checked), and its records found by the
    chain of lengths from record 0 (:func:`~.recordio_framing.record_in_prefix`). The
    checksum of the stored payload vouches for the rest, which is neither decompressed
    nor split. None where that doesn't hold: the caller reads the whole chunk.

    >>> import io
    >>> buf = io.BytesIO()
    >>> from recprep.containers import get_format
    >>> w = get_format("recordio").writer(buf, "snappy", chunk_bytes=1 << 20)
    >>> for n in range(100):
    ...     w.write(b"rec:" + str(n).encode())
    >>> w.close()
    >>> sound_record(buf.getvalue(), 100, 42, 1 << 20)
    b'rec:42'
    """
    found = _sound_payload(data, count, limit)
    if found is None or not 0 <= p < count:
        return None
    payload, compression = found
    try:
        if compression != "snappy-framed":
            prefix = get_compression(compression).decompress(payload, limit)
            want = (p + 1) * len(prefix) // count * 9 // 8 + 64
            place = record_in_prefix(memoryview(prefix)[:want], p) if want < len(prefix) \
                else None
            place = place or record_in_prefix(prefix, p)
            return None if place is None else prefix[place[0]:place[1]]
        blocks, total = snappy_blocks(payload, limit)
        want = (p + 1) * total // count * 9 // 8 + 64  # where record p likely ends
        parts: list[bytes] = []
        have = 0
        for at, block in enumerate(blocks):
            parts.append(snappy_block(payload, block))
            have += len(parts[-1])
            if have >= want or at == len(blocks) - 1:
                prefix = b"".join(parts)
                # records are looked for as far as record p likely ends, then further
                place = record_in_prefix(memoryview(prefix)[:want], p) if want < have \
                    else None
                place = place or record_in_prefix(prefix, p)
                if place is not None:
                    return prefix[place[0]:place[1]]
                want = total  # the guess was short: on to the end
        return None
    except LocatedError:
        return None


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
    found = record_heads(prefix)
    if found is None:
        return None
    heads, words = found
    heads = heads[:p + 1]
    if len(heads) <= p or heads[0] != 0:
        return None
    ends = heads + 4 + words[heads].astype(np.int64)
    end = int(ends[-1])
    if end > len(prefix) or not (ends[:-1] == heads[1:]).all():
        return None
    return int(heads[-1]) + 4, end


_SNAPPY_STREAM = b"\xff\x06\x00\x00sNaPpY"


def snappy_blocks(payload: bytes, limit: int) -> tuple[list[tuple[int, int, int]], int]:
    """The blocks of a snappy framing stream, each ``(kind, start, end)`` of its body
    (0: raw snappy, 1: stored; a masked CRC-32C of its data first), and their data's total
    size; raises :class:`~recprep.errors.CorruptDataError` at anything else (reserved
    frame types, a stream past ``limit``...). The careful decoder then says what."""
    if not payload.startswith(_SNAPPY_STREAM):
        raise CorruptDataError("not a snappy framing stream")
    view = memoryview(payload)
    blocks: list[tuple[int, int, int]] = []
    pos, end, total = len(_SNAPPY_STREAM), len(payload), 0
    while pos < end:
        kind = payload[pos]
        body = pos + 4
        stop = body + int.from_bytes(payload[pos + 1:body], "little")
        if stop > end or (kind in (0, 1) and stop - body < 4):
            raise CorruptDataError("snappy frame cut off")
        if kind == 0:
            total += cramjam.snappy.decompress_raw_len(view[body + 4:stop])
        elif kind == 1:
            total += stop - body - 4
        elif kind < 0x80 or kind == 0xFF and payload[pos:stop] != _SNAPPY_STREAM:
            raise CorruptDataError(f"snappy frame of type 0x{kind:02x}")
        if kind < 2:
            blocks.append((kind, body, stop))
        pos = stop
    if total > limit:
        raise CorruptDataError(f"snappy stream of {total} bytes, over {limit}")
    return blocks, total


def snappy_block(payload: bytes, block: tuple[int, int, int]) -> bytes:
    """The data of one block of :func:`snappy_blocks`, its CRC-32C checked (a mismatch
    raises :class:`~recprep.errors.CorruptDataError`)."""
    kind, start, stop = block
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
