"""Tables as input: their rows, a block of columns at a time.

A *table* is a pandas ``DataFrame``, a pyarrow ``Table``/``RecordBatch``, a pyarrow
``Dataset`` (files on any filesystem pyarrow reads), or a dict of columns (equal-length
numpy arrays, lists, tuples, pandas ``Series`` or pyarrow arrays). :class:`TableReader`
hands it out as :class:`ColumnBlock`\\ s of about :data:`ROW_BLOCK` rows: column name ->
the values of those rows, either a numpy array (row ``i`` is ``column[i]``: a numpy
scalar, or a sub-array for a dict's N-D array) or a list of Python values. Row ``i`` of
the table is ``{name: column[i] for name, column in block.columns.items()}``: the rows
the write loop encodes one by one, and the blocks a codec may encode at once
(:meth:`~recprep.codecs.base.Codec.encode_columns`) are the same values.

Values of DataFrames and Arrow columns: numbers come back as numpy scalars of the
column's dtype, strings as ``str``, datetimes as ``numpy.datetime64`` (timezone-aware
ones in UTC), nulls as ``None``. A float column's ``NaN`` is a float value and stays
``NaN``; pandas' missing markers of other columns (``None``, ``pd.NA``, ``NaT``, ``NaN``
in an object or string column) are nulls. A dict's columns are taken as they are: row
``i`` is ``column[i]`` (a pandas ``Series`` or pyarrow array in it reads like a column of
a DataFrame or Table).

A table without columns is refused (:class:`~recprep.errors.InvalidArgumentError`, a
dict's :class:`~recprep.errors.ColumnsError`), however many rows it has: its rows would be
empty instances.

A reader of rows ``start:end`` pickles only those rows (an Arrow slice as IPC bytes, a
pandas slice), so row ranges travel to workers at the cost of their own data; a
``Dataset`` on files travels as its fragments (paths, format, filesystem), and each
task reads only the files its rows are in.

>>> reader = TableReader({"n": np.arange(3), "s": ["a", "b", "c"]})
>>> block, = reader().column_blocks()
>>> block.n, block.columns["n"], list(block.rows())[2]
(3, array([0, 1, 2]), {'n': np.int64(2), 's': 'c'})
"""

from __future__ import annotations

import abc
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from .._core.arrowcols import INSTANCE_KEY, VALUE_COLUMN
from ..errors import ColumnsError, InputError, InvalidArgumentError, RecprepWarning, warn
from .columnvalues import arrow_values, numpy_values, pandas_values

__all__ = ["ROW_BLOCK", "ColumnBlock", "RowKind", "TableReader", "is_table"]

ROW_BLOCK = 4096
"""Rows per block: big enough that numpy's per-call cost vanishes, small enough that a
block's values (and a codec's buffers for them) stay a few MB."""


#: what a table's rows are: dicts of its columns; or, for a table ``to_arrow`` made of
#: tuples or bare values (its schema's ``recprep.instance``), tuples of its columns in
#: order, or its one column's values
RowKind = Literal["dict", "tuple", "value"]


@dataclass(frozen=True)
class ColumnBlock:
    """``n`` consecutive rows of a table: ``columns[name][i]`` is row ``i``'s value;
    ``instance``: what a row is made into (see :data:`RowKind`)."""

    columns: dict[Any, Any]
    n: int
    instance: RowKind = "dict"

    def rows(self) -> Iterator[Any]:
        """The rows, in order: one dict each (a tuple, or a bare value, see
        ``instance``)."""
        rows = zip(*self.columns.values(), strict=True)
        if self.instance == "tuple":
            yield from rows
        elif self.instance == "value":
            for (value,) in rows:
                yield value
        else:
            names = list(self.columns)
            for row in rows:
                yield dict(zip(names, row, strict=True))


def package_name(value: Any) -> str:
    """The top-level package ``value``'s type comes from (``"pandas"``, ``"builtins"``...).

    >>> package_name([]), package_name(np.zeros(1))
    ('builtins', 'numpy')
    """
    return type(value).__module__.partition(".")[0]


def is_table(value: Any) -> bool:
    """Whether ``value`` is one of the tables :class:`TableReader` reads (a ``Mapping``
    is one only if it is a dict of columns: :class:`~recprep.errors.ColumnsError` says
    why not otherwise)."""
    if isinstance(value, (_TableSource, Mapping)):
        return True
    pandas, pyarrow = sys.modules.get("pandas"), sys.modules.get("pyarrow")
    if pandas is not None and isinstance(value, pandas.DataFrame):
        return True
    if pyarrow is not None and isinstance(value, (pyarrow.Table, pyarrow.RecordBatch)):
        return True
    dataset = sys.modules.get("pyarrow.dataset")
    return dataset is not None and isinstance(value, dataset.Dataset)


