"""The *layout* of a ``"recprep"`` record: what every record of its shape shares, and where
each value sits.

:func:`layout_of` walks a chunk's first record (with its decoded value) into a
:class:`Layout`: the bytes every record of that shape shares (format byte, tags, counts,
packed codes, dict keys, array headers) and where each value sits (fixed-width fields, and
``u32``-sized str/bytes), as operations run over all records at once;
:func:`layout_segments` cuts them at each sized value. What the walk can't follow (lists,
sets, named tuples, pickles, 0-d or empty arrays...) gives no layout.
:mod:`~recprep.codecs.recprep.columns` checks every record of a chunk against the layout
and cuts their values out.

>>> from recprep.codecs.recprep import RecprepCodec
>>> record = RecprepCodec().encode({"a": 1, "b": "xy"})
>>> lay = layout_of(record, {"a": 1, "b": "xy"})
>>> lay.template, lay.kinds
(('dict', ('a', 'b'), (('leaf', 0), ('leaf', 1))), ['int', 'str'])
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .arrays import ARRAY_HEADS, ND_KINDS, read_dtype
from .decode import decode_value
from .wire import (
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
    u32,
)

__all__ = ["Layout", "layout_of", "layout_program", "layout_segments"]

_FIXED = {T_INT: ("int", "<i8"), T_FLOAT: ("float", "<f8"), T_COMPLEX: ("complex", "<c16")}
_PACKED = {ord("?"): ("bool", "|u1", 1), ord("q"): ("int", "<i8", 8),
           ord("d"): ("float", "<f8", 8), ord("s"): ("str", None, 4),
           ord("y"): ("bytes", None, 4)}


class _NoLayout(Exception):
    """Internal: the first record holds something columns don't cover."""


class Layout:
    """Operations run over all records: ``("const", bytes)``, ``("fixed", slot, size,
    dtype, shape, order, kind)``, ``("tagbool", slot)``, ``("none", slot)``, ``("len",
    lslot)``, ``("data", slot, lslot, is_str)``; a template of the value's structure
    (``("leaf", slot)``, ``("tuple", templates)``, ``("dict", keys, templates)``), each
    leaf's kind, and a signature (template and kinds) that tells layouts apart. What the
    column cutter learns of it once is kept on it (``segments``, ``rowwise``,
    ``program``)."""

    def __init__(self) -> None:
        self.ops: list[tuple] = []
        self.slots = 0
        self.lslots = 0
        self.kinds: list[Any] = []
        self.template: Any = None
        self.signature: Any = None
        self.segments: list[tuple[int, list, list, tuple | None]] | None = None
        self.rowwise: bool | None = None
        self.program: tuple[np.ndarray, bytes] | None = None
        self.arrow_schema: Any = None  # (type ids, record batch schema) of its chunks

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


def _walk(buf: bytes, off: int, value: Any, lay: Layout) -> tuple[Any, int]:
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
        return ("leaf", slot), off + 5 + u32(buf, off + 1)[0]
    if tag in (T_TUPLE, T_DICT):
        return _walk_container(buf, off, value, lay, tag)
    if tag in (T_PTUPLE, T_PDICT):
        return _walk_packed(buf, off, value, lay, tag)
    if tag in (T_NDARRAY, T_NPSCALAR):
        return _walk_numpy(buf, off, lay, tag)
    raise _NoLayout


def _walk_container(buf: bytes, off: int, value: Any, lay: Layout, tag: int
                    ) -> tuple[Any, int]:
    """A plain tuple or dict (tags 0x0B, 0x0C): its items, walked one by one (a dict's
    keys are shared bytes)."""
    count = u32(buf, off + 1)[0]
    if not count or type(value) is not (tuple if tag == T_TUPLE else dict):
        raise _NoLayout
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


