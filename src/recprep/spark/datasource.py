"""pyspark Python Data Sources (pyspark >= 4.0): ``tfrecord`` and ``recordio``.

After :func:`register_data_sources` (:func:`recprep.spark.register`)::

    spark.read.format("tfrecord").load(path)
    df.write.format("tfrecord").mode("overwrite").option("recordType", "Example") \\
        .option("partitionBy", "number").save(path)

Options (names are case-insensitive):

=========================  ==========================================================
``recordType``             ``Example`` (default) or ``ByteArray`` (one binary column,
                           ``byteArray`` on reading). ``SequenceExample`` is refused.
``compression``            ``none``, ``gzip``, ``zlib`` (TFRecord) or ``snappy``,
                           ``gzip``, ``none`` (RecordIO); Spark-TFRecord's ``codec``
                           option with a Hadoop codec class (``...GzipCodec``) works too
``partitionBy``            comma-separated partition columns (Spark refuses
                           ``.partitionBy()`` for Python data sources)
``partitionOverwriteMode`` ``dynamic`` (default): ``overwrite`` replaces only the
                           partitions written; ``static``: everything
``namePrefix``             shard name prefix (``part``)
``storageOptions``         fsspec storage options, as a JSON object
``columns``                comma-separated columns to read (the others are not
                           decoded): Spark doesn't tell a Python data source which
                           columns a query uses, so ``.select(...)`` alone reads all
=========================  ==========================================================

Spark 4 only accepts the ``append`` and ``overwrite`` save modes for Python data sources
(its default, ``errorifexists``, is refused by Spark itself). Each task's rows for a
partition value become one shard, as Spark writes; :func:`recprep.spark.write` offers
``num_shards`` and ``records_per_shard``. A write's commit (manifests, ``_SUCCESS``) runs
on the driver once every task has finished.

Two more sources, ``recprep_pieces`` and ``recprep_scan``, are recprep's own plumbing for
:func:`recprep.spark.write` and :func:`recprep.spark.read` (they bring rows between the JVM
and Python as Arrow batches); they take a pickled plan as an option and are not for
direct use.
"""

from __future__ import annotations

import json
import logging
import pickle
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)

from ..errors import InvalidArgumentError
from ..executors.base import Outcome, failed
from ..storage.fs import resolve
from .codecs import FALLBACK_CODEC, record_codec
from .decode import read_file
from .pieces import TaskReport, write_pieces
from .reading import ReadPlan, plan_read
from .reports import save_reports
from .writing import (
    SparkWriteJob,
    check_arguments,
    finish,
    group_reports,
    job_from_option,
    outputs_as_pieces,
    prepare_job,
)

__all__ = ["PIECES_SOURCE", "SCAN_SOURCE", "RecordIODataSource", "TFRecordDataSource",
           "register_data_sources", "register_internal"]

log = logging.getLogger("recprep")

PIECES_SOURCE = "recprep_pieces"
SCAN_SOURCE = "recprep_scan"
#: the option carrying a pickled plan (filesystem credentials included): its name matches
#: Spark's default ``spark.redaction.regex``, so plans and the UI show it redacted
PLAN_OPTION = "plan_secret"
_HADOOP_CODECS = {"gzipcodec": "gzip", "defaultcodec": "zlib", "deflatecodec": "zlib",
                  "snappycodec": "snappy", "deflate": "zlib", "uncompressed": "none"}


@dataclass
class TaskMessage(WriterCommitMessage):
    """A writing task's report (pickled), sent to the commit."""

    task: int
    payload: bytes


def _task_id() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


class _ScanReader(DataSourceReader):
    """One input partition per file."""

    def __init__(self, plan: ReadPlan) -> None:
        self.plan = plan

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(task) for task in self.plan.tasks]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from pyspark.sql.pandas.types import to_arrow_schema  # what the worker checks against

        plan = self.plan
        expected = to_arrow_schema(plan.struct(), timezone="UTC")
        yield from read_file(plan.fs, partition.value, plan.columns, plan.partition_columns,
                             arrow_schema=expected)


# -- recprep's plumbing --------------------------------------------------------------------


class _PiecesWriter(DataSourceArrowWriter):
    """Writes pieces; its commit only saves the tasks' outcomes for the driver."""

    def __init__(self, job: SparkWriteJob) -> None:
        self.job = job

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskMessage:
        task = _task_id()
        try:
            outcome = Outcome(result=write_pieces(self.job.plan, task, iterator))
        except Exception as err:  # sent back whole, raised on the driver
            outcome = failed(err)
        return TaskMessage(task, pickle.dumps(outcome))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        outcomes = [(m.task, pickle.loads(m.payload)) for m in messages  # through Spark
                    if isinstance(m, TaskMessage)]
        save_reports(self.job, outcomes)  # JSON data for the driver, never a pickle

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        log.warning("recprep: the Spark job writing %s was aborted", self.job.plan.root)


