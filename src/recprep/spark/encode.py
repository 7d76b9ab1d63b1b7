"""Rows to records: a DataFrame's Arrow record batches, encoded by one codec.

One encoder class per codec; the table of :mod:`recprep.spark.codecs` says which one a
codec uses (:meth:`~recprep.spark.codecs.SparkCodec.encoder`).

* ``example`` — one ``tf.train.Example`` per row, byte for byte what
  :class:`~recprep.codecs.example.ExampleCodec` gives for the row's values as arrays
  (entries in TensorFlow's key order, :func:`~recprep.codecs.example.wire.key_order`;
  packed lists), built a column at a time by the codecs' one column encoder
  (:class:`recprep.codecs.example.ExampleBuilder`, which ``ExampleCodec.encode_columns``
  uses too): numbers are turned into float32 bytes and varints by numpy for the whole
  batch, and each row's entry is a cached header plus a slice. A null
  value leaves its feature out of that row's Example (as Spark-TFRecord does); a null
  *element* of an array can't be written (an Example list has no nulls) and raises
  :class:`~recprep.errors.EncodeError` naming the column.
* ``recprep`` — one ``{column: value}`` dict per row (nulls kept as ``None``).
* ``raw`` — the bytes of the single binary column (Spark-TFRecord's ``ByteArray``).

Example
-------
>>> import pyarrow as pa
>>> from recprep.codecs.example import ExampleCodec
>>> batch = pa.record_batch({"id": pa.array([3, None]), "w": pa.array(["ab", "c"])})
>>> encoder = ExampleEncoder([ColumnSpec("id", "bigint"), ColumnSpec("w", "string")])
>>> first, second = encoder.encode(batch)
>>> ExampleCodec().decode(first), ExampleCodec().decode(second)
({'id': array([3]), 'w': array([b'ab'], dtype=object)}, {'w': array([b'c'], dtype=object)})
>>> sorted(encoder.nulls)
['id']
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from ..codecs import get_codec
from ..codecs.example import (
    BYTES,
    LIST_BODY,
    ExampleBuilder,
    Payload,
    bytes_payload,
    number_payload,
)
from ..codecs.example.wire import field_head
from ..errors import EncodeError
from .columns import ColumnSpec

__all__ = ["BatchEncoder", "ExampleEncoder", "RawEncoder", "RecprepEncoder"]


def _binary(arr: pa.Array) -> tuple[np.ndarray, bytes]:
    """Offsets (int64, one more than values) and data of a string or binary array."""
    arr = arr.cast(pa.large_binary())
    _, offsets, data = arr.buffers()
    starts = np.frombuffer(offsets, np.int64, len(arr) + 1, arr.offset * 8)
    return starts, b"" if data is None else data.to_pybytes()


def _arrow_numbers(arr: pa.Array, element: str) -> np.ndarray:
    """Numeric values as numpy (nulls as 0): floats as they are (float32 on the wire),
    bools and ints as int64 (varints on the wire)."""
    if pa.types.is_boolean(arr.type):
        arr = arr.cast(pa.int8())
    values = arr.fill_null(0).to_numpy(zero_copy_only=False) if arr.null_count else (
        arr.to_numpy(zero_copy_only=False)
    )
    return values if element == "float" else values.astype(np.int64)


class BatchEncoder:
    """Turns record batches into records; remembers which columns held nulls."""

    def __init__(self, columns: Sequence[ColumnSpec]) -> None:
        self.columns = list(columns)
        self.nulls: set[str] = set()

    def encode(self, batch: pa.RecordBatch) -> list[bytes]:
        """The records of ``batch``'s rows, in order."""
        raise NotImplementedError

    def _note_nulls(self, batch: pa.RecordBatch) -> None:
        for column in self.columns:
            if batch.column(column.name).null_count:
                self.nulls.add(column.name)


class ExampleEncoder(BatchEncoder):
    """Rows as ``tf.train.Example`` records (see the module docstring): each column's
    payload made from Arrow, the records by the codecs' shared column encoder."""

    def __init__(self, columns: Sequence[ColumnSpec]) -> None:
        super().__init__(columns)
        self._builder = ExampleBuilder()

    def encode(self, batch: pa.RecordBatch) -> list[bytes]:
        self._note_nulls(batch)
        return self._builder.records([self._payload(c, batch.column(c.name))
                                      for c in self.columns])

    def _payload(self, column: ColumnSpec, arr: pa.Array) -> Payload:
        """``column``'s values; no entry in the rows where it is null."""
        absent = arr.is_null().to_numpy(zero_copy_only=False) if arr.null_count else None
        element = "float" if column.element == "float" else (
            "bytes" if column.element in ("string", "binary") else "int"
        )
        if column.depth == 0:
            if element == "bytes":
                starts, data = _binary(arr)
                return bytes_payload(column.name, data, starts, absent)
            return number_payload(column.name, _arrow_numbers(arr, element), None, absent)
        if arr.flatten().null_count:
            raise EncodeError(
                f"column {column.name!r} ({column.type}) holds an array with a null "
                "element; an Example list can't hold nulls: drop or fill them first "
                "(e.g. F.filter(col, lambda x: x.isNotNull())), or use codec='recprep'"
            )
        arr = arr.cast(pa.large_list(arr.type.value_type))
        rows = np.frombuffer(arr.buffers()[1], np.int64, len(arr) + 1, arr.offset * 8)
        if element == "bytes":
            data, starts = self._string_lists(arr.values, rows)
            return Payload(column.name, BYTES, LIST_BODY, data, starts, absent)
        return number_payload(column.name, _arrow_numbers(arr.values, element), rows, absent)

    @staticmethod
    def _string_lists(values: pa.Array, rows: np.ndarray) -> tuple[bytes, np.ndarray]:
        """The bytes-list bodies of arrays of strings, back to back, and where each row's
        body starts (``rows``: each row's first value)."""
        offsets, data = _binary(values)
        frames = [field_head(e - s) + data[s:e]
                  for s, e in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)]
        sizes = np.fromiter(map(len, frames), np.int64, len(frames))
        value_starts = np.zeros(len(frames) + 1, dtype=np.int64)
        np.cumsum(sizes, out=value_starts[1:])
        return b"".join(frames), value_starts[rows]


class RecprepEncoder(BatchEncoder):
    """Rows as ``{column: value}`` dicts of the ``recprep`` codec."""

    def __init__(self, columns: Sequence[ColumnSpec]) -> None:
        super().__init__(columns)
        self._codec = get_codec("recprep")

    def encode(self, batch: pa.RecordBatch) -> list[bytes]:
        self._note_nulls(batch)
        names = [c.name for c in self.columns]
        values = [batch.column(n).to_pylist() for n in names]
        encode = self._codec.encode
        return [encode(dict(zip(names, row, strict=True)))
                for row in zip(*values, strict=True)]


class RawEncoder(BatchEncoder):
    """The single binary column's bytes as the record."""

    def encode(self, batch: pa.RecordBatch) -> list[bytes]:
        (column,) = self.columns
        arr = batch.column(column.name)
        if arr.null_count:
            raise EncodeError(
                f"column {column.name!r} holds a null; a ByteArray record can't be null: "
                "filter those rows first"
            )
        return list(arr.to_pylist())
