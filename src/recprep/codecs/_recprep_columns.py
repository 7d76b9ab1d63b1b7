"""A whole chunk of ``"recprep"`` records decoded at once into columns (numpy, no per-record call).

The first record is walked once into a *layout*: the bytes every record of that shape
shares (format byte, tags, counts, packed codes, dict keys, array headers) and where each
value sits (fixed-width fields, and ``u32``-sized str/bytes). Every record of the chunk is
then checked against the layout at once — shared bytes equal, ``True``/``False`` tags
valid, sizes within the record, nothing left over — and the values are cut out as strided
views of the joined records. A layout that every record passes decodes each one exactly
as :meth:`RecprepCodec.decode` would, so anything else (mixed layouts, damage, pickles,
named tuples, lists, sets, 0-d or empty arrays, non-UTF-8 strings) gives ``None``: the
caller decodes record by record, which raises where it should.

>>> from recprep.codecs.recprep import RecprepCodec
>>> codec = RecprepCodec()
>>> cols = decode_columns([codec.encode((i, float(i), "w" * i)) for i in range(5)], codec.decode)
>>> cols.tree
(array([0, 1, 2, 3, 4]), array([0., 1., 2., 3., 4.]), array(['', 'w', 'ww', 'www', \
'wwww'], dtype=object))
>>> decode_columns([codec.encode((1, 2)), codec.encode((1, "2"))], codec.decode) is None  # mixed
True
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from ..batching import Columns
from ._recprep_base import (
    FORMAT_TAG,
    T_BYTES,
    T_COMPLEX,
    T_DICT,
    T_FALSE,
    T_FLOAT,
    T_INT,
    T_NDARRAY,
    T_NONE,
    T_NPSCALAR,
    T_PDICT,
    T_PTUPLE,
    T_STR,
    T_TRUE,
    T_TUPLE,
)
from ._recprep_decode import decode_value
from ._recprep_numpy import ND_KINDS, read_dtype

__all__ = ["decode_columns"]

_u32 = struct.Struct("<I").unpack_from
_SHAPE = [struct.Struct(f"<BB{n}QQ") for n in range(65)]
_FIXED = {T_INT: ("int", "<i8"), T_FLOAT: ("float", "<f8"), T_COMPLEX: ("complex", "<c16")}
_PACKED = {ord("?"): ("bool", "|u1", 1), ord("q"): ("int", "<i8", 8),
           ord("d"): ("float", "<f8", 8), ord("s"): ("str", None, 4),
           ord("y"): ("bytes", None, 4)}
MIN_RECORDS = 4  # fewer: decoding them one by one costs less than a layout check


class _Unsupported(Exception):
    """Internal: the first record holds something columns don't cover."""


class _Layout:
    """Operations run over all records: ``("const", bytes)``, ``("fixed", slot, size,
    dtype, shape, order, kind)``, ``("tagbool", slot)``, ``("len", lslot)``, ``("data",
    slot, lslot, is_str)``; a template of the structure and a signature."""

    def __init__(self) -> None:
        self.ops: list[tuple] = []
        self.slots = 0
        self.lslots = 0
        self.kinds: list[Any] = []

    def const(self, b: bytes) -> None:
        if self.ops and self.ops[-1][0] == "const":
            self.ops[-1] = ("const", self.ops[-1][1] + b)
        else:
            self.ops.append(("const", bytes(b)))

    def leaf(self, kind: Any) -> int:
        self.kinds.append(kind)
        self.slots += 1
        return self.slots - 1

    def length(self) -> int:
        self.ops.append(("len", self.lslots))
        self.lslots += 1
        return self.lslots - 1


