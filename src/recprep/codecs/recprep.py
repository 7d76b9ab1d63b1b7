"""The ``"recprep"`` codec: a typed binary encoding that round-trips exactly.

A record is the format byte :data:`FORMAT_TAG` (``0xF1``) followed by exactly one
value: a one-byte type tag and a body. Python scalars and containers, ``numpy`` arrays
and ``numpy`` scalars have their own tags, matched on the *exact* type, so that type and
value both come back (``-0.0``, NaN payloads, lone surrogates, ``'>i4'`` arrays, Fortran
order...). Anything else, subclasses included, is stored as a pickle, which is decoded
only with ``allow_pickle=True``. Tuples and lists of ``bool``/``int``/``float``/``str``/
``bytes`` are *packed*: one struct holds all their fixed-width fields. The byte-level
format is specified in ``docs/format.md``.

Example
-------
>>> codec = RecprepCodec()
>>> record = codec.encode((1, "a"))
>>> record.hex(" ")
'f1 0e 02 00 00 00 71 73 01 00 00 00 00 00 00 00 01 00 00 00 61'
>>> codec.decode(record)
(1, 'a')
"""

from __future__ import annotations

import math
import pickle
import re
import struct
from collections.abc import Callable
from itertools import chain
from typing import Any

import cloudpickle
import numpy as np

from ..errors import DecodeError, EncodeError, PickleRefusedError
from .base import Codec

__all__ = ["FORMAT_TAG", "MAX_DEPTH", "RecprepCodec"]

#: the first byte of every record: 0xF0 | format version 1
FORMAT_TAG = 0xF1
#: containers nested deeper than this are refused (EncodeError / DecodeError)
MAX_DEPTH = 1000

# value tags
T_NONE, T_FALSE, T_TRUE, T_INT, T_BIGINT, T_FLOAT, T_COMPLEX = range(7)
T_STR, T_BYTES, T_BYTEARRAY, T_LIST, T_TUPLE, T_DICT, T_PLIST, T_PTUPLE = range(7, 15)
T_NDARRAY, T_NPSCALAR, T_NPSTR, T_NPBYTES, T_PICKLE = range(0x10, 0x15)

_F1 = bytes([FORMAT_TAG])
_TAG_U32 = struct.Struct("<BI")
_TAG_Q = struct.Struct("<Bq")
_TAG_D = struct.Struct("<Bd")
_TAG_DD = struct.Struct("<Bdd")
_u32 = struct.Struct("<I").unpack_from
_q = struct.Struct("<q").unpack_from
_d = struct.Struct("<d").unpack_from
_dd = struct.Struct("<dd").unpack_from
_u8u8 = struct.Struct("<BB").unpack_from
_pack_tag_u32 = _TAG_U32.pack
_U32_MAX = 0xFFFFFFFF

# packed sequences: item codes (ASCII) and the struct field each one has in the body
_PACK_CODE = {bool: b"?", int: b"q", float: b"d", str: b"s", bytes: b"y"}
_VAR_CODES = frozenset(b"sy")
_FIELD_OF_CODE = bytes.maketrans(b"s?yqd", b"I?Iqd")
_NOT_CODES = bytes(c for c in range(256) if c not in b"?qdsy")
_PLAN_CACHE_MAX = 2048


class _Fail(Exception):
    """Internal: a malformed record, with the detail for the DecodeError."""


# ---------------------------------------------------------------------------- encoding


def _plan(key: tuple[type, ...], tag: int) -> tuple[bytes, struct.Struct, tuple[int, ...]] | None:
    """The packed layout of a tuple/list whose items have the types ``key`` (or None)."""
    try:
        codes = b"".join([_PACK_CODE[t] for t in key])
    except KeyError:
        return None
    fields = codes.translate(_FIELD_OF_CODE)
    if len(set(fields)) == 1:  # homogeneous: a short format even for long sequences
        fields = b"%d%c" % (len(fields), fields[0])
    var = tuple(i for i, c in enumerate(codes) if c in _VAR_CODES)
    return _pack_tag_u32(tag, len(key)) + codes, struct.Struct(b"<" + fields), var


_EPLANS: dict[int, dict[tuple[type, ...], Any]] = {T_PTUPLE: {}, T_PLIST: {}}


