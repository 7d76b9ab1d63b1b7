"""Records to rows: the files of a dataset read back as Arrow record batches.

Each file is read by one task (:func:`read_file`): its container is taken from the
manifest or detected from the bytes (:func:`recprep.containers.sniff`), every checksum
is verified, and each chunk of records becomes one record batch of the requested
columns, with the file's partition values added as constant columns.

A chunk is decoded at once where its records share one layout — Examples parsed by
:func:`~recprep.codecs.example.parse_chunk`, recprep records by the codec's
``decode_columns`` — and each column's Arrow array is made from numpy buffers
(:mod:`recprep.spark.arrays`); only the requested columns' values are read. Columns that
can't be made so (other layouts, a value that doesn't fit) are decoded record by record,
which gives the same values and errors.

* ``example`` records: a missing feature (or an empty list, for a scalar column) is a
  null; a scalar column whose list holds several values raises
  :class:`~recprep.errors.DecodeError` (read it as an array); ``bytes_list`` values are
  decoded as UTF-8 for string columns.
* ``recprep`` records are ``{column: value}`` dicts; ``raw`` records fill the one binary
  column (``byteArray``).

Example
-------
>>> batch = RecordDecoder("example", [ColumnSpec("id", "int")]).decode(
...     [bytes.fromhex("0a0d0a0b0a02696412051a030a0107"), b""])
>>> batch.to_pylist()
[{'id': 7}, {'id': None}]
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ..codecs import get_codec
from ..codecs.example import parse_chunk
from ..containers import DEFAULT_MAX_CHUNK_BYTES, Format, sniff
from ..errors import DecodeError
from ..storage.fs import open_regular
from .arrays import arrow_type, example_array, value_array
from .columns import ColumnSpec

__all__ = ["FileTask", "RecordDecoder", "arrow_type", "conform", "read_file"]


@dataclass(frozen=True)
class FileTask:
    """One file to read: where, how, and the partition values of its directory."""

    path: str
    shown: str
    codec: str  # "example", "recprep" or "raw"
    #: the manifest's format (it travels by class reference: a format registered outside
    #: recprep is imported on the executor); None: detect it from the bytes
    container: Format | None = None
    compressor: str | None = None
    partition: tuple[Any, ...] = ()


def _fail(column: ColumnSpec, detail: str) -> DecodeError:
    return DecodeError(f"column {column.name!r} ({column.type}): {detail}")


def _utf8_texts(values: list[Any], column: ColumnSpec) -> list[Any]:
    try:
        return [None if v is None else v.decode("utf-8") for v in values]
    except UnicodeDecodeError:
        raise _fail(column, "a value is not UTF-8 text; read the column as binary "
                            "(schema=...)") from None


class RecordDecoder:
    """Decodes records of one codec into a record batch of ``columns``."""

    def __init__(self, codec: str, columns: Sequence[ColumnSpec]) -> None:
        self.codec_name = codec
        self.columns = list(columns)
        self.schema = pa.schema([(c.name, arrow_type(c.type)) for c in self.columns])
        self._codec = get_codec(codec)
        self._names = {c.name for c in self.columns}

    def decode(self, records: Sequence[bytes]) -> pa.RecordBatch:
        """The record batch of a chunk's ``records`` (a list of them, or a container's
        ``Records``)."""
        if self.codec_name == "raw":
            arrays = [pa.array(list(records), pa.binary())]
        elif self.codec_name == "recprep":
            arrays = self._dicts(records)
        else:
            arrays = self._examples(records)
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _dicts(self, records: Sequence[bytes]) -> list[pa.Array]:
        n = len(records)
        columns = self._codec.decode_columns(records)  # type: ignore[arg-type]
        tree = columns.tree if columns is not None else None
        if isinstance(tree, dict):
            arrays = [value_array(c, tree[c.name], n) if c.name in tree
                      else pa.nulls(n, arrow_type(c.type)) for c in self.columns]
        else:
            arrays = [None] * len(self.columns)
        if all(a is not None for a in arrays):
            return arrays
        rows = _decoded(self._codec.decode, records)
        for row in rows[:1]:
            if not isinstance(row, dict):
                raise DecodeError(
                    f"the records hold {type(row).__name__} values, not dicts of columns; "
                    "read them with recprep.RecordIO"
                )
        for k, column in enumerate(self.columns):
            if arrays[k] is not None:
                continue
            values = [row.get(column.name) for row in rows]
            try:
                arrays[k] = pa.array(values, arrow_type(column.type))
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as err:
                raise _fail(column, f"a value doesn't fit: {err}") from None
        return arrays

    def _examples(self, records: Sequence[bytes]) -> list[pa.Array]:
        """The columns of a chunk parsed at once where it can be (only the columns read:
        the other features' framing is checked, their values not read), else — for the
        columns that need it — of the records decoded one by one."""
        n = len(records)
        parsed = parse_chunk(records, self._names)
        arrays = ([None] * len(self.columns) if parsed is None else
                  [example_array(c, parsed.get(c.name), n) for c in self.columns])
        if all(a is not None for a in arrays):
            return arrays
        examples = _decoded(self._codec.decode, records)
        return [a if a is not None else self._column(c, [e.get(c.name) for e in examples])
                for a, c in zip(arrays, self.columns, strict=True)]

    def _column(self, column: ColumnSpec, lists: list[np.ndarray | None]) -> pa.Array:
        element, depth = column.element, column.depth
        wanted = arrow_type(column.type)
        if depth > 1:
            raise _fail(column, f"an Example feature is a flat list; read it as "
                                f"array<{element}>")
        text = element in ("string", "binary")
        expected = "O" if text else "f" if element in ("float", "double") else "i"
        kinds = {v.dtype.kind for v in lists if v is not None and v.size} - {expected}
        if kinds:
            found = {"O": "bytes_list", "i": "int64_list", "f": "float_list"}
            raise _fail(column, f"the records hold a {found[kinds.pop()]}")
        if depth == 0:
            many = [v.size for v in lists if v is not None and v.size > 1]
            if many:
                raise _fail(column, f"a record holds {many[0]} values for this scalar "
                                    f"column; read it as array<{element}> (schema=...)")
            values = [v[0] if v is not None and v.size else None for v in lists]
            if element == "string":
                return pa.array(_utf8_texts(values, column), wanted)
            if text:
                return pa.array(values, wanted)
            return self._numbers(column, values, wanted)
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
        values = self._numbers(column, flat, wanted.value_type)
        mask = pa.array([v is None for v in lists]) if any(v is None for v in lists) else None
        lists_array = pa.LargeListArray.from_arrays(pa.array(offsets), values, mask=mask)
        return lists_array.cast(wanted)

    @staticmethod
    def _numbers(column: ColumnSpec, values: Any, wanted: pa.DataType) -> pa.Array:
        try:
            if isinstance(values, np.ndarray):
                if pa.types.is_boolean(wanted):
                    return pa.array(values != 0)
                return pa.array(values).cast(wanted)
            if pa.types.is_boolean(wanted):
                return pa.array([None if v is None else bool(v) for v in values], wanted)
            return pa.array([None if v is None else v.item() for v in values]).cast(wanted)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
            raise _fail(column, f"a value doesn't fit: {err}") from None


def _decoded(decode: Any, records: Sequence[bytes]) -> list[Any]:
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


def conform(batch: pa.RecordBatch, schema: pa.Schema, where: str) -> pa.RecordBatch:
    """``batch`` with exactly ``schema`` (the one Spark expects: column order, list field
    names, nullability); a null in a non-nullable column is a ``DecodeError``."""
    arrays = []
    for f in schema:
        arr = batch.column(f.name)
        if not f.nullable and arr.null_count:
            raise DecodeError(f"{where}: column {f.name!r} is not nullable, but a record has "
                              "no value for it; read with a schema where it is nullable")
        arrays.append(arr if arr.type == f.type else arr.cast(f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def read_file(
    fs: Any,
    task: FileTask,
    columns: Sequence[ColumnSpec],
    partition_columns: Sequence[ColumnSpec] = (),
    *,
    arrow_schema: pa.Schema | None = None,
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
) -> Iterator[pa.RecordBatch]:
    """The record batches of one file: ``columns`` decoded from its records, then the
    ``partition_columns`` filled with the task's partition values, conformed to
    ``arrow_schema`` when given. Runs on an executor."""
    decoder = RecordDecoder(task.codec, columns)
    constants = [(c.name, arrow_type(c.type), v)
                 for c, v in zip(partition_columns, task.partition, strict=True)]
    with open_regular(fs, task.path) as handle:
        container = task.container or sniff(handle, path=task.shown)
        if container is None:
            return  # an empty file
        chunks = container.read_chunks(handle, path=task.shown, max_chunk_bytes=max_chunk_bytes,
                                       compressor=task.compressor)
        for chunk in chunks:
            try:
                batch = decoder.decode(chunk.records)
            except DecodeError as err:
                raise err.located(path=task.shown, offset=chunk.offset) from None
            if constants:
                n = batch.num_rows
                arrays = [*batch.columns,
                          *(pa.array([v] * n, t) for _, t, v in constants)]
                names = [*batch.schema.names, *(name for name, _, _ in constants)]
                batch = pa.RecordBatch.from_arrays(arrays, names=names)
            yield batch if arrow_schema is None else conform(batch, arrow_schema, task.shown)