def _walk(buf: bytes, off: int, value: Any, lay: _Layout) -> tuple[Any, int]:
    """Add the value at ``off`` (decoded: ``value``) to ``lay``; its template and end."""
    tag = buf[off]
    if tag == T_NONE:
        lay.const(buf[off : off + 1])
        slot = lay.leaf("none")
        lay.ops.append(("none", slot))
        return ("leaf", slot), off + 1
    if tag in (T_FALSE, T_TRUE):
        slot = lay.leaf("bool")
        lay.ops.append(("tagbool", slot))
        return ("leaf", slot), off + 1
    if tag in _FIXED:
        kind, name = _FIXED[tag]
        lay.const(buf[off : off + 1])
        slot = lay.leaf(kind)
        size = np.dtype(name).itemsize
        lay.ops.append(("fixed", slot, size, np.dtype(name), (), False, kind))
        return ("leaf", slot), off + 1 + size
    if tag in (T_STR, T_BYTES):
        lay.const(buf[off : off + 1])
        slot = lay.leaf("str" if tag == T_STR else "bytes")
        lslot = lay.length()
        lay.ops.append(("data", slot, lslot, tag == T_STR))
        return ("leaf", slot), off + 5 + _u32(buf, off + 1)[0]
    if tag in (T_TUPLE, T_DICT):
        count = _u32(buf, off + 1)[0]
        if not count or type(value) is not (tuple if tag == T_TUPLE else dict):
            raise _Unsupported
        lay.const(buf[off : off + 5])
        off += 5
        children = []
        if tag == T_TUPLE:
            for item in value:
                child, off = _walk(buf, off, item, lay)
                children.append(child)
            return ("tuple", tuple(children)), off
        for item in value.values():  # type: ignore[union-attr]
            _, end = decode_value(buf, off, False)
            lay.const(buf[off:end])
            child, off = _walk(buf, end, item, lay)
            children.append(child)
        return ("dict", tuple(value), tuple(children)), off
    if tag in (T_PTUPLE, T_PDICT):
        return _walk_packed(buf, off, value, lay, tag)
    if tag == T_NDARRAY:
        dt, p = read_dtype(buf, off + 1, ND_KINDS)
        ndim, order = buf[p], buf[p + 1]
        if not 0 < ndim <= 64 or order > 1:
            raise _Unsupported
        *shape, nbytes = _SHAPE[ndim].unpack_from(buf, p)[2:]
        end = p + _SHAPE[ndim].size
        if not nbytes or math.prod(shape) * dt.itemsize != nbytes:
            raise _Unsupported
        lay.const(buf[off:end])
        slot = lay.leaf(("nd", dt.str, tuple(shape), order))
        lay.ops.append(("fixed", slot, nbytes, dt, tuple(shape), bool(order), "nd"))
        return ("leaf", slot), end + nbytes
    if tag == T_NPSCALAR:
        dt, p = read_dtype(buf, off + 1, "biufc")
        lay.const(buf[off:p])
        slot = lay.leaf(("np", dt.str))
        lay.ops.append(("fixed", slot, dt.itemsize, dt, (), False, "np"))
        return ("leaf", slot), p + dt.itemsize
    raise _Unsupported


def _walk_packed(buf: bytes, off: int, value: Any, lay: _Layout, tag: int
                 ) -> tuple[Any, int]:
    is_dict = tag == T_PDICT
    n = _u32(buf, off + 1)[0] * (2 if is_dict else 1)
    if not n or type(value) is not (dict if is_dict else tuple):
        raise _Unsupported
    codes = buf[off + 5 : off + 5 + n]
    lay.const(buf[off : off + 5 + n])
    p = off + 5 + n
    templates: list[Any] = []
    sized: list[tuple[int, int, bool]] = []  # (lslot or key length, slot or -1, is_str)
    end = p + sum(_PACKED[c][2] for c in codes)  # the end of the fields, in the first record
    for item, code in enumerate(codes):
        kind, dt, size = _PACKED[code]
        if is_dict and item % 2 == 0:  # a key: the same in every record
            lay.const(buf[p : p + size])
            if dt is None:
                sized.append((_u32(buf, p)[0], -1, False))
                end += _u32(buf, p)[0]
        elif dt is None:
            slot = lay.leaf(kind)
            end += _u32(buf, p)[0]
            sized.append((lay.length(), slot, kind == "str"))
            templates.append(("leaf", slot))
        else:
            slot = lay.leaf(kind)
            lay.ops.append(("fixed", slot, size, np.dtype(dt), (), False, kind))
            templates.append(("leaf", slot))
        p += size
    for lslot, slot, is_str in sized:
        if slot < 0:  # a key's bytes: their length is the same in every record
            lay.ops.append(("const", bytes(buf[p : p + lslot])))
            p += lslot
        else:  # a value's: the cursor follows its length, record by record
            lay.ops.append(("data", slot, lslot, is_str))
    if is_dict:
        return ("dict", tuple(value), tuple(templates)), end
    return ("tuple", tuple(templates)), end


