"""Writing a DataFrame: validate, write pieces on the executors, make shards, commit.

1. **Validate** everything on the driver before any job runs: arguments, column types
   (:func:`~recprep.spark.columns.check_columns`), and what the output already holds
   against ``mode`` — ``error`` refuses a non-empty path; ``append`` and a dynamic
   ``overwrite`` refuse data partitioned by other columns.
2. **Pieces** (:mod:`recprep.spark.pieces`): one Spark job, each task writing its rows,
   per partition directory, into the hidden staging directory. Rows reach Python as Arrow
   batches through recprep's internal Python data source, never through the driver.
3. **Shards**: with neither ``num_shards`` nor ``records_per_shard``, each piece is a
   shard (one per task and directory, as Spark writes); otherwise one more job assembles
   balanced shards (:mod:`recprep.spark.assemble`).
4. **Commit** (:mod:`recprep.spark.commit`): each directory's set with the core protocol,
   manifest last; ``_SUCCESS`` last of all. An error before the commit leaves the output
   as it was; the staging directory is removed either way.

Only file facts (counts, sizes, CRCs, partition values) travel to the driver — as JSON
data, never as a pickle read from the (shared) output directory.
"""

from __future__ import annotations

import base64
import datetime
import json
import logging
import pickle
import posixpath
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import cloudpickle

from .. import errors
from ..errors import (
    CorruptDataError,
    InvalidArgumentError,
    OutputExistsError,
    TaskFailedError,
)
from ..executors.base import Outcome, execute, serialize
from ..locking import ShardSetLock
from ..manifest import Manifest
from ..shards import check_prefix
from ..storage import display, resolve
from ..writing import FileFacts, WriteOptions, check_options
from .assemble import assemble_shard, plan_shards, shard_count
from .columns import check_columns
from .commit import DirectoryOutput, commit_dataset, manifest_schema
from .layout import existing_keys, partition_path, visible_entries
from .pieces import Piece, TaskReport, WritePlan

__all__ = ["SparkWriteResult", "WriteJob", "group_reports", "prepare", "write"]

log = logging.getLogger("recprep")

MODES = ("error", "overwrite", "append")
PARTITION_OVERWRITE = ("dynamic", "static")
FORMATS = ("tfrecord", "recordio")
CODECS = ("example", "recprep", "raw")
STAGING_PREFIX = ".recprep-staging-spark-"
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
class WriteJob:
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


def _positive(name: str, value: Any) -> None:
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
    _choice("format", format, FORMATS)
    _choice("codec", codec, CODECS)
    _choice("mode", mode, MODES)
    _choice("partition_overwrite", partition_overwrite, PARTITION_OVERWRITE)
    _positive("num_shards", num_shards)
    _positive("records_per_shard", records_per_shard)
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


def prepare(
    schema: Any, fs: Any, root: str, options: WriteOptions, partition_by: Sequence[str], *,
    mode: str, partition_overwrite: str, name_prefix: str,
    num_shards: int | None = None, records_per_shard: int | None = None,
) -> WriteJob:
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
            raise OutputExistsError(shown, [display(fs, e) for e in entries])
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
    staging = posixpath.join(root, f"{STAGING_PREFIX}{run}")
    fs.makedirs(staging, exist_ok=True)
    plan = WritePlan(fs, root, staging, options, tuple(data), tuple(parts))
    return WriteJob(plan, prefix, mode, mode == "overwrite" and partition_overwrite == "static",
                    num_shards, records_per_shard)


def group_reports(reports: Sequence[TaskReport]) -> tuple[dict[tuple[Any, ...], list[Piece]],
                                                    dict[tuple[Any, ...], set[str]]]:
    pieces: dict[tuple[Any, ...], list[Piece]] = {}
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


def _rel(job: WriteJob, key: tuple[Any, ...]) -> str:
    return partition_path([c.name for c in job.plan.partitions], key) if key else ""


def _empty_shards(job: WriteJob, count: int) -> DirectoryOutput:
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


