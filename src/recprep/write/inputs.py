"""What ``convert`` accepts as input, turned into readers it can run and split.

* A PaddlePaddle-style reader (a no-argument callable returning an iterable), a one-shot
  iterable, or :func:`~recprep.partitions`: used as they are.
* A table — a pandas ``DataFrame``, a pyarrow ``Table`` or ``RecordBatch`` — becomes a
  :class:`TableReader`: one instance per row, in row order, a dict ``{column: value}``.
  Numbers come back as numpy scalars of the column's dtype, strings as ``str``, datetimes
  as ``numpy.datetime64`` (timezone-aware ones in UTC), nulls as ``None``. A float
  column's ``NaN`` is a float value and stays ``NaN``; pandas' missing markers of other
  columns (``None``, ``pd.NA``, ``NaT``, ``NaN`` in an object or string column) are nulls.
  The index of a DataFrame is not written (a warning says so unless it is the default
  ``0..n-1``): ``df.reset_index()`` keeps it as a column.
* A sized sequence — a list, tuple, ``range``, numpy array, pandas ``Series`` or a table —
  with more than :data:`ROWS_PER_PART` instances is split into row ranges
  (:func:`split_sized`) by a rule that depends on its length alone, so every executor
  reads the same partitions and writes the same bytes; a parallel executor reads them
  in parallel.
* Values that are iterable only by accident (``str``, ``bytes``, a dict, a polars
  ``DataFrame``, which iterates over its columns) are refused.

Example
-------
>>> import pyarrow as pa
>>> reader = as_input(pa.table({"x": [1, None], "s": ["a", "b"]}))
>>> rows = list(reader())
>>> rows
[{'x': np.int64(1), 's': 'a'}, {'x': None, 's': 'b'}]
>>> len(reader), type(rows[0]["x"]).__name__
(2, 'int64')
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from ..errors import InputError, InvalidArgumentError, RecprepWarning, UnsplitInputWarning, warn

__all__ = [
    "ROWS_PER_PART",
    "TableReader",
    "as_input",
    "check_reader",
    "is_sized",
    "split_sized",
]

ROWS_PER_PART = 8192
"""A sized input is cut into parts of about this many instances (when it has at least two
parts' worth): few enough parts that task overhead stays small, enough that two workers
share a 20,000-instance list."""
_ROW_BLOCK = 4096  # rows converted to Python values at a time: bounded memory per block

_ACCIDENTAL = (str, bytes, bytearray, memoryview, Mapping)


def _module_of(value: Any) -> str:
    return type(value).__module__.partition(".")[0]


def _is_pandas_frame(value: Any) -> bool:
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(value, pandas.DataFrame)


def _is_arrow_table(value: Any) -> bool:
    pyarrow = sys.modules.get("pyarrow")
    return pyarrow is not None and isinstance(value, (pyarrow.Table, pyarrow.RecordBatch))


def check_reader(reader: Any) -> None:
    """Raise unless ``reader`` is a callable or an iterable that isn't one by accident.

    >>> check_reader("abc")
    Traceback (most recent call last):
    ...
    recprep.errors.InvalidArgumentError: reader is a str, which is iterable only by accident; \
pass a no-argument callable returning an iterable of instances, an iterable, or a table \
(pandas DataFrame, pyarrow Table)
    """
    if isinstance(reader, _ACCIDENTAL):
        raise InvalidArgumentError(
            f"reader is a {type(reader).__name__}, which is iterable only by accident; pass "
            "a no-argument callable returning an iterable of instances, an iterable, or a "
            "table (pandas DataFrame, pyarrow Table)"
        )
    if _module_of(reader) == "polars" and hasattr(reader, "to_arrow"):
        raise InvalidArgumentError(
            f"reader is a polars {type(reader).__name__}, which iterates over its columns, "
            "not its rows; pass reader.to_arrow() (one instance per row)"
        )
    if not callable(reader) and not hasattr(reader, "__iter__"):
        raise InvalidArgumentError(
            f"reader must be a no-argument callable returning an iterable (a PaddlePaddle "
            f"reader), an iterable of instances or a table, got {type(reader).__name__}"
        )


def as_input(reader: Any) -> Any:
    """``reader`` as convert runs it: tables become :class:`TableReader`\\ s; the rest is
    checked (:func:`check_reader`) and returned as it is."""
    if _is_pandas_frame(reader) or _is_arrow_table(reader):
        return TableReader(reader)
    check_reader(reader)
    return reader


def is_sized(reader: Any) -> bool:
    """Whether ``reader`` is data of a known length that slicing splits (not a reader that
    produces data when called)."""
    if isinstance(reader, TableReader):
        return True
    if isinstance(reader, (list, tuple, range, np.ndarray)):
        return True
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(reader, pandas.Series)


def split_sized(reader: Any, max_parts: int) -> list[Any] | None:
    """The row ranges of a sized input, as readers — or None when it is too small to split.

    The cut depends only on the input's length (and ``max_parts``), never on the executor:
    ``ceil(len / ROWS_PER_PART)`` parts, at most ``max_parts``, as even as can be.

    >>> parts = split_sized(list(range(20_000)), 256)
    >>> [len(p) for p in parts], parts[1][0]
    ([6666, 6667, 6667], 6666)
    >>> split_sized(list(range(100)), 256) is None
    True
    """
    count = len(reader)
    parts = min(max_parts, math.ceil(count / ROWS_PER_PART))
    if parts < 2:
        return None
    bounds = [count * p // parts for p in range(parts + 1)]
    if isinstance(reader, TableReader):
        return [reader.rows(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(reader, pandas.Series):
        return [reader.iloc[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    return [reader[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def warn_unsplit(reader: Any, executor: str) -> None:
    """Say that ``reader`` runs as one task on the parallel ``executor``, and what to do."""
    kind = "a one-shot iterable" if not callable(reader) else "a single reader"
    where = "in this process" if not callable(reader) else "as one task"
    warn(
        UnsplitInputWarning(
            f"executor={executor!r} got {kind} ({type(reader).__name__}), which can't be "
            f"split: it is read {where}, without parallelism. Pass "
            "recprep.partitions([...]) of readers (one per file, say), or a list, array or "
            "DataFrame, to spread the work"
        )
    )


class TableReader:
    """A table as a reader: rows ``start:end`` of it, one dict per row, in order.

    Picklable (it travels to workers with its rows), sized, and sliceable by
    :meth:`rows`. See the module docs for how values come back.

    >>> import pandas as pd
    >>> frame = pd.DataFrame({"n": [1, 2], "when": pd.to_datetime(["2024-01-01", None])})
    >>> first, second = TableReader(frame)()
    >>> first["n"], str(first["when"])[:10], type(first["when"]).__name__, second["when"]
    (np.int64(1), '2024-01-01', 'datetime64', None)
    """

    def __init__(self, table: Any, start: int = 0, end: int | None = None) -> None:
        self.table = table
        self.start = start
        self.end = len(table) if end is None else end
        if self.start == 0 and _is_pandas_frame(table):
            _warn_index(table)

    def __len__(self) -> int:
        return self.end - self.start

    def rows(self, start: int, end: int) -> TableReader:
        """Rows ``start:end`` of this reader (relative to it)."""
        return TableReader(self.table, self.start + start, self.start + end)

    def __call__(self) -> Iterator[dict[Any, Any]]:
        return self._rows()

    def __repr__(self) -> str:
        return f"TableReader({type(self.table).__name__}, rows {self.start}:{self.end})"

    def _rows(self) -> Iterator[dict[Any, Any]]:
        columns = _column_names(self.table)
        for block in range(self.start, self.end, _ROW_BLOCK):
            stop = min(block + _ROW_BLOCK, self.end)
            try:
                values = _block_values(self.table, block, stop)
            except Exception as err:  # a column pandas/pyarrow can't hand out
                raise InputError(err, block - self.start) from err
            for row in zip(*values, strict=True):
                yield dict(zip(columns, row, strict=True))


def _warn_index(frame: Any) -> None:
    import pandas as pd

    index = frame.index
    if isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1:
        return
    warn(
        RecprepWarning(
            f"the DataFrame's index ({type(index).__name__}, name {index.name!r}) is not "
            "written: each instance is a dict of the columns. Call df.reset_index() first "
            "to keep it as a column"
        )
    )


def _column_names(table: Any) -> list[Any]:
    if _is_pandas_frame(table):
        names = list(table.columns)
    else:
        names = list(table.schema.names)
    if len(set(names)) != len(names):
        repeated = sorted({str(n) for n in names if names.count(n) > 1})
        raise InvalidArgumentError(
            f"the table has repeated column names {repeated}: each row becomes a dict, "
            "so column names must be unique"
        )
    return names


def _block_values(table: Any, start: int, stop: int) -> list[list[Any]]:
    """The Python values of rows ``start:stop``, column by column."""
    if _is_pandas_frame(table):
        block = table.iloc[start:stop]
        return [_pandas_values(block.iloc[:, k]) for k in range(block.shape[1])]
    block = table.slice(start, stop - start)
    return [_arrow_values(block.column(k)) for k in range(block.num_columns)]


def _with_nulls(values: list[Any], mask: np.ndarray) -> list[Any]:
    for i in np.flatnonzero(mask):  # a loop over the nulls only
        values[i] = None
    return values


def _pandas_values(column: Any) -> list[Any]:
    import pandas as pd

    dtype = column.dtype
    if isinstance(dtype, pd.DatetimeTZDtype):
        column = column.dt.tz_convert("UTC").dt.tz_localize(None)
        dtype = column.dtype
    if isinstance(dtype, np.dtype):
        array = column.to_numpy()
        if dtype.kind == "O":
            return _with_nulls(list(array), np.asarray(pd.isna(array), dtype=bool))
        values = list(array)  # numpy scalars of the column's dtype
        if dtype.kind in "mM":
            return _with_nulls(values, np.isnat(array))
        return values
    mask = column.isna().to_numpy(dtype=bool)
    numpy_dtype = getattr(dtype, "numpy_dtype", None)  # nullable Int64, Float64, boolean
    if numpy_dtype is not None and numpy_dtype.kind in "biuf":
        fill = False if numpy_dtype.kind == "b" else 0
        return _with_nulls(list(column.to_numpy(dtype=numpy_dtype, na_value=fill)), mask)
    return _with_nulls(list(column.to_numpy(dtype=object)), mask)  # str, category...


def _arrow_values(column: Any) -> list[Any]:
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = column.type
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    mask = column.is_null().to_numpy(zero_copy_only=False)
    if pa.types.is_timestamp(kind) and kind.tz is not None:
        column = column.cast(pa.timestamp(kind.unit))  # the UTC instants, as stored
        kind = column.type
    numeric = pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)
    temporal = pa.types.is_timestamp(kind) or pa.types.is_date(kind) or pa.types.is_duration(kind)
    if numeric or temporal:
        if column.null_count and not temporal:
            column = pc.fill_null(column, pa.scalar(False if pa.types.is_boolean(kind) else 0,
                                                    kind))
        array = column.to_numpy(zero_copy_only=False)
        if pa.types.is_date(kind):
            array = array.astype("datetime64[D]")
        return _with_nulls(list(array), mask)
    return column.to_pylist()  # str, bytes, lists, structs, decimals, times...
