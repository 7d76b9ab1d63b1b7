"""The ``"recprep"`` codec: a typed binary encoding that round-trips exactly.

A record is the format byte :data:`FORMAT_TAG` (``0xF1``) followed by exactly one
value: a one-byte type tag and a body. Python scalars and containers, ``numpy`` arrays
and ``numpy`` scalars have their own tags, matched on the *exact* type, so that type and
value both come back (``-0.0``, NaN payloads, lone surrogates, ``'>i4'`` arrays, Fortran
order...). Anything else, subclasses included, is stored as a pickle, which is decoded
only with ``allow_pickle=True``. Tuples and lists of ``bool``/``int``/``float``/``str``/
``bytes`` are *packed*: one struct holds all their fixed-width fields. The byte-level
format is specified in ``docs/format.md``.

Encoding and decoding are iterative (nesting costs no Python stack) and the common
shapes run through code generated once per item signature, which keeps this pure-Python
codec within reach of ``pickle``'s C speed.

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
from functools import partial
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

# value tags (see docs/format.md)
T_NONE, T_FALSE, T_TRUE, T_INT, T_BIGINT, T_FLOAT, T_COMPLEX = range(7)
T_STR, T_BYTES, T_BYTEARRAY, T_LIST, T_TUPLE, T_DICT, T_PLIST, T_PTUPLE = range(7, 15)
T_NDARRAY, T_NPSCALAR, T_NPSTR, T_NPBYTES, T_PICKLE = range(0x10, 0x15)

_F1 = bytes([FORMAT_TAG])
_TAG_U32 = struct.Struct("<BI")
_TAG_Q = struct.Struct("<Bq")
_TAG_D = struct.Struct("<Bd")
_TAG_DD = struct.Struct("<Bdd")
_pack_tag_u32 = _TAG_U32.pack
_u32 = struct.Struct("<I").unpack_from
_q = struct.Struct("<q").unpack_from
_d = struct.Struct("<d").unpack_from
_dd = struct.Struct("<dd").unpack_from
_u8u8 = struct.Struct("<BB").unpack_from
_SHAPE = [struct.Struct(f"<BB{n}QQ") for n in range(65)]  # ndim, order, dims, nbytes
_CACHE_MAX = 512  # entries per cache (plans, dtypes); a full cache is cleared
_CACHE_ITEMS = 1024  # packed sequences longer than this get no cached plan
_GEN_ITEMS = 64  # packed sequences up to this long get generated code


class _Fail(Exception):
    """Internal: a malformed record; the message becomes a DecodeError's."""


def _cache_put(cache: dict, key: Any, value: Any) -> Any:
    if len(cache) >= _CACHE_MAX:
        cache.clear()
    cache[key] = value
    return value


# ------------------------------------------------------------------ packed sequences
# Body: u32 n, n item codes, one struct of the fixed-width fields (a u32 length for
# str/bytes items), then the str/bytes data in item order.

_CODE_OF = {bool: "?", int: "q", float: "d", str: "s", bytes: "y"}
_FIELD_OF_CODE = bytes.maketrans(b"?qdsy", b"?qdII")


def _fields(codes: bytes) -> struct.Struct:
    fields = codes.translate(_FIELD_OF_CODE)
    if fields.count(fields[:1]) == len(fields):  # homogeneous: '784d', not 784 letters
        fields = b"%d%c" % (len(fields), fields[0])
    return struct.Struct(b"<" + fields)


def _new_encoder(t: type, key: tuple[type, ...]) -> tuple:
    """Cache and return ``(encode, prefix, prefix_with_format_tag)`` for items of ``key``."""
    tag = T_PTUPLE if t is tuple else T_PLIST
    try:
        kinds = set(key)
        if not key:
            raise KeyError  # () and [] take the plain container form
        if len(kinds) == 1:
            codes = _CODE_OF[key[0]] * len(key)
        else:
            codes = "".join(map(_CODE_OF.__getitem__, key))
    except KeyError:
        plan: tuple = (None, b"", b"")
    else:
        pack, n = _fields(codes.encode()).pack, len(key)
        var = []
        if "s" in codes or "y" in codes:
            var = [i for i, c in enumerate(codes) if c in "sy"]
        fn = partial(_enc_packed_long, pack, var) if n > _GEN_ITEMS else _gen_encoder(key, pack)
        prefix = _pack_tag_u32(tag, n) + codes.encode()
        plan = (fn, prefix, _F1 + prefix)
    if len(key) > _CACHE_ITEMS:
        return plan
    return _cache_put(_EPLANS[t], key, plan)


