"""A DataFrame write's plan: validate, prepare the staging directory, make shards, commit.

The steps :func:`recprep.spark.jobs.write_dataframe` runs (this module submits no Spark job):

1. **Validate** everything on the driver before any job runs: arguments, column types
   (:func:`check_columns`, by the codec's rules: :mod:`recprep.spark.codecs`), and what
   the output already holds against ``mode`` — ``error`` refuses a non-empty path;
   ``append`` and a dynamic ``overwrite`` refuse data partitioned by other columns
   (:func:`prepare_job`).
2. **Pieces** (:mod:`recprep.spark.pieces`): one Spark job, each task writing its rows,
   per partition directory, into the hidden staging directory. Rows reach Python as Arrow
   batches through recprep's internal Python data source, never through the driver; the
   task reports come back through :mod:`recprep.spark.reports`.
3. **Shards**: with neither ``num_shards`` nor ``records_per_shard``, each piece is a
   shard (one per task and directory, as Spark writes: :func:`outputs_as_pieces`);
   otherwise one more job assembles balanced shards (:mod:`recprep.spark.assemble`).
4. **Commit** (:func:`finish`, :mod:`recprep.spark.commit`): each directory's set with
   the core protocol, manifest last; ``_SUCCESS`` last of all. An error before the commit
   leaves the output as it was; the staging directory is removed either way.

Only file facts (counts, sizes, CRCs, partition values) travel to the driver — as JSON
data, never as a pickle read from the (shared) output directory.
"""
from __future__ import annotations

import base64
import posixpath
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cloudpickle

from ..containers import available_formats
from ..errors import DatasetExistsError, InvalidArgumentError, UnsupportedColumnError
from ..storage.fs import display
from ..storage.manifest import Manifest
from ..storage.shardnames import check_prefix
from ..storage.staging import FileFacts
from ..write.options import WriteOptions, check_options
from .codecs import SPARK_CODECS, spark_codec
from .columns import PARTITION_TYPES, ColumnSpec, type_string
from .commit import DirectoryOutput, commit_dataset, manifest_schema
from .layout import existing_keys, partition_path, visible_entries
from .pieces import PieceFile, TaskReport, WritePlan

__all__ = ["SparkWriteResult", "SparkWriteJob", "check_arguments", "check_columns", "finish",
           "group_reports", "job_from_option", "job_option", "outputs_as_pieces",
           "prepare_job"]

MODES = ("error", "overwrite", "append")
PARTITION_OVERWRITE = ("dynamic", "static")
SPARK_STAGING_PREFIX = ".recprep-staging-spark-"
LOCK_NAME = "spark"
REPORTS = "reports.json"


@dataclass
class SparkWriteResult:
    """What :func:`recprep.spark.write` wrote: a manifest per directory (``""`` is the
    dataset's own directory, ``"number=8"`` a partition)."""

    output_path: str
    name_prefix: str
    manifests: dict[str, Manifest]
    elapsed: float

    @property
    def directories(self) -> list[str]:
        return sorted(self.manifests)

    @property
    def num_records(self) -> int:
        return sum(m.num_records for m in self.manifests.values())

    @property
    def num_shards(self) -> int:
        return sum(m.num_shards for m in self.manifests.values())

    def __str__(self) -> str:
        return (f"{self.num_records} rows -> {self.num_shards} shards in "
                f"{len(self.manifests)} directories of {self.output_path} "
                f"({self.elapsed:.2f} s)")


@dataclass(frozen=True)
class SparkWriteJob:
    """A validated write: the plan the tasks get, and how to finish it."""

    plan: WritePlan
    prefix: str
    mode: str
    static: bool
    num_shards: int | None = None
    records_per_shard: int | None = None

    @property
    def reports_path(self) -> str:
        return posixpath.join(self.plan.staging, REPORTS)


def _positive_or_none(name: str, value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                              or value < 1):
        raise InvalidArgumentError(f"{name} must be an int >= 1 or None, got {value!r}")


