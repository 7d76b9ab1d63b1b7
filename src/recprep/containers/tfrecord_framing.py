"""TFRecord's framing: the masked CRC-32C, frame headers found at once, and what a file's
first bytes say of its compression.

A record is framed as ``uint64 length``, ``uint32 masked_crc32c(length bytes)``, the data,
``uint32 masked_crc32c(data)`` (the layout is in :mod:`recprep.containers.tfrecord`).
The length CRCs of many frames are computed at once by table lookup (a CRC is affine in
its input), which is what lets a parser check whole buffers of frames, and the resync
after damage find candidate frames, in numpy rather than a byte at a time.

Example
-------
>>> frame = bytes.fromhex("0100000000000000 0175de41 61 786ee428")   # the record b"a"
>>> masked_crc32c(frame[:8]) == int.from_bytes(frame[8:12], "little")
True
>>> detect_compression(frame), frame_starts(b"xyz" + frame, 0, 4, 1 << 20).tolist()
('none', [3])
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

import google_crc32c
import numpy as np

from .tfrecord_index import FRAME_BYTES

#: the ``wbits`` of a compressed file's one stream
_WBITS = {"gzip": 31, "zlib": 15}
_FRAME = FRAME_BYTES  # framing bytes per record
_crc = google_crc32c.value
_QI = struct.Struct("<QI")
_q_i = _QI.unpack_from
_unpack_u64 = struct.Struct("<Q").unpack_from
_I = struct.Struct("<I")
_i = _I.unpack_from


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