def _gen_encoder(key: tuple[type, ...], pack: Callable) -> Callable[[Any, bytes], bytes | None]:
    """Generate ``enc(x, head)``: the packed record of ``x``, None if its types aren't ``key``.

    The type check lets callers try the plan used last for a sequence of the same length
    without computing ``key``.
    """
    n = len(key)
    names = ", ".join(f"a{i}" for i in range(n)) + ","
    lines = [f"def enc(x, head):\n    {names} = x"]
    lines.append("    if " + " or ".join(f"type(a{i}) is not T{i}" for i in range(n)) + ":")
    lines.append("        return None")
    var = [i for i, t in enumerate(key) if t is str or t is bytes]
    lines += [f"    a{i} = a{i}.encode('utf-8', 'surrogatepass')" for i in var if key[i] is str]
    args = ", ".join(f"len(a{i})" if i in var else f"a{i}" for i in range(n))
    if var:
        tails = "".join(f", a{i}" for i in var)
        lines.append(f"    return b''.join((head, pack({args}){tails}))")
    else:
        lines.append(f"    return head + pack({args})")
    namespace = {"pack": pack, **{f"T{i}": t for i, t in enumerate(key)}}
    exec("\n".join(lines), namespace)  # only our identifiers: no data in the source
    return namespace["enc"]


def _enc_packed_long(pack: Callable, var: list[int], x: Any, head: bytes) -> bytes:
    if not var:
        return head + pack(*x)
    vals = list(x)
    pieces = [head, b""]
    for i in var:
        b = vals[i]
        if type(b) is str:
            b = b.encode("utf-8", "surrogatepass")
        vals[i] = len(b)
        pieces.append(b)
    pieces[1] = pack(*vals)
    return b"".join(pieces)


_EPLANS: dict[type, dict[tuple[type, ...], tuple]] = {tuple: {}, list: {}}
# the plan last used for each length of packed sequence, tried first
_RECENT: dict[type, list[tuple | None]] = {t: [None] * (_GEN_ITEMS + 1) for t in (tuple, list)}


def _encode_packed(x: tuple | list, t: type, top: bool) -> bytes | None:
    """The packed form of ``x`` (after the format tag if ``top``), or None."""
    n = len(x)
    recent = _RECENT[t]
    try:
        if n <= _GEN_ITEMS:
            plan = recent[n]
            if plan is not None:
                b = plan[0](x, plan[2] if top else plan[1])
                if b is not None:
                    return b
        key = tuple(map(type, x))
        plan = _EPLANS[t].get(key) or _new_encoder(t, key)
        if plan[0] is None:
            return None
        if n <= _GEN_ITEMS:
            recent[n] = plan
        return plan[0](x, plan[2] if top else plan[1])
    except struct.error:  # an int beyond int64, or too long: the plain form
        return None


def _new_decoder(codes: bytes, as_tuple: bool) -> Callable[[bytes, int], tuple[Any, int]]:
    """Cache and return the decoder of the packed fields of items ``codes``."""
    if not codes or codes.translate(None, b"?qdsy"):
        raise _Fail(f"bad packed item codes {codes[:16]!r}")
    fields = _fields(codes)
    var = []
    if b"s" in codes or b"y" in codes:
        var = [(i, c == 115) for i, c in enumerate(codes) if c in b"sy"]
    n = len(codes)
    if n > _GEN_ITEMS:
        fn = partial(_dec_packed_long, fields.unpack_from, fields.size, var, as_tuple)
    else:
        names = ", ".join(f"a{i}" for i in range(n)) + ","
        lines = ["def dec(buf, off):", f"    {names} = unpack(buf, off)"]
        lines.append(f"    p = off + {fields.size}")
        for i, is_str in var:
            lines.append(f"    e = p + a{i}")
            conv = ".decode('utf-8', 'surrogatepass')" if is_str else ""
            lines.append(f"    a{i} = buf[p:e]{conv}\n    p = e")
        lines.append("    if p > len(buf):\n        raise Fail('truncated packed sequence')")
        lines.append(f"    return {'(' if as_tuple else '['}{names}{')' if as_tuple else ']'}, p")
        namespace = {"unpack": fields.unpack_from, "Fail": _Fail}
        exec("\n".join(lines), namespace)  # only our identifiers: no data in the source
        fn = namespace["dec"]
    if n > _CACHE_ITEMS:
        return fn
    return _cache_put(_DPLANS[as_tuple], codes, fn)


