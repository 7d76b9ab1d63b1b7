"""A batch of ``RecordIO.batches(n, format="arrow")`` as a Ray Data block.

The columns are the reader's Arrow columns (``docs/arrow.md``: a dict's keys, a tuple's
``f0, f1, ...``, else ``value``; strings and bytes decoded straight into Arrow buffers),
with one change for Ray: arrays of one shape — nested fixed-size lists of numbers without
nulls in the reader's stream — become pyarrow's fixed-shape tensor type, over the same
values, which Ray Data hands out as numpy arrays of that shape.

>>> import pytest; pa = pytest.importorskip("pyarrow")
>>> import numpy as np
>>> from recprep import RecordIO, convert
>>> _ = convert("memory://doc/raybatch", [(np.full((2, 3), i, np.float32), i) for i in range(4)],
...             1, "r")
>>> batch = next(RecordIO("memory://doc/raybatch/r").batches(4, format="arrow"))
>>> block = ray_block(batch)
>>> block.column_names, block.column("f0").type.shape, block.column("f1").to_pylist()
(['f0', 'f1'], [2, 3], [0, 1, 2, 3])
>>> block.column("f0").chunk(0).to_numpy_ndarray()[3].tolist()
[[3.0, 3.0, 3.0], [3.0, 3.0, 3.0]]
"""

from __future__ import annotations

from typing import Any


def ray_block(batch: Any) -> Any:
    """``batch`` (a ``pyarrow.RecordBatch`` of the reader's) as a ``pyarrow.Table`` with
    its arrays as fixed-shape tensors (see the module docs)."""
    import pyarrow as pa

    columns = [_as_tensors(pa, column) for column in batch.columns]
    return pa.Table.from_arrays(columns, names=batch.schema.names)


def _as_tensors(pa: Any, column: Any) -> Any:
    shape, inner = [], column.type
    while pa.types.is_fixed_size_list(inner):
        shape.append(inner.list_size)
        inner = inner.value_type
    if not shape or not (pa.types.is_integer(inner) or pa.types.is_floating(inner)):
        return column
    values = column
    for _ in shape:
        if values.null_count:
            return column  # a missing array (None) keeps the list form
        values = values.flatten()
    if values.null_count:
        return column
    array = values.to_numpy(zero_copy_only=False).reshape(len(column), *shape)
    return pa.FixedShapeTensorArray.from_numpy_ndarray(array)
