"""numpy arrays (tag 0x10) and numpy scalars (tag 0x11) in the ``"recprep"`` codec.

Arrays are written as their dtype string, shape and raw bytes. Two kinds of bytes are not
taken as they are:

* x87 ``longdouble`` (``float80`` kept in 12 or 16 bytes) has padding bytes numpy leaves
  uninitialised; they are written as zeros, so equal values give equal records and no
  process memory leaks into files (``clongdouble`` too; arrays and scalars).
* On decoding, a ``bool`` array byte other than 0 is read as ``True`` (stored as 1), as
  numpy's own ``astype(bool)`` does, and a ``<U``/``>U`` array holding a code point above
  U+10FFFF (which numpy can't turn into a ``str``) is a ``DecodeError``. Lone surrogates
  are valid: numpy stores them from Python strings and gives them back.

>>> import numpy as np
>>> out = []; enc_ndarray(np.array([1, 2], np.uint8), out)
>>> out[0].hex(" "), bytes(out[1])  # tag, "|u1", ndim 1, C order, shape (2,), 2 bytes
('10 03 7c 75 31 01 00 02 00 00 00 00 00 00 00 02 00 00 00 00 00 00 00', b'\\x01\\x02')
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from .pickles import enc_pickle
from .wire import Fail, cache_put

__all__ = ["ARRAY_HEADS", "SCALAR_ENCODERS", "dec_ndarray", "dec_npscalar", "enc_ndarray"]

#: the struct of an array's header after its dtype, by ndim: ndim, order, dims, nbytes
ARRAY_HEADS = [struct.Struct(f"<BB{n}QQ") for n in range(65)]
_u8u8 = struct.Struct("<BB").unpack_from
ND_KINDS = "biufcmMUS"
_DT_BODY: dict[int, tuple[np.dtype, bytes | None]] = {}  # id(dtype) -> (dtype, body)

_LD = np.dtype(np.longdouble)
#: padding bytes in each (real or imaginary) longdouble: 6 on x86_64, 2 on i386, 0 where
#: longdouble is float64 or IEEE binary128
LD_PAD = _LD.itemsize - 10 if np.finfo(np.longdouble).nmant == 63 and _LD.itemsize > 10 else 0


def dtype_body(dt: np.dtype) -> bytes | None:
    """u8 length + ``dt.str``, or None if ``dt`` can't be rebuilt from that (pickle it).

    ``np.longlong``/``np.ulonglong`` come back as ``np.int64``/``np.uint64``, as they do
    from numpy's own pickles: ``dt.str`` doesn't tell them apart.
    """
    hit = _DT_BODY.get(id(dt))  # dt.str costs ~0.3 us: cache by identity (dt kept alive)
    if hit is not None and hit[0] is dt:
        return hit[1]
    body = None
    if (dt.kind in ND_KINDS and dt.fields is None and dt.subdtype is None and dt.itemsize
            and dt.metadata is None):
        text = dt.str.encode("ascii")
        body = bytes((len(text),)) + text
    return cache_put(_DT_BODY, id(dt), (dt, body))[1]


def _zero_ld_padding(data: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``data`` (longdouble or clongdouble) with zeroed padding."""
    out = np.array(data, order="C", copy=True)
    parts = out.reshape(-1).view(np.uint8).reshape(-1, _LD.itemsize)
    if data.dtype.byteorder == ">" or (data.dtype.byteorder == "=" and _BIG_ENDIAN):
        parts[:, :LD_PAD] = 0
    else:
        parts[:, _LD.itemsize - LD_PAD :] = 0
    return out


_BIG_ENDIAN = np.dtype("=u2").str[0] == ">"


def enc_ndarray(a: np.ndarray, out: list) -> None:
    """Append the array body (tag 0x10) of ``a`` to ``out`` (a pickle if its dtype can't)."""
    body = dtype_body(a.dtype)
    if body is None:
        return enc_pickle(a, out)
    if a.flags.c_contiguous:
        order, data = 0, a
    elif a.flags.f_contiguous:
        order, data = 1, a.T  # C-contiguous, its bytes in a's Fortran order
    else:
        order, data = 0, np.ascontiguousarray(a)
    if body in _LD_BODIES:
        data = _zero_ld_padding(data)
    out.append(b"\x10" + body + ARRAY_HEADS[a.ndim].pack(a.ndim, order, *a.shape, a.nbytes))
    out.append(data)  # join reads the array's buffer: no intermediate copy
    return None


def _enc_npscalar(x: np.generic, out: list) -> None:
    head = _SCALAR_HEAD.get(type(x))
    if head is None:
        body = dtype_body(x.dtype)
        if body is None:
            return enc_pickle(x, out)
        head = b"\x11" + body
    out.append(head)
    out.append(x)  # numpy scalars export their bytes as a buffer
    return None


def _enc_ld_scalar(x: np.generic, out: list) -> None:
    out.append(_SCALAR_HEAD[type(x)])
    out.append(_zero_ld_padding(np.asarray(x)))