def _dec_packed_long(unpack: Callable, size: int, var: list, as_tuple: bool, buf: bytes,
                     off: int) -> tuple[Any, int]:
    vals = list(unpack(buf, off))
    p = off + size
    for i, is_str in var:
        e = p + vals[i]
        vals[i] = buf[p:e].decode("utf-8", "surrogatepass") if is_str else buf[p:e]
        p = e
    if p > len(buf):
        raise _Fail("truncated packed sequence")
    return (tuple(vals) if as_tuple else vals), p


_DPLANS: dict[bool, dict[bytes, Callable]] = {True: {}, False: {}}
_TUPLE_DECODERS = _DPLANS[True]


def _no_decoder(buf: bytes, off: int) -> tuple[Any, int]:
    raise _Fail("a packed tuple of 0 items")


# (header, decoder) of the whole-record packed tuple decoded last, tried first
_LAST_TOP: list[tuple[bytes, Callable]] = [(b"\xf1\x0e\x00\x00\x00\x00", _no_decoder)]


def _dec_packed(buf: bytes, off: int, as_tuple: bool) -> tuple[Any, int]:
    p = off + 5 + _u32(buf, off + 1)[0]
    codes = buf[off + 5 : p]
    fn = _DPLANS[as_tuple].get(codes) or _new_decoder(codes, as_tuple)
    return fn(buf, p)


# ------------------------------------------------------------------ other encoders


def _enc_sized(tag: int, to_bytes: Callable[[Any], Any] | None = None) -> Callable:
    def enc(x: Any, out: list) -> None:
        b = to_bytes(x) if to_bytes else x
        out.append(_pack_tag_u32(tag, len(b)))
        out.append(b)

    return enc


def _utf8(s: str) -> bytes:
    return s.encode("utf-8", "surrogatepass")


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


_ND_KINDS = "biufcmMUS"
_ND_INFO: dict[str, bytes | None] = {}


def _dtype_prefix(dt: np.dtype, tag: int) -> bytes | None:
    """Tag + dtype string, if ``dt`` comes back from ``dt.str``, else None (pickle it).

    ``np.longlong``/``np.ulonglong`` (``'q'``/``'Q'``) come back as ``np.int64``/
    ``np.uint64``, as they do from numpy's own pickles: ``dt.str`` doesn't tell them apart.
    """
    key = dt.str
    info = _ND_INFO.get(key, False)
    if info is False:
        info = None
        if dt.kind in _ND_KINDS and dt.fields is None and dt.subdtype is None and dt.itemsize:
            text = key.encode("ascii")
            info = bytes((len(text),)) + text
        info = _cache_put(_ND_INFO, key, info)
    if info is None or dt.metadata is not None:
        return None
    return bytes((tag,)) + info


def _enc_ndarray(a: np.ndarray, out: list) -> None:
    prefix = _dtype_prefix(a.dtype, T_NDARRAY)
    if prefix is None:
        return _enc_pickle(a, out)
    if a.flags.c_contiguous:
        order, data = 0, a
    elif a.flags.f_contiguous:
        order, data = 1, a.T  # C-contiguous, its bytes in a's Fortran order
    else:
        order, data = 0, np.ascontiguousarray(a)
    out.append(prefix + _SHAPE[a.ndim].pack(a.ndim, order, *a.shape, a.nbytes))
    out.append(data)  # join reads the buffer: no intermediate copy


def _enc_npscalar(x: np.generic, out: list) -> None:
    prefix = _dtype_prefix(x.dtype, T_NPSCALAR)
    if prefix is None:
        return _enc_pickle(x, out)
    out.append(prefix)
    out.append(x)  # numpy scalars export their bytes as a buffer


_ENCODERS: dict[type, Callable[[Any, list], None]] = {
    type(None): lambda x, out: out.append(b"\x00"),
    bool: lambda x, out: out.append(b"\x02" if x else b"\x01"),
    complex: lambda x, out: out.append(_TAG_DD.pack(T_COMPLEX, x.real, x.imag)),
    bytes: _enc_sized(T_BYTES),
    bytearray: _enc_sized(T_BYTEARRAY),
    np.bytes_: _enc_sized(T_NPBYTES),
    np.str_: _enc_sized(T_NPSTR, _utf8),
    np.ndarray: _enc_ndarray,
}
for _t in set(np.sctypeDict.values()):
    if issubclass(_t, np.generic) and _t not in _ENCODERS and _t not in (np.void, np.object_):
        _ENCODERS[_t] = _enc_npscalar