def _choice(name: str, value: Any, valid: Sequence[str]) -> None:
    if value not in valid:
        raise InvalidArgumentError(f"{name} must be one of {list(valid)}, got {value!r}")


def check_arguments(
    *, format: str, codec: str, compressor: str | None, partition_by: Any,
    num_shards: Any, records_per_shard: Any, mode: str, partition_overwrite: str,
    name_prefix: str,
) -> tuple[WriteOptions, list[str]]:
    """Validate the arguments of a write; the write options and partition columns."""
    _choice("format", format, available_formats())
    _choice("codec", codec, list(SPARK_CODECS))
    _choice("mode", mode, MODES)
    _choice("partition_overwrite", partition_overwrite, PARTITION_OVERWRITE)
    _positive_or_none("num_shards", num_shards)
    _positive_or_none("records_per_shard", records_per_shard)
    if num_shards is not None and records_per_shard is not None:
        raise InvalidArgumentError(
            "pass num_shards or records_per_shard, not both: they both decide how many "
            "shards each directory gets"
        )
    check_prefix(name_prefix)
    if partition_by is None:
        partition_by = []
    elif isinstance(partition_by, str):
        partition_by = [partition_by]
    partition_by = list(partition_by)
    if not all(isinstance(c, str) and c for c in partition_by):
        raise InvalidArgumentError(
            f"partition_by must be a column name or a list of them, got {partition_by!r}"
        )
    options = check_options(format, compressor, codec, 1, None)
    return options, partition_by


def check_columns(
    schema: Any, partition_by: Sequence[str], codec: str
) -> tuple[list[ColumnSpec], list[ColumnSpec]]:
    """Split a DataFrame's ``StructType`` into data and partition columns, refusing what
    ``codec`` can't write (:class:`~recprep.errors.UnsupportedColumnError`, naming the
    column; the rules are the codec's, :meth:`recprep.spark.codecs.SparkCodec.check_data`).
    """
    columns = [ColumnSpec(f.name, type_string(f.dataType), bool(f.nullable)) for f in schema]
    by_name = {c.name: c for c in columns}
    if len(by_name) != len(columns):
        names = [c.name for c in columns]
        repeated = sorted({n for n in names if names.count(n) > 1})
        raise InvalidArgumentError(f"column names must be unique; repeated: {repeated}")
    parts = []
    for name in partition_by:
        if name not in by_name:
            raise InvalidArgumentError(
                f"partition column {name!r} is not a column of the DataFrame "
                f"({list(by_name)})"
            )
        column = by_name[name]
        if column.type not in PARTITION_TYPES:
            raise UnsupportedColumnError(
                name, column.type,
                f"a partition column must be one of {list(PARTITION_TYPES)}, as it becomes "
                "a directory name",
            )
        parts.append(column)
    if len(set(partition_by)) != len(partition_by):
        raise InvalidArgumentError(f"partition_by repeats a column: {list(partition_by)}")
    data = [c for c in columns if c.name not in set(partition_by)]
    if not data:
        raise InvalidArgumentError(
            "every column is a partition column: nothing would be left to write in the "
            "records"
        )
    spark_codec(codec).check_data(data)
    return data, parts


def prepare_job(
    schema: Any, fs: Any, root: str, options: WriteOptions, partition_by: Sequence[str], *,
    mode: str, partition_overwrite: str, name_prefix: str,
    num_shards: int | None = None, records_per_shard: int | None = None,
) -> SparkWriteJob:
    """Check the columns and what ``root`` holds against ``mode``; make the staging
    directory. Raises before anything is written."""
    data, parts = check_columns(schema, partition_by, options.codec.name)
    keys = tuple(partition_by)
    shown = display(fs, root)
    if fs.isfile(root):
        raise InvalidArgumentError(f"{shown} is a file; a dataset is written to a directory")
    existing = existing_keys(fs, root)
    if mode == "error":
        entries = visible_entries(fs, root)
        if entries:
            raise DatasetExistsError(shown, [display(fs, e) for e in entries])
    elif existing is not None and existing != keys and not (
        mode == "overwrite" and partition_overwrite == "static"
    ):
        have = "/".join(existing) or "nothing (files at the top)"
        want = "/".join(keys) or "nothing"
        raise InvalidArgumentError(
            f"{shown} holds data partitioned by {have}; this write partitions by {want}. "
            "Write elsewhere, or replace everything with mode='overwrite', "
            "partition_overwrite='static'"
        )
    run = uuid.uuid4().hex[:8]
    prefix = f"{name_prefix}-{run}" if mode == "append" else name_prefix
    staging = posixpath.join(root, f"{SPARK_STAGING_PREFIX}{run}")
    fs.makedirs(staging, exist_ok=True)
    plan = WritePlan(fs, root, staging, options, tuple(data), tuple(parts))
    static = mode == "overwrite" and partition_overwrite == "static"
    return SparkWriteJob(plan, prefix, mode, static, num_shards, records_per_shard)


