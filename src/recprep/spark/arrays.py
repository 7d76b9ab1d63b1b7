"""A chunk's records as Arrow arrays: at once from numpy buffers where the values allow,
record by record where they don't.

The table of :mod:`recprep.spark.codecs` reads each codec's chunks with these:
:func:`example_arrays` parses a chunk of Examples at once
(:func:`~recprep.codecs.example.parse_chunk`), :func:`value_arrays` decodes a chunk of
``recprep`` records at once (``RecprepCodec.decode_columns``); only the requested
columns' values are read. Each column's array is then made without a Python object per
value (:func:`example_array`, :func:`value_array`): numbers become arrays over the parsed
numpy values, byte strings become string/binary arrays over the joined bytes and their
offsets (``pa.Array.from_buffers``), lists become ``ListArray`` over per-record offsets.
Where a column's values don't map this simply — a scalar column with several values in a
record, another list kind, a value that doesn't fit the column's type, text that isn't
UTF-8 — those give ``None`` and that column is read record by record, which gives the
same values, or the error it always gave:

* ``example`` records: a missing feature (or an empty list, for a scalar column) is a
  null; a scalar column whose list holds several values raises
  :class:`~recprep.errors.DecodeError` (read it as an array); ``bytes_list`` values are
  decoded as UTF-8 for string columns.
* ``recprep`` records are ``{column: value}`` dicts; a column a record lacks is a null.

>>> from recprep.codecs.example import ExampleCodec, parse_chunk
>>> from recprep.spark.columns import ColumnSpec
>>> words = [np.array([b"a", b"bc"][: i % 3], dtype=object) for i in range(4)]
>>> records = [ExampleCodec().encode({"w": w, "n": i}) for i, w in enumerate(words)]
>>> parsed = parse_chunk(records)
>>> example_array(ColumnSpec("w", "array<string>"), parsed["w"], 4).to_pylist()
[[], ['a'], ['a', 'bc'], []]
>>> example_array(ColumnSpec("n", "int"), parsed["n"], 4).to_pylist()
[0, 1, 2, 3]
>>> example_array(ColumnSpec("w", "string"), parsed["w"], 4) is None  # 2 values: per record
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from ..codecs import Codec
from ..codecs.example import (
    BYTES,
    FLOATS,
    INTS,
    Values,
    byte_strings,
    parse_chunk,
    run_offsets,
)
from ..errors import DecodeError
from .columns import INTEGRAL, ColumnSpec

__all__ = ["arrow_type", "example_array", "example_arrays", "value_array", "value_arrays"]

_ATOMIC = {
    "tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(), "bigint": pa.int64(),
    "boolean": pa.bool_(), "float": pa.float32(), "double": pa.float64(),
    "string": pa.string(), "binary": pa.binary(), "date": pa.date32(),
}
_LIST_KIND = {"string": BYTES, "binary": BYTES, "float": FLOATS, "double": FLOATS}
#: the numpy kinds of a ``"recprep"`` column whose conversion by a cast is the one
#: ``pa.array`` makes of the Python values (others: record by record)
_VALUE_KINDS = {"i": set(INTEGRAL), "f": {"float", "double"}, "b": {"boolean"}}


def arrow_type(type: str) -> pa.DataType:
    """The Arrow type Spark expects for a column of DDL ``type``.

    >>> arrow_type("array<float>")
    ListType(list<item: float>)
    """
    if type.startswith("array<") and type.endswith(">"):
        return pa.list_(arrow_type(type[6:-1]))
    return _ATOMIC[type]


def _elements(element: str, values: Values, wanted: pa.DataType) -> pa.Array | None:
    """The Arrow array of every value of ``values`` (an Example list's), as ``wanted``."""
    if values.kind == BYTES:
        return byte_strings(values, text=element == "string")
    if not values.kind:
        return pa.array([], wanted)
    flat = np.ascontiguousarray(values.flat())
    if pa.types.is_boolean(wanted):
        return pa.array(flat != 0)
    try:
        return pa.array(flat).cast(wanted)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def example_array(column: ColumnSpec, values: Values | None, n: int) -> pa.Array | None:
    """``column``'s array over ``n`` Example records, from their parsed ``values`` (None:
    no record holds the feature, a column of nulls); None where the records must be read
    one by one (see the module docstring)."""
    wanted = arrow_type(column.type)
    if values is None:
        return pa.nulls(n, wanted)
    if column.depth > 1 or values.kind not in (0, _LIST_KIND.get(column.element, INTS)):
        return None
    counts = values.counts
    if column.depth == 0:
        if (counts > 1).any():
            return None  # the per-record path says which record, and what to do
        present = counts == 1
        if not present.any():
            return pa.nulls(n, wanted)
        found = _elements(column.element, values, wanted)
        if found is None or present.all():
            return found
        places = np.cumsum(present) - 1
        return found.take(pa.array(places, mask=~present))  # an empty list: null
    found = _elements(column.element, values, wanted.value_type)
    offsets = None if found is None else run_offsets(counts)
    if found is None or offsets is None:
        return None
    lists = pa.ListArray.from_arrays(offsets, found)
    return lists if lists.type == wanted else lists.cast(wanted)


def value_array(column: ColumnSpec, leaf: Any, n: int) -> pa.Array | None:
    """``column``'s array from a leaf of ``"recprep"`` records' columns (a numpy array, or
    a list of the values themselves), as ``pa.array`` makes it of the values; None where
    the records must be read one by one."""
    wanted = arrow_type(column.type)
    try:
        if isinstance(leaf, list) or leaf.dtype.kind == "O":
            return pa.array(leaf, wanted)  # the decoded values themselves
        if leaf.ndim == 1 and column.type in _VALUE_KINDS.get(leaf.dtype.kind, ()):
            return pa.array(leaf).cast(wanted)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
        pass
    return None


# -- a chunk's columns: at once where they can be, else record by record -----------------


def _column_error(column: ColumnSpec, detail: str) -> DecodeError:
    return DecodeError(f"column {column.name!r} ({column.type}): {detail}")


def _utf8_texts(values: list[Any], column: ColumnSpec) -> list[Any]:
    try:
        return [None if v is None else v.decode("utf-8") for v in values]
    except UnicodeDecodeError:
        raise _column_error(column, "a value is not UTF-8 text; read the column as binary "
                                    "(schema=...)") from None


def _decoded_one_by_one(decode: Any, records: Sequence[bytes]) -> list[Any]:
    """The records decoded one by one; an error names the record (its index in the
    chunk)."""
    try:
        return [decode(r) for r in records]
    except DecodeError:
        for index, record in enumerate(records):  # the slow path, after a failure
            try:
                decode(record)
            except DecodeError as err:
                raise err.located(record_index=index) from None
        raise


def value_arrays(
    codec: Codec, columns: Sequence[ColumnSpec], records: Sequence[bytes]
) -> list[pa.Array]:
    """The arrays of ``columns`` over a chunk of ``recprep`` records (dicts of columns),
    decoded by ``codec``: at once where the codec's ``decode_columns`` gives them, else —
    for the columns that need it — from the records decoded one by one."""
    n = len(records)
    found = codec.decode_columns(records)  # type: ignore[arg-type]
    tree = found.tree if found is not None else None
    if isinstance(tree, dict):
        arrays = [value_array(c, tree[c.name], n) if c.name in tree
                  else pa.nulls(n, arrow_type(c.type)) for c in columns]
    else:
        arrays = [None] * len(columns)
    if all(a is not None for a in arrays):
        return arrays
    rows = _decoded_one_by_one(codec.decode, records)
    for row in rows[:1]:
        if not isinstance(row, dict):
            raise DecodeError(
                f"the records hold {type(row).__name__} values, not dicts of columns; "
                "read them with recprep.RecordIO"
            )
    for k, column in enumerate(columns):
        if arrays[k] is not None:
            continue
        values = [row.get(column.name) for row in rows]
        try:
            arrays[k] = pa.array(values, arrow_type(column.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as err:
            raise _column_error(column, f"a value doesn't fit: {err}") from None
    return arrays


def example_arrays(
    codec: Codec, columns: Sequence[ColumnSpec], records: Sequence[bytes]
) -> list[pa.Array]:
    """The arrays of ``columns`` over a chunk of Examples: parsed at once where it can be
    (only the columns read: the other features' framing is checked, their values not
    read), else — for the columns that need it — from the records decoded one by one by
    ``codec``."""
    n = len(records)
    parsed = parse_chunk(records, {c.name for c in columns})
    arrays = ([None] * len(columns) if parsed is None else
              [example_array(c, parsed.get(c.name), n) for c in columns])
    if all(a is not None for a in arrays):
        return arrays
    examples = _decoded_one_by_one(codec.decode, records)
    return [a if a is not None else _example_column(c, [e.get(c.name) for e in examples])
            for a, c in zip(arrays, columns, strict=True)]


def _example_column(column: ColumnSpec, lists: list[np.ndarray | None]) -> pa.Array:
    """``column``'s array from each record's decoded Example list (None: no feature)."""
    element, depth = column.element, column.depth
    wanted = arrow_type(column.type)
    if depth > 1:
        raise _column_error(column, f"an Example feature is a flat list; read it as "
                                    f"array<{element}>")
    text = element in ("string", "binary")
    expected = "O" if text else "f" if element in ("float", "double") else "i"
    kinds = {v.dtype.kind for v in lists if v is not None and v.size} - {expected}
    if kinds:
        found = {"O": "bytes_list", "i": "int64_list", "f": "float_list"}
        raise _column_error(column, f"the records hold a {found[kinds.pop()]}")
    if depth == 0:
        many = [v.size for v in lists if v is not None and v.size > 1]
        if many:
            raise _column_error(column, f"a record holds {many[0]} values for this scalar "
                                        f"column; read it as array<{element}> (schema=...)")
        values = [v[0] if v is not None and v.size else None for v in lists]
        if element == "string":
            return pa.array(_utf8_texts(values, column), wanted)
        if text:
            return pa.array(values, wanted)
        return _example_numbers(column, values, wanted)
    if text:
        rows = [None if v is None else v.tolist() for v in lists]
        if element == "string":
            rows = [None if r is None else _utf8_texts(r, column) for r in rows]
        return pa.array(rows, wanted)
    sizes = np.fromiter((0 if v is None else v.size for v in lists), np.int64, len(lists))
    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    parts = [v for v in lists if v is not None and v.size]
    flat = np.concatenate(parts) if parts else np.zeros(0, np.float32)
    values = _example_numbers(column, flat, wanted.value_type)
    mask = pa.array([v is None for v in lists]) if any(v is None for v in lists) else None
    lists_array = pa.LargeListArray.from_arrays(pa.array(offsets), values, mask=mask)
    return lists_array.cast(wanted)


def _example_numbers(column: ColumnSpec, values: Any, wanted: pa.DataType) -> pa.Array:
    try:
        if isinstance(values, np.ndarray):
            if pa.types.is_boolean(wanted):
                return pa.array(values != 0)
            return pa.array(values).cast(wanted)
        if pa.types.is_boolean(wanted):
            return pa.array([None if v is None else bool(v) for v in values], wanted)
        return pa.array([None if v is None else v.item() for v in values]).cast(wanted)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
        raise _column_error(column, f"a value doesn't fit: {err}") from None
