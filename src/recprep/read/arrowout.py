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

from collections.abc import Callable, Iterator
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np

from .._core.arrowcols import arrow, numeric_batch, record_batch
from .._core.batching import BatchFormat, Columns, collate
from ..codecs import Codec
from ..errors import ArrowMappingError, InvalidArgumentError, RecprepError

if TYPE_CHECKING:
    import pandas
    import pyarrow

__all__ = ["ARROW_BATCH_ROWS", "ArrowOut", "as_format", "chunk_batch", "conformed"]

#: instances per record batch of :meth:`ArrowOut.to_arrow` and of the Arrow stream
ARROW_BATCH_ROWS = 8192


# --------------------------------------------------------------------------- one chunk


def chunk_batch(codec: Codec, records: Any) -> Columns | None:
    """A chunk's :class:`~recprep.batching.Columns` for ``batches(format="arrow")``: the
    codec's own (:meth:`~recprep.codecs.base.Codec.decode_arrow_columns`, built from the
    chunk's bytes), else its ``decode_columns`` — made one ``pyarrow.RecordBatch`` where
    they hold Python objects (str, bytes, lists), kept numpy columns where they are
    numbers and arrays only (a batch copies those once, and Arrow takes the copy). None
    when the codec decodes the chunk record by record, or its columns don't map (those
    records then raise, or not, as they are decoded)."""
    own = codec.decode_arrow_columns(records)
    if own is not None:
        return own
    columns = codec.decode_columns(records)
    if columns is None or not _has_objects(columns.tree):
        return columns  # numbers and arrays: a batch copies them once, Arrow takes that
    try:
        batch = record_batch(columns.tree)
    except ArrowMappingError:
        return None
    return Columns(batch, columns.n, ("arrow", columns.signature, batch.schema))


def _has_objects(tree: Any) -> bool:
    """Whether a column tree has a column of Python objects (str, bytes, lists)."""
    if isinstance(tree, (tuple, dict)):
        return any(map(_has_objects, tree.values() if isinstance(tree, dict) else tree))
    return not isinstance(tree, np.ndarray) or tree.dtype == object


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
    if batch.schema.equals(schema, check_metadata=True):
        return batch
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
            was = " (all None in the batches that fixed the stream's schema)" if any(
                map(pa.types.is_null, _leaf_types([field.type]))) else ""
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


def _one_schema(trees: Iterator[Any], schema: Any, given: bool | None = None
                ) -> Iterator[Any]:
    """Record batches of one schema (``schema``, else the first batch's); ``given``
    (default: whether there is a schema): cast to it, safely, not only nulls."""
    given = schema is not None if given is None else given
    known: dict[Any, Any] = {}  # numeric_batch's layouts
    batch_type = arrow().RecordBatch
    at = 0
    try:
        for tree in trees:
            if type(tree) is batch_type:  # (most batches of small rows: a slice)
                got, its = tree, tree.schema
            else:
                got, its = _batch_of(tree, known, at)
            if schema is None:
                schema = its
            elif its is not schema and not its.equals(schema, check_metadata=True):
                got = conformed(got, schema, at, given)  # else: as it is
            at += got.num_rows
            yield got
            del tree, got  # not held while the next batch is made: its memory is reused
    finally:
        trees.close()  # type: ignore[attr-defined]


def _batch_of(tree: Any, known: dict[Any, Any], at: int) -> tuple[Any, Any]:
    """A batch of columns (not a record batch) as a record batch, and its schema."""
    made = numeric_batch(tree, known, at)
    if made is None:
        got = record_batch(tree, at)
        return got, got.schema
    return made


