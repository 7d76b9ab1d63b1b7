"""A conversion's tasks, run: built here, run by the executor, recorded in staging.

:func:`write_staged` turns the input into tasks (:mod:`recprep.write.plan` has the task
functions) and :func:`run_recorded` runs them on the job's backend
(:func:`recprep.executors.dispatch.run_all` decides between calling them here and shipping them):

* one reader (a callable, an iterable, a sized input a serial run streams): one
  **stream** task writes every shard; a sized input is cut where a parallel run would
  cut it into partitions, so both write the same bytes;
* :func:`~recprep.partitions` (or a sized input a parallel executor splits): a
  **pieces** task per group of partitions, then an **assemble** task per shard.

Each finished task is recorded in the staging directory (its files, their sizes, CRC-32C
and chunks, the reader's notes and the types pickled); a resumed run reuses the records
still intact instead of running those tasks again. Progress hears of instances (live,
from tasks run in this process; from each result, otherwise), tasks and shards.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from ..executors import Backend, get_backend
from ..executors.dispatch import TaskCall, run_all
from ..storage.staging import FileFacts
from .inputs import ROWS_PER_PART, is_sized, split_sized, warn_unsplit
from .job import ConvertJob
from .plan import (
    DEFAULT_MAX_TASKS,
    PartitionGroup,
    Partitions,
    TaskResult,
    assemble_task,
    pieces_task,
    plan_assembly,
    stream_task,
)
from .progress import Progress

__all__ = ["StagedTask", "run_recorded", "write_staged"]

log = logging.getLogger("recprep")


@dataclass(frozen=True)
class StagedTask:
    """A task of a conversion: its call, the ``key`` its record in staging goes by (what
    a resume looks for), and the input partitions it reads (what progress counts)."""

    key: str
    call: TaskCall
    partitions: int = 1


def run_recorded(
    job: ConvertJob, backend: Backend, tasks: Sequence[StagedTask], progress: Progress,
    reuse: bool,
) -> list[TaskResult]:
    """Run ``tasks`` on ``backend`` (with ``reuse``, only those a killed run didn't record);
    their results in task order. Each finished task is recorded."""
    staging = job.staging
    results: list[TaskResult | None] = [None] * len(tasks)
    todo = []
    for index, task in enumerate(tasks):
        done = staging.recorded(task.key) if reuse else None
        if done is None:
            todo.append(index)
            continue
        result = results[index] = TaskResult(*done)
        log.debug("recprep: reusing the staged output of %s", task.call.description)
        if task.call.live:
            progress.add_instances(result.records)
            progress.add_tasks(task.partitions)
    ticked = backend.in_process  # live tasks run here told progress as they went
    calls = [tasks[index].call for index in todo]
    for position, result in run_all(backend, calls, progress.add_instances):
        task = tasks[todo[position]]
        results[todo[position]] = result
        staging.record(task.key, result.files, result.notes, result.pickled)
        if task.call.live:
            if not ticked:
                progress.add_instances(result.records)
            progress.add_tasks(task.partitions)
    return results  # type: ignore[return-value]


def write_staged(
    job: ConvertJob, reader: Any, progress: Progress, reuse: bool
) -> tuple[list[FileFacts], list[Any], dict[str, int]]:
    """Run the tasks that produce the staged shards: their facts in shard order, the
    readers' notes in partition order, and the types stored as pickles by the codec's
    fallback (each with the first instance that held one)."""
    backend = job.backend
    parts = None
    if not isinstance(reader, Partitions) and is_sized(reader):
        # Row ranges cut by the input's length alone: a parallel executor reads them as
        # partitions; this process streams them, cutting chunks at the same places, so
        # the bytes are the same either way.
        parts = split_sized(reader, DEFAULT_MAX_TASKS, job.part_rows or ROWS_PER_PART)
        if parts is not None and not backend.in_process:
            bounds = (0, *accumulate(len(part) for part in parts))
            reader, parts = Partitions(tuple(parts), row_bounds=bounds), None
    if isinstance(reader, Partitions):
        return _write_partitions(job, reader, progress, reuse)
    if not backend.in_process:
        if not is_sized(reader):  # (a sized input this small isn't worth splitting)
            warn_unsplit(reader, backend.name or type(backend).__name__)
        if not callable(reader):
            backend = get_backend("serial")  # a one-shot iterable is read here, once
    cuts = list(accumulate(len(part) for part in parts[:-1])) if parts else []
    args = (reader, job.fs, job.staging.path, job.names, job.options, cuts)
    task = StagedTask("stream", TaskCall(stream_task, args, "the reader's task", live=True))
    (result,) = run_recorded(job, backend, [task], progress, reuse)
    progress.add_shards(job.num_shards)
    return [f for f in result.files if f is not None], result.notes, result.pickled


def _write_partitions(
    job: ConvertJob, reader: Partitions, progress: Progress, reuse: bool
) -> tuple[list[FileFacts], list[Any], dict[str, int]]:
    """:func:`write_staged` of partitions: pieces per task, then shards of the pieces."""
    piece_tasks = []
    bounds = reader.row_bounds
    for start, end in reader.groups():
        group = reader.readers[start] if end - start == 1 else PartitionGroup(
            reader.readers[start:end]
        )
        label = f"partition {start}" if end - start == 1 else f"partitions {start}-{end - 1}"
        if bounds is not None:  # a sized input's row ranges: named as the input counts
            label = f"instances {bounds[start]}-{bounds[end] - 1} of the input"
        args = (start, group, job.fs, job.staging.path, job.num_shards, job.options,
                0 if bounds is None else bounds[start])
        call = TaskCall(pieces_task, args, label, live=True)
        piece_tasks.append(StagedTask(f"part-{start:05d}-{end:05d}", call, end - start))
    pieces = run_recorded(job, job.backend, piece_tasks, progress, reuse)
    pickled: dict[str, int] = {}
    offset = 0  # instances of the partitions before this task's
    for piece in pieces:
        for type_name, index in piece.pickled.items():
            pickled.setdefault(type_name, offset + index)
        offset += piece.records
    plan = plan_assembly([p.files for p in pieces], job.num_shards)
    assemble = [
        StagedTask(f"shard-{s:05d}", TaskCall(
            assemble_task, (job.names[s], parts, job.fs, job.staging.path, job.options),
            f"shard {s} ({job.names[s]})"))
        for s, parts in enumerate(plan)
    ]
    shards: list[FileFacts] = []
    for result in run_recorded(job, job.backend, assemble, progress, reuse):
        (facts,) = result.files
        assert facts is not None
        shards.append(facts)
        progress.add_shards()
    return shards, [note for p in pieces for note in p.notes], pickled
