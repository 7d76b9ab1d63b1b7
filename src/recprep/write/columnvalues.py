"""The values of one column of a table, as :class:`~recprep.write.tables.TableReader`
hands them out: a numpy array (row ``i`` is ``column[i]``, a numpy scalar, or a
sub-array for a column of arrays of one shape) or a list of Python values.

Numbers come back as numpy scalars of the column's dtype, strings as ``str``, datetimes
as ``numpy.datetime64`` (timezone-aware ones in UTC), nulls as ``None``; an Arrow column
of arrays of one shape (``fixed_size_list``, nested once per dimension, or the
fixed-shape tensor type) as one ``(rows, *shape)`` array.

>>> import pyarrow as pa
>>> arrow_values(pa.array([[1, 2], [3, 4]], pa.list_(pa.int16(), 2))).dtype
dtype('int16')
>>> arrow_values(pa.array(["a", None]))
['a', None]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..codecs.blocks import TypedValues

__all__ = ["arrow_values", "numpy_values", "pandas_values"]


def _with_nulls(values: Any, mask: np.ndarray) -> Any:
    """``values`` as they are if ``mask`` holds no null, else a list with ``None`` at
    the nulls."""
    nulls = np.flatnonzero(mask)
    if not nulls.size:
        return values
    out = list(values)
    for i in nulls.tolist():  # a loop over the nulls only
        out[i] = None
    return out


def pandas_values(column: Any) -> Any:
    """The values of a pandas column (a ``Series``): an array, or a list of Python
    values with ``None`` for nulls (see the module docs)."""
    import pandas as pd

    dtype = column.dtype
    if isinstance(dtype, pd.DatetimeTZDtype):
        column = column.dt.tz_convert("UTC").dt.tz_localize(None)
        dtype = column.dtype
    if isinstance(dtype, np.dtype):
        return numpy_values(column.to_numpy())
    mask = column.isna().to_numpy(dtype=bool)
    numpy_dtype = getattr(dtype, "numpy_dtype", None)  # nullable Int64, Float64, boolean
    if numpy_dtype is not None and numpy_dtype.kind in "biuf":
        fill = False if numpy_dtype.kind == "b" else 0
        return _with_nulls(column.to_numpy(dtype=numpy_dtype, na_value=fill), mask)
    return _with_nulls(list(column.to_numpy(dtype=object)), mask)  # str, category...


#: the types of values ``pandas.isna`` never calls null (exactly these, not subclasses)
_NEVER_NULL = frozenset({str, bytes, bool, int, np.ndarray})


def numpy_values(array: np.ndarray) -> Any:
    """The values of a pandas column held as a numpy array (``Series.to_numpy()`` of a
    column of a numpy dtype, or a slice of it): the array, or a list of its objects with
    ``None`` for nulls (:class:`~recprep.codecs.blocks.TypedValues`: the types found
    once, for the codec).

    >>> numpy_values(np.array(["a", None, float("nan")], object))
    ['a', None, None]
    """
    import pandas as pd

    kind = array.dtype.kind
    if kind == "O":  # (an object array's tolist() is its objects, as they are)
        values = array.tolist()
        types = set(map(type, values))
        if types <= _NEVER_NULL:  # nothing pandas calls a null: no need to ask it
            return TypedValues(values, types)
        return TypedValues(_with_nulls(values, np.asarray(pd.isna(array), dtype=bool)))
    if kind in "mM":
        return _with_nulls(array, np.isnat(array))
    return array  # its values are numpy scalars of the column's dtype


def arrow_values(column: Any) -> Any:
    """The values of a pyarrow column (an array or a list, see :func:`pandas_values`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = column.type
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_timestamp(kind) and kind.tz is not None:
        column = column.cast(pa.timestamp(kind.unit))  # the UTC instants, as stored
        kind = column.type
    numeric = pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)
    temporal = pa.types.is_timestamp(kind) or pa.types.is_date(kind) or pa.types.is_duration(kind)
    if numeric or temporal:
        mask = column.is_null().to_numpy(zero_copy_only=False)
        if column.null_count and not temporal:
            column = pc.fill_null(column, pa.scalar(False if pa.types.is_boolean(kind) else 0,
                                                    kind))
        array = column.to_numpy(zero_copy_only=False)
        if pa.types.is_date(kind):
            array = array.astype("datetime64[D]")
        return _with_nulls(array, mask)
    arrays = _fixed_shape_values(column)
    if arrays is not None:
        return arrays
    return column.to_pylist()  # str, bytes, lists, structs, decimals, times...


def _fixed_shape_values(column: Any) -> np.ndarray | None:
    """A column of arrays of one shape — ``fixed_size_list`` (nested: one level per
    dimension) of numbers, or the fixed-shape tensor type — as one numpy array of
    ``(rows, *shape)``, so that row ``i`` is an array (as ``to_arrow`` found it) rather
    than nested lists; None for other columns, and for any with a null at any level."""
    import pyarrow as pa

    if isinstance(column.type, pa.FixedShapeTensorType):
        if column.null_count:
            return None
        return np.asarray(column.to_numpy_ndarray())
    shape: list[int] = []
    values = column
    while pa.types.is_fixed_size_list(values.type):
        if values.null_count:
            return None
        shape.append(values.type.list_size)
        values = values.flatten()
    kind = values.type
    if not shape or values.null_count or not (
            pa.types.is_integer(kind) or pa.types.is_floating(kind)
            or pa.types.is_boolean(kind)):
        return None
    flat = values.to_numpy(zero_copy_only=False)
    return flat.reshape(len(column), *shape)