def outputs_as_pieces(job: WriteJob, pieces: Mapping[tuple[Any, ...], list[Piece]]
                      ) -> list[DirectoryOutput]:
    """Each piece becomes a shard (no ``num_shards``/``records_per_shard``)."""
    outputs = [DirectoryOutput(_rel(job, key), key, [p.facts for p in found],
                               [p.index for p in found])
               for key, found in pieces.items()]
    if not outputs and not job.plan.partitions:
        outputs.append(_empty_shards(job, 1))
    return outputs


def _run_one(item: tuple[int, bytes]) -> tuple[int, Outcome]:
    index, payload = item
    return index, execute(payload)


def outputs_balanced(
    job: WriteJob, pieces: Mapping[tuple[Any, ...], list[Piece]], spark: Any
) -> list[DirectoryOutput]:
    """Assemble balanced shards from the pieces, one Spark task per shard."""
    plan = job.plan
    work: list[tuple[tuple[Any, ...], str, int, list[Any]]] = []
    for key, found in pieces.items():
        records = sum(p.facts.records for p in found)
        count = shard_count(records, num_shards=job.num_shards,
                            records_per_shard=job.records_per_shard)
        for number, segments in enumerate(plan_shards(found, count)):
            work.append((key, _rel(job, key), number, segments))
    payloads = []
    for n, (_, rel, number, segments) in enumerate(work):
        path = posixpath.join(plan.staging, f"shard-{n:06d}")
        index = f"{path}.tfindex" if plan.indexed else None
        payloads.append(serialize(assemble_shard, (plan.fs, path, segments, plan.options, index),
                                  f"shard {number} of {rel or 'the dataset'}"))
    results: list[tuple[FileFacts, str | None]] = [None] * len(payloads)  # type: ignore[list-item]
    if payloads:
        context = spark.sparkContext
        slices = min(len(payloads), max(1, 4 * context.defaultParallelism))
        context.setJobDescription(f"recprep: assemble {len(payloads)} shard(s)")
        try:
            done = context.parallelize(list(enumerate(payloads)), slices).map(_run_one).collect()
        except Exception as err:  # Py4JJavaError and friends: the job itself died
            raise TaskFailedError("the Spark job assembling shards", type(err).__name__,
                                  str(err).strip().splitlines()[0], str(err)) from err
        for index, outcome in done:
            _, rel, number, _ = work[index]
            results[index] = outcome.unwrap(f"assembling shard {number} of {rel or 'the dataset'}")
    outputs: dict[str, DirectoryOutput] = {}
    for (key, rel, _, _), (facts, index) in zip(work, results, strict=True):
        output = outputs.setdefault(rel, DirectoryOutput(rel, key, [], []))
        output.shards.append(facts)
        output.indexes.append(index)
    if not outputs and not plan.partitions:
        outputs[""] = _empty_shards(job, job.num_shards or 1)
    return list(outputs.values())


def finish(job: WriteJob, outputs: Sequence[DirectoryOutput],
           nulls: Mapping[tuple[Any, ...], set[str]]) -> dict[str, Manifest]:
    """Commit ``outputs`` (see :mod:`recprep.spark.commit`)."""
    plan = job.plan
    schemas = {o.rel: manifest_schema(plan.options.codec.name, plan.data, plan.partitions,
                                      nulls.get(o.key, ()))
               for o in outputs}
    return commit_dataset(plan.fs, plan.root, plan.staging, job.prefix, plan.options, outputs,
                          schemas, overwrite=job.mode == "overwrite", static=job.static)


def save_reports(job: WriteJob, outcomes: Sequence[tuple[int, Outcome]]) -> None:
    """Save the tasks' outcomes (what the data source's commit received through Spark)
    for the driver, as JSON data: a file in the shared output directory is input, and
    unpickling it would run whatever it holds."""
    doc = [_outcome_json(task, outcome) for task, outcome in outcomes]
    fs, path = job.plan.fs, job.reports_path
    with fs.open(path + ".tmp", "wb") as out:
        out.write(json.dumps(doc).encode())
    fs.mv(path + ".tmp", path)


