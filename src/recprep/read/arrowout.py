"""A set as Arrow: record batches, tables, DataFrames and the Arrow C stream.

:meth:`RecordIO.batches(n, format="arrow") <recprep.RecordIO.batches>` hands out
``pyarrow.RecordBatch``\\ es, :meth:`~ArrowOut.to_arrow` a ``pyarrow.Table``,
:meth:`~ArrowOut.to_pandas` a ``pandas.DataFrame``, and ``__arrow_c_stream__`` (the Arrow
PyCapsule stream protocol) lets pyarrow, polars and DuckDB read a reader directly — every
reader option holding (shuffle, ranks, workers, a loaded state, ``on_corrupt``): the rows
are the instances of ``read()``, in its order. How instances become columns:

==================================  ======================================================
instances                           columns
==================================  ======================================================
dicts (``str`` keys)                one column per key, in the keys' order
tuples                              ``f0``, ``f1``, … (named tuples: their field names)
anything else                       one column, ``value``
==================================  ======================================================

and a column's values (``None`` is a null anywhere):

==================================  ======================================================
values                              Arrow type
==================================  ======================================================
``int`` / ``float`` / ``bool``      ``int64`` / ``double`` / ``bool``
numpy scalars                       their dtype's type (``int32``, ``float32``, …)
``str`` / ``bytes``                 ``string`` / ``binary`` (``large_*`` past 2 GiB)
ndarrays of one dtype and shape     ``fixed_size_list`` over one buffer, nested once per
                                    dimension (``(28, 28)`` uint8: a list of 28 lists of
                                    28): polars reads it as ``Array``, DuckDB as
                                    ``ARRAY``
lists (and ndarrays of several      ``list`` arrays of their items' type
shapes)
nested tuples / dicts               ``struct`` columns (fields ``f0``… / the keys)
==================================  ======================================================

A column's values must be of one type (``None`` aside): mixed types (``1`` and ``"1"``,
``1`` and ``1.5``), ints beyond int64, complex numbers and other objects (pickles) have
no Arrow type, and raise :class:`~recprep.errors.ArrowMappingError` naming the column and
the instance — no lossy promotion, no binary fallback, which a query engine could not
read anyway.

The stream has one schema. It is ``schema=`` when given (each batch cast to it, safely),
else the first batch's; a later batch must have the same columns and types, except
that a column whose values were all ``None`` (``null``) takes the stream's type. A column
that was all ``None`` in the first batch and holds values later can't be streamed:
:class:`~recprep.errors.ArrowMappingError` names it and the instance, and ``schema=``
gets past it. :meth:`~ArrowOut.to_arrow`, which holds every batch, settles such columns
itself. The schema's metadata ``recprep.instance`` says what the instances were
(``dict``, ``tuple`` or ``value``).

>>> from recprep import convert, RecordIO
>>> _ = convert("memory://doc/arrow", [(i, f"w{i}") for i in range(5)], 2, "a")
>>> table = RecordIO("memory://doc/arrow/a-*").to_arrow()
>>> table.column_names, table.column("f0").to_pylist(), table.column("f1").type
(['f0', 'f1'], [0, 1, 2, 3, 4], DataType(string))
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np

from .._core.batching import BatchFormat
from ..errors import ArrowMappingError, InvalidArgumentError, MissingDependencyError

if TYPE_CHECKING:
    import pandas
    import pyarrow

__all__ = ["ARROW_BATCH_ROWS", "VALUE_COLUMN", "ArrowOut", "arrow", "as_format",
           "record_batch"]

#: instances per record batch of :meth:`ArrowOut.to_arrow` and of the Arrow stream
ARROW_BATCH_ROWS = 8192
#: the column of instances that are neither dicts nor tuples
VALUE_COLUMN = "value"
#: the schema metadata saying what the instances were
INSTANCE_KEY = b"recprep.instance"


def arrow() -> Any:
    """The ``pyarrow`` module, or a :class:`~recprep.errors.MissingDependencyError`."""
    try:
        import pyarrow
    except ImportError:
        raise MissingDependencyError("pyarrow", "arrow", "Arrow output") from None
    return pyarrow


def _is_arrow(value: Any) -> bool:
    return type(value).__module__.startswith("pyarrow")


# --------------------------------------------------------------------------- one batch


def record_batch(batch: Any, first: int = 0) -> pyarrow.RecordBatch:
    """The ``pyarrow.RecordBatch`` of a batch of columns (as
    :func:`~recprep.batching.collate` makes them; leaves may also be Arrow arrays) whose
    first instance is instance ``first`` of the pass (for errors).

    >>> from recprep.batching import collate
    >>> rb = record_batch(collate([{"x": 1, "s": None}, {"x": 2, "s": "b"}]))
    >>> rb.schema.names, rb.column(1).to_pylist()
    (['x', 's'], [None, 'b'])
    """
    pa = arrow()
    if isinstance(batch, tuple) and batch:
        kind, names = "tuple", _field_names(batch)
        columns = list(batch)
    elif isinstance(batch, dict) and batch:
        kind, names = "dict", [_name(k, first) for k in batch]
        columns = list(batch.values())
    else:
        kind, names, columns = "value", [VALUE_COLUMN], [batch]
    arrays = [_array(pa, column, name, first) for name, column in
              zip(names, columns, strict=True)]
    if kind == "value" and pa.types.is_struct(arrays[0].type) and _dicts(batch):
        kind = "dict"  # dicts of several key sets: the union of their keys, nulls filled
        got = pa.RecordBatch.from_struct_array(arrays[0])
        names, arrays = got.schema.names, got.columns
    out = pa.RecordBatch.from_arrays(arrays, names=names)
    return out.replace_schema_metadata({INSTANCE_KEY: kind.encode()})


def _field_names(columns: tuple) -> list[str]:
    fields = getattr(columns, "_fields", None)
    return list(fields) if fields is not None else [f"f{i}" for i in range(len(columns))]


def _name(key: Any, first: int) -> str:
    if not isinstance(key, str):
        raise ArrowMappingError(repr(key), first, f"a column name must be a str, got "
                                f"{type(key).__qualname__}")
    return key


def _dicts(column: Any) -> bool:
    return isinstance(column, list) and all(isinstance(v, dict) or v is None for v in column)


def _array(pa: Any, column: Any, name: str, first: int) -> Any:
    """One column as an Arrow array."""
    if _is_arrow(column):
        return column
    if isinstance(column, tuple) and column:
        names = _field_names(column)
    elif isinstance(column, dict) and column:
        names = [_name(k, first) for k in column]
        column = tuple(column.values())
    elif isinstance(column, np.ndarray):
        return _numpy_array(pa, column, name, first)
    else:
        return _list_array(pa, list(column), name, first)
    children = [_array(pa, c, f"{name}.{n}", first) for n, c in zip(names, column,
                                                                    strict=True)]
    return pa.StructArray.from_arrays(children, names=names)


def _numpy_array(pa: Any, column: np.ndarray, name: str, first: int) -> Any:
    """A numpy column as ``collate`` makes it: numbers, stacked arrays, str or bytes."""
    if column.dtype == object:  # collate's str-only or bytes-only column
        text = isinstance(column[0], str)
        try:
            out = pa.array(column, type=pa.string() if text else pa.binary())
            if isinstance(out, pa.ChunkedArray):  # past int32 offsets
                out = pa.array(column, type=pa.large_string() if text else pa.large_binary())
        except (pa.ArrowException, ValueError) as err:
            raise ArrowMappingError(name, first + _failing(pa, list(column)), str(err)
                                    ) from None
        return out
    if column.dtype.kind == "c":
        raise ArrowMappingError(name, first, f"{column.dtype} numbers have no Arrow type")
    if not column.dtype.isnative:
        column = column.astype(column.dtype.newbyteorder("="))
    try:
        values = pa.array(np.ascontiguousarray(column).reshape(-1))
    except pa.ArrowException as err:
        raise ArrowMappingError(name, first, f"{column.dtype}: {err}") from None
    for size in reversed(column.shape[1:]):
        values = pa.FixedSizeListArray.from_arrays(values, size)
    return values


def _list_array(pa: Any, values: list[Any], name: str, first: int) -> Any:
    """A column ``collate`` left a list: None among values, lists, mixed types..."""
    kinds: dict[type, int] = {}
    for i, value in enumerate(values):
        if value is not None and kinds.setdefault(type(value), i) != i and len(kinds) > 1:
            break
    if not kinds:
        return pa.nulls(len(values))
    if len(kinds) > 1:
        (one, _), (other, at) = list(kinds.items())[:2]
        raise ArrowMappingError(name, first + at, f"values of one type were expected, found "
                                f"{one.__qualname__} and then {other.__qualname__}")
    try:
        return pa.array(values)
    except (pa.ArrowException, ValueError, TypeError, OverflowError) as err:
        at = _failing(pa, values)
        raise ArrowMappingError(name, first + at, f"{type(values[at]).__qualname__}: {err}"
                                ) from None


def _failing(pa: Any, values: list[Any]) -> int:
    """The first of ``values`` pyarrow can't convert alone (else 0)."""
    for i, value in enumerate(values):
        try:
            pa.array([value])
        except Exception:
            return i
    return 0