def _too_deep() -> EncodeError:
    return EncodeError(
        f"the value nests containers deeper than {MAX_DEPTH} levels (or contains itself)"
    )


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
                    raise _too_deep()
                if t is dict:
                    out.append(_pack_tag_u32(T_DICT, len(x)))
                    stack.append(it)
                    it = chain.from_iterable(x.items())
                    break
                packed = _encode_packed(x, t, False)
                if packed is not None:
                    out.append(packed)
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


# ------------------------------------------------------------------ decoding

_DTYPE_RE = re.compile(rb"[<>|][biufcmMUS]\d{1,10}(\[\d{0,10}[A-Za-z]{1,3}\])?")
_DTYPES: dict[bytes, np.dtype] = {}


def _read_dtype(buf: bytes, off: int, kinds: str) -> tuple[np.dtype, int]:
    """Read the length-prefixed dtype string at ``off``; refuse kinds not in ``kinds``."""
    end = off + 1 + buf[off]
    text = buf[off + 1 : end]
    if end > len(buf):
        raise _Fail("truncated dtype string")
    dt = _DTYPES.get(text)
    if dt is None:
        try:  # the pattern first: np.dtype() parses far more than dtype.str forms
            dt = np.dtype(text.decode("ascii")) if _DTYPE_RE.fullmatch(text) else None
        except (TypeError, ValueError):
            dt = None
        if (dt is None or dt.str != text.decode() or dt.hasobject or dt.fields is not None
                or not dt.itemsize):
            raise _Fail(f"invalid dtype string {text!r}")
        _cache_put(_DTYPES, text, dt)
    if dt.kind not in kinds:
        raise _Fail(f"dtype {text!r} is not allowed here")
    return dt, end


def _dec_ndarray(buf: bytes, off: int) -> tuple[np.ndarray, int]:
    dt, p = _read_dtype(buf, off + 1, _ND_KINDS)
    ndim, order = _u8u8(buf, p)
    if ndim > 64 or order > 1:
        raise _Fail(f"array header has ndim={ndim}, order flag={order}")
    *shape, nbytes = _SHAPE[ndim].unpack_from(buf, p)[2:]
    p += _SHAPE[ndim].size
    if math.prod(shape) * dt.itemsize != nbytes:
        raise _Fail(f"an array of shape {tuple(shape)} and dtype {dt.str} isn't {nbytes} bytes")
    end = p + nbytes
    if end > len(buf):
        raise _Fail(f"array data needs {nbytes} bytes, the record has {len(buf) - p}")
    o = "F" if order else "C"
    if nbytes == 0:
        return np.empty(shape, dt, order=o), end
    flat = np.frombuffer(buf, dt, math.prod(shape), p)
    return flat.reshape(shape, order=o).copy(order=o), end  # writable, owns its data


def _dec_npscalar(buf: bytes, off: int) -> tuple[np.generic, int]:
    dt, p = _read_dtype(buf, off + 1, "biufcmM")
    end = p + dt.itemsize
    if end > len(buf):
        raise _Fail("truncated numpy scalar")
    return np.frombuffer(buf, dt, 1, p)[0], end


def _dec_sized(convert: Callable[[bytes], Any]) -> Callable[[bytes, int], tuple[Any, int]]:
    def dec(buf: bytes, off: int) -> tuple[Any, int]:
        start = off + 5
        end = start + _u32(buf, off + 1)[0]
        if end > len(buf):
            raise _Fail(f"a value needs {end - start} bytes, the record has {len(buf) - start}")
        return convert(buf[start:end]), end

    return dec


def _str(b: bytes) -> str:
    return b.decode("utf-8", "surrogatepass")