def load_reports(job: WriteJob) -> list[TaskReport]:
    """The task reports the data source's commit saved (JSON, checked); a failed task
    raises :class:`~recprep.errors.TaskFailedError` carrying its error."""
    shown = display(job.plan.fs, job.reports_path)
    try:
        doc = json.loads(job.plan.fs.cat_file(job.reports_path))
        outcomes = [_outcome_from_json(item) for item in doc]
    except (ValueError, KeyError, TypeError, RecursionError) as err:
        raise CorruptDataError(f"not the task reports of this write ({type(err).__name__}: "
                               f"{err})", path=shown) from None
    reports = []
    for task, outcome, original in sorted(outcomes, key=lambda item: item[0]):
        try:
            reports.append(outcome.unwrap(f"Spark task {task} (writing rows)"))
        except TaskFailedError as err:
            err.original = original
            raise err from original
    return reports


def _value_json(value: Any) -> list[Any]:
    if value is None:
        return ["n"]
    if isinstance(value, bool):
        return ["b", value]
    if isinstance(value, int):
        return ["i", value]
    if isinstance(value, float):
        return ["f", value]
    if isinstance(value, str):
        return ["s", value]
    if isinstance(value, datetime.datetime):
        return ["t", value.isoformat()]
    if isinstance(value, datetime.date):
        return ["d", value.isoformat()]
    raise InvalidArgumentError(f"a partition value must be an int, str, bool or date, got "
                               f"{type(value).__name__}")


_DECODE: dict[str, Any] = {"b": bool, "i": int, "f": float, "s": str,
                           "t": datetime.datetime.fromisoformat,
                           "d": datetime.date.fromisoformat}


def _value_from_json(item: list[Any]) -> Any:
    tag, *rest = item
    if tag == "n" and not rest:
        return None
    (value,) = rest
    decoded = _DECODE[tag](value)
    if tag in "bifs" and type(value) is not type(decoded):
        raise TypeError(f"partition value {value!r} is not of type {tag!r}")
    return decoded


def _outcome_json(task: int, outcome: Outcome) -> dict[str, Any]:
    if outcome.error_type is not None:
        return {"task": task, "error": [outcome.error_type, outcome.error_message,
                                        outcome.error_traceback],
                "original": _error_json(outcome)}
    report: TaskReport = outcome.result
    return {
        "task": task,
        "pieces": [{"key": [_value_json(v) for v in p.key], "task": p.task, "seq": p.seq,
                    "facts": asdict(p.facts), "index": p.index} for p in report.pieces],
        "nulls": [[[_value_json(v) for v in key], sorted(columns)]
                  for key, columns in report.nulls.items()],
    }


def _error_json(outcome: Outcome) -> dict[str, Any] | None:
    """A recprep error's class name, arguments and attributes (what is JSON of them)."""
    if outcome.error_pickle is None:
        return None
    try:  # made by the task, come through Spark (as the outcome itself): not from storage
        err = pickle.loads(outcome.error_pickle)
    except Exception:
        return None
    kind = type(err)
    if not isinstance(err, errors.RecprepError) or getattr(errors, kind.__name__, None) is not kind:
        return None
    state = {}
    for key, value in vars(err).items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            continue
        state[key] = value
    return {"class": kind.__name__, "args": [str(a) for a in err.args], "state": state}


def _error_from_json(doc: dict[str, Any] | None) -> BaseException | None:
    """The recprep error :func:`_error_json` described: only classes of
    :mod:`recprep.errors` are made, from data (nothing is imported or run)."""
    if doc is None:
        return None
    kind = getattr(errors, str(doc["class"]), None)
    if not (isinstance(kind, type) and issubclass(kind, errors.RecprepError)):
        return None
    err = kind.__new__(kind)
    Exception.__init__(err, *[str(a) for a in doc["args"]])
    err.__dict__.update({str(k): v for k, v in dict(doc["state"]).items()})
    return err


def _facts(doc: dict[str, Any]) -> FileFacts:
    return FileFacts(str(doc["path"]), int(doc["records"]), int(doc["bytes"]),
                     int(doc["crc32c"]), int(doc["offset"]))


