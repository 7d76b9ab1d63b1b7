"""A batch of :meth:`recprep.RecordIO.batches` as a ``pyarrow.Table`` (a Ray Data block).

Instances become rows: a dict's keys are the columns; a tuple's values are the columns
``f0, f1, ...``; any other value is the one column ``value``. Stacked numbers stay
their numpy dtype; strings and bytes become Arrow strings and binary; arrays of one shape
(``(n, d1, ...)`` stacked) become pyarrow's fixed-shape tensor type, one buffer; lists
and other values are left to ``pyarrow.array``'s inference (nulls for ``None``).

>>> import pytest; _ = pytest.importorskip("pyarrow")
>>> import numpy as np
>>> table = _arrow_table((np.arange(3), np.array(["a", "b", "c"], dtype=object)))
>>> table.column_names, table.column("f0").to_pylist(), table.column("f1").type
(['f0', 'f1'], [0, 1, 2], DataType(string))
>>> tensors = _arrow_table({"x": np.zeros((2, 3), dtype=np.float32)}).column("x")
>>> tensors.type.extension_name, tensors.type.shape, tensors.type.value_type
('arrow.fixed_shape_tensor', [3], DataType(float))
>>> _arrow_table([[1], [2, 3]]).to_pydict()
{'value': [[1], [2, 3]]}
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import DecodeError

#: the name of the one column of instances that are neither dicts nor tuples
VALUE_COLUMN = "value"


def _arrow_table(batch: Any) -> Any:
    """One batch of :meth:`recprep.RecordIO.batches` as a ``pyarrow.Table``.

    The one place a read task turns numpy columns into Arrow: to be replaced by the
    reader's own ``batches(n, format="arrow")`` when it has one.
    """
    import pyarrow as pa

    if isinstance(batch, dict):
        names, columns = [str(k) for k in batch], list(batch.values())
    elif isinstance(batch, tuple):
        names, columns = [f"f{i}" for i in range(len(batch))], list(batch)
    elif isinstance(batch, list) and batch and all(isinstance(v, dict) for v in batch):
        return _rows_table(pa, batch)  # dicts of several key sets in one batch
    elif isinstance(batch, list) and batch and all(type(v) is tuple for v in batch):
        width = max(map(len, batch))
        rows = [dict(zip([f"f{i}" for i in range(width)], v, strict=False)) for v in batch]
        return _rows_table(pa, rows)
    else:
        names, columns = [VALUE_COLUMN], [batch]
    arrays = [_arrow_column(pa, name, column) for name, column in zip(names, columns, strict=True)]
    return pa.Table.from_arrays(arrays, names=names)


def _rows_table(pa: Any, rows: list[dict[Any, Any]]) -> Any:
    try:
        return pa.Table.from_pylist([{str(k): _plain(v) for k, v in r.items()} for r in rows])
    except (pa.ArrowException, TypeError, ValueError) as err:
        raise DecodeError(f"instances that don't make one Arrow table: {err}") from err


def _plain(value: Any) -> Any:
    """A value pyarrow infers: numpy arrays as lists, numpy scalars as Python ones."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def _arrow_column(pa: Any, name: str, column: Any) -> Any:
    """One column: a stacked numpy array (1-D: as it is; N-D: fixed-shape tensors), an
    object array of ``str``/``bytes``, or a list of values."""
    try:
        if isinstance(column, np.ndarray) and column.dtype != object:
            if column.ndim == 1:
                return pa.array(column)
            return pa.FixedShapeTensorArray.from_numpy_ndarray(np.ascontiguousarray(column))
        if isinstance(column, np.ndarray):
            return pa.array(column.tolist())
        return pa.array([_plain(v) for v in column])
    except (pa.ArrowException, TypeError, ValueError) as err:
        raise DecodeError(
            f"column {name!r} has values Arrow can't hold in one column ({err}); read "
            "them with RecordIO, or write instances of one type per column"
        ) from err