def _layout(first: bytes, value: Any) -> _Layout | None:
    lay = _Layout()
    try:
        lay.const(first[:1])
        lay.template, _ = _walk(first, 1, value, lay)  # type: ignore[attr-defined]
    except Exception:  # anything the walk can't follow: record by record
        return None
    lay.signature = (lay.template, tuple(lay.kinds))  # type: ignore[attr-defined]
    return lay


#: the layouts used last (most recent first), tried before walking a chunk's first record
_RECENT: list[_Layout] = []
RECENT_LAYOUTS = 2


def _stacked(dt: np.dtype) -> np.dtype:
    """The dtype ``np.stack`` gives arrays of ``dt`` (non-native byte order: native)."""
    return np.stack([np.zeros(1, dt)]).dtype


def decode_columns(records: list[Any], decode: Callable[[bytes], Any]) -> Columns | None:
    """The records' values as columns, or None where they don't share one layout.

    ``decode`` (the ``"recprep"`` codec's) decodes one record, the first, to learn its
    layout.
    """
    n = len(records)
    if n < MIN_RECORDS:
        return None
    buf = b"".join(records)
    first = bytes(records[0])
    if not first or first[0] != FORMAT_TAG:
        return None
    for recent in _RECENT:  # a layout that every record passes decodes them all exactly
        cols = _run(recent, buf, records, n)
        if cols is not None:
            return cols
    try:
        value = decode(first)
    except Exception:
        return None
    lay = _layout(first, value)
    if lay is None:
        return None
    _RECENT.insert(0, lay)
    del _RECENT[RECENT_LAYOUTS:]
    return _run(lay, buf, records, n)


def _run(lay: _Layout, buf: bytes, records: list[Any], n: int) -> Columns | None:
    u8 = np.frombuffer(buf, np.uint8)
    lens = np.fromiter(map(len, records), np.int64, n)
    ends = np.cumsum(lens)
    starts = ends - lens
    width = int(lens[0])
    uniform = bool((lens == width).all())
    rows = u8.reshape(n, width) if uniform else None
    off = 0
    extra: np.ndarray | None = None  # per record, what sized values moved the cursor
    leaves: list[Any] = [None] * lay.slots
    lengths: list[Any] = [None] * lay.lslots

    def take(size: int) -> np.ndarray | None:
        if rows is not None and extra is None:
            return rows[:, off : off + size] if off + size <= width else None
        pos = starts + off if extra is None else starts + off + extra
        if not (pos + size <= ends).all():
            return None
        if size > 256:
            return np.stack([u8[p : p + size] for p in pos.tolist()])
        return u8[pos[:, None] + np.arange(size)]

    for op in lay.ops:
        name = op[0]
        if name == "const":
            want = op[1]
            got = take(len(want))
            if got is None or not (got == np.frombuffer(want, np.uint8)).all():
                return None
            off += len(want)
        elif name == "fixed":
            _, slot, size, dt, shape, fortran, kind = op
            got = take(size)
            if got is None:
                return None
            leaf = _leaf(got, dt, shape, fortran, kind, n)
            if leaf is None:
                return None
            leaves[slot] = leaf
            off += size
        elif name == "none":
            leaves[op[1]] = [None] * n
        elif name == "tagbool":
            got = take(1)
            if got is None:
                return None
            tags = got[:, 0]
            if not ((tags == T_TRUE) | (tags == T_FALSE)).all():
                return None
            leaves[op[1]] = tags == T_TRUE
            off += 1
        elif name == "len":
            got = take(4)
            if got is None:
                return None
            lengths[op[1]] = np.ascontiguousarray(got).view("<u4")[:, 0].astype(np.int64)
            off += 4
        else:  # data
            _, slot, lslot, is_str = op
            size = lengths[lslot]
            pos = starts + off if extra is None else starts + off + extra
            if not (pos + size <= ends).all():
                return None
            leaf = _strings(u8, pos, size, is_str, n)
            if leaf is None:
                return None
            leaves[slot] = leaf
            extra = size if extra is None else extra + size
    final = starts + off if extra is None else starts + off + extra
    if not (final == ends).all():
        return None
    return Columns(_fill(lay.template, leaves), n,  # type: ignore[attr-defined]
                   lay.signature)  # type: ignore[attr-defined]


