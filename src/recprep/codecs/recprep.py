"""The ``"recprep"`` codec: a typed binary encoding that round-trips exactly.

A record is the format byte :data:`FORMAT_TAG` (``0xF1``) followed by exactly one
value: a one-byte type tag and a body. Python scalars and containers, ``numpy`` arrays
and ``numpy`` scalars have their own tags, matched on the *exact* type, so that type and
value both come back (``-0.0``, NaN payloads, lone surrogates, ``'>i4'`` arrays, Fortran
order...). Anything else, subclasses included, is stored as a pickle, which is decoded
only with ``allow_pickle=True``. Tuples, lists and dicts holding only ``bool``/``int``/
``float``/``str``/``bytes`` are *packed*: one struct holds all their fixed-width fields.
The byte-level format is specified in ``docs/format.md``.

Encoding and decoding are iterative (nesting costs no Python stack), and packed
containers run through code generated once per item signature, which keeps this
pure-Python codec within reach of ``pickle``'s C speed.

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

from ..errors import REMEDY, DecodeError, EncodeError, PickleRefusedError, Remedy
from .base import Codec

__all__ = ["FORMAT_TAG", "MAX_DEPTH", "RecprepCodec"]

#: the first byte of every record: 0xF0 | format version 1
FORMAT_TAG = 0xF1
#: containers nested deeper than this are refused (EncodeError / DecodeError)
MAX_DEPTH = 1000

# value tags (see docs/format.md)
T_NONE, T_FALSE, T_TRUE, T_INT, T_BIGINT, T_FLOAT, T_COMPLEX, T_STR = range(8)
T_BYTES, T_BYTEARRAY, T_LIST, T_TUPLE, T_DICT, T_PLIST, T_PTUPLE, T_PDICT = range(8, 16)
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
_CACHE_ITEMS = 1024  # packed containers of more items get no cached plan
_GEN_ITEMS = 64  # packed containers of up to this many items get generated code


class _Fail(Exception):
    """Internal: a malformed record; the message becomes a DecodeError's."""


def _cache_put(cache: dict, key: Any, value: Any) -> Any:
    if len(cache) >= _CACHE_MAX:
        cache.clear()
    cache[key] = value
    return value


def _compile(lines: list[str], name: str, namespace: dict) -> Callable:
    exec("\n".join(lines), namespace)  # only our identifiers: no data reaches the source
    return namespace[name]


# ------------------------------------------------------------------ packed containers
# Body: u32 count, one code per item (dicts: key, value, key, value...), one struct of
# the fixed-width fields (a u32 length for str/bytes), then the str/bytes data in order.

_PACKED_TAG = {tuple: T_PTUPLE, list: T_PLIST, dict: T_PDICT}
_CODE_OF = {bool: "?", int: "q", float: "d", str: "s", bytes: "y"}
_FIELD_OF_CODE = bytes.maketrans(b"?qdsy", b"?qdII")


def _fields(codes: bytes) -> struct.Struct:
    fields = codes.translate(_FIELD_OF_CODE)
    if fields.count(fields[:1]) == len(fields):  # homogeneous: '784d', not 784 letters
        fields = b"%d%c" % (len(fields), fields[0])
    return struct.Struct(b"<" + fields)


