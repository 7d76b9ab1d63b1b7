"""Reading RecordIO: chunk by chunk, the variant told per file, damage skipped.

:func:`iter_chunks` walks a file of either variant (:mod:`~recprep.containers.recordio_framing`
says how a chunk is laid out), telling the variant from the first chunk whose checksum
holds. Damage is raised, or (``on_corrupt="skip"``) reported and passed over: a chunk
whose header is sound is skipped whole; after a damaged header the next sound chunk is
searched for by its magic and checksum (:func:`_resync`), within a :class:`_ResyncBudget`
that keeps a crafted file's cost linear in its size. :func:`hop_chunk_headers` is the fast
index scan: header to header, no payload read.

Example
-------
>>> import io
>>> from recprep.containers import get_format
>>> buf = io.BytesIO()
>>> w = get_format("recordio").writer(buf, "none", chunk_bytes=2)
>>> for r in (b"ab", b"cd", b"e"):
...     w.write(r)
>>> w.close()
>>> _ = buf.seek(0)
>>> [(i.offset, i.num_records) for i in scan_index(buf, path="mem")]
[(0, 1), (26, 1), (52, 1)]
>>> bad = bytearray(buf.getvalue()); bad[50] ^= 0xFF   # a payload byte of chunk 2
>>> import warnings
>>> with warnings.catch_warnings(record=True):
...     warnings.simplefilter("always")
...     chunks = list(iter_chunks(io.BytesIO(bytes(bad)), path="mem", on_corrupt="skip"))
>>> [list(c.records) for _, c in chunks]
[[b'ab'], [b'e']]
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

from .._core.records import Chunk, Records
from .._core.scratch import scratch
from ..errors import ChunkTooLargeError, CorruptDataError, InvalidArgumentError, LocatedError
from .base import DEFAULT_MAX_CHUNK_BYTES, ChunkInfo, OnSkip, Source, max_records, report_skip
from .compression import Buffer, get_compression
from .recordio_framing import (
    _HEADER,
    _U32,
    GO,
    HEADER_SIZE,
    LEGACY,
    MAGIC,
    MIN_RECORD_BYTES,
    Dialect,
    split_payload,
)


def _read_exact(file: Source, size: int) -> bytes:
    data = file.read(size)
    return data if data is not None else b""


def _read_scratch(file: Source, size: int) -> Buffer:
    """``size`` bytes of ``file`` (fewer at its end), read into a
    :func:`~recprep._core.scratch.scratch` buffer where the file reads into buffers."""
    readinto = getattr(file, "readinto", None)
    if readinto is None:
        return _read_exact(file, size)
    view = scratch(size)
    got = 0
    while got < size:
        n = readinto(view[got:])
        if not n:
            break
        got += n
    return view[:got].toreadonly()  # as bytes would be, to checksums and decoders


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



class _RecordIODamage(Exception):
    """Internal: a damaged chunk, and how reading can go on after it."""

    def __init__(self, error: CorruptDataError, kind: str, lost: int | None = None,
                 resume: int | None = None) -> None:
        super().__init__(str(error))
        self.error, self.kind, self.lost, self.resume = error, kind, lost, resume


class _ResyncBudget:
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
    budget: _ResyncBudget | None = None,
) -> tuple[ChunkInfo, Chunk | None, Dialect] | None:
    """Read the chunk at ``offset``; None at the end of the file; damage raises
    :class:`_RecordIODamage`.

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
    fields, options = _header_fields(head, dialect, where)
    if not decode and dialect is not None:
        return _hopped(fields, dialect, end, limit, where), None, dialect
    chosen, payload = _payload_or_damage(file, fields, options, offset, limit, path)
    _, comp, size, count = chosen.unpack(fields)
    resume = offset + HEADER_SIZE + size
    problem = _implausible(chosen, fields, limit)
    if problem is not None:
        raise _RecordIODamage(CorruptDataError(problem, **where), "payload", None, resume)
    info = ChunkInfo(offset, count, size)
    if not decode:
        return info, None, chosen
    records = _chunk_records(payload, chosen.ids[comp], count, limit, budget, where, resume)
    return info, Chunk(offset, records), chosen


def _header_fields(head: bytes, dialect: Dialect | None, where: dict[str, Any]
                   ) -> tuple[tuple[int, ...], list[Dialect]]:
    """A chunk header's fields and the variants that can read it; damage raises."""
    if len(head) < HEADER_SIZE:
        raise _RecordIODamage(CorruptDataError(
            f"chunk header cut off after {len(head)} of {HEADER_SIZE} bytes "
            "(a torn last chunk: was the writer stopped?)", **where), "torn")
    fields = _HEADER.unpack(head)
    if fields[0] != MAGIC:
        raise _RecordIODamage(CorruptDataError(
            f"expected the RecordIO chunk magic 0x{MAGIC:08x}, found 0x{fields[0]:08x}",
            **where), "header")
    options = _candidates(fields, dialect)
    if not options:
        raise _RecordIODamage(CorruptDataError(
            f"unknown compressor id in the chunk header (fields {list(fields[1:])}); "
            "expected 0-2 (Go RecordIO) or 1-3 (pyrecordio 0.0.4)", **where), "header")
    return fields, options