# --------------------------------------------------------------------------- one schema


def _differs_by_nulls(found: Any, want: Any) -> bool:
    """Whether type ``found`` is ``want`` but for ``null`` types where ``want`` has others."""
    pa = arrow()
    if found == want or pa.types.is_null(found):
        return True
    if type(found) is not type(want) or found.num_fields != want.num_fields or \
            found.num_fields == 0:
        return False
    if pa.types.is_fixed_size_list(found) and found.list_size != want.list_size:
        return False
    return all(f.name == w.name and _differs_by_nulls(f.type, w.type) for f, w in
               zip((found.field(i) for i in range(found.num_fields)),
                   (want.field(i) for i in range(want.num_fields)), strict=True))


def conformed(batch: Any, schema: Any, first: int, given: bool) -> Any:
    """``batch`` with ``schema``'s types (the stream's): cast safely when the schema was
    ``given``, else only where its columns were all ``None``."""
    pa = arrow()
    if batch.schema.equals(schema, check_metadata=False):
        return batch.replace_schema_metadata(schema.metadata)
    if batch.schema.names != schema.names:
        missing = next((n for n in schema.names if n not in batch.schema.names),
                       batch.schema.names[0] if batch.schema.names else "")
        raise ArrowMappingError(missing, first, f"the stream's columns are "
                                f"{schema.names}, this batch's are {batch.schema.names}")
    arrays = []
    for field, column in zip(schema, batch.columns, strict=True):
        if not (given or _differs_by_nulls(column.type, field.type)):
            was = " (all None in the batches that fixed the stream's schema)" if \
                pa.types.is_null(field.type) else ""
            raise ArrowMappingError(field.name, first, f"the stream's type is {field.type}"
                                    f"{was}, this batch's is {column.type}")
        try:
            arrays.append(column.cast(field.type, safe=True))
        except (pa.ArrowException, ValueError) as err:
            raise ArrowMappingError(field.name, first, f"can't cast {column.type} to "
                                    f"{field.type}: {err}") from None
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _checked_schema(schema: Any) -> Any:
    if schema is None or isinstance(schema, arrow().Schema):
        return schema
    raise InvalidArgumentError(f"schema must be a pyarrow.Schema or None, got "
                               f"{type(schema).__qualname__}")