_DECODERS: list[Callable[[bytes, int], tuple[Any, int]] | None] = [None] * 256
_DECODERS[T_NONE] = lambda buf, off: (None, off + 1)
_DECODERS[T_FALSE] = lambda buf, off: (False, off + 1)
_DECODERS[T_TRUE] = lambda buf, off: (True, off + 1)
_DECODERS[T_INT] = lambda buf, off: (_q(buf, off + 1)[0], off + 9)
_DECODERS[T_BIGINT] = _dec_sized(lambda b: int.from_bytes(b, "little", signed=True))
_DECODERS[T_FLOAT] = lambda buf, off: (_d(buf, off + 1)[0], off + 9)
_DECODERS[T_COMPLEX] = lambda buf, off: (complex(*_dd(buf, off + 1)), off + 17)
_DECODERS[T_STR] = _dec_sized(_str)
_DECODERS[T_BYTES] = _dec_sized(bytes)
_DECODERS[T_BYTEARRAY] = _dec_sized(bytearray)
_DECODERS[T_PLIST] = partial(_dec_packed, as_tuple=False)
_DECODERS[T_PTUPLE] = partial(_dec_packed, as_tuple=True)
_DECODERS[T_NDARRAY] = _dec_ndarray
_DECODERS[T_NPSCALAR] = _dec_npscalar
_DECODERS[T_NPSTR] = _dec_sized(lambda b: np.str_(_str(b)))
_DECODERS[T_NPBYTES] = _dec_sized(np.bytes_)
_DECODERS[T_PICKLE] = _dec_sized(bytes)  # unpickled by _decode_value after the policy check


def _build_dict(items: list) -> dict:
    it = iter(items)
    return dict(zip(it, it, strict=True))


_BUILD = {T_LIST: lambda items: items, T_TUPLE: tuple, T_DICT: _build_dict}
_EMPTY = {T_LIST: list, T_TUPLE: tuple, T_DICT: dict}
_BAD_INPUT = (_Fail, struct.error, IndexError, UnicodeDecodeError, ValueError, TypeError,
              OverflowError, MemoryError)


def _decode_value(buf: bytes, off: int, allow_pickle: bool) -> tuple[Any, int]:
    """Decode the value at ``off``; return it and the offset after it."""
    size = len(buf)
    stack: list = []
    kind: int | None = None
    items: list = []
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
                value = buf[off + 5 : end].decode("utf-8", "surrogatepass")
                off = end
            elif tag == T_LIST or tag == T_TUPLE or tag == T_DICT:
                if len(stack) >= MAX_DEPTH:
                    raise _Fail(f"containers nest deeper than {MAX_DEPTH} levels")
                count = _u32(buf, off + 1)[0] * (2 if tag == T_DICT else 1)
                off += 5
                if count:
                    if count > size - off:
                        raise _Fail(f"a container claims {count} values, the record has less")
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
            while True:  # hand the value to its container, closing the finished ones
                if kind is None:
                    return value, off
                items.append(value)
                remaining -= 1
                if remaining:
                    break
                value = _BUILD[kind](items)
                kind, items, remaining = stack.pop()
    except _BAD_INPUT as e:
        if isinstance(e, DecodeError):
            raise
        if isinstance(e, _Fail):
            raise _decode_error(str(e), start) from None
        if isinstance(e, (struct.error, IndexError)):
            raise _decode_error("the record is truncated", start) from None
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


_FAST_FAIL = (_Fail, struct.error, IndexError, UnicodeDecodeError, TypeError)


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
        if t is tuple or t is list:  # fast path: a packed sequence is the whole record
            packed = _encode_packed(instance, t, True)
            if packed is not None:
                return packed
        out = [_F1]
        try:
            _encode_into(instance, out)
        except struct.error:
            raise EncodeError(
                "a str, bytes or container is too long for recprep (limit 2**32-1 bytes or "
                "items); split it"
            ) from None
        return b"".join(out)

    def decode(self, record: bytes | memoryview, *, allow_pickle: bool = False) -> Any:
        """Return the value held by ``record`` (a pickled part only if ``allow_pickle``)."""
        buf = record if type(record) is bytes else memoryview(record).tobytes()
        try:  # fast path: a whole-record packed tuple whose decoder exists
            head, fn = _LAST_TOP[0]
            if buf.startswith(head):
                value, off = fn(buf, len(head))
                if off == len(buf):
                    return value
            elif buf[1] == T_PTUPLE and buf[0] == FORMAT_TAG:
                p = 6 + _u32(buf, 2)[0]
                fn = _TUPLE_DECODERS.get(buf[6:p])
                if fn is not None:
                    value, off = fn(buf, p)
                    if off == len(buf):
                        _LAST_TOP[0] = (buf[:p], fn)
                        return value
        except _FAST_FAIL:
            pass  # the general path below says what is wrong
        if not buf:
            raise DecodeError("the record is empty; a recprep record is at least 2 bytes")
        if buf[0] != FORMAT_TAG:
            raise _not_recprep(buf[0])
        value, off = _decode_value(buf, 1, allow_pickle)
        if off != len(buf):
            raise _decode_error(f"{len(buf) - off} trailing byte(s) after the value", off)
        return value
