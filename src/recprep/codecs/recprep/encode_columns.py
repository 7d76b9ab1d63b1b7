"""A block of rows given as columns, encoded at once by the ``"recprep"`` codec.

The mirror image of :mod:`~recprep.codecs.recprep.columns` (which decodes a chunk into
columns): each row is the dict ``{name: column[i], ...}`` and its record is exactly what
:meth:`RecprepCodec.encode` gives for it, but the records of the whole block are built
by numpy (:mod:`~recprep.codecs.recprep.segments`): the bytes every record shares (format
byte, dict head, keys, tags, array headers), each row's fixed-width values (numpy columns
as their bytes, Python ints/floats packed by numpy, bool tags, equal arrays stacked) and
its str/bytes data. Rows whose values are all ``bool``/``int``/``float``/``str``/``bytes`` take the
packed dict form (tag 0x0F), the others the plain one (tag 0x0C), as ``encode`` does.

A column the block can't encode exactly gives ``None`` (the caller encodes the block row
by row): numpy scalars that ``encode`` pickles or pads (``longdouble``), arrays of
different dtypes or shapes or in Fortran order, ints beyond int64, values of other types
(lists, dicts, datetimes...), rows of which only some would be packed. Columns mixing
supported types (``str`` and ``None``, say) are encoded per type and merged.

>>> from recprep.codecs.recprep import RecprepCodec
>>> codec = RecprepCodec()
>>> columns = {"n": np.arange(3), "s": ["a", None, "ccc"]}
>>> rows = [{"n": n, "s": s} for n, s in zip(columns["n"], columns["s"])]
>>> recprep_encode_columns(columns, 3, codec.encode) == [codec.encode(r) for r in rows]
True
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Mapping
from itertools import repeat
from operator import attrgetter
from typing import Any

import numpy as np

from ..blocks import TypedValues
from .arrays import ARRAY_HEADS, ND_KINDS, dtype_body
from .segments import Segments, merge_rows, ragged_of
from .wire import (
    F1,
    T_BYTES,
    T_DICT,
    T_FLOAT,
    T_INT,
    T_NDARRAY,
    T_NPBYTES,
    T_NPSCALAR,
    T_NPSTR,
    T_PDICT,
    T_STR,
    pack_tag_u32,
)

__all__ = ["recprep_encode_block", "recprep_encode_columns"]

_NONE, _BOOL, _INT, _FLOAT, _STR, _BYTES, _ARRAY, _OTHER = range(8)
_TYPE_ID: dict[type, int] = {type(None): _NONE, bool: _BOOL, int: _INT, float: _FLOAT,
                             str: _STR, bytes: _BYTES, np.ndarray: _ARRAY}
#: the packed item code of each type a packed container holds
_CODE = {_BOOL: b"?", _INT: b"q", _FLOAT: b"d", _STR: b"s", _BYTES: b"y"}
_KEY_TYPES = (str, int, float, bool, bytes)
_U32_MAX = 2**32 - 1


class _BlockNeedsRows(Exception):
    """Internal: the block holds something only ``encode`` does exactly."""


def recprep_encode_columns(columns: Mapping[Any, Any], n: int,
                           encode: Callable[[Any], bytes]) -> list[bytes] | None:
    """The records of the ``n`` rows ``{name: column[i]}``, or None (see the module docs);
    ``encode`` (the codec's) encodes the keys, once each."""
    block = recprep_encode_block(columns, n, encode)
    return None if block is None else block.records()


def recprep_encode_block(columns: Mapping[Any, Any], n: int,
                         encode: Callable[[Any], bytes]) -> Segments | None:
    """:func:`recprep_encode_columns` as the pieces of each record
    (:class:`~recprep.codecs.recprep.segments.Segments`, a
    :class:`~recprep.codecs.blocks.RecordBlock`), not yet laid out: a writer places
    them where its chunks want them.

    >>> from recprep.codecs.recprep import RecprepCodec
    >>> encode = RecprepCodec().encode
    >>> block = recprep_encode_block({"n": np.arange(3)}, 3, encode)
    >>> block.lengths().tolist(), block.records() == recprep_encode_columns(
    ...     {"n": np.arange(3)}, 3, encode)
    ([25, 25, 25], True)
    """
    if not n or not columns or not all(type(k) in _KEY_TYPES for k in columns):
        return None
    try:
        kinds = [_kinds_of_column(values, n) for values in columns.values()]
        packed = _rows_packable(kinds, n)
        if packed.all():
            segments = _packed_dict_segments(columns, kinds, n)
        elif packed.any():
            raise _BlockNeedsRows  # some rows would be packed, others not
        else:
            segments = _plain_dict_segments(columns, kinds, n, encode)
    except (_BlockNeedsRows, OverflowError, struct.error):  # ints beyond int64 among them
        return None
    return segments


#: what a column's values are: ``None`` for a numpy column (its rows are numpy
#: scalars or arrays), else the type id of all of them, or each one's (int8 array)
Kinds = int | np.ndarray | None


def _kinds_of_column(values: Any, n: int) -> Kinds:
    if isinstance(values, np.ndarray):
        return None
    types = values.types if isinstance(values, TypedValues) else set(map(type, values))
    if len(types) == 1:
        return _TYPE_ID.get(types.pop(), _OTHER)
    return np.fromiter(map(_TYPE_ID.get, map(type, values), repeat(_OTHER)), np.int8, n)


def _rows_packable(kinds: list[Kinds], n: int) -> np.ndarray:
    """Which rows ``encode`` writes as a packed dict: those whose values are all
    bool/int/float/str/bytes (none, if a column is a numpy one)."""
    rows = np.ones(n, bool)
    for k in kinds:
        if k is None:
            return np.zeros(n, bool)
        rows &= (k >= _BOOL) & (k <= _BYTES)
    return rows


# ---------------------------------------------------------------------- packed dicts


def _packed_dict_segments(columns: Mapping[Any, Any], kinds: list[Kinds], n: int) -> Segments:
    """Rows of bool/int/float/str/bytes values: the packed dict (tag 0x0F)."""
    codes, fields = [], Segments(n)
    data = Segments(n)
    for (key, values), kind in zip(columns.items(), kinds, strict=True):
        if not isinstance(kind, int):  # a column of two types: the codes differ by row
            raise _BlockNeedsRows
        key_kind = _TYPE_ID[type(key)]
        codes += [_CODE[key_kind], _CODE[kind]]
        if key_kind in (_STR, _BYTES):
            raw = key.encode("utf-8", "surrogatepass") if key_kind == _STR else key
            fields.const(struct.pack("<I", len(raw)))
            data.const(raw)
        else:
            fields.const(struct.pack("<" + _CODE[key_kind].decode(), key))
        if kind in (_STR, _BYTES):
            lengths, raw_values = _text_bytes(values, kind == _STR)
            fields.fixed(_u32s(lengths))
            data.ragged(lengths, raw_values)
        else:
            fields.fixed(_number_bytes(values, kind))
    head = Segments(n)
    head.const(F1 + pack_tag_u32(T_PDICT, len(columns)) + b"".join(codes))
    head.extend(fields)
    head.extend(data)
    return head


# ---------------------------------------------------------------------- plain dicts


def _plain_dict_segments(columns: Mapping[Any, Any], kinds: list[Kinds], n: int,
           encode: Callable[[Any], bytes]) -> Segments:
    """The plain dict (tag 0x0C): each key's encoding, then its value's."""
    out = Segments(n)
    out.const(F1 + pack_tag_u32(T_DICT, len(columns)))
    for (key, values), k in zip(columns.items(), kinds, strict=True):
        out.const(encode(key)[1:])
        out.extend(_numpy_column(values, n) if k is None else _object_column(values, k, n))
    return out


def _numpy_column(values: np.ndarray, n: int) -> Segments:
    """A numpy column: row ``i`` is ``values[i]``, a numpy scalar or a sub-array."""
    out = Segments(n)
    dt = values.dtype
    if dt.char in "gG" or dt.kind not in ND_KINDS:
        raise _BlockNeedsRows  # longdouble padding, objects, structured dtypes
    if values.ndim > 1:
        cell = values[0]
        if cell.flags.f_contiguous and not cell.flags.c_contiguous:
            raise _BlockNeedsRows  # such rows are written in Fortran order: row by row
        out.extend(_arrays(values.dtype, cell.shape, np.ascontiguousarray(values), n))
    elif dt.kind in "US":  # numpy str/bytes scalars (their trailing NULs dropped)
        lengths, raw = _text_bytes(values.tolist(), dt.kind == "U")
        out.const(bytes((T_NPSTR if dt.kind == "U" else T_NPBYTES,)))
        out.fixed(_u32s(lengths))
        out.ragged(lengths, raw)
    else:
        native = dt.newbyteorder("=")
        body = dtype_body(native)
        if body is None:
            raise _BlockNeedsRows
        if dt.kind == "b":  # a scalar is True or False, whatever byte the array held
            data = (values.view(np.uint8) != 0).view(np.uint8)
        else:
            data = np.ascontiguousarray(values, native)
        out.const(bytes((T_NPSCALAR,)) + body)
        out.fixed(data.view(np.uint8).reshape(n, native.itemsize))
    return out


def _arrays(dt: np.dtype, shape: tuple[int, ...], data: np.ndarray, n: int) -> Segments:
    """Rows that are C-ordered arrays of ``dt`` and ``shape``, ``data`` their bytes
    (anything numpy reshapes to ``n`` rows)."""
    body = dtype_body(dt)
    if body is None or dt.char in "gG" or len(shape) > 64:
        raise _BlockNeedsRows  # pickled or padded by encode
    out = Segments(n)
    nbytes = math.prod(shape) * dt.itemsize
    out.const(bytes((T_NDARRAY,)) + body + ARRAY_HEADS[len(shape)].pack(len(shape), 0, *shape,
                                                                    nbytes))
    out.fixed(np.frombuffer(data, np.uint8).reshape(n, nbytes) if isinstance(data, bytes)
              else data.reshape(n, -1).view(np.uint8))
    return out


def _object_column(values: list[Any], kinds: int | np.ndarray, n: int) -> Segments:
    """A column of Python values: each type's rows encoded at once, then merged."""
    if isinstance(kinds, int):
        return _typed(values, kinds, n)
    groups = []
    for kind in np.flatnonzero(np.bincount(kinds, minlength=_OTHER + 1)).tolist():
        rows = np.flatnonzero(kinds == kind)
        part = list(map(values.__getitem__, rows.tolist()))
        groups.append((rows, *ragged_of(_typed(part, kind, len(rows)))))
    out = Segments(n)
    out.ragged(*merge_rows(n, groups))
    return out


def _typed(values: list[Any], kind: int, n: int) -> Segments:
    """Values all of one type (id ``kind``), as ``encode`` writes them."""
    out = Segments(n)
    if kind == _NONE:
        out.const(b"\x00")
    elif kind == _BOOL:
        out.fixed(_number_bytes(values, kind) + np.uint8(1))  # tags 0x01 / 0x02
    elif kind in (_INT, _FLOAT):
        out.const(bytes((T_INT if kind == _INT else T_FLOAT,)))
        out.fixed(_number_bytes(values, kind))
    elif kind in (_STR, _BYTES):
        lengths, raw = _text_bytes(values, kind == _STR)
        out.const(bytes((T_STR if kind == _STR else T_BYTES,)))
        out.fixed(_u32s(lengths))
        out.ragged(lengths, raw)
    elif kind == _ARRAY:
        out.extend(_array_cells(values, n))
    else:
        raise _BlockNeedsRows
    return out


def _array_cells(values: list[np.ndarray], n: int) -> Segments:
    """Arrays of one dtype and shape (else the block goes row by row)."""
    dtypes, ndims = set(map(attrgetter("dtype"), values)), set(map(attrgetter("ndim"), values))
    if len(dtypes) != 1 or len(ndims) != 1:
        raise _BlockNeedsRows
    ((dt,), (ndim,)) = dtypes, ndims
    if ndim == 1:  # (the cheap check: a length is an attribute lookup less than a shape)
        sizes = set(map(len, values))
        shapes: set[tuple[int, ...]] = {(size,) for size in sizes}
    else:
        shapes = set(map(attrgetter("shape"), values))
    if len(shapes) != 1:
        raise _BlockNeedsRows
    (shape,) = shapes
    try:  # C-contiguous arrays export their bytes: joined with no per-array call
        data: Any = b"".join(values)  # type: ignore[arg-type]  # arrays are buffers
    except (BufferError, TypeError, ValueError):  # not C-contiguous, or datetimes
        if ndim > 1 and any(map(attrgetter("flags.f_contiguous"), values)):
            raise _BlockNeedsRows from None  # Fortran order is kept: row by row
        data = np.stack(values, dtype=dt)
    return _arrays(dt, shape, data, n)


def _number_bytes(values: list[Any], kind: int) -> np.ndarray:
    """Python bools, ints or floats as ``(n, width)`` bytes of ``?``, ``<q``, ``<d``."""
    dt = {_BOOL: "|b1", _INT: "<i8", _FLOAT: "<f8"}[kind]
    array = np.array(values, dtype=dt)  # an int beyond int64: OverflowError
    return array.view(np.uint8).reshape(len(values), array.itemsize)


def _u32s(lengths: np.ndarray) -> np.ndarray:
    if len(lengths) and int(lengths.max()) > _U32_MAX:
        raise _BlockNeedsRows  # encode refuses it: the row path says so
    return lengths.astype("<u4").view(np.uint8).reshape(len(lengths), 4)


def _text_bytes(values: list[Any], is_str: bool) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-8 (surrogates kept) or raw bytes of str/bytes ``values``: each one's
    length and all of them back to back."""
    n = len(values)
    if is_str:
        joined = "".join(values)
        if joined.isascii():
            return (np.fromiter(map(len, values), np.int64, n),
                    np.frombuffer(joined.encode("ascii"), np.uint8))
        values = list(map(str.encode, values, repeat("utf-8"), repeat("surrogatepass")))
    return np.fromiter(map(len, values), np.int64, n), np.frombuffer(b"".join(values),
                                                                     np.uint8)
