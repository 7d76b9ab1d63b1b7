"""Compression of chunk payloads, with decompression bounded by a size limit.

Each :class:`Compression` pairs a ``compress`` with a ``decompress(data, limit)`` that
never produces (or allocates) more than ``limit`` bytes: a chunk of a few bytes that
claims to inflate to gigabytes fails with :class:`~recprep.errors.ChunkTooLargeError`
before any such allocation. Containers map their own on-disk ids to these by name.

The work is done by cramjam (snappy, gzip) and zlib; Python only walks the snappy
framing's frame headers (one per 64 KiB) to learn the output size in advance. Where
recprep's C kernels are built (:mod:`recprep._core.native`), a snappy framing stream is
decoded by them instead, frame by frame straight into the bytes returned, each frame's
CRC-32C checked in the same pass; a stream they turn down is read as above, which says
what is wrong with it.

:meth:`Compression.compress_below` compresses only when that pays: it returns ``None``
when the result would not be smaller than a share of the input, so a writer can store
such a payload uncompressed. For snappy it costs next to nothing on incompressible data:
the raw blocks are compressed first (snappy gives up early on data it can't shrink, tens
of GB/s) and the framing's CRC-32C work is done only for output that is kept.

Example
-------
>>> from recprep.containers.compression import get_compression
>>> snappy = get_compression("snappy-framed")
>>> snappy.decompress(snappy.compress(b"abc" * 10), limit=1024)
b'abcabcabcabcabcabcabcabcabcabc'
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

import cramjam

from .._core.native import crc32c, kernels
from .._core.registry import Registry
from ..errors import ChunkTooLargeError, CorruptDataError, InvalidArgumentError

__all__ = ["SNAPPY_STREAM", "Compression", "available_compressions", "framed_output_size",
           "get_compression", "register_compression", "snappy_frames"]

Buffer = bytes | bytearray | memoryview
#: what makes a buffer of a given size for :meth:`Compression.decompress_into` to fill
Alloc = Callable[[int], Buffer]


@dataclass(frozen=True)
class Compression:
    """A named way to compress a payload and to decompress it within a limit.

    ``compress_unless`` (optional) is a cheaper ``compress_below``: it may skip work on
    output it won't keep. ``decompress_into`` (optional) is ``decompress`` writing into
    a buffer ``alloc(size)`` gives (a :func:`~recprep._core.scratch.scratch` buffer
    whose memory is used again: :meth:`decompressed`).
    """

    name: str
    compress: Callable[[Buffer], bytes]
    decompress: Callable[[Buffer, int], bytes]
    compress_unless: Callable[[Buffer, float], bytes | None] | None = None
    decompress_into: Callable[[Buffer, int, Alloc], Buffer] | None = None

    def decompressed(self, data: Buffer, limit: int, alloc: Alloc) -> Buffer:
        """``decompress(data, limit)``, into ``alloc(size)`` where the compression can
        (``decompress_into``).

        >>> from recprep._core.scratch import scratch
        >>> snappy = get_compression("snappy-framed")
        >>> out = snappy.decompressed(snappy.compress(b"ab" * 50_000), 1 << 20, scratch)
        >>> type(out).__name__, bytes(out[:4])
        ('memoryview', b'abab')
        """
        if self.decompress_into is not None:
            return self.decompress_into(data, limit, alloc)
        return self.decompress(data, limit)

    def compress_below(self, data: Buffer, share: float) -> bytes | None:
        """``compress(data)`` if it is smaller than ``share * len(data)``, else None.

        >>> snappy = get_compression("snappy-framed")
        >>> len(snappy.compress_below(b"a" * 1000, 0.9))
        70
        >>> snappy.compress_below(bytes(range(256)), 0.9) is None
        True
        """
        if self.compress_unless is not None:
            return self.compress_unless(data, share)
        out = self.compress(data)
        return out if len(out) < share * len(data) else None


def _check_compression(name: str, compression: Compression) -> None:
    if not isinstance(compression, Compression) or compression.name != name:
        raise InvalidArgumentError(
            f"compression {name!r} must be a recprep.containers.compression.Compression "
            f"named {name!r}, "
            f"got {compression!r}"
        )


_COMPRESSIONS: Registry[Compression] = Registry(
    "compression", group="recprep.compressions", check=_check_compression
)


def register_compression(
    compression: Compression | str, *, name: str | None = None, replace: bool = False
) -> None:
    """Add a compression under its name (or its dotted path, ``"package.module:obj"``,
    under ``name``). A name already registered raises
    :class:`~recprep.errors.InvalidArgumentError` unless ``replace=True``."""
    if isinstance(compression, str):
        if name is None:
            raise InvalidArgumentError(f"register_compression({compression!r}) needs name=")
        _COMPRESSIONS.register(name, compression, replace=replace)
    else:
        _COMPRESSIONS.register(compression.name, compression, replace=replace)


def available_compressions() -> list[str]:
    """The registered compression names, sorted (plug-ins too; none is imported)."""
    return _COMPRESSIONS.available()


def get_compression(name: str) -> Compression:
    """Return the compression called ``name``."""
    return _COMPRESSIONS.get(name)


def _check_decompressed_size(size: int, limit: int) -> None:
    if size > limit:
        raise ChunkTooLargeError(size, limit)


def _corrupt(what: str, err: Exception) -> CorruptDataError:
    return CorruptDataError(f"{what} payload does not decompress: {err}")


# -- none ---------------------------------------------------------------------------


def _identity(data: Buffer) -> bytes:
    return bytes(data)


def _identity_bounded(data: Buffer, limit: int) -> bytes:
    _check_decompressed_size(len(data), limit)
    return bytes(data)


def _identity_into(data: Buffer, limit: int, alloc: Alloc) -> Buffer:
    """The data itself: stored uncompressed, a scratch buffer it was read into is its
    records' (no copy, and nothing more to allocate)."""
    _check_decompressed_size(len(data), limit)
    return data