def _leaf(got: np.ndarray, dt: np.dtype, shape: tuple, fortran: bool, kind: str, n: int
          ) -> Any:
    if kind == "bool" or dt.kind == "b":  # any byte but 0 is True, as the decoder reads it
        flat = got != 0
    else:
        flat = got.view(dt)
    if dt.kind == "U":
        points = got.view(dt.str[0] + "u4")
        if points.size and points.max() > 0x10FFFF:
            return None
    if kind == "np":
        native = dt.newbyteorder("=")
        return flat[:, 0].astype(native) if native != flat.dtype else flat[:, 0]
    if kind == "nd" and flat.dtype.byteorder == ">" and _stacked(flat.dtype) != flat.dtype:
        flat = flat.astype(_stacked(flat.dtype))  # as np.stack gives them: native order
    if not shape:
        return flat[:, 0]
    if fortran:
        return flat.reshape((n, *shape[::-1])).transpose((0, *range(len(shape), 0, -1)))
    return flat.reshape((n, *shape))


def _strings(u8: np.ndarray, pos: np.ndarray, size: np.ndarray, is_str: bool, n: int
             ) -> np.ndarray | None:
    """An object array of the ``n`` str (or bytes) values at ``pos`` of ``size`` bytes."""
    total = int(size.sum())
    out = np.empty(n, dtype=object)
    if not total:
        out[:] = [""] * n if is_str else [b""] * n
        return out
    placed = np.cumsum(size) - size
    data = u8[np.repeat(pos - placed, size) + np.arange(total)]
    counts = np.bincount(data, minlength=256)[:128 if is_str else 256]
    free = np.flatnonzero(counts == 0)
    if free.size:  # join with a byte no value holds, split in C
        sep = int(free[0])
        joined = np.insert(data, placed[1:], sep).tobytes()
        try:
            parts: list[Any] = (joined.decode("utf-8", "surrogatepass").split(chr(sep))
                                if is_str else joined.split(bytes((sep,))))
        except UnicodeDecodeError:
            return None
    else:
        blob = data.tobytes()
        cuts = placed.tolist() + [total]
        try:
            parts = [blob[a:b].decode("utf-8", "surrogatepass") if is_str else blob[a:b]
                     for a, b in zip(cuts, cuts[1:], strict=False)]
        except UnicodeDecodeError:
            return None
    if len(parts) != n:
        return None
    out[:] = parts
    return out


def _fill(template: Any, leaves: list[Any]) -> Any:
    if template[0] == "leaf":
        return leaves[template[1]]
    if template[0] == "tuple":
        return tuple(_fill(t, leaves) for t in template[1])
    return {k: _fill(t, leaves) for k, t in zip(template[1], template[2], strict=True)}