def group_reports(reports: Sequence[TaskReport]) -> tuple[dict[tuple[Any, ...], list[PieceFile]],
                                                    dict[tuple[Any, ...], set[str]]]:
    pieces: dict[tuple[Any, ...], list[PieceFile]] = {}
    nulls: dict[tuple[Any, ...], set[str]] = {}
    for report in reports:
        for piece in report.pieces:
            pieces.setdefault(piece.key, []).append(piece)
        for key, columns in report.nulls.items():
            nulls.setdefault(key, set()).update(columns)
    for found in pieces.values():
        found.sort(key=lambda p: (p.task, p.seq))
    return dict(sorted(pieces.items(), key=lambda item: _sort_key(item[0]))), nulls


def _sort_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((v is None, str(type(v)), v if v is not None else 0) for v in key)


def partition_dir(job: SparkWriteJob, key: tuple[Any, ...]) -> str:
    """The directory (relative to the root) of the partition values ``key``."""
    return partition_path([c.name for c in job.plan.partitions], key) if key else ""


def empty_shards(job: SparkWriteJob, count: int) -> DirectoryOutput:
    """The root's set when a DataFrame without partition columns has no rows."""
    fs = job.plan.fs
    shards: list[FileFacts] = []
    indexes: list[str | None] = []
    for n in range(count):
        path = posixpath.join(job.plan.staging, f"empty-{n:05d}")
        with fs.open(path, "wb"):
            pass
        shards.append(FileFacts(path, 0, 0, 0))
        indexes.append(None)
    return DirectoryOutput("", (), shards, indexes)


def outputs_as_pieces(job: SparkWriteJob, pieces: Mapping[tuple[Any, ...], list[PieceFile]]
                      ) -> list[DirectoryOutput]:
    """Each piece becomes a shard (no ``num_shards``/``records_per_shard``)."""
    outputs = [DirectoryOutput(partition_dir(job, key), key, [p.facts for p in found],
                               [p.index for p in found])
               for key, found in pieces.items()]
    if not outputs and not job.plan.partitions:
        outputs.append(empty_shards(job, 1))
    return outputs


def finish(job: SparkWriteJob, outputs: Sequence[DirectoryOutput],
           nulls: Mapping[tuple[Any, ...], set[str]]) -> dict[str, Manifest]:
    """Commit ``outputs`` (see :mod:`recprep.spark.commit`)."""
    plan = job.plan
    schemas = {o.rel: manifest_schema(plan.options.codec.name, plan.data, plan.partitions,
                                      nulls.get(o.key, ()))
               for o in outputs}
    return commit_dataset(plan.fs, plan.root, plan.staging, job.prefix, plan.options, outputs,
                          schemas, overwrite=job.mode == "overwrite", static=job.static)


def job_option(job: SparkWriteJob) -> str:
    """The job as a data source option (base64 of its pickle)."""
    return base64.b64encode(cloudpickle.dumps(job)).decode("ascii")


def job_from_option(text: str) -> SparkWriteJob:
    """The job :func:`job_option` made."""
    job = cloudpickle.loads(base64.b64decode(text))
    assert isinstance(job, SparkWriteJob)
    return job