# -- snappy, raw block format (pyrecordio 0.0.4) ---------------------------------------


def _snappy_raw_compress(data: Buffer) -> bytes:
    return bytes(cramjam.snappy.compress_raw(data))


def _snappy_raw_unless(data: Buffer, share: float) -> bytes | None:
    out = cramjam.snappy.compress_raw(data)
    return bytes(out) if len(out) < share * len(data) else None


def _snappy_raw_decompress(data: Buffer, limit: int) -> bytes:
    try:
        size = cramjam.snappy.decompress_raw_len(data)
    except Exception as err:  # cramjam raises its own DecompressionError
        raise _corrupt("snappy", err) from None
    _check_decompressed_size(size, limit)
    try:
        return bytes(cramjam.snappy.decompress_raw(data))
    except Exception as err:
        raise _corrupt("snappy", err) from None


# -- snappy, framing format (Go recordio) ------------------------------------------------

SNAPPY_STREAM = b"\xff\x06\x00\x00sNaPpY"
"""What a snappy framing stream starts with (its stream identifier frame)."""


def _frame_varint(data: Buffer, pos: int, end: int) -> int:
    """Decode the little-endian base-128 varint at ``pos`` (at most 5 bytes)."""
    result = shift = 0
    for i in range(pos, min(pos + 5, end)):
        byte = data[i]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result
        shift += 7
    raise CorruptDataError(f"snappy frame at payload byte {pos} has a bad length varint")


def snappy_frames(data: Buffer) -> list[tuple[int, int, int, int]]:
    """The frames of a snappy framing stream that hold data, each ``(kind, body, stop,
    size)``: 0 (a raw snappy block) or 1 (stored), where its body starts (a masked
    CRC-32C of its data first) and stops, and its data's size. Only headers are read (one
    per frame of at most 64 KiB of output), so this is cheap, and it tells a bomb from a
    real chunk before anything is decompressed; anything else than a framing stream's
    frames raises :class:`~recprep.errors.CorruptDataError` naming the payload byte.

    >>> snappy_frames(SNAPPY_STREAM + b"\\x01\\x07\\x00\\x00" + bytes(4) + b"abc")
    [(1, 14, 21, 3)]
    """
    view = memoryview(data)
    end = len(view)
    pos = 0
    frames: list[tuple[int, int, int, int]] = []
    while pos < end:
        if pos + 4 > end:
            raise CorruptDataError(f"snappy frame header cut off at payload byte {pos}")
        kind = view[pos]
        length = view[pos + 1] | view[pos + 2] << 8 | view[pos + 3] << 16
        body = pos + 4
        if body + length > end:
            raise CorruptDataError(
                f"snappy frame at payload byte {pos} claims {length} bytes; "
                f"only {end - body} remain"
            )
        if kind == 0x00:  # compressed: 4-byte masked CRC-32C, then a raw snappy block
            if length < 5:
                raise CorruptDataError(f"snappy frame at payload byte {pos} is too short")
            frames.append((0, body, body + length, _frame_varint(view, body + 4, body + length)))
        elif kind == 0x01:  # uncompressed: 4-byte masked CRC-32C, then the data
            if length < 4:
                raise CorruptDataError(f"snappy frame at payload byte {pos} is too short")
            frames.append((1, body, body + length, length - 4))
        elif kind == 0xFF:
            if bytes(view[pos : body + length]) != SNAPPY_STREAM:
                raise CorruptDataError(f"bad snappy stream identifier at payload byte {pos}")
        elif 0x02 <= kind <= 0x7F:
            raise CorruptDataError(
                f"reserved unskippable snappy frame type 0x{kind:02x} at payload byte {pos}"
            )
        # 0x80-0xfe: skippable (padding and the like)
        pos = body + length
    return frames


def framed_output_size(data: Buffer) -> int:
    """The decompressed size of a snappy framing stream, from its frames' headers
    (:func:`snappy_frames`)."""
    return sum(frame[3] for frame in snappy_frames(data))


_FRAME_INPUT = 65536
_MASK_DELTA = 0xA282EAD8


