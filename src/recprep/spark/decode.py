"""Records to rows: the files of a dataset read back as Arrow record batches.

Each file is read by one task (:func:`read_file`): its container is taken from the
manifest or detected from the bytes (:func:`recprep.containers.sniff`), every checksum
is verified (a TFRecord file's frames placed by its side index where it has one), and
each chunk of records becomes one record batch of the requested columns, with the file's
partition values added as constant columns: one row per record of the chunk, also when
no data column is requested (then no record is decoded).

How a chunk's records become columns is their codec's: the decoder asks the table of
:mod:`recprep.spark.codecs` (``example`` and ``recprep`` records are decoded a chunk at
once where they can be, :mod:`recprep.spark.arrays`; ``raw`` records fill the one binary
column, ``byteArray``).

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

import pyarrow as pa

from .._core.native import kernels
from ..codecs import get_codec
from ..containers import DEFAULT_MAX_CHUNK_BYTES, Format, sniff
from ..containers.tfrecord import TFRecordFormat
from ..errors import DecodeError
from ..storage.fs import open_regular
from ..storage.sideindex import load_index
from .arrays import arrow_type
from .codecs import spark_codec
from .columns import ColumnSpec

__all__ = ["FileTask", "RecordDecoder", "arrow_type", "conform", "read_file", "rows_only"]


@dataclass(frozen=True)
class FileTask:
    """One file to read: where, how, and the partition values of its directory."""

    path: str
    shown: str
    codec: str  # a codec of the table, recprep.spark.codecs.SPARK_CODECS
    #: the manifest's format (it travels by class reference: a format registered outside
    #: recprep is imported on the executor); None: detect it from the bytes
    container: Format | None = None
    compressor: str | None = None
    partition: tuple[Any, ...] = ()


class RecordDecoder:
    """Decodes records of one codec into a record batch of ``columns``."""

    def __init__(self, codec: str, columns: Sequence[ColumnSpec]) -> None:
        self.codec_name = codec
        self.columns = list(columns)
        self.schema = pa.schema([(c.name, arrow_type(c.type)) for c in self.columns])
        self._spark = spark_codec(codec)
        self._codec = get_codec(codec)

    def decode(self, records: Sequence[bytes]) -> pa.RecordBatch:
        """The record batch of a chunk's ``records`` (a list of them, or a container's
        ``Records``): one row per record, also when no column is read (then nothing is
        decoded: a batch of no columns and ``len(records)`` rows)."""
        if not self.columns:
            return rows_only(len(records))
        arrays = self._spark.arrays(self._codec, self.columns, records)
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def rows_only(n: int) -> pa.RecordBatch:
    """A record batch of ``n`` rows and no column (``RecordBatch.from_arrays`` of no arrays
    has no rows).

    >>> rows_only(3).num_rows, rows_only(3).num_columns
    (3, 0)
    """
    return pa.RecordBatch.from_struct_array(pa.Array.from_buffers(pa.struct([]), n, [None]))


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
    if not arrays:
        return rows_only(batch.num_rows)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _side_index(fs: Any, path: str, container: Format) -> dict[str, Any]:
    """``read_chunks``' keywords for the file's side index: a TFRecord file's frames where
    it has a usable ``.tfindex`` (a hint checked against the file's own lengths: an index
    that doesn't match changes nothing), else none. The hint spares numpy's walk over the
    lengths only: with recprep's C kernels, which walk the frames in one pass anyway, the
    index isn't read at all."""
    if not isinstance(container, TFRecordFormat) or kernels() is not None:
        return {}
    try:
        index = load_index(fs, path, container)
    except OSError:  # unreadable: the file is walked as without one
        return {}
    return {} if index is None else {"frames": index.bounds()}


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
                                       compressor=task.compressor,
                                       **_side_index(fs, task.path, container))
        for chunk in chunks:
            try:
                batch = decoder.decode(chunk.records)
            except DecodeError as err:
                raise err.located(path=task.shown, offset=chunk.offset) from None
            if constants:
                n = batch.num_rows
                arrays = [*batch.columns,
                          *(pa.repeat(pa.scalar(v, t), n) for _, t, v in constants)]
                names = [*batch.schema.names, *(name for name, _, _ in constants)]
                batch = pa.RecordBatch.from_arrays(arrays, names=names)
            yield batch if arrow_schema is None else conform(batch, arrow_schema, task.shown)