_SCALAR_HEAD: dict[type, bytes] = {}  # numpy scalar type -> tag + dtype (not datetimes)
#: numpy scalar type -> encoder, for every scalar type numpy knows (bar void and object)
SCALAR_ENCODERS: dict[type, Callable[[Any, list], None]] = {}
for _t in set(np.sctypeDict.values()):
    if issubclass(_t, np.generic) and _t not in (np.void, np.object_, np.str_, np.bytes_):
        SCALAR_ENCODERS[_t] = _enc_npscalar
        _body = dtype_body(np.dtype(_t))
        # datetimes: the dtype depends on the value. None: a type another package put in
        # numpy's table (ml_dtypes' bfloat16, imported by TensorFlow) that dtype.str can't
        # rebuild; such scalars take the pickle fallback.
        if _t not in (np.datetime64, np.timedelta64) and _body is not None:
            _SCALAR_HEAD[_t] = b"\x11" + _body
if LD_PAD:
    SCALAR_ENCODERS[np.longdouble] = SCALAR_ENCODERS[np.clongdouble] = _enc_ld_scalar
# the dtype bodies of arrays whose padding is zeroed
_LD_BODIES = frozenset(dtype_body(np.dtype(o + c)) for o in "<>" for c in "gG" if LD_PAD)


# ------------------------------------------------------------------ decoding

_DTYPE_RE = re.compile(rb"[<>|][biufcmMUS]\d{1,10}(\[\d{0,10}[A-Za-z]{1,3}\])?")
_DTYPES: dict[bytes, np.dtype] = {}


def read_dtype(buf: bytes, off: int, kinds: str) -> tuple[np.dtype, int]:
    """Read the length-prefixed dtype string at ``off``; refuse kinds not in ``kinds``."""
    end = off + 1 + buf[off]
    if end > len(buf):
        raise Fail("truncated dtype string")
    text = buf[off + 1 : end]
    dt = _DTYPES.get(text)
    if dt is None:
        try:  # the pattern first: np.dtype() parses far more than dtype.str forms
            dt = np.dtype(text.decode("ascii")) if _DTYPE_RE.fullmatch(text) else None
        except (TypeError, ValueError):
            dt = None
        if (dt is None or dt.str != text.decode() or dt.hasobject or dt.fields is not None
                or not dt.itemsize):
            raise Fail(f"invalid dtype string {text!r}")
        cache_put(_DTYPES, text, dt)
    if dt.kind not in kinds:
        raise Fail(f"dtype {text!r} is not allowed here")
    return dt, end


def dec_ndarray(buf: bytes, off: int) -> tuple[np.ndarray, int]:
    """Decode the array (tag 0x10) at ``off``: a writable copy that owns its memory."""
    dt, p = read_dtype(buf, off + 1, ND_KINDS)
    ndim, order = _u8u8(buf, p)
    if ndim > 64 or order > 1:
        raise Fail(f"array header has ndim={ndim}, order flag={order}")
    *shape, nbytes = ARRAY_HEADS[ndim].unpack_from(buf, p)[2:]
    p += ARRAY_HEADS[ndim].size
    count = math.prod(shape)
    if count * dt.itemsize != nbytes:  # Python ints: no overflow
        raise Fail(f"an array of shape {tuple(shape)} and dtype {dt.str} isn't {nbytes} bytes")
    end = p + nbytes
    if end > len(buf):
        raise Fail(f"array data needs {nbytes} bytes, the record has {len(buf) - p}")
    o: Any = "F" if order else "C"
    if nbytes == 0:
        return np.empty(shape, dt, order=o), end
    flat = np.frombuffer(buf, dt, count, p)
    kind = dt.kind
    if kind == "U":
        points = flat.view(dt.byteorder + "u4")
        if points.max() > 0x10FFFF:
            bad = int(np.argmax(points > 0x10FFFF))
            raise Fail(f"a {dt.str} array holds code point {int(points[bad]):#x} (beyond "
                       f"U+10FFFF) at element {bad // (dt.itemsize // 4)}")
    elif kind == "b":
        u8 = flat.view(np.uint8)
        if u8.max() > 1:  # numpy's bool is "not 0"; other bytes break its comparisons
            flat = np.not_equal(u8, 0)
    return flat.reshape(shape, order=o).copy(order=o), end  # writable, owns its data


# dtype string -> (unpack, numpy type, size) where ``type(unpacked)`` is exact
_SCALAR_FAST: dict[bytes, tuple[Callable, type, int]] = {}
for _code in "?bBhHiIqQd":
    _s, _text = struct.Struct("<" + _code), np.dtype("<" + _code).str
    _SCALAR_FAST[_text.encode()] = (_s.unpack_from, np.dtype(_text).type, _s.size)


def dec_npscalar(buf: bytes, off: int) -> tuple[np.generic, int]:
    """Decode the numpy scalar (tag 0x11) at ``off``."""
    p = off + 2 + buf[off + 1]
    fast = _SCALAR_FAST.get(buf[off + 2 : p])
    if fast is not None:
        return fast[1](fast[0](buf, p)[0]), p + fast[2]
    dt, p = read_dtype(buf, off + 1, "biufcmM")
    end = p + dt.itemsize
    if end > len(buf):
        raise Fail("truncated numpy scalar")
    return np.ndarray((), dt, buf, p)[()], end
