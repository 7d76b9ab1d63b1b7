"""Arrow arrays straight from a chunk's columns: numpy buffers in, no Python object per value.

:class:`~recprep.spark.decode.RecordDecoder` parses a chunk at once —
:func:`~recprep.codecs.example.parse_chunk` for Examples,
``RecprepCodec.decode_columns`` for dicts of values — and asks these functions for each
column's Arrow array. Numbers become arrays over the parsed numpy values, byte strings
become string/binary arrays over the joined bytes and their offsets
(``pa.Array.from_buffers``), lists become ``ListArray`` over per-record offsets. Where a
column's values don't map this simply — a scalar column with several values in a record,
another list kind, a value that doesn't fit the column's type, text that isn't UTF-8 —
they give ``None`` and the decoder reads that column record by record, which gives the
same values, or the error it always gave.

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

from typing import Any

import numpy as np
import pyarrow as pa

from ..codecs.example import BYTES, FLOATS, INTS, Values
from .columns import INTEGRAL, ColumnSpec

__all__ = ["arrow_type", "example_array", "value_array"]

_ATOMIC = {
    "tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(), "bigint": pa.int64(),
    "boolean": pa.bool_(), "float": pa.float32(), "double": pa.float64(),
    "string": pa.string(), "binary": pa.binary(), "date": pa.date32(),
}
_LIST_KIND = {"string": BYTES, "binary": BYTES, "float": FLOATS, "double": FLOATS}
_INT32_MAX = 2**31 - 1
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


def _offsets(sizes: np.ndarray) -> pa.Array | None:
    """int32 offsets of runs of ``sizes``; None past int32."""
    offsets = np.zeros(len(sizes) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return None if offsets[-1] > _INT32_MAX else pa.array(offsets.astype(np.int32))


def _elements(element: str, values: Values, wanted: pa.DataType) -> pa.Array | None:
    """The Arrow array of every value of ``values`` (an Example list's), as ``wanted``."""
    if values.kind == BYTES:
        assert values.sizes is not None
        offsets = _offsets(values.sizes)
        if offsets is None:
            return None
        data = np.ascontiguousarray(values.values)
        text = element == "string"
        found = pa.Array.from_buffers(pa.string() if text else pa.binary(), len(values.sizes),
                                      [None, offsets.buffers()[1], pa.py_buffer(data)])
        if text:
            try:
                found.validate(full=True)  # UTF-8
            except pa.ArrowInvalid:
                return None
        return found
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
    offsets = None if found is None else _offsets(counts)
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