def as_format(format: BatchFormat, schema: Any = None
              ) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """What makes batches of columns (trees) into batches of ``format``: themselves
    (``"numpy"``), Arrow record batches of one schema, or pandas DataFrames of those —
    ``format`` and ``schema`` checked now, before a pass starts."""
    if format == "numpy":
        if schema is not None:
            raise InvalidArgumentError('schema= is for format="arrow" or "pandas"')
        return lambda trees: trees
    schema = _checked_schema(schema)
    if format == "arrow":
        return lambda trees: _one_schema(trees, schema)
    return lambda trees: _frames(_one_schema(trees, schema))


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

    def _batch_trees(self, batch_size: int, drop_last: bool = False, arrow: bool = False
                     ) -> Iterator[Any]:
        raise NotImplementedError  # RecordIO's: a pass's batches of columns (Arrow ones)

    def to_arrow(self, *, schema: pyarrow.Schema | None = None) -> pyarrow.Table:
        """A pass as one ``pyarrow.Table`` (held whole: its record batches are of
        :data:`ARROW_BATCH_ROWS` instances). With ``schema``, every batch is cast to it;
        without, a column of only ``None`` in some batches takes the type of the others.
        """
        pa = arrow()
        if schema is not None:
            got = list(self.batches(ARROW_BATCH_ROWS, format="arrow", schema=schema))
            return pa.Table.from_batches(got, schema=schema)
        trees = self._batch_trees(ARROW_BATCH_ROWS, arrow=True)
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
        ``polars.DataFrame`` and DuckDB read it. ``requested_schema`` (a schema capsule:
        ``RecordBatchReader.from_stream(reader, schema=...)``) is what ``schema=`` is to
        :meth:`batches`. An error of the pass reaches the consumer as its own error type
        (pyarrow's ``ArrowInvalid``) with recprep's message.

        The pass starts when the stream's first batch is read — a consumer that only asks
        for the schema (DuckDB asks several streams for it before it scans one) reads
        nothing and uses up no epoch. The schema comes from the first instances of the
        set (in ``convert``'s order, kept for the reader's later streams); where one of
        their columns is all ``None``, from the pass's first batch instead (the pass then
        starts here)."""
        pa = arrow()
        if requested_schema is not None:  # what schema= is to batches(): every batch cast
            asked = pa.Schema._import_from_c_capsule(requested_schema)
            stream = pa.RecordBatchReader.from_batches(asked, self._stream(asked, True))
            return stream.__arrow_c_stream__()
        schema = self._stream_schema()
        if schema is not None:
            stream = pa.RecordBatchReader.from_batches(schema, self._stream(schema))
            return stream.__arrow_c_stream__(requested_schema)
        batches = self.batches(ARROW_BATCH_ROWS, format="arrow")
        head = next(batches, None)
        schema = pa.schema([]) if head is None else head.schema
        stream = pa.RecordBatchReader.from_batches(
            schema, batches if head is None else chain([head], batches))
        return stream.__arrow_c_stream__(requested_schema)

    def dataset(self, *, cache_chunks: int = 64) -> Any:
        raise NotImplementedError  # RecordIO's

    def _stream_schema(self) -> Any:
        """The schema of the first instances of the set (random access: no pass), or None
        where a column of theirs is all None (or they can't be read or mapped)."""
        known = self.__dict__.get("_arrow_schema")
        if known is not None:
            return known
        pa = arrow()
        try:
            first = self.dataset(cache_chunks=0)[:ARROW_BATCH_ROWS]
            schema = record_batch(collate(first)).schema if first else None
        except RecprepError:
            return None
        if schema is None or any(pa.types.is_null(t) for t in _leaf_types(schema)):
            return None
        self.__dict__["_arrow_schema"] = schema
        return schema

    def _stream(self, schema: Any, given: bool = False) -> Iterator[Any]:
        """The batches of a pass that starts when the first is asked for."""
        yield from _one_schema(self._batch_trees(ARROW_BATCH_ROWS, arrow=True), schema,
                               given=given)


def _leaf_types(types: Any) -> Iterator[Any]:
    """Every type of ``types`` (a schema's fields', or types), nested ones too."""
    stack = [getattr(t, "type", t) for t in types]
    while stack:
        kind = stack.pop()
        yield kind
        stack.extend(kind.field(i).type for i in range(kind.num_fields))