def _packed(x: tuple | list, tag: int) -> list[bytes] | None:
    """The pieces of ``x`` in packed form, or None if it can't be packed."""
    key = tuple(map(type, x))
    cache = _EPLANS[tag]
    plan = cache.get(key, False)
    if plan is False:
        plan = _plan(key, tag) if key else None
        if len(cache) >= _PLAN_CACHE_MAX:
            cache.clear()
        if len(key) <= 256:
            cache[key] = plan
    if plan is None:
        return None
    prefix, fields, var = plan
    try:
        if not var:
            return [prefix, fields.pack(*x)]
        vals = list(x)
        tails = []
        for i in var:
            b = vals[i]
            if type(b) is str:
                b = b.encode("utf-8", "surrogatepass")
            vals[i] = len(b)
            tails.append(b)
        return [prefix, fields.pack(*vals), *tails]
    except struct.error:  # an int beyond int64 or a length beyond 4 GiB-1
        return None


def _enc_bytes(tag: int) -> Callable[[Any, list], None]:
    def enc(x: Any, out: list) -> None:
        out.append(_pack_tag_u32(tag, len(x)))
        out.append(x)

    return enc


def _enc_str(tag: int) -> Callable[[str, list], None]:
    def enc(x: str, out: list) -> None:
        b = x.encode("utf-8", "surrogatepass")
        out.append(_pack_tag_u32(tag, len(b)))
        out.append(b)

    return enc


