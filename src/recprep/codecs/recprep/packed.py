"""Packed tuples, lists and dicts of ``bool``/``int``/``float``/``str``/``bytes`` (tags 0x0D-0x0F).

Body: ``u32`` count, one code per item (dicts: key, value, key, value...), one struct of
the fixed-width fields (a ``u32`` length for str/bytes), then the str/bytes data in order.

Each item signature (the codes) gets a *plan*. A signature starts with a generic plan (a
``struct`` built for it, plus a loop over its str/bytes items); one used
:data:`PROMOTE` times gets code generated for it, which is several times faster. Generating
code costs ~100 us, so it is also rationed: each compile spends :data:`COMPILE_COST`
credits, and each use of a generic plan earns one. Records crafted with thousands of
distinct signatures therefore decode at the generic speed (a few us each), never at the
cost of a compile each (issue 13 item 11).

>>> dec = packed_decoder(b"qd", 2, 0x0E)
>>> dec(b"\\x01" + bytes(7) + bytes(6) + b"\\xf0\\x3f", 0)
((1, 1.0), 16)
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from functools import partial
from itertools import chain
from typing import Any

from .wire import (
    F1,
    T_PDICT,
    T_PLIST,
    T_PTUPLE,
    Fail,
    build_dict,
    cache_put,
    pack_tag_u32,
    repeated_key,
)

__all__ = ["COMPILE_COST", "LAST_TOP", "PROMOTE", "encode_packed", "packed_decoder"]

CACHE_ITEMS = 1024  # packed containers of more items get no cached plan
GEN_ITEMS = 64  # packed containers of up to this many items may get generated code
#: uses of a signature's generic plan before code is generated for it
PROMOTE = 8
#: credits a compile spends; each use of a generic plan earns one
COMPILE_COST = 64
_CREDIT_MAX = COMPILE_COST * 32
_credit = [_CREDIT_MAX]  # a process starts able to compile 32 signatures at once

PACKED_TAG: dict[type, int] = {tuple: T_PTUPLE, list: T_PLIST, dict: T_PDICT}
_CODE_OF = {bool: "?", int: "q", float: "d", str: "s", bytes: "y"}
_FIELD_OF_CODE = bytes.maketrans(b"?qdsy", b"?qdII")


_BUILD: dict[int, Callable[[list], Any]] = {
    T_PLIST: lambda items: items, T_PTUPLE: tuple, T_PDICT: build_dict
}


def _compile(lines: list[str], name: str, namespace: dict) -> Callable:
    exec("\n".join(lines), namespace)  # only our identifiers: no data reaches the source
    return namespace[name]


def _fields(codes: bytes) -> struct.Struct:
    fields = codes.translate(_FIELD_OF_CODE)
    if fields.count(fields[:1]) == len(fields):  # homogeneous: '784d', not 784 letters
        fields = b"%d%c" % (len(fields), fields[0])
    return struct.Struct(b"<" + fields)


def _may_compile(uses: int) -> bool:
    """Earn a credit for a use of a generic plan; True (and spend the credits) if the plan
    has been used :data:`PROMOTE` times and a compile is affordable."""
    credit = min(_credit[0] + 1, _CREDIT_MAX)
    if uses >= PROMOTE and credit >= COMPILE_COST:
        _credit[0] = credit - COMPILE_COST
        return True
    _credit[0] = credit
    return False


# ------------------------------------------------------------------ encoding


def _new_encoder(t: type, types: tuple[type, ...]) -> tuple:
    """Cache and return the plan ``(encode, prefix, prefix_with_format_tag, generated)``
    of a ``t`` whose items have ``types`` (a dict's: its keys' then its values')."""
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
        plan: tuple = (None, b"", b"", False)
    else:
        pack, n = _fields(codes.encode()).pack, len(key)
        var = [i for i, c in enumerate(codes) if c in "sy"] if "s" in codes or "y" in codes else []
        prefix = pack_tag_u32(PACKED_TAG[t], n // 2 if t is dict else n) + codes.encode()
        fn: Callable[..., Any]
        if n <= GEN_ITEMS:
            fn = _EncodePlan(pack, var, t, types, key, prefix)
        else:
            fn = partial(_enc_packed_long, pack, var, t is dict)
        plan = (fn, prefix, F1 + prefix, False)
    if len(key) > CACHE_ITEMS:
        return plan
    return cache_put(_EPLANS[t], types, plan)


class _EncodePlan:
    """The generic plan of a signature, which generates code for it once used enough.

    (A small object rather than a closure: a signature seen once costs one allocation.)
    """

    __slots__ = ("gen", "key", "pack", "prefix", "t", "types", "uses", "var")

    def __init__(self, pack: Callable, var: list[int], t: type, types: tuple, key: tuple,
                 prefix: bytes) -> None:
        self.pack, self.var, self.t, self.types, self.key = pack, var, t, types, key
        self.prefix, self.uses = prefix, 0
        self.gen: Callable[..., Any] | None = None

    def __call__(self, x: Any, head: bytes) -> bytes | None:
        gen = self.gen
        if gen is not None:
            return gen(x, head)
        self.uses += 1
        if _may_compile(self.uses):
            self.gen = gen = _gen_encoder(self.key, self.pack, self.t is dict)
            cache, prefix = _EPLANS[self.t], self.prefix
            if self.types in cache:
                cache[self.types] = (gen, prefix, F1 + prefix, True)
            return gen(x, head)
        return _enc_packed_long(self.pack, self.var, self.t is dict, x, head)


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
_RECENT_ENCODE_PLANS: dict[type, list] = {t: [None] * (GEN_ITEMS + 1) for t in (tuple, list, dict)}


def encode_packed(x: Any, t: type, top: bool) -> bytes | None:
    """The packed form of ``x`` (after the format tag if ``top``), or None."""
    n = len(x)
    try:
        if n <= GEN_ITEMS:
            plan = _RECENT_ENCODE_PLANS[t][n]
            if plan is not None:
                b = plan[0](x, plan[2] if top else plan[1])
                if b is not None:
                    return b
        key = (*map(type, x), *map(type, x.values())) if t is dict else tuple(map(type, x))
        plan = _EPLANS[t].get(key) or _new_encoder(t, key)
        if plan[0] is None:
            return None
        if plan[3]:
            _RECENT_ENCODE_PLANS[t][n] = plan
        return plan[0](x, plan[2] if top else plan[1])
    except struct.error:  # an int beyond int64, or too long: the plain form
        return None


# ------------------------------------------------------------------ decoding


def packed_decoder(codes: bytes, n: int, tag: int) -> Callable[[bytes, int], tuple[Any, int]]:
    """The (cached) decoder of the packed fields of items ``codes``: ``dec(buf, off)``
    returns the container and the offset after it."""
    found = _DPLANS[tag].get(codes)
    if found is not None:
        return found
    if len(codes) != n:
        raise Fail("truncated packed container")
    if not codes or codes.translate(None, b"?qdsy"):
        raise Fail(f"bad packed item codes {codes[:16]!r}")
    fields = _fields(codes)
    var = []
    if b"s" in codes or b"y" in codes:
        var = [(i, c == 115) for i, c in enumerate(codes) if c in b"sy"]
    if n > GEN_ITEMS:
        fn: Callable[..., Any] = partial(_dec_packed_long, fields.unpack_from, fields.size,
                                         var, tag)
        return fn if n > CACHE_ITEMS else cache_put(_DPLANS[tag], codes, fn)
    return cache_put(_DPLANS[tag], codes,
                     _DecodePlan(fields.unpack_from, fields.size, var, tag, codes))


class _DecodePlan:
    """The generic plan of a signature, which generates code for it once used enough."""

    __slots__ = ("codes", "gen", "size", "tag", "unpack", "uses", "var")

    def __init__(self, unpack: Callable, size: int, var: list, tag: int, codes: bytes) -> None:
        self.unpack, self.size, self.var, self.tag, self.codes = unpack, size, var, tag, codes
        self.uses = 0
        self.gen: Callable[..., Any] | None = None

    def __call__(self, buf: bytes, off: int) -> tuple[Any, int]:
        gen = self.gen
        if gen is not None:
            return gen(buf, off)
        self.uses += 1
        if _may_compile(self.uses):
            tag, codes = self.tag, self.codes
            self.gen = gen = _gen_decoder(len(codes), tag, self.unpack, self.size, self.var)
            cache = _DPLANS[tag]
            if codes in cache:
                cache[codes] = gen
            head = LAST_TOP[0][0]
            if head[1] == tag and head[6:] == codes:
                LAST_TOP[0] = (head, gen)
            return gen(buf, off)
        return _dec_packed_long(self.unpack, self.size, self.var, self.tag, buf, off)


def _gen_decoder(n: int, tag: int, unpack: Callable, size: int, var: list) -> Callable:
    names = ", ".join(f"a{i}" for i in range(n))
    lines = ["def dec(buf, off):", f"    {names}, = unpack(buf, off)"]
    lines.append(f"    p = off + {size}")
    for i, is_str in var:
        conv = ".decode('utf-8', 'surrogatepass')" if is_str else ""
        lines.append(f"    e = p + a{i}\n    a{i} = buf[p:e]{conv}\n    p = e")
    lines.append("    if p > len(buf):\n        raise Fail('truncated packed container')")
    if tag == T_PDICT:
        lines.append("    d = {" + ", ".join(f"a{i}: a{i + 1}" for i in range(0, n, 2)) + "}")
        if n > 2:  # a key twice (damaged or forged): refused, as build_dict does
            keys = ", ".join(f"a{i}" for i in range(0, n, 2))
            lines.append(f"    if len(d) != {n // 2}:\n        raise Fail(repeated_key([{keys}]))")
        lines.append("    return d, p")
    else:
        value = f"({names},)" if tag == T_PTUPLE else f"[{names}]"
        lines.append(f"    return {value}, p")
    return _compile(lines, "dec", {"unpack": unpack, "Fail": Fail,
                                   "repeated_key": repeated_key})


def _dec_packed_long(unpack: Callable, size: int, var: list, tag: int, buf: bytes,
                     off: int) -> tuple[Any, int]:
    vals = list(unpack(buf, off))
    p = off + size
    for i, is_str in var:
        e = p + vals[i]
        vals[i] = buf[p:e].decode("utf-8", "surrogatepass") if is_str else buf[p:e]
        p = e
    if p > len(buf):
        raise Fail("truncated packed container")
    return _BUILD[tag](vals), p


_DPLANS: dict[int, dict[bytes, Callable]] = {T_PLIST: {}, T_PTUPLE: {}, T_PDICT: {}}
#: the decoder cache of each packed tag (code bytes -> decoder)
DPLANS = _DPLANS


def _no_decoder(buf: bytes, off: int) -> tuple[Any, int]:
    raise Fail("a packed tuple of 0 items")


#: (header, decoder) of the whole-record packed container decoded last, tried first
LAST_TOP: list[tuple[bytes, Callable]] = [(b"\xf1\x0e\x00\x00\x00\x00", _no_decoder)]