def _hopped(fields: tuple[int, ...], dialect: Dialect, end: int, limit: int,
            where: dict[str, Any]) -> ChunkInfo:
    """The chunk a header of a file of known variant describes, its payload not read: a
    count its bytes can't hold, or a payload past the end of the file, is damage."""
    _, _, size, count = dialect.unpack(fields)
    problem = _implausible(dialect, fields, limit)
    if problem is not None:
        raise _RecordIODamage(CorruptDataError(problem, **where), "header")
    offset = where["offset"]
    if offset + HEADER_SIZE + size > end:
        raise _RecordIODamage(CorruptDataError(
            f"chunk payload cut off: header says {size} bytes, file has "
            f"{max(end - offset - HEADER_SIZE, 0)} (a torn last chunk: was the writer "
            "stopped?)", **where), "torn", count)
    return ChunkInfo(offset, count, size)


def _payload_or_damage(
    file: Source, fields: tuple[int, ...], options: list[Dialect], offset: int, limit: int,
    path: str,
) -> tuple[Dialect, Buffer]:
    """:func:`_read_payload`, its error said as the damage it is."""
    try:
        return _read_payload(file, fields, options, offset, limit, path)
    except CorruptDataError as err:
        _, _, size, count = options[0].unpack(fields)
        lost = None if _implausible(options[0], fields, limit) else count
        if isinstance(err, ChunkTooLargeError):
            raise _RecordIODamage(err, "header") from None
        if "cut off" in err.detail:
            raise _RecordIODamage(err, "torn", lost) from None
        raise _RecordIODamage(err, "payload", lost, offset + HEADER_SIZE + size) from None


def _chunk_records(payload: Buffer, compression: str, count: int, limit: int,
             budget: _ResyncBudget | None, where: dict[str, Any], resume: int) -> Records:
    """The records of a sound payload (its checksum holds); a payload that doesn't
    decompress or split into ``count`` records is damage."""
    try:
        data = get_compression(compression).decompressed(payload, limit, scratch)
        if budget is not None:
            budget.spent += len(data)
        return split_payload(data, count)
    except LocatedError as err:  # the payload is sound (its CRC holds): the count is wrong,
        located = err.located(**where)  # so how many records it held is not known
        assert isinstance(located, CorruptDataError)
        raise _RecordIODamage(located, "payload", None, resume) from None


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
    budget: _ResyncBudget,
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
                except _RecordIODamage:
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
    budget = _ResyncBudget(offset, end)
    while True:
        try:
            found = _read_chunk(file, offset, dialect, max_chunk_bytes, path, decode, end)
        except _RecordIODamage as damage:
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


def _skip(file: Source, damage: _RecordIODamage, offset: int, dialect: Dialect | None,
          limit: int, path: str, end: int, budget: _ResyncBudget, on_skip: OnSkip | None) -> int:
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
) -> tuple[Dialect, Buffer]:
    """Read the payload under each plausible variant; keep the one whose checksum fits
    (into a scratch buffer: its memory is used again once nothing refers to it)."""
    where: dict[str, Any] = {"path": path, "offset": offset}
    start = file.tell()
    problems: list[CorruptDataError] = []
    for dialect in options:
        crc, _, size, _ = dialect.unpack(fields)
        if size > limit:
            problems.append(ChunkTooLargeError(size, limit, **where))
            continue
        file.seek(start)
        payload = _read_scratch(file, size)
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



def _first_chunk(
    file: Source, path: str, limit: int, end: int
) -> tuple[ChunkInfo | None, Dialect] | None:
    """The first chunk's header and the variant its checksum says (the one place the
    variant is told: :func:`_read_payload`); ``(None, GO)`` for an empty file, None when
    the first chunk is damaged."""
    try:
        found = _read_chunk(file, 0, None, limit, path, False, end)
    except _RecordIODamage:
        return None
    if found is None:
        return None, GO
    return found[0], found[2]


def hop_chunk_headers(
    file: Source,
    *,
    path: str,
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
    on_corrupt: str = "raise",
    on_skip: OnSkip | None = None,
) -> tuple[list[int], list[int]]:
    """The offsets and record counts of a file's chunks, hopping from header to header.

    The first chunk's checksum tells the variant; then a tight loop reads only headers.
    At anything unexpected (bad magic, an unknown compressor, a record count the chunk's
    bytes can't hold, a chunk past the end of the file, a cut header) the careful walk of
    :func:`iter_chunks` starts over, and raises or skips as ``on_corrupt`` says."""
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