class _TableSource(abc.ABC):
    """A table's rows, by range: the values of a block, and a slice that pickles small."""

    names: list[Any]
    instance: RowKind = "dict"
    #: whether its rows are in this process's memory (a few read anywhere cost nothing)
    in_memory = True

    @abc.abstractmethod
    def __len__(self) -> int: ...

    @abc.abstractmethod
    def values(self, start: int, stop: int) -> list[Any]:
        """Each column's values of rows ``start:stop`` (an array or a list)."""

    @abc.abstractmethod
    def sliced(self, start: int, stop: int) -> _TableSource:
        """Rows ``start:stop`` alone (what a task is shipped)."""

    def blocks(self, start: int, stop: int) -> Iterator[ColumnBlock]:
        """Rows ``start:stop``, :data:`ROW_BLOCK` at a time."""
        for first in range(start, stop, ROW_BLOCK):
            end = min(first + ROW_BLOCK, stop)
            yield ColumnBlock(dict(zip(self.names, self.values(first, end), strict=True)),
                              end - first, self.instance)


class _Frame(_TableSource):
    def __init__(self, frame: Any) -> None:
        self.frame = frame
        self.names = _unique(list(frame.columns))

    def __len__(self) -> int:
        return len(self.frame)

    def values(self, start: int, stop: int) -> list[Any]:
        block = self.frame.iloc[start:stop]
        return [pandas_values(block.iloc[:, k]) for k in range(block.shape[1])]

    def blocks(self, start: int, stop: int) -> Iterator[ColumnBlock]:
        """:meth:`values` of each block, the columns of a numpy dtype taken out of the
        frame once and sliced (a column of another dtype is read a block at a time)."""
        columns = [self.frame.iloc[:, k] for k in range(len(self.names))]
        whole = [column.to_numpy() if isinstance(column.dtype, np.dtype) else None
                 for column in columns]
        for first in range(start, stop, ROW_BLOCK):
            end = min(first + ROW_BLOCK, stop)
            values = [pandas_values(column.iloc[first:end]) if array is None
                      else numpy_values(array[first:end])
                      for column, array in zip(columns, whole, strict=True)]
            yield ColumnBlock(dict(zip(self.names, values, strict=True)), end - first,
                              self.instance)

    def sliced(self, start: int, stop: int) -> _TableSource:
        return _Frame(self.frame.iloc[start:stop])


class _Arrow(_TableSource):
    def __init__(self, table: Any) -> None:
        self.table = table
        self.names = _unique(list(table.schema.names))
        self.instance = _row_kind(table.schema, self.names)

    def __len__(self) -> int:
        return len(self.table)

    def values(self, start: int, stop: int) -> list[Any]:
        block = self.table.slice(start, stop - start)
        return [arrow_values(block.column(k)) for k in range(block.num_columns)]

    def sliced(self, start: int, stop: int) -> _TableSource:
        return _Arrow(self.table.slice(start, stop - start))

    def __reduce__(self) -> Any:
        # pyarrow pickles a slice's whole buffers; IPC writes only the slice's rows
        import pyarrow as pa

        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, self.table.schema) as writer:
            writer.write(self.table)
        return _arrow_from_ipc, (sink.getvalue().to_pybytes(),)


def _row_kind(schema: Any, names: list[Any]) -> RowKind:
    """What the rows of an Arrow table are: tuples or bare values when its schema's
    metadata says ``to_arrow`` made it of those (and its columns are still the ones it
    made, in order: ``f0, f1...``, or ``value``), else dicts (a namedtuple's, named after
    its fields, comes back as dicts)."""
    said = (schema.metadata or {}).get(INSTANCE_KEY)
    if said == b"tuple" and names == [f"f{i}" for i in range(len(names))]:
        return "tuple"
    if said == b"value" and names == [VALUE_COLUMN]:
        return "value"
    return "dict"


def _arrow_from_ipc(data: bytes) -> _Arrow:
    import pyarrow as pa

    return _Arrow(pa.ipc.open_stream(data).read_all())