class _PiecesSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return PIECES_SOURCE

    def writer(self, schema: Any, overwrite: bool) -> _PiecesWriter:
        return _PiecesWriter(job_from_option(self.options[PLAN_OPTION]))


class _ScanSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SCAN_SOURCE

    def schema(self) -> Any:
        return ReadPlan.from_option(self.options[PLAN_OPTION]).struct()

    def reader(self, schema: Any) -> _ScanReader:
        return _ScanReader(ReadPlan.from_option(self.options[PLAN_OPTION]))


def register_internal(spark: Any) -> None:
    """Register recprep's plumbing sources with ``spark`` (idempotent)."""
    spark.dataSource.register(_PiecesSource)
    spark.dataSource.register(_ScanSource)


# -- the public sources --------------------------------------------------------------------


class _DataSourceWriter(DataSourceArrowWriter):
    """Each task's rows per partition value become one shard; the commit makes the sets."""

    def __init__(self, job: SparkWriteJob) -> None:
        self.job = job

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskMessage:
        task = _task_id()
        return TaskMessage(task, pickle.dumps(write_pieces(self.job.plan, task, iterator)))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        reports: list[TaskReport] = [pickle.loads(m.payload) for m in messages
                                     if isinstance(m, TaskMessage)]
        try:
            pieces, nulls = group_reports(reports)
            finish(self.job, outputs_as_pieces(self.job, pieces), nulls)
        finally:
            self._remove_staging()

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self._remove_staging()

    def _remove_staging(self) -> None:
        fs, staging = self.job.plan.fs, self.job.plan.staging
        if fs.exists(staging):
            fs.rm(staging, recursive=True)


class TFRecordDataSource(DataSource):
    """``spark.read.format("tfrecord")`` / ``df.write.format("tfrecord")``."""

    FORMAT = "tfrecord"

    @classmethod
    def name(cls) -> str:
        return cls.FORMAT

    def _location(self) -> tuple[Any, str]:
        path = self.options.get("path")
        if not path:
            raise InvalidArgumentError(
                f"the {self.FORMAT} data source needs a path: .load(path) / .save(path)"
            )
        text = self.options.get("storageOptions")
        try:
            storage = json.loads(text) if text else {}
        except ValueError:
            raise InvalidArgumentError(
                f"storageOptions must be a JSON object, got {text!r}"
            ) from None
        return resolve(path, storage)

    def _columns(self) -> list[str] | None:
        text = self.options.get("columns")
        return None if text is None else [c.strip() for c in str(text).split(",") if c.strip()]

    def schema(self) -> Any:
        fs, root = self._location()
        plan = plan_read(fs, root, record_type=self.options.get("recordType"))
        return plan.select(self._columns()).struct()

    def reader(self, schema: Any) -> _ScanReader:
        fs, root = self._location()
        plan = plan_read(fs, root, schema=schema, record_type=self.options.get("recordType"))
        return _ScanReader(plan.select(self._columns()))

    def writer(self, schema: Any, overwrite: bool) -> _DataSourceWriter:
        fs, root = self._location()
        compression = self.options.get("compression") or self.options.get("codec")
        if compression is not None:
            name = str(compression).rsplit(".", 1)[-1].lower()
            compression = _HADOOP_CODECS.get(name, name)
        partition_by = [c.strip() for c in (self.options.get("partitionBy") or "").split(",")
                        if c.strip()]
        mode = "overwrite" if overwrite else "append"
        partition_overwrite = str(self.options.get("partitionOverwriteMode") or "dynamic")
        prefix = self.options.get("namePrefix") or "part"
        codec = record_codec(self.options.get("recordType")) or FALLBACK_CODEC
        options, columns = check_arguments(
            format=self.FORMAT, codec=codec,
            compressor=compression, partition_by=partition_by, num_shards=None,
            records_per_shard=None, mode=mode, partition_overwrite=partition_overwrite.lower(),
            name_prefix=prefix,
        )
        fs.makedirs(root, exist_ok=True)
        job = prepare_job(schema, fs, root, options, columns, mode=mode,
                      partition_overwrite=partition_overwrite.lower(), name_prefix=prefix)
        log.info("recprep: writing %s (staging %s)", root, posixpath.basename(job.plan.staging))
        return _DataSourceWriter(job)


class RecordIODataSource(TFRecordDataSource):
    """``spark.read.format("recordio")`` / ``df.write.format("recordio")``."""

    FORMAT = "recordio"


def register_data_sources(spark: Any) -> None:
    """Register the ``tfrecord`` and ``recordio`` data sources with ``spark``."""
    spark.dataSource.register(TFRecordDataSource)
    spark.dataSource.register(RecordIODataSource)