def _enc_bigint(x: int) -> bytes:
    body = x.to_bytes(x.bit_length() // 8 + 1, "little", signed=True)
    return _pack_tag_u32(T_BIGINT, len(body)) + body


def _enc_pickle(x: Any, out: list) -> None:
    try:
        body = cloudpickle.dumps(x, protocol=5)
    except Exception as e:
        raise EncodeError(
            f"recprep can't encode a {type(x).__qualname__} and pickling it failed "
            f"({type(e).__name__}: {e})"
        ) from e
    out.append(_pack_tag_u32(T_PICKLE, len(body)))
    out.append(body)


_ND_KINDS = frozenset("biufcmMUS")
_ND_INFO: dict[str, tuple[bytes, type] | None] = {}
_SHAPE = [struct.Struct(f"<BB{n}QQ") for n in range(65)]


def _dtype_prefix(dt: np.dtype, tag: int) -> bytes | None:
    """Tag + dtype string, if ``dt`` round-trips exactly through ``dt.str``, else None."""
    key = dt.str
    info = _ND_INFO.get(key, False)
    if info is False:
        info = None
        if dt.kind in _ND_KINDS and dt.fields is None and dt.subdtype is None:
            info = (key.encode("ascii"), np.dtype(key).type)
        _ND_INFO[key] = info
    if info is None or info[1] is not dt.type or dt.metadata is not None:
        return None
    return bytes((tag, len(info[0]))) + info[0]


def _enc_ndarray(a: np.ndarray, out: list) -> None:
    prefix = _dtype_prefix(a.dtype, T_NDARRAY)
    if prefix is None:
        return _enc_pickle(a, out)
    if a.flags.c_contiguous:
        order, data = 0, a
    elif a.flags.f_contiguous:
        order, data = 1, a.T
    else:
        order, data = 0, np.ascontiguousarray(a)
    out.append(prefix + _SHAPE[a.ndim].pack(a.ndim, order, *a.shape, a.nbytes))
    out.append(data)


def _enc_npscalar(x: np.generic, out: list) -> None:
    prefix = _dtype_prefix(x.dtype, T_NPSCALAR)
    if prefix is None:
        return _enc_pickle(x, out)
    out.append(prefix)
    out.append(x)


_ENCODERS: dict[type, Callable[[Any, list], None]] = {
    type(None): lambda x, out: out.append(b"\x00"),
    bool: lambda x, out: out.append(b"\x02" if x else b"\x01"),
    complex: lambda x, out: out.append(_TAG_DD.pack(T_COMPLEX, x.real, x.imag)),
    bytes: _enc_bytes(T_BYTES),
    bytearray: _enc_bytes(T_BYTEARRAY),
    np.bytes_: _enc_bytes(T_NPBYTES),
    np.str_: _enc_str(T_NPSTR),
    np.ndarray: _enc_ndarray,
}
for _t in set(np.sctypeDict.values()):
    if issubclass(_t, np.generic) and _t not in _ENCODERS and _t.__name__ not in ("void", "object_"):
        _ENCODERS[_t] = _enc_npscalar


def _encode_into(value: Any, out: list) -> None:
    """Append the pieces of ``value`` to ``out``; iterative, so depth costs no stack."""
    stack: list = []
    it = iter((value,))
    while True:
        for x in it:
            t = type(x)
            if t is int:
                try:
                    out.append(_TAG_Q.pack(T_INT, x))
                except struct.error:
                    out.append(_enc_bigint(x))
            elif t is float:
                out.append(_TAG_D.pack(T_FLOAT, x))
            elif t is str:
                b = x.encode("utf-8", "surrogatepass")
                out.append(_pack_tag_u32(T_STR, len(b)))
                out.append(b)
            elif t is tuple or t is list or t is dict:
                if len(stack) >= MAX_DEPTH:
                    raise EncodeError(
                        f"the value nests containers deeper than {MAX_DEPTH} levels "
                        "(or contains itself); flatten it"
                    )
                if t is dict:
                    out.append(_pack_tag_u32(T_DICT, len(x)))
                    stack.append(it)
                    it = chain.from_iterable(x.items())
                    break
                pieces = _packed(x, T_PTUPLE if t is tuple else T_PLIST)
                if pieces is not None:
                    out += pieces
                    continue
                out.append(_pack_tag_u32(T_TUPLE if t is tuple else T_LIST, len(x)))
                stack.append(it)
                it = iter(x)
                break
            else:
                _ENCODERS.get(t, _enc_pickle)(x, out)
        else:
            if not stack:
                return
            it = stack.pop()


# ---------------------------------------------------------------------------- decoding

_DTYPE_RE = re.compile(rb"[<>|][biufcmMUS]\d{1,10}(\[\d{0,10}[A-Za-z]{1,3}\])?")
_DTYPES: dict[bytes, np.dtype] = {}


def _read_dtype(buf: Any, off: int, kinds: str) -> tuple[np.dtype, int]:
    """Read a length-prefixed dtype string at ``off``; refuse anything not in ``kinds``."""
    end = off + 1 + buf[off]
    text = bytes(buf[off + 1 : end])
    if end > len(buf):
        raise _Fail("truncated dtype string")
    dt = _DTYPES.get(text)
    if dt is None:
        try:
            ok = _DTYPE_RE.fullmatch(text) is not None
            dt = np.dtype(text.decode("ascii")) if ok else None
        except (TypeError, ValueError):
            dt = None
        if dt is None or dt.str != text.decode() or dt.hasobject or dt.fields is not None:
            raise _Fail(f"invalid dtype string {text!r}") from None
        if len(_DTYPES) < _PLAN_CACHE_MAX:
            _DTYPES[text] = dt
    if dt.kind not in kinds:
        raise _Fail(f"dtype {text!r} is not allowed here")
    return dt, end


def _dec_ndarray(buf: Any, off: int) -> tuple[np.ndarray, int]:
    dt, p = _read_dtype(buf, off + 1, "biufcmMUS")
    ndim, order = _u8u8(buf, p)
    if ndim > 64 or order > 1:
        raise _Fail(f"array header has ndim={ndim}, order flag={order}")
    *shape, nbytes = _SHAPE[ndim].unpack_from(buf, p)[2:]
    p += _SHAPE[ndim].size
    count = math.prod(shape)
    if count * dt.itemsize != nbytes:
        raise _Fail(f"array of shape {tuple(shape)} and dtype {dt.str} can't hold {nbytes} bytes")
    end = p + nbytes
    if end > len(buf):
        raise _Fail(f"array data needs {nbytes} bytes, the record has {len(buf) - p}")
    o = "F" if order else "C"
    if nbytes == 0:
        return np.empty(shape, dt, order=o), end
    return np.frombuffer(buf, dt, count, p).reshape(shape, order=o).copy(order=o), end


def _dec_npscalar(buf: Any, off: int) -> tuple[np.generic, int]:
    dt, p = _read_dtype(buf, off + 1, "biufcmM")
    end = p + dt.itemsize
    if end > len(buf):
        raise _Fail("truncated numpy scalar")
    return np.frombuffer(buf, dt, 1, p)[0], end


def _dec_sized(convert: Callable[[Any], Any]) -> Callable[[Any, int], tuple[Any, int]]:
    def dec(buf: Any, off: int) -> tuple[Any, int]:
        start = off + 5
        end = start + _u32(buf, off + 1)[0]
        if end > len(buf):
            raise _Fail(f"value needs {end - start} bytes, the record has {len(buf) - start}")
        return convert(buf[start:end]), end

    return dec


def _utf8(b: Any) -> str:
    return str(b, "utf-8", "surrogatepass")


def _dec_packed(buf: Any, off: int, as_tuple: bool) -> tuple[Any, int]:
    n = _u32(buf, off + 1)[0]
    p = off + 5 + n
    codes = bytes(buf[off + 5 : p])
    if len(codes) != n or not n:
        raise _Fail("truncated or empty packed sequence")
    plan = _DPLANS.get(codes)
    if plan is None:
        if codes.translate(None, b"?qdsy"):
            raise _Fail(f"packed sequence has unknown item codes {codes!r}")
        fields = codes.translate(_FIELD_OF_CODE)
        if len(set(fields)) == 1:
            fields = b"%d%c" % (len(fields), fields[0])
        var = tuple((i, c == 115) for i, c in enumerate(codes) if c in _VAR_CODES)
        plan = struct.Struct(b"<" + fields), var
        if n <= 256:
            if len(_DPLANS) >= _PLAN_CACHE_MAX:
                _DPLANS.clear()
            _DPLANS[codes] = plan
    fields, var = plan
    vals = fields.unpack_from(buf, p)
    p += fields.size
    if var:
        vals = list(vals)
        size = len(buf)
        for i, is_str in var:
            end = p + vals[i]
            if end > size:
                raise _Fail("truncated packed sequence")
            vals[i] = str(buf[p:end], "utf-8", "surrogatepass") if is_str else bytes(buf[p:end])
            p = end
        return (tuple(vals) if as_tuple else vals), p
    return (vals if as_tuple else list(vals)), p


_DPLANS: dict[bytes, tuple[struct.Struct, tuple[tuple[int, bool], ...]]] = {}


def _dec_fixed(value: Any, size: int) -> Callable[[Any, int], tuple[Any, int]]:
    return lambda buf, off: (value, off + size)


def _dec_bigint(buf: Any, off: int) -> tuple[int, int]:
    b, end = _dec_sized(bytes)(buf, off)
    return int.from_bytes(b, "little", signed=True), end


_DECODERS: list[Callable[[Any, int], tuple[Any, int]] | None] = [None] * 256
_DECODERS[T_NONE] = _dec_fixed(None, 1)
_DECODERS[T_FALSE] = _dec_fixed(False, 1)
_DECODERS[T_TRUE] = _dec_fixed(True, 1)
_DECODERS[T_INT] = lambda buf, off: (_q(buf, off + 1)[0], off + 9)
_DECODERS[T_BIGINT] = _dec_bigint
_DECODERS[T_FLOAT] = lambda buf, off: (_d(buf, off + 1)[0], off + 9)
_DECODERS[T_COMPLEX] = lambda buf, off: (complex(*_dd(buf, off + 1)), off + 17)
_DECODERS[T_STR] = _dec_sized(_utf8)
_DECODERS[T_BYTES] = _dec_sized(bytes)
_DECODERS[T_BYTEARRAY] = _dec_sized(bytearray)
_DECODERS[T_PLIST] = lambda buf, off: _dec_packed(buf, off, False)
_DECODERS[T_PTUPLE] = lambda buf, off: _dec_packed(buf, off, True)
_DECODERS[T_NDARRAY] = _dec_ndarray
_DECODERS[T_NPSCALAR] = _dec_npscalar
_DECODERS[T_NPSTR] = _dec_sized(lambda b: np.str_(_utf8(b)))
_DECODERS[T_NPBYTES] = _dec_sized(lambda b: np.bytes_(bytes(b)))
_DECODERS[T_PICKLE] = _dec_sized(bytes)  # unpickled by _decode_value, after the policy check


def _build_dict(items: list) -> dict:
    it = iter(items)
    return dict(zip(it, it))


_BUILD = {T_LIST: lambda items: items, T_TUPLE: tuple, T_DICT: _build_dict}
_EMPTY = {T_LIST: list, T_TUPLE: tuple, T_DICT: dict}


def _decode_value(buf: Any, off: int, allow_pickle: bool) -> tuple[Any, int]:
    """Decode the value at ``off``; return it and the offset after it."""
    size = len(buf)
    stack: list = []
    kind = items = None
    remaining = 0
    start = off
    try:
        while True:
            start = off
            tag = buf[off]
            if tag == T_INT:
                value = _q(buf, off + 1)[0]
                off += 9
            elif tag == T_FLOAT:
                value = _d(buf, off + 1)[0]
                off += 9
            elif tag == T_STR:
                end = off + 5 + _u32(buf, off + 1)[0]
                if end > size:
                    raise _Fail("truncated string")
                value = str(buf[off + 5 : end], "utf-8", "surrogatepass")
                off = end
            elif tag == T_LIST or tag == T_TUPLE or tag == T_DICT:
                if len(stack) >= MAX_DEPTH:
                    raise _Fail(f"containers nest deeper than {MAX_DEPTH} levels")
                count = _u32(buf, off + 1)[0] * (2 if tag == T_DICT else 1)
                off += 5
                if count:
                    if count > size - off:
                        raise _Fail(f"container claims {count} values, more than the record holds")
                    stack.append((kind, items, remaining))
                    kind, items, remaining = tag, [], count
                    continue
                value = _EMPTY[tag]()
            else:
                dec = _DECODERS[tag]
                if dec is None:
                    raise _Fail(f"unknown type tag 0x{tag:02x}")
                if (tag == T_PLIST or tag == T_PTUPLE) and len(stack) >= MAX_DEPTH:
                    raise _Fail(f"containers nest deeper than {MAX_DEPTH} levels")
                value, off = dec(buf, off)
                if tag == T_PICKLE:
                    if not allow_pickle:
                        raise PickleRefusedError()
                    value = _unpickle(value, start)
            while True:  # hand the value to its container, closing finished ones
                if kind is None:
                    return value, off
                items.append(value)  # type: ignore[union-attr]
                remaining -= 1
                if remaining:
                    break
                value = _BUILD[kind](items)
                kind, items, remaining = stack.pop()
    except _Fail as e:
        raise _decode_error(str(e), start) from None
    except (struct.error, IndexError, UnicodeDecodeError, ValueError, TypeError, OverflowError,
            MemoryError) as e:
        if isinstance(e, DecodeError):
            raise
        if isinstance(e, (struct.error, IndexError)):
            raise _decode_error(f"truncated record ({e})", start) from None
        raise _decode_error(f"malformed value ({type(e).__name__}: {e})", start) from None


def _unpickle(body: bytes, start: int) -> Any:
    try:
        return pickle.loads(body)
    except Exception as e:
        raise _decode_error(f"unpickling failed ({type(e).__name__}: {e})", start) from e


def _decode_error(detail: str, offset: int) -> DecodeError:
    err = DecodeError(f"{detail}, at byte {offset} of the record")
    err.record_offset = offset  # type: ignore[attr-defined]
    return err


def _not_recprep(first: int) -> DecodeError:
    hint = " (it looks like a pickle)" if first == 0x80 else ""
    return DecodeError(
        f"the record is not recprep-encoded: it starts with byte 0x{first:02x}{hint}, not "
        f"0x{FORMAT_TAG:02x}; if it was written with another codec, read it with "
        'codec="pickle" or codec="raw"'
    )


class RecprepCodec(Codec):
    """Typed, exact, deterministic encoding of Python and ``numpy`` values.

    Examples
    --------
    >>> import numpy as np
    >>> codec = RecprepCodec()
    >>> codec.decode(codec.encode({"x": np.arange(3, dtype=">i4"), "y": -0.0}))
    {'x': array([0, 1, 2], dtype='>i4'), 'y': -0.0}
    >>> codec.decode(b"\\x80\\x04N.")
    Traceback (most recent call last):
    ...
    recprep.errors.DecodeError: the record is not recprep-encoded: it starts with byte 0x80 \
(it looks like a pickle), not 0xf1; if it was written with another codec, read it with \
codec="pickle" or codec="raw"
    """

    name = "recprep"

    def encode(self, instance: Any) -> bytes:
        """Return the record of ``instance``: ``0xF1`` then the encoded value."""
        t = type(instance)
        if t is tuple or t is list:
            pieces = _packed(instance, T_PTUPLE if t is tuple else T_PLIST)
            if pieces is not None:
                return b"".join([_F1, *pieces])
        out = [_F1]
        try:
            _encode_into(instance, out)
        except struct.error:
            raise EncodeError(
                f"a str, bytes or container is too long for recprep (limit {_U32_MAX} bytes or "
                "items); split it"
            ) from None
        return b"".join(out)

    def decode(self, record: bytes | memoryview, *, allow_pickle: bool = False) -> Any:
        """Return the value held by ``record`` (a pickled part only if ``allow_pickle``)."""
        buf = record
        if type(buf) is not bytes:
            buf = memoryview(buf)
            if buf.format != "B" or buf.ndim != 1:
                buf = buf.cast("B") if buf.c_contiguous else memoryview(buf.tobytes())
        if not len(buf):
            raise DecodeError("the record is empty; a recprep record is at least 2 bytes")
        if buf[0] != FORMAT_TAG:
            raise _not_recprep(buf[0])
        value, off = _decode_value(buf, 1, allow_pickle)
        if off != len(buf):
            raise _decode_error(f"{len(buf) - off} trailing byte(s) after the value", off)
        return value
