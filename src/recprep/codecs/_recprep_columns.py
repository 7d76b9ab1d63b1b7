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
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .._core.batching import Columns
from .._core.records import Records
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

__all__ = ["decode_columns", "decode_rows"]

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
    sized: list[tuple[int, int, bool, int]] = []  # (lslot or key length, slot or -1,
    #                                                  is_str, bytes in the first record)
    end = p + sum(_PACKED[c][2] for c in codes)  # the end of the fields, in the first record
    for item, code in enumerate(codes):
        kind, dt, size = _PACKED[code]
        if is_dict and item % 2 == 0:  # a key: the same in every record
            lay.const(buf[p : p + size])
            if dt is None:
                sized.append((_u32(buf, p)[0], -1, False, _u32(buf, p)[0]))
                end += _u32(buf, p)[0]
        elif dt is None:
            slot = lay.leaf(kind)
            end += _u32(buf, p)[0]
            sized.append((lay.length(), slot, kind == "str", _u32(buf, p)[0]))
            templates.append(("leaf", slot))
        else:
            slot = lay.leaf(kind)
            lay.ops.append(("fixed", slot, size, np.dtype(dt), (), False, kind))
            templates.append(("leaf", slot))
        p += size
    for lslot, slot, is_str, size in sized:  # size: in the first record
        if slot < 0:  # a key's bytes: their length is the same in every record
            lay.ops.append(("const", bytes(buf[p : p + lslot])))
        else:  # a value's: the cursor follows its length, record by record
            lay.ops.append(("data", slot, lslot, is_str))
        p += size
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


def decode_columns(records: Sequence[Any], decode: Callable[[bytes], Any]
                   ) -> Columns | None:
    """The records' values as columns, or None where they don't share one layout.

    ``decode`` (the ``"recprep"`` codec's) decodes one record, the first, to learn its
    layout.
    """
    found = _decode(records, decode)
    return None if found is None else found[0]


def _decode(records: Sequence[Any], decode: Callable[[bytes], Any]
            ) -> tuple[Columns, _Layout] | None:
    n = len(records)
    if n < MIN_RECORDS:
        return None
    first = bytes(records[0])
    if not first or first[0] != FORMAT_TAG:
        return None
    if isinstance(records, Records):  # spans of the chunk's payload: nothing is copied
        buf, starts, ends = records.payload, records.starts, records.ends
    else:
        buf = b"".join(records)
        lens = np.fromiter(map(len, records), np.int64, n)
        ends = np.cumsum(lens)
        starts = ends - lens
    for recent in list(_RECENT):  # a layout every record passes decodes them all exactly
        cols = _run(recent, buf, starts, ends, n)
        if cols is not None:
            return cols, recent
    try:
        value = decode(first)
    except Exception:
        return None
    lay = _layout(first, value)
    if lay is None:
        return None
    _RECENT.insert(0, lay)
    del _RECENT[RECENT_LAYOUTS:]
    cols = _run(lay, buf, starts, ends, n)
    return None if cols is None else (cols, lay)


#: leaf kinds whose column gives back the decoded values themselves (``tolist``)
_ROW_KINDS = frozenset({"int", "float", "complex", "bool", "str", "bytes", "none"})


def _rowwise(kind: Any) -> bool:
    """Whether a leaf of this kind gives, row by row, what ``decode`` gives: Python
    values, numpy scalars, and arrays in C order and the machine's byte order (each row
    copied into an array of its own)."""
    if type(kind) is not tuple:
        return kind in _ROW_KINDS
    if kind[0] == "np":
        return True
    return kind[3] == 0 and np.dtype(kind[1]).isnative  # ("nd", dtype, shape, order)


def decode_rows(records: Sequence[Any], decode: Callable[[bytes], Any]) -> list[Any] | None:
    """The records' values — exactly what ``decode`` gives for each — made from their
    columns, or None unless they share one layout of numbers, strings, bytes, ``None``,
    numpy scalars and arrays (C order, native byte order: each row is copied into an
    array of its own, as ``decode`` makes it).

    >>> from recprep.codecs.recprep import RecprepCodec
    >>> codec = RecprepCodec()
    >>> decode_rows([codec.encode({"i": i, "s": "ab"[:i]}) for i in range(4)], codec.decode)
    [{'i': 0, 's': ''}, {'i': 1, 's': 'a'}, {'i': 2, 's': 'ab'}, {'i': 3, 's': 'ab'}]
    """
    found = _decode(records, decode)
    if found is None:
        return None
    cols, lay = found
    rowwise = getattr(lay, "rowwise", None)
    if rowwise is None:
        rowwise = lay.rowwise = all(map(_rowwise, lay.kinds))  # type: ignore[attr-defined]
    if not rowwise:
        return None
    return _rows(cols.tree, lay.template, lay.kinds)  # type: ignore[attr-defined]