def _new_encoder(t: type, types: tuple[type, ...]) -> tuple:
    """Cache and return ``(encode, prefix, prefix_with_format_tag)`` for item ``types``.

    A dict's ``types`` are its keys' then its values'; its items are key, value, key...
    """
    key = types
    if t is dict:
        half = len(types) // 2
        key = tuple(chain.from_iterable(zip(types[:half], types[half:], strict=True)))
    try:
        if not key:
            raise KeyError  # (), [] and {} take the plain container form
        if len(set(key)) == 1:
            codes = _CODE_OF[key[0]] * len(key)
        else:
            codes = "".join(map(_CODE_OF.__getitem__, key))
    except KeyError:
        plan: tuple = (None, b"", b"")
    else:
        pack, n = _fields(codes.encode()).pack, len(key)
        var = [i for i, c in enumerate(codes) if c in "sy"] if "s" in codes or "y" in codes else []
        fn: Callable[..., Any]
        if n > _GEN_ITEMS:
            fn = partial(_enc_packed_long, pack, var, t is dict)
        else:
            fn = _gen_encoder(key, pack, t is dict)
        prefix = _pack_tag_u32(_PACKED_TAG[t], n // 2 if t is dict else n) + codes.encode()  # type: ignore[index]
        plan = (fn, prefix, _F1 + prefix)
    if len(key) > _CACHE_ITEMS:
        return plan
    return _cache_put(_EPLANS[t], types, plan)


def _gen_encoder(key: tuple[type, ...], pack: Callable, is_dict: bool) -> Callable:
    """Generate ``enc(x, head)``: the packed form of ``x``, None if its types aren't ``key``.

    The type check lets callers try the plan used last for a container of the same length
    without computing ``key``.
    """
    n = len(key)
    if is_dict:
        targets = ", ".join(f"(a{i}, a{i + 1})" for i in range(0, n, 2)) + ", = x.items()"
    else:
        targets = ", ".join(f"a{i}" for i in range(n)) + ", = x"
    lines = ["def enc(x, head):", f"    {targets}"]
    lines.append("    if " + " or ".join(f"type(a{i}) is not T{i}" for i in range(n)) + ":")
    lines.append("        return None")
    var = [i for i, t in enumerate(key) if t is str or t is bytes]
    lines += [f"    a{i} = a{i}.encode('utf-8', 'surrogatepass')" for i in var if key[i] is str]
    args = ", ".join(f"len(a{i})" if i in var else f"a{i}" for i in range(n))
    tails = "".join(f", a{i}" for i in var)
    lines.append(f"    return b''.join((head, pack({args}){tails}))")
    return _compile(lines, "enc", {"pack": pack, **{f"T{i}": t for i, t in enumerate(key)}})


def _enc_packed_long(pack: Callable, var: list[int], is_dict: bool, x: Any, head: bytes) -> bytes:
    vals = list(chain.from_iterable(x.items())) if is_dict else list(x)
    pieces = [head, b""]
    for i in var:
        b = vals[i]
        if type(b) is str:
            b = b.encode("utf-8", "surrogatepass")
        vals[i] = len(b)
        pieces.append(b)
    pieces[1] = pack(*vals)
    return b"".join(pieces)


_EPLANS: dict[type, dict[tuple[type, ...], tuple]] = {tuple: {}, list: {}, dict: {}}
# the generated plan used last for each container length, tried first
_RECENT: dict[type, list] = {t: [None] * (_GEN_ITEMS + 1) for t in (tuple, list, dict)}


def _encode_packed(x: Any, t: type, top: bool) -> bytes | None:
    """The packed form of ``x`` (after the format tag if ``top``), or None."""
    n = len(x)
    try:
        if n <= _GEN_ITEMS:
            plan = _RECENT[t][n]
            if plan is not None:
                b = plan[0](x, plan[2] if top else plan[1])
                if b is not None:
                    return b
        key = (*map(type, x), *map(type, x.values())) if t is dict else tuple(map(type, x))
        plan = _EPLANS[t].get(key) or _new_encoder(t, key)
        if plan[0] is None:
            return None
        if len(key) <= _GEN_ITEMS:
            _RECENT[t][n] = plan
        return plan[0](x, plan[2] if top else plan[1])
    except struct.error:  # an int beyond int64, or too long: the plain form
        return None


def _new_decoder(codes: bytes, n: int, tag: int) -> Callable[[bytes, int], tuple[Any, int]]:
    """Cache and return the decoder of the packed fields of items ``codes``."""
    if len(codes) != n:
        raise _Fail("truncated packed container")
    if not codes or codes.translate(None, b"?qdsy"):
        raise _Fail(f"bad packed item codes {codes[:16]!r}")
    fields = _fields(codes)
    var = []
    if b"s" in codes or b"y" in codes:
        var = [(i, c == 115) for i, c in enumerate(codes) if c in b"sy"]
    fn: Callable[..., Any]
    if n > _GEN_ITEMS:
        fn = partial(_dec_packed_long, fields.unpack_from, fields.size, var, tag)
    else:
        names = ", ".join(f"a{i}" for i in range(n))
        lines = ["def dec(buf, off):", f"    {names}, = unpack(buf, off)"]
        lines.append(f"    p = off + {fields.size}")
        for i, is_str in var:
            conv = ".decode('utf-8', 'surrogatepass')" if is_str else ""
            lines.append(f"    e = p + a{i}\n    a{i} = buf[p:e]{conv}\n    p = e")
        lines.append("    if p > len(buf):\n        raise Fail('truncated packed container')")
        if tag == T_PDICT:
            value = "{" + ", ".join(f"a{i}: a{i + 1}" for i in range(0, n, 2)) + "}"
        else:
            value = f"({names},)" if tag == T_PTUPLE else f"[{names}]"
        lines.append(f"    return {value}, p")
        fn = _compile(lines, "dec", {"unpack": fields.unpack_from, "Fail": _Fail})
    if n > _CACHE_ITEMS:
        return fn
    return _cache_put(_DPLANS[tag], codes, fn)


def _dec_packed_long(unpack: Callable, size: int, var: list, tag: int, buf: bytes,
                     off: int) -> tuple[Any, int]:
    vals = list(unpack(buf, off))
    p = off + size
    for i, is_str in var:
        e = p + vals[i]
        vals[i] = buf[p:e].decode("utf-8", "surrogatepass") if is_str else buf[p:e]
        p = e
    if p > len(buf):
        raise _Fail("truncated packed container")
    return _BUILD[tag - 3](vals), p  # T_PLIST - 3 == T_LIST...


_DPLANS: dict[int, dict[bytes, Callable]] = {T_PLIST: {}, T_PTUPLE: {}, T_PDICT: {}}


def _no_decoder(buf: bytes, off: int) -> tuple[Any, int]:
    raise _Fail("a packed tuple of 0 items")


# (header, decoder) of the whole-record packed container decoded last, tried first
_LAST_TOP: list[tuple[bytes, Callable]] = [(b"\xf1\x0e\x00\x00\x00\x00", _no_decoder)]


# ------------------------------------------------------------------ other encoders


def _enc_sized(tag: int, to_bytes: Callable[[Any], Any] | None = None) -> Callable:
    def enc(x: Any, out: list) -> None:
        b = to_bytes(x) if to_bytes else x
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


_ND_KINDS = "biufcmMUS"
_DT_BODY: dict[int, tuple[np.dtype, bytes | None]] = {}  # id(dtype) -> (dtype, body)


def _dtype_body(dt: np.dtype) -> bytes | None:
    """u8 length + ``dt.str``, or None if ``dt`` can't be rebuilt from that (pickle it).

    ``np.longlong``/``np.ulonglong`` come back as ``np.int64``/``np.uint64``, as they do
    from numpy's own pickles: ``dt.str`` doesn't tell them apart.
    """
    hit = _DT_BODY.get(id(dt))  # dt.str costs ~0.3 us: cache by identity (dt kept alive)
    if hit is not None and hit[0] is dt:
        return hit[1]
    body = None
    if (dt.kind in _ND_KINDS and dt.fields is None and dt.subdtype is None and dt.itemsize
            and dt.metadata is None):
        text = dt.str.encode("ascii")
        body = bytes((len(text),)) + text
    return _cache_put(_DT_BODY, id(dt), (dt, body))[1]


def _enc_ndarray(a: np.ndarray, out: list) -> None:
    body = _dtype_body(a.dtype)
    if body is None:
        return _enc_pickle(a, out)
    if a.flags.c_contiguous:
        order, data = 0, a
    elif a.flags.f_contiguous:
        order, data = 1, a.T  # C-contiguous, its bytes in a's Fortran order
    else:
        order, data = 0, np.ascontiguousarray(a)
    out.append(b"\x10" + body + _SHAPE[a.ndim].pack(a.ndim, order, *a.shape, a.nbytes))
    out.append(data)  # join reads the array's buffer: no intermediate copy


_SCALAR_HEAD: dict[type, bytes] = {}  # numpy scalar type -> tag + dtype (not datetimes)


def _enc_npscalar(x: np.generic, out: list) -> None:
    head = _SCALAR_HEAD.get(type(x))
    if head is None:
        body = _dtype_body(x.dtype)
        if body is None:
            return _enc_pickle(x, out)
        head = b"\x11" + body
    out.append(head)
    out.append(x)  # numpy scalars export their bytes as a buffer


_ENCODERS: dict[type, Callable[[Any, list], None]] = {
    type(None): lambda x, out: out.append(b"\x00"),
    bool: lambda x, out: out.append(b"\x02" if x else b"\x01"),
    complex: lambda x, out: out.append(_TAG_DD.pack(T_COMPLEX, x.real, x.imag)),
    bytes: _enc_sized(T_BYTES),
    bytearray: _enc_sized(T_BYTEARRAY),
    np.bytes_: _enc_sized(T_NPBYTES),
    np.str_: _enc_sized(T_NPSTR, lambda s: s.encode("utf-8", "surrogatepass")),
    np.ndarray: _enc_ndarray,
}
for _t in set(np.sctypeDict.values()):
    if issubclass(_t, np.generic) and _t not in _ENCODERS and _t not in (np.void, np.object_):
        _ENCODERS[_t] = _enc_npscalar
        _body = _dtype_body(np.dtype(_t))
        # datetimes: the dtype depends on the value. None: a type another package put in
        # numpy's table (ml_dtypes' bfloat16, imported by TensorFlow) that dtype.str can't
        # rebuild; such scalars take the pickle fallback.
        if _t not in (np.datetime64, np.timedelta64) and _body is not None:
            _SCALAR_HEAD[_t] = b"\x11" + _body


def _too_deep() -> EncodeError:
    return EncodeError(
        f"the value nests containers deeper than {MAX_DEPTH} levels (or contains itself)"
    )


def _encode_into(value: Any, out: list) -> None:
    """Append the pieces of ``value`` to ``out``; iterative, so depth costs no stack."""
    append = out.append
    stack: list = []
    it = iter((value,))
    while True:
        for x in it:
            t = type(x)
            if t is int:
                try:
                    append(_TAG_Q.pack(T_INT, x))
                except struct.error:
                    append(_enc_bigint(x))
            elif t is str:
                b = x.encode("utf-8", "surrogatepass")
                append(_pack_tag_u32(T_STR, len(b)))
                append(b)
            elif t is float:
                append(_TAG_D.pack(T_FLOAT, x))
            elif t is tuple or t is list or t is dict:
                if len(stack) >= MAX_DEPTH:
                    raise _too_deep()
                packed = _encode_packed(x, t, False)
                if packed is not None:
                    append(packed)
                    continue
                append(_pack_tag_u32(_PACKED_TAG[t] - 3, len(x)))  # type: ignore[index]
                stack.append(it)
                it = chain.from_iterable(x.items()) if t is dict else iter(x)
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
    if end > len(buf):
        raise _Fail("truncated dtype string")
    text = buf[off + 1 : end]
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
    if math.prod(shape) * dt.itemsize != nbytes:  # Python ints: no overflow
        raise _Fail(f"an array of shape {tuple(shape)} and dtype {dt.str} isn't {nbytes} bytes")
    end = p + nbytes
    if end > len(buf):
        raise _Fail(f"array data needs {nbytes} bytes, the record has {len(buf) - p}")
    o: Any = "F" if order else "C"
    if nbytes == 0:
        return np.empty(shape, dt, order=o), end
    flat = np.frombuffer(buf, dt, math.prod(shape), p)
    return flat.reshape(shape, order=o).copy(order=o), end  # writable, owns its data


# dtype string -> (unpack, numpy type, size) where ``type(unpacked)`` is exact
_SCALAR_FAST: dict[bytes, tuple[Callable, type, int]] = {}
for _code in "?bBhHiIqQd":
    _s, _text = struct.Struct("<" + _code), np.dtype("<" + _code).str
    _SCALAR_FAST[_text.encode()] = (_s.unpack_from, np.dtype(_text).type, _s.size)


def _dec_npscalar(buf: bytes, off: int) -> tuple[np.generic, int]:
    p = off + 2 + buf[off + 1]
    fast = _SCALAR_FAST.get(buf[off + 2 : p])
    if fast is not None:
        return fast[1](fast[0](buf, p)[0]), p + fast[2]
    dt, p = _read_dtype(buf, off + 1, "biufcmM")
    end = p + dt.itemsize
    if end > len(buf):
        raise _Fail("truncated numpy scalar")
    return np.ndarray((), dt, buf, p)[()], end


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


def _build_dict(items: list) -> dict:
    it = iter(items)
    return dict(zip(it, it, strict=True))


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
_DECODERS[T_NDARRAY] = _dec_ndarray
_DECODERS[T_NPSCALAR] = _dec_npscalar
_DECODERS[T_NPSTR] = _dec_sized(lambda b: np.str_(_str(b)))
_DECODERS[T_NPBYTES] = _dec_sized(np.bytes_)
_DECODERS[T_PICKLE] = _dec_sized(bytes)  # unpickled by _decode_value after the policy check
_BUILD: dict[int, Callable[[list[Any]], Any]] = {
    T_LIST: lambda items: items, T_TUPLE: tuple, T_DICT: _build_dict
}
_EMPTY = {T_LIST: list, T_TUPLE: tuple, T_DICT: dict}
_CONTAINERS = (T_LIST, T_TUPLE, T_DICT, T_PLIST, T_PTUPLE, T_PDICT)
_BAD_INPUT = (_Fail, struct.error, IndexError, UnicodeDecodeError, ValueError, TypeError,
              OverflowError, MemoryError)


def _decode_value(buf: bytes, off: int, allow_pickle: bool) -> tuple[Any, int]:
    """Decode the value at ``off``; return it and the offset after it.

    ``off`` moves only past a value decoded whole, so on failure it is where the bad value
    starts.
    """
    size = len(buf)
    stack: list = []
    kind = remaining = 0  # kind 0: the top level
    items: list = []
    append = items.append
    try:
        while True:
            tag = buf[off]
            if tag == T_INT:
                value = _q(buf, off + 1)[0]
                off += 9
            elif tag == T_STR:
                end = off + 5 + _u32(buf, off + 1)[0]
                if end > size:
                    raise _Fail("truncated string")
                value = buf[off + 5 : end].decode("utf-8", "surrogatepass")
                off = end
            elif tag == T_FLOAT:
                value = _d(buf, off + 1)[0]
                off += 9
            elif T_PLIST <= tag <= T_PDICT:
                if len(stack) >= MAX_DEPTH:
                    raise _Fail(f"containers nest deeper than {MAX_DEPTH} levels")
                n = _u32(buf, off + 1)[0] * (2 if tag == T_PDICT else 1)
                p = off + 5 + n
                codes = buf[off + 5 : p]
                value, off = (_DPLANS[tag].get(codes) or _new_decoder(codes, n, tag))(buf, p)
            else:
                if tag in _CONTAINERS and len(stack) >= MAX_DEPTH:
                    raise _Fail(f"containers nest deeper than {MAX_DEPTH} levels")
                if tag == T_LIST or tag == T_TUPLE or tag == T_DICT:
                    count = _u32(buf, off + 1)[0] * (2 if tag == T_DICT else 1)
                    if count:
                        if count > size - off - 5:
                            raise _Fail(f"a container claims {count} values, the record has less")
                        stack.append((kind, items, remaining))
                        kind, items, remaining = tag, [], count
                        append = items.append
                        off += 5
                        continue
                    value = _EMPTY[tag]()
                    off += 5
                else:
                    dec = _DECODERS[tag]
                    if dec is None:
                        raise _Fail(f"unknown type tag 0x{tag:02x}")
                    if tag == T_PICKLE and not allow_pickle:
                        raise PickleRefusedError()
                    value, end = dec(buf, off)
                    if tag == T_PICKLE:
                        value = _unpickle(value, off)
                    off = end
            if not kind:
                return value, off
            append(value)
            remaining -= 1
            while not remaining:  # close the finished containers
                value = _BUILD[kind](items)
                kind, items, remaining = stack.pop()
                if not kind:
                    return value, off
                append = items.append
                append(value)
                remaining -= 1
    except _BAD_INPUT as e:
        if isinstance(e, DecodeError):
            raise
        if isinstance(e, _Fail):
            raise _decode_error(str(e), off) from None
        if isinstance(e, (struct.error, IndexError)):
            raise _decode_error("the record is truncated", off) from None
        raise _decode_error(f"malformed value ({type(e).__name__}: {e})", off) from None


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
        f"0x{FORMAT_TAG:02x}{REMEDY}",
        remedy=Remedy("codec", "pickle", also=("raw",),
                      effect="if it was written with another codec"),
    )


