"""``rs.write`` and ``rs.read`` on the driver: the Spark jobs they run.

:func:`write_dataframe` validates everything (:mod:`recprep.spark.writing`), runs the pieces job
through recprep's own data source (rows reach Python as Arrow batches, never through the
driver), loads the tasks' reports (:mod:`recprep.spark.reports`), runs the job that
assembles balanced shards when asked to, and commits. :func:`read_dataframe` gives a DataFrame over
recprep's scan source. Every job is submitted through :mod:`recprep.executors.spark`
(:func:`~recprep.executors.spark.run_job`, :func:`~recprep.executors.spark.run_tasks`):
one job description in the Spark UI, and a failed job is a
:class:`~recprep.errors.TaskFailedError` naming it.

This module sits above :mod:`recprep.spark.datasource`, which sits above the plans it
runs (:mod:`~recprep.spark.reading`, :mod:`~recprep.spark.writing`): imports go one way.
"""

from __future__ import annotations

import logging
import posixpath
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import InvalidArgumentError
from ..executors.base import serialize
from ..executors.spark import check_workers, run_job, run_tasks
from ..storage.fs import display, resolve
from ..storage.locking import ShardSetLock
from ..storage.staging import FileFacts
from . import writing
from .assemble import assemble_shard, plan_shards, shard_count
from .commit import DirectoryOutput
from .datasource import PIECES_SOURCE, PLAN_OPTION, SCAN_SOURCE, register_internal
from .pieces import PieceFile
from .reading import plan_read
from .reports import load_reports
from .writing import SparkWriteJob, SparkWriteResult

__all__ = ["outputs_balanced", "read_dataframe", "write_dataframe"]

log = logging.getLogger("recprep")


def outputs_balanced(
    job: SparkWriteJob, pieces: Mapping[tuple[Any, ...], list[PieceFile]], spark: Any
) -> list[DirectoryOutput]:
    """Assemble balanced shards from the pieces, one Spark task per shard."""
    plan = job.plan
    work: list[tuple[tuple[Any, ...], str, int, list[Any]]] = []
    for key, found in pieces.items():
        records = sum(p.facts.records for p in found)
        count = shard_count(records, num_shards=job.num_shards,
                            records_per_shard=job.records_per_shard)
        for number, segments in enumerate(plan_shards(found, count)):
            work.append((key, writing.partition_dir(job, key), number, segments))
    payloads = []
    for n, (_, rel, number, segments) in enumerate(work):
        path = posixpath.join(plan.staging, f"shard-{n:06d}")
        index = plan.index_of(path)
        payloads.append(serialize(assemble_shard, (plan.fs, path, segments, plan.options, index),
                                  f"shard {number} of {rel or 'the dataset'}"))
    results: list[tuple[FileFacts, str | None]] = [None] * len(payloads)  # type: ignore[list-item]
    if payloads:
        slices = min(len(payloads), max(1, 4 * spark.sparkContext.defaultParallelism))
        done = run_tasks(spark, payloads, f"recprep: assemble {len(payloads)} shard(s)",
                         "the Spark job assembling shards", slices=slices)
        for task, outcome in done:
            _, rel, number, _ = work[task]
            results[task] = outcome.unwrap(f"assembling shard {number} of {rel or 'the dataset'}")
    outputs: dict[str, DirectoryOutput] = {}
    for (key, rel, _, _), (facts, index) in zip(work, results, strict=True):
        output = outputs.setdefault(rel, DirectoryOutput(rel, key, [], []))
        output.shards.append(facts)
        output.indexes.append(index)
    if not outputs and not plan.partitions:
        outputs[""] = writing.empty_shards(job, job.num_shards or 1)
    return list(outputs.values())


def _remove_quietly(fs: Any, path: str) -> None:
    try:
        if fs.exists(path):
            fs.rm(path, recursive=True)
    except Exception:  # cleanup must not hide the error that led here
        log.warning("recprep: could not remove %s", path, exc_info=True)


def write_dataframe(
    df: Any, path: str, *, format: str, codec: str, compressor: str | None,
    partition_by: str | Sequence[str] | None, num_shards: int | None,
    records_per_shard: int | None, mode: str, partition_overwrite: str,
    storage_options: Mapping[str, Any] | None, name_prefix: str,
) -> SparkWriteResult:
    """See :func:`recprep.spark.write`."""
    started = time.perf_counter()
    options, columns = writing.check_arguments(
        format=format, codec=codec, compressor=compressor, partition_by=partition_by,
        num_shards=num_shards, records_per_shard=records_per_shard, mode=mode,
        partition_overwrite=partition_overwrite, name_prefix=name_prefix,
    )
    fs, root = resolve(path, storage_options)
    writing.check_columns(df.schema, columns, options.codec.name)  # before touching storage
    if fs.isfile(root):
        raise InvalidArgumentError(f"{display(fs, root)} is a file; a dataset is a directory")
    fs.makedirs(root, exist_ok=True)
    spark = df.sparkSession
    with ShardSetLock(fs, root, writing.LOCK_NAME) as lock:
        if lock.held:  # no other rs.write runs here: staging left behind was a killed run's
            for entry in fs.ls(root, detail=False):
                if posixpath.basename(entry.rstrip("/")).startswith(writing.SPARK_STAGING_PREFIX):
                    log.info("recprep: removing %s, left by a killed write", entry)
                    _remove_quietly(fs, entry)
        job = writing.prepare_job(df.schema, fs, root, options, columns, mode=mode,
                              partition_overwrite=partition_overwrite, name_prefix=name_prefix,
                              num_shards=num_shards, records_per_shard=records_per_shard)
        try:
            register_internal(spark)
            writer = (df.write.format(PIECES_SOURCE).mode("append")
                      .option(PLAN_OPTION, writing.job_option(job)))
            run_job(spark, f"recprep: write {display(fs, root)}", "the Spark job writing rows",
                    writer.save)
            pieces, nulls = writing.group_reports(load_reports(job))
            if num_shards is None and records_per_shard is None:
                outputs = writing.outputs_as_pieces(job, pieces)
            else:
                outputs = outputs_balanced(job, pieces, spark)
            manifests = writing.finish(job, outputs, nulls)
        finally:
            _remove_quietly(fs, job.plan.staging)
    result = SparkWriteResult(display(fs, root), job.prefix, manifests,
                              time.perf_counter() - started)
    log.info("recprep: %s", result)
    return result


def read_dataframe(spark: Any, path: str, *, schema: Any, record_type: str | None,
         storage_options: Mapping[str, Any] | None, columns: Sequence[str] | None = None
         ) -> Any:
    """See :func:`recprep.spark.read`."""
    if isinstance(schema, str):
        from pyspark.sql.types import _parse_datatype_string

        schema = _parse_datatype_string(schema)
    fs, root = resolve(path, storage_options)
    plan = plan_read(fs, root, schema=schema, record_type=record_type)
    plan = plan.with_partition_columns().select(columns)
    log.info("recprep: reading %d file(s) of %s", len(plan.tasks), display(fs, root))
    if not plan.tasks:
        return spark.createDataFrame([], plan.struct())
    check_workers(spark)  # the scan runs in the user's actions: a clear error now, not there
    register_internal(spark)
    return (spark.read.format(SCAN_SOURCE).schema(plan.struct())
            .option(PLAN_OPTION, plan.to_option()).load())