def _walk_numpy(buf: bytes, off: int, lay: Layout, tag: int) -> tuple[Any, int]:
    """A numpy array (not 0-d, not empty) or scalar: shared header, fixed-width data."""
    if tag == T_NPSCALAR:
        dt, p = read_dtype(buf, off + 1, "biufc")
        lay.const(buf[off:p])
        slot = lay.leaf(("np", dt.str))
        lay.ops.append(("fixed", slot, dt.itemsize, dt, (), False, "np"))
        return ("leaf", slot), p + dt.itemsize
    dt, p = read_dtype(buf, off + 1, ND_KINDS)
    ndim, order = buf[p], buf[p + 1]
    if not 0 < ndim <= 64 or order > 1:
        raise _NoLayout
    *shape, nbytes = ARRAY_HEADS[ndim].unpack_from(buf, p)[2:]
    end = p + ARRAY_HEADS[ndim].size
    if not nbytes or math.prod(shape) * dt.itemsize != nbytes:
        raise _NoLayout
    lay.const(buf[off:end])
    slot = lay.leaf(("nd", dt.str, tuple(shape), order))
    lay.ops.append(("fixed", slot, nbytes, dt, tuple(shape), bool(order), "nd"))
    return ("leaf", slot), end + nbytes


def _walk_packed(buf: bytes, off: int, value: Any, lay: Layout, tag: int
                 ) -> tuple[Any, int]:
    """A packed tuple or dict (tags 0x0E, 0x0F): fixed-width fields, then the str/bytes
    data (a dict's keys are shared bytes)."""
    is_dict = tag == T_PDICT
    n = u32(buf, off + 1)[0] * (2 if is_dict else 1)
    if not n or type(value) is not (dict if is_dict else tuple):
        raise _NoLayout
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
                sized.append((u32(buf, p)[0], -1, False, u32(buf, p)[0]))
                end += u32(buf, p)[0]
        elif dt is None:
            slot = lay.leaf(kind)
            end += u32(buf, p)[0]
            sized.append((lay.length(), slot, kind == "str", u32(buf, p)[0]))
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


def layout_of(first: bytes, value: Any) -> Layout | None:
    """The layout of the record ``first``, whose decoded value is ``value``; None where
    the walk can't follow it (the chunk is then decoded record by record)."""
    lay = Layout()
    try:
        lay.const(first[:1])
        lay.template, _ = _walk(first, 1, value, lay)
    except Exception:  # anything the walk can't follow: record by record
        return None
    lay.signature = (lay.template, tuple(lay.kinds))
    return lay


def layout_segments(lay: Layout) -> list[tuple[int, list, list, tuple | None]]:
    """The layout's operations cut at each sized value: per segment, its width, the
    bytes every record must hold there (``(offset, bytes as uint8)`` runs), the
    operations with their offset in it, and the sized value that ends it (None for the
    last)."""
    if lay.segments is not None:
        return lay.segments
    segments: list[tuple[int, list, list, tuple | None]] = []
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
    lay.segments = segments
    return segments


#: in a layout program: a segment followed by no sized value
NO_DATA = 0xFFFFFFFF


def layout_program(lay: Layout) -> tuple[np.ndarray, bytes]:
    """The layout's segments as the C kernel ``walk_layout`` reads them
    (:mod:`recprep._core.native`): uint32 values ``segments, length slots``, then per
    segment ``width, runs, (offset, length, at) * runs, lens, (offset, slot) * lens,
    data slot`` — and the bytes the runs are ``at`` in.

    >>> from recprep.codecs.recprep import RecprepCodec
    >>> lay = layout_of(RecprepCodec().encode(("ab", 1)), ("ab", 1))
    >>> program, consts = layout_program(lay)  # "ab" comes after the packed 1
    >>> program.tolist(), consts.hex(" ")
    ([2, 1, 20, 1, 0, 8, 0, 1, 8, 0, 0, 0, 0, 0, 4294967295], 'f1 0e 02 00 00 00 73 71')
    """
    if lay.program is not None:
        return lay.program
    words: list[int] = [0, lay.lslots]
    consts: list[bytes] = []
    at = 0
    for width, runs, ops, data in layout_segments(lay):
        words += [width, len(runs)]
        for offset, want in runs:
            words += [offset, len(want), at]
            consts.append(want.tobytes())
            at += len(want)
        lens = [(offset, op[1]) for op, offset in ops if op[0] == "len"]
        words.append(len(lens))
        for offset, slot in lens:
            words += [offset, slot]
        words.append(NO_DATA if data is None else data[2])
        words[0] += 1
    lay.program = (np.array(words, np.uint32), b"".join(consts))
    return lay.program