class _Dataset(_TableSource):
    """A pyarrow ``Dataset`` of files: its fragments (in the dataset's row order), each
    one's row count (from metadata), and the dataset schema every fragment is read with
    (partition columns included)."""

    in_memory = False  # a row read is its fragment's file read

    def __init__(self, fragments: Sequence[Any], counts: Sequence[int], schema: Any,
                 skip: int = 0, rows: int | None = None) -> None:
        self.fragments, self.counts, self.schema = list(fragments), list(counts), schema
        self.skip = skip  # rows of the first fragment before this source's first row
        self.rows = sum(counts) - skip if rows is None else rows
        self.names = _unique(list(schema.names))

    @classmethod
    def of(cls, dataset: Any) -> _TableSource:
        if not hasattr(dataset, "files"):  # in memory (it doesn't pickle): a Table
            return _Arrow(dataset.to_table())
        fragments = list(dataset.get_fragments())
        return cls(fragments, [f.count_rows() for f in fragments], dataset.schema)

    def __len__(self) -> int:
        return self.rows

    def _spans(self, start: int, stop: int) -> Iterator[tuple[int, int, int]]:
        """``(fragment, first row in it, rows)`` covering rows ``start:stop``."""
        at = -self.skip  # this source's row where the current fragment starts
        for k, count in enumerate(self.counts):
            lo, hi = max(start, at), min(stop, at + count)
            if lo < hi:
                yield k, lo - at, hi - lo
            at += count
            if at >= stop:
                return

    def values(self, start: int, stop: int) -> list[Any]:
        tables = [self.fragments[k].to_table(schema=self.schema).slice(first, rows)
                  for k, first, rows in self._spans(start, stop)]
        import pyarrow as pa

        return _Arrow(pa.concat_tables(tables)).values(0, stop - start)

    def blocks(self, start: int, stop: int) -> Iterator[ColumnBlock]:
        """A fragment is read once, then cut into blocks."""
        for k, first, rows in self._spans(start, stop):
            table = _Arrow(self.fragments[k].to_table(schema=self.schema).slice(first, rows))
            yield from table.blocks(0, rows)

    def sliced(self, start: int, stop: int) -> _TableSource:
        spans = list(self._spans(start, stop))
        if not spans:
            return _Dataset([], [], self.schema)
        ks = [k for k, _, _ in spans]
        return _Dataset([self.fragments[k] for k in ks], [self.counts[k] for k in ks],
                        self.schema, spans[0][1], stop - start)


class _Columns(_TableSource):
    """A dict of equal-length columns, checked once."""

    def __init__(self, columns: Mapping[Any, Any]) -> None:
        self.columns = {name: _column(name, values) for name, values in columns.items()}
        self.names = list(self.columns)
        lengths = {name: len(values) for name, values in self.columns.items()}
        if not lengths:
            raise ColumnsError("the dict has no columns: a dict of columns needs at least "
                               "one (column name -> equal-length sequence)")
        if len(set(lengths.values())) > 1:
            found = ", ".join(f"{name!r}: {n}" for name, n in lengths.items())
            raise ColumnsError(f"columns of one length (one value per row); found lengths "
                               f"{found}")
        self.length = next(iter(lengths.values()))

    def __len__(self) -> int:
        return self.length

    def values(self, start: int, stop: int) -> list[Any]:
        return [_column_slice(self.columns[name], start, stop) for name in self.names]

    def sliced(self, start: int, stop: int) -> _TableSource:
        return _Columns({name: _column_slice(values, start, stop, copy=True)
                         for name, values in self.columns.items()})


def _column(name: Any, values: Any) -> Any:
    """``values`` if it is a column (a sized 1-D sequence along its first axis)."""
    if isinstance(values, np.ndarray):
        if values.ndim >= 1:
            return values
    elif isinstance(values, (list, tuple, range)):
        return values
    elif package_name(values) == "pandas" and type(values).__name__ == "Series":
        return values
    elif package_name(values) == "pyarrow" and hasattr(values, "to_pylist") and hasattr(
            values, "null_count"):  # an Array or ChunkedArray
        return values
    raise ColumnsError(
        f"the dict's value for {name!r} is {_article(type(values).__name__)}, not a column; a dict "
        "is read as a table only when every value is a column (a 1-D sequence: list, "
        "tuple, numpy array, pandas Series, pyarrow array) of one length — any other dict "
        "is iterable only by accident: pass a list of instances instead"
    )