def _masked_crc32c(data: Buffer) -> bytes:
    crc = crc32c(data)
    return (((crc >> 15 | crc << 17) + _MASK_DELTA) & 0xFFFFFFFF).to_bytes(4, "little")


def _snappy_frames(data: Buffer, share: float) -> bytes | None:
    """The snappy framing stream of ``data``, byte for byte what ``cramjam.snappy.compress``
    writes (blocks of 64 KiB input; a block is stored compressed only if that saves 1/8),
    or None when that stream would not be smaller than ``share * len(data)``.

    Sizes are known once the raw blocks are compressed, so the CRC-32C of each block (the
    framing's checksum of its uncompressed data) is computed only for a stream that is kept.
    """
    view = memoryview(data).cast("B")
    size = len(view)
    if not size:
        return None  # nothing to save
    blocks = [view[i : i + _FRAME_INPUT] for i in range(0, size, _FRAME_INPUT)]
    packed = [cramjam.snappy.compress_raw(block) for block in blocks]
    bodies: list[memoryview | cramjam.Buffer] = [
        small if len(small) < len(block) - len(block) // 8 else block
        for block, small in zip(blocks, packed, strict=True)
    ]
    total = len(SNAPPY_STREAM) + sum(8 + len(body) for body in bodies)
    if total >= share * size:
        return None
    parts: list[Buffer | cramjam.Buffer] = [SNAPPY_STREAM]
    for block, body in zip(blocks, bodies, strict=True):
        kind = 0x01 if body is block else 0x00
        parts.append((kind | (len(body) + 4) << 8).to_bytes(4, "little"))
        parts.append(_masked_crc32c(block))
        parts.append(body)
    return b"".join(parts)


def _snappy_framed_compress(data: Buffer) -> bytes:
    return bytes(cramjam.snappy.compress(data))


def _snappy_framed_into(data: Buffer, limit: int, alloc: Alloc) -> Buffer:
    """:func:`_snappy_framed_decompress` into ``alloc(size)`` (the C kernel's way; the
    careful way, for a stream it turns down or where it isn't built, into bytes)."""
    native = kernels()
    if native is not None:
        out = native.snappy_framed(data, limit, alloc)
        if out is not None:  # read-only to what decodes it, as bytes would be
            return out.toreadonly() if isinstance(out, memoryview) else out
    return _snappy_framed_decompress(data, limit)


def _snappy_framed_decompress(data: Buffer, limit: int) -> bytes:
    """The data of a snappy framing stream, at most ``limit`` bytes: by recprep's C kernel
    (frames decoded straight into the bytes returned, each frame's CRC-32C checked in the
    same pass) where it is built, else by cramjam. Anything the kernel turns down — a
    malformed or damaged stream, or one past ``limit`` — is read here the careful way,
    which says what is wrong."""
    native = kernels()
    if native is not None:
        out = native.snappy_framed(data, limit)
        if out is not None:
            return out
    if len(data) and data[0] != 0xFF:
        raise CorruptDataError("snappy payload does not start with the stream identifier")
    _check_decompressed_size(framed_output_size(data), limit)
    try:
        return bytes(cramjam.snappy.decompress(data))
    except Exception as err:
        raise _corrupt("snappy", err) from None


# -- gzip / zlib ------------------------------------------------------------------------


def _gzip_compress(data: Buffer) -> bytes:
    return bytes(cramjam.gzip.compress(data))


def _zlib_compress(data: Buffer) -> bytes:
    return zlib.compress(data)


def _inflate(data: Buffer, limit: int, wbits: int, what: str) -> bytes:
    """Inflate every member of a gzip/zlib stream, never past ``limit`` bytes."""
    out: list[bytes] = []
    size = 0
    rest = bytes(data)
    try:
        while rest:
            inflater = zlib.decompressobj(wbits)
            piece = inflater.decompress(rest, limit - size + 1)
            size += len(piece)
            _check_decompressed_size(size, limit)
            out.append(piece)
            if not inflater.eof:
                raise CorruptDataError(f"{what} payload ends before its stream does")
            rest = inflater.unused_data
    except zlib.error as err:
        raise _corrupt(what, err) from None
    return b"".join(out)


def _gzip_decompress(data: Buffer, limit: int) -> bytes:
    return _inflate(data, limit, 31, "gzip")


def _zlib_decompress(data: Buffer, limit: int) -> bytes:
    return _inflate(data, limit, 15, "zlib")


for _c in (
    Compression("none", _identity, _identity_bounded, decompress_into=_identity_into),
    Compression(
        "snappy-framed", _snappy_framed_compress, _snappy_framed_decompress, _snappy_frames,
        _snappy_framed_into,
    ),
    Compression(
        "snappy-raw", _snappy_raw_compress, _snappy_raw_decompress, _snappy_raw_unless
    ),
    Compression("gzip", _gzip_compress, _gzip_decompress),
    Compression("zlib", _zlib_compress, _zlib_decompress),
):
    register_compression(_c)