_FAST_FAIL = (_Fail, struct.error, IndexError, UnicodeDecodeError, TypeError, KeyError)


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
(it looks like a pickle), not 0xf1; pass codec='pickle' or codec='raw' if it was written \
with another codec
    """

    name = "recprep"

    def encode(self, instance: Any) -> bytes:
        """Return the record of ``instance``: ``0xF1`` then the encoded value."""
        t = type(instance)
        if t is tuple or t is list or t is dict:  # fast path: a packed container
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

    def decode_many(self, records: list[bytes], *, allow_pickle: bool = False) -> list[Any]:
        """The values of a chunk's records: whole-record packed containers of the shape
        seen last are decoded with no per-record dispatch; the rest go through ``decode``."""
        out: list[Any] = []
        append = out.append
        decode = self.decode
        head, fn = _LAST_TOP[0]
        start = len(head)
        for record in records:
            if type(record) is bytes and record.startswith(head):
                try:
                    value, off = fn(record, start)
                    if off == len(record):
                        append(value)
                        continue
                except _FAST_FAIL:
                    pass
            append(decode(record, allow_pickle=allow_pickle))
            if _LAST_TOP[0][1] is not fn:  # decode learnt a new shape: use it from now on
                head, fn = _LAST_TOP[0]
                start = len(head)
        return out

    def decode(self, record: bytes | memoryview, *, allow_pickle: bool = False) -> Any:
        """Return the value held by ``record`` (a pickled part only if ``allow_pickle``)."""
        buf = record if type(record) is bytes else memoryview(record).tobytes()
        try:  # fast path: a whole-record packed container whose decoder exists
            head, fn = _LAST_TOP[0]
            if buf.startswith(head):
                value, off = fn(buf, len(head))
                if off == len(buf):
                    return value
            elif buf[0] == FORMAT_TAG and T_PLIST <= buf[1] <= T_PDICT:
                tag = buf[1]
                p = 6 + _u32(buf, 2)[0] * (2 if tag == T_PDICT else 1)
                found = _DPLANS[tag].get(buf[6:p])
                if found is not None:
                    fn = found
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