def _rows(tree: Any, template: Any, kinds: list[Any]) -> list[Any]:
    """The values of a column tree, one per record (numpy scalars stay numpy, array rows
    are copied out)."""
    if template[0] == "leaf":
        if isinstance(tree, list):
            return tree
        kind = kinds[template[1]]
        if type(kind) is not tuple:
            return tree.tolist()
        return list(tree) if kind[0] == "np" else list(map(np.array, tree))
    if template[0] == "tuple":
        rows = (_rows(t, c, kinds) for t, c in zip(tree, template[1], strict=True))
        return list(zip(*rows, strict=False))  # equal lengths: one row per record
    names = template[1]
    columns = [_rows(tree[k], t, kinds) for k, t in zip(names, template[2], strict=True)]
    return [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=False)]


def _segments(lay: _Layout) -> list[tuple[int, list, list, tuple | None]]:
    """The layout's operations cut at each sized value: per segment, its width, the
    bytes every record must hold there (``(offset, bytes as uint8)`` runs), the
    operations with their offset in it, and the sized value that ends it (None for the
    last)."""
    segments = getattr(lay, "segments", None)
    if segments is not None:
        return segments
    segments = []
    ops: list[tuple[tuple, int]] = []
    consts: list[tuple[int, bytes]] = []
    width = 0

    def close(data: tuple | None) -> None:
        runs = [(at, np.frombuffer(want, np.uint8)) for at, want in consts]
        segments.append((width, runs, list(ops), data))

    for op in lay.ops:
        name = op[0]
        if name == "data":
            close(op)
            ops, consts, width = [], [], 0
            continue
        if name == "const":
            consts.append((width, op[1]))
            width += len(op[1])
            continue
        ops.append((op, width))
        width += {"fixed": op[2] if name == "fixed" else 0, "tagbool": 1, "len": 4,
                  "none": 0}[name]
    close(None)
    lay.segments = segments  # type: ignore[attr-defined]
    return segments


def _run(lay: _Layout, buf: bytes, starts: np.ndarray, ends: np.ndarray, n: int
         ) -> Columns | None:
    """The columns of the ``n`` records ``buf[starts[i]:ends[i]]`` if all pass ``lay``."""
    u8 = np.frombuffer(buf, np.uint8)
    lens = ends - starts
    width = int(lens[0])
    rows = None
    if bool((lens == width).all()):  # one row per record, if they are evenly spaced
        stride = int(starts[1] - starts[0]) if n > 1 else width
        if stride >= width and bool((np.diff(starts) == stride).all()):
            rows = as_strided(u8[int(starts[0]):], (n, width), (stride, 1), writeable=False)
    off = 0
    extra: np.ndarray | None = None  # per record, what sized values moved the cursor
    leaves: list[Any] = [None] * lay.slots
    lengths: list[Any] = [None] * lay.lslots

    def take(size: int) -> np.ndarray | None:
        """The next ``size`` bytes of every record, one row each."""
        if rows is not None and extra is None:
            return rows[:, off : off + size] if off + size <= width else None
        pos = starts + off if extra is None else starts + off + extra
        if not (pos + size <= ends).all():
            return None
        if size > 256:
            return np.stack([u8[p : p + size] for p in pos.tolist()])
        return u8[pos[:, None] + np.arange(size)]

    for size, consts, ops, data in _segments(lay):
        if size:
            got = take(size)
            if got is None or not all(
                    (got[:, at : at + len(want)] == want).all() for at, want in consts):
                return None
            for op, at in ops:
                name = op[0]
                if name == "fixed":
                    _, slot, nbytes, dt, shape, fortran, kind = op
                    leaf = _leaf(got[:, at : at + nbytes], dt, shape, fortran, kind, n)
                    if leaf is None:
                        return None
                    leaves[slot] = leaf
                elif name == "tagbool":
                    tags = got[:, at]
                    if not ((tags == T_TRUE) | (tags == T_FALSE)).all():
                        return None
                    leaves[op[1]] = tags == T_TRUE
                elif name == "len":
                    lengths[op[1]] = np.ascontiguousarray(got[:, at : at + 4]).view(
                        "<u4")[:, 0].astype(np.int64)
                else:  # none
                    leaves[op[1]] = [None] * n
            off += size
        else:
            for op, _ in ops:  # only Nones: no bytes of their own
                leaves[op[1]] = [None] * n
        if data is None:
            break
        _, slot, lslot, is_str = data
        sizes = lengths[lslot]
        pos = starts + off if extra is None else starts + off + extra
        if not (pos + sizes <= ends).all():
            return None
        leaf = _strings(u8, pos, sizes, is_str, n)
        if leaf is None:
            return None
        leaves[slot] = leaf
        extra = sizes if extra is None else extra + sizes
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