def _one_schema(trees: Iterator[Any], schema: Any) -> Iterator[Any]:
    """Record batches of one schema (``schema``, else the first batch's)."""
    given = schema is not None
    at = 0
    try:
        for tree in trees:
            got = record_batch(tree, at)
            if schema is None:
                schema = got.schema
            got = conformed(got, schema, at, given)
            at += got.num_rows
            yield got
    finally:
        trees.close()  # type: ignore[attr-defined]


def as_format(trees: Iterator[Any], format: BatchFormat, schema: Any = None
              ) -> Iterator[Any]:
    """Batches of columns (``trees``) as ``format`` asks: themselves (``"numpy"``), Arrow
    record batches of one schema, or pandas DataFrames made of those."""
    if format == "numpy":
        if schema is not None:
            raise InvalidArgumentError('schema= is for format="arrow" or "pandas"')
        return trees
    batches = _one_schema(trees, _checked_schema(schema))
    return batches if format == "arrow" else _frames(batches)


def _frames(batches: Iterator[Any]) -> Iterator[Any]:
    try:
        for batch in batches:
            yield batch.to_pandas()
    finally:
        batches.close()  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- the reader's face


class ArrowOut:
    """What :class:`~recprep.RecordIO` gives Arrow, pandas, polars and DuckDB (see the
    module's mapping). Every method makes one pass, with the reader's options."""

    def batches(self, batch_size: int, *, drop_last: bool = False,
                format: BatchFormat = "numpy", schema: Any = None) -> Iterator[Any]:
        raise NotImplementedError  # RecordIO's

    def to_arrow(self, *, schema: pyarrow.Schema | None = None) -> pyarrow.Table:
        """A pass as one ``pyarrow.Table`` (held whole: its record batches are of
        :data:`ARROW_BATCH_ROWS` instances). With ``schema``, every batch is cast to it;
        without, a column of only ``None`` in some batches takes the type of the others.
        """
        pa = arrow()
        if schema is not None:
            got = list(self.batches(ARROW_BATCH_ROWS, format="arrow", schema=schema))
            return pa.Table.from_batches(got, schema=schema)
        trees = self.batches(ARROW_BATCH_ROWS)
        got, at = [], 0
        for tree in trees:
            got.append(record_batch(tree, at))
            at += got[-1].num_rows
        if not got:
            return pa.table({})
        try:
            schema = pa.unify_schemas([b.schema for b in got], promote_options="default")
        except (pa.ArrowException, TypeError):
            schema = got[0].schema  # conform names the first batch that differs
        starts = np.cumsum([0] + [b.num_rows for b in got])
        return pa.Table.from_batches(
            [conformed(b, schema, int(s), False) for b, s in zip(got, starts, strict=False)],
            schema=schema)

    def to_pandas(self, *, schema: pyarrow.Schema | None = None) -> pandas.DataFrame:
        """A pass as one ``pandas.DataFrame``: :meth:`to_arrow`'s table, as pyarrow's
        ``Table.to_pandas`` makes it (``fixed_size_list`` columns hold numpy arrays)."""
        return self.to_arrow(schema=schema).to_pandas()

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        """A pass as an Arrow C stream (a PyCapsule), record batches of
        :data:`ARROW_BATCH_ROWS` instances: ``pyarrow.RecordBatchReader.from_stream``,
        ``polars.DataFrame`` / ``polars.from_arrow`` and DuckDB read it. The pass starts
        here (its first batch fixes the schema, see the module); ``requested_schema`` (a
        schema capsule) casts the stream, as pyarrow can."""
        pa = arrow()
        batches = self.batches(ARROW_BATCH_ROWS, format="arrow")
        head = next(batches, None)
        schema = pa.schema([]) if head is None else head.schema
        stream = pa.RecordBatchReader.from_batches(
            schema, batches if head is None else chain([head], batches))
        return stream.__arrow_c_stream__(requested_schema)