def _article(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _column_slice(values: Any, start: int, stop: int, copy: bool = False) -> Any:
    if isinstance(values, np.ndarray):
        part = values[start:stop]
        if values.dtype.kind == "O" and values.ndim == 1 and not copy:
            return part.tolist()  # the objects themselves
        return part.copy() if copy else part
    if isinstance(values, (list, tuple, range)):
        return list(values[start:stop])
    if hasattr(values, "iloc"):
        part = values.iloc[start:stop]
        return part if copy else pandas_values(part)
    part = values.slice(start, stop - start)
    if copy:  # a slice pickles its whole buffers: a copy of the rows alone
        import pyarrow as pa

        return pa.concat_arrays([part]) if isinstance(part, pa.Array) else pa.chunked_array(
            [pa.concat_arrays(part.chunks)] if part.num_chunks else [], part.type)
    return arrow_values(part)


def _unique(names: list[Any]) -> list[Any]:
    if len(set(names)) != len(names):
        repeated = sorted({str(n) for n in names if names.count(n) > 1})
        raise InvalidArgumentError(
            f"the table has repeated column names {repeated}: each row becomes a dict, "
            "so column names must be unique"
        )
    return names


def as_source(table: Any) -> _TableSource:
    """The :class:`_TableSource` of a table (see :func:`is_table`)."""
    if isinstance(table, _TableSource):
        return table
    if isinstance(table, Mapping):
        return _Columns(table)
    if package_name(table) == "pandas":
        return _Frame(table)
    dataset = sys.modules.get("pyarrow.dataset")
    if dataset is not None and isinstance(table, dataset.Dataset):
        return _Dataset.of(table)
    return _Arrow(table)


class TableReader:
    """A table as a reader: rows ``start:end`` of it, one dict per row, in order.

    Picklable at the cost of its own rows (see the module docs), sized, and sliceable by
    :meth:`rows`. Calling it gives the rows (an iterable whose ``column_blocks()`` gives
    the same rows as :class:`ColumnBlock`\\ s, for codecs that encode columns).

    >>> import pandas as pd
    >>> frame = pd.DataFrame({"n": [1, 2], "when": pd.to_datetime(["2024-01-01", None])})
    >>> first, second = TableReader(frame)()
    >>> first["n"], str(first["when"])[:10], type(first["when"]).__name__, second["when"]
    (np.int64(1), '2024-01-01', 'datetime64', None)
    """

    def __init__(self, table: Any, start: int = 0, end: int | None = None, *,
                 check_index: bool = True) -> None:
        self.source = as_source(table)
        if not self.source.names:
            _refuse_no_columns(table, len(self.source))
        self.start = start
        self.end = len(self.source) if end is None else end
        if check_index and self.start == 0 and isinstance(self.source, _Frame):
            _warn_index(self.source.frame)

    def __len__(self) -> int:
        return self.end - self.start

    @property
    def in_memory(self) -> bool:
        """Whether its rows are in memory (not a ``Dataset``'s files, read when asked)."""
        return self.source.in_memory

    def rows(self, start: int, end: int) -> TableReader:
        """Rows ``start:end`` of this reader (relative to it)."""
        return TableReader(self.source, self.start + start, self.start + end,
                           check_index=False)

    def __call__(self) -> TableRows:
        return TableRows(self)

    def __repr__(self) -> str:
        return f"TableReader({type(self.source).__name__[1:]}, rows {self.start}:{self.end})"

    def __reduce__(self) -> Any:
        return _table_reader_of, (self.source.sliced(self.start, self.end), len(self))

    def column_blocks(self) -> Iterator[ColumnBlock]:
        """The rows as :class:`ColumnBlock`\\ s, in order."""
        blocks = self.source.blocks(self.start, self.end)
        done = 0
        while True:
            try:
                block = next(blocks)
            except StopIteration:
                return
            except Exception as err:  # a column pandas/pyarrow can't hand out
                raise InputError(err, done) from err
            done += block.n
            yield block


def _refuse_no_columns(table: Any, rows: int) -> None:
    """A table without columns is refused, whatever its kind and however many rows it
    has: each row would be an empty instance, holding nothing to train on (as a dict
    without columns is refused by :class:`_Columns`)."""
    kind = type(table).__name__
    module = package_name(table)
    if module in ("pandas", "pyarrow"):
        kind = f"{module} {kind}"
    raise InvalidArgumentError(
        f"reader is a table ({kind}) with {rows} row(s) and no columns: each row would be "
        "an empty instance, with nothing in it to train on; select the columns to write "
        "(or pass a list of instances)"
    )


def _table_reader_of(source: _TableSource, rows: int) -> TableReader:
    return TableReader(source, 0, rows, check_index=False)


class TableRows:
    """One pass over a :class:`TableReader`: iterating gives the rows;
    :meth:`column_blocks` gives them as blocks (the write loop's choice)."""

    def __init__(self, reader: TableReader) -> None:
        self.reader = reader

    def __iter__(self) -> Iterator[dict[Any, Any]]:
        for block in self.reader.column_blocks():
            yield from block.rows()

    def column_blocks(self) -> Iterator[ColumnBlock]:
        return self.reader.column_blocks()


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
