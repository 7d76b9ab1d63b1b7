"""Spark DataFrames in and out: TFRecord or RecordIO shard sets, with ``partition_by``.

::

    from recprep import spark as rs

    rs.write(df, "s3://bucket/ds", format="tfrecord", partition_by=["number"],
             mode="overwrite")                      # number=1/, number=8/, ..., _SUCCESS
    df2 = rs.read(spark, "s3://bucket/ds")          # partition columns come back as columns

    rs.register(spark)                              # the Python data sources
    spark.read.format("tfrecord").load(path)
    df.write.format("tfrecord").mode("overwrite").option("partitionBy", "number").save(path)

Rows become ``tf.train.Example`` records (``codec="example"``) or dicts of the ``recprep``
codec; each partition directory is a shard set with its manifest (the columns and their
Spark types in its ``schema``), committed like ``convert``'s, and ``_SUCCESS`` marks a
complete write. The work runs on the executors; nothing is collected to the driver but
file facts. Reading also takes what Spark-TFRecord and the Spark-TensorFlow-Connector write
(``part-*`` files, no manifest). See ``docs/spark.md``.

pyspark (>= 4.0) and pyarrow are imported only when these functions are called:
``pip install 'recprep[spark]'``.

Where things live:

================  ========================================================================
module            what it holds
================  ========================================================================
``jobs``          ``write``/``read`` on the driver: the Spark jobs they run
``codecs``        each codec's Spark side, one class per codec in one table: the columns
                  it writes, its row encoder, its records as Arrow, a set's columns
``columns``       column types (``ColumnSpec``), Example features, types inferred
``encode``        rows to records, one encoder per codec
``arrays``        a chunk's records to Arrow arrays (at once, else record by record)
``writing``       a write's plan: arguments and columns checked, staging, commit
``pieces``        the executors' part of a write: each task's rows into piece files
``assemble``      pieces into balanced shards (``num_shards``, ``records_per_shard``)
``commit``        each directory's set committed, manifest schemas, ``_SUCCESS``
``reports``       the tasks' reports, saved for the driver as JSON
``reading``       a read's plan: the files, the schema, one task per file
``decode``        the executors' part of a read: a file's records to record batches
``layout``        Hive-style partition directories: names, discovery
``datasource``    the Python data sources (``tfrecord``, ``recordio`` and the internal two)
================  ========================================================================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import MissingDependencyError

if TYPE_CHECKING:
    from .writing import SparkWriteResult

__all__ = ["read", "register", "write"]


def _require(purpose: str) -> None:
    """Raise :class:`~recprep.errors.MissingDependencyError` unless pyspark and pyarrow
    import."""
    for module in ("pyspark", "pyarrow"):
        try:
            __import__(module)
        except ImportError:
            raise MissingDependencyError(module, "spark", purpose) from None


def write(
    df: Any,
    path: str,
    *,
    format: str = "tfrecord",
    codec: str = "example",
    compressor: str | None = None,
    partition_by: str | Sequence[str] | None = None,
    num_shards: int | None = None,
    records_per_shard: int | None = None,
    mode: str = "error",
    partition_overwrite: str = "dynamic",
    storage_options: Mapping[str, Any] | None = None,
    name_prefix: str = "part",
) -> SparkWriteResult:
    """Write a DataFrame as shard sets, one per partition directory.

    Parameters
    ----------
    df
        A pyspark ``DataFrame``. Its rows are encoded on the executors.
    path
        The dataset directory, local or an fsspec URL every executor reaches.
    format
        ``"tfrecord"`` (default) or ``"recordio"``.
    codec
        ``"example"`` (``tf.train.Example`` records; a null value leaves its feature out of
        that Example, as Spark-TFRecord does), ``"recprep"`` (``{column: value}`` dicts,
        nulls kept as ``None``, float64 exact) or ``"raw"`` (one binary column, the record
        itself: Spark-TFRecord's ``recordType=ByteArray``).
    compressor
        ``None`` for the format's default (``"none"`` for TFRecord, ``"snappy"`` for
        RecordIO); TFRecord takes ``"gzip"`` and ``"zlib"``, RecordIO ``"gzip"``.
    partition_by
        Columns whose values name Hive-style directories (``number=8/``); they are left out
        of the records and come back from the directory names on reading.
    num_shards, records_per_shard
        Shards per directory: exactly ``num_shards``, or as many as keep each under
        ``records_per_shard`` records (balanced to within one record). Neither: one shard
        per Spark task and directory, as Spark writes (no extra pass over the data).
    mode
        ``"error"`` (default: refuse a non-empty path), ``"overwrite"`` or ``"append"``
        (a new shard set with a fresh prefix in each directory; existing files untouched).
    partition_overwrite
        With ``mode="overwrite"``: ``"dynamic"`` (default) replaces only the partition
        directories the DataFrame has rows for; ``"static"`` replaces the whole dataset.
    storage_options
        Passed to fsspec (credentials, endpoint...), on the driver and the executors.
    name_prefix
        Shards are ``{name_prefix}-00000-of-00003``...; appends add a suffix to it.

    Returns
    -------
    SparkWriteResult
        The directories written, with their manifests.
    """
    _require("recprep.spark.write")
    from .jobs import write_dataframe

    return write_dataframe(
        df, path, format=format, codec=codec, compressor=compressor,
        partition_by=partition_by, num_shards=num_shards,
        records_per_shard=records_per_shard, mode=mode,
        partition_overwrite=partition_overwrite, storage_options=storage_options,
        name_prefix=name_prefix,
    )


def read(
    spark: Any,
    path: str,
    *,
    schema: Any = None,
    record_type: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    columns: Sequence[str] | None = None,
) -> Any:
    """Read a dataset written by :func:`write`, ``convert``, Spark-TFRecord or the
    Spark-TensorFlow-Connector into a DataFrame, one Spark task per file.

    Parameters
    ----------
    spark
        The ``SparkSession``.
    path
        The dataset directory (or one file), local or an fsspec URL.
    schema
        A ``StructType`` (or DDL string) to read with. By default the schema comes from
        the manifests, or, without one, from the records of the first non-empty file
        (Examples: ``int64_list`` -> bigint, ``float_list`` -> float, ``bytes_list`` ->
        string; a list that doesn't hold exactly one value in some record -> array).
    record_type
        ``"Example"`` or ``"ByteArray"`` (one ``byteArray`` binary column per record), for
        files without a manifest. By default Examples are expected.
    storage_options
        Passed to fsspec, on the driver and the executors.
    columns
        Read only these columns (data or partition columns), in this order: the others'
        values are never decoded. Spark doesn't tell a Python data source which columns
        a query uses, so ``rs.read(spark, path).select("x")`` decodes every column;
        ``rs.read(spark, path, columns=["x"])`` decodes one.

    Returns
    -------
    pyspark.sql.DataFrame
        The data columns, then the partition columns (typed as written, or ``int`` /
        ``string`` inferred from the directory names when there is no manifest).
    """
    _require("recprep.spark.read")
    from .jobs import read_dataframe

    return read_dataframe(spark, path, schema=schema, record_type=record_type,
                 storage_options=storage_options, columns=columns)


def register(spark: Any) -> None:
    """Register the Python data sources ``tfrecord`` and ``recordio`` with ``spark``.

    Then ``spark.read.format("tfrecord").load(path)`` and
    ``df.write.format("tfrecord").mode("overwrite").save(path)`` work, with the options
    ``recordType`` (``Example`` or ``ByteArray``), ``compression``, ``partitionBy``
    (comma-separated: Spark refuses ``.partitionBy()`` for Python data sources),
    ``partitionOverwriteMode`` (``dynamic``, the default, or ``static``) and
    ``namePrefix``. Spark 4 accepts only the ``append`` and ``overwrite`` save modes for
    Python data sources. Needs pyspark >= 4.0, and recprep and pyarrow in the workers'
    Python (else :class:`~recprep.errors.WorkerImportError`: set ``PYSPARK_PYTHON``).
    """
    _require("recprep.spark.register")
    from ..executors.spark import check_workers
    from .datasource import register_data_sources

    check_workers(spark)  # the sources run in Spark's Python workers: they must import recprep
    register_data_sources(spark)