def _outcome_from_json(item: dict[str, Any]) -> tuple[int, Outcome, BaseException | None]:
    task = int(item["task"])
    if "error" in item:
        kind, message, trace = (str(x) for x in item["error"])
        outcome = Outcome(error_type=kind, error_message=message, error_traceback=trace)
        return task, outcome, _error_from_json(item.get("original"))
    pieces = [
        Piece(tuple(_value_from_json(v) for v in p["key"]), int(p["task"]), int(p["seq"]),
              _facts(p["facts"]),
              None if p["index"] is None else str(p["index"]))
        for p in item["pieces"]
    ]
    nulls = {tuple(_value_from_json(v) for v in key): {str(c) for c in columns}
             for key, columns in item["nulls"]}
    return task, Outcome(result=TaskReport(task, pieces, nulls)), None


def _remove(fs: Any, path: str) -> None:
    try:
        if fs.exists(path):
            fs.rm(path, recursive=True)
    except Exception:  # cleanup must not hide the error that led here
        log.warning("recprep: could not remove %s", path, exc_info=True)


def write(
    df: Any, path: str, *, format: str, codec: str, compressor: str | None,
    partition_by: str | Sequence[str] | None, num_shards: int | None,
    records_per_shard: int | None, mode: str, partition_overwrite: str,
    storage_options: Mapping[str, Any] | None, name_prefix: str,
) -> SparkWriteResult:
    """See :func:`recprep.spark.write`."""
    from .datasource import PIECES_SOURCE, PLAN_OPTION, register_internal

    started = time.perf_counter()
    options, columns = check_arguments(
        format=format, codec=codec, compressor=compressor, partition_by=partition_by,
        num_shards=num_shards, records_per_shard=records_per_shard, mode=mode,
        partition_overwrite=partition_overwrite, name_prefix=name_prefix,
    )
    fs, root = resolve(path, storage_options)
    check_columns(df.schema, columns, options.codec.name)  # before touching storage
    if fs.isfile(root):
        raise InvalidArgumentError(f"{display(fs, root)} is a file; a dataset is a directory")
    fs.makedirs(root, exist_ok=True)
    spark = df.sparkSession
    with ShardSetLock(fs, root, LOCK_NAME) as lock:
        if lock.held:  # no other rs.write runs here: staging left behind was a killed run's
            for entry in fs.ls(root, detail=False):
                if posixpath.basename(entry.rstrip("/")).startswith(STAGING_PREFIX):
                    log.info("recprep: removing %s, left by a killed write", entry)
                    _remove(fs, entry)
        job = prepare(df.schema, fs, root, options, columns, mode=mode,
                      partition_overwrite=partition_overwrite, name_prefix=name_prefix,
                      num_shards=num_shards, records_per_shard=records_per_shard)
        try:
            register_internal(spark)
            spark.sparkContext.setJobDescription(f"recprep: write {display(fs, root)}")
            try:
                (df.write.format(PIECES_SOURCE).mode("append")
                 .option(PLAN_OPTION, job_option(job)).save())
            except Exception as err:
                raise TaskFailedError("the Spark job writing rows", type(err).__name__,
                                      str(err).strip().splitlines()[0], str(err)) from err
            pieces, nulls = group_reports(load_reports(job))
            if num_shards is None and records_per_shard is None:
                outputs = outputs_as_pieces(job, pieces)
            else:
                outputs = outputs_balanced(job, pieces, spark)
            manifests = finish(job, outputs, nulls)
        finally:
            _remove(fs, job.plan.staging)
    result = SparkWriteResult(display(fs, root), job.prefix, manifests,
                              time.perf_counter() - started)
    log.info("recprep: %s", result)
    return result


def job_option(job: WriteJob) -> str:
    """The job as a data source option (base64 of its pickle)."""
    return base64.b64encode(cloudpickle.dumps(job)).decode("ascii")


def job_from_option(text: str) -> WriteJob:
    """The job :func:`job_option` made."""
    job = cloudpickle.loads(base64.b64decode(text))
    assert isinstance(job, WriteJob)
    return job
