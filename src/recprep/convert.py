"""``convert``: a reader's instances in, a committed shard set out.

Instance ``i`` goes to shard ``i % num_shards``, at position ``i // num_shards``, so
shards are balanced to within one instance and a round-robin read gives the instances
back in their original order. The same holds for :func:`~recprep.partitions` input, as
if its partitions were one reader, whichever executor runs the work (``tasks.py``).
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import posixpath
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .codecs import Codec
from .errors import OutputExistsError
from .executors import Backend, get_backend, serialize
from .executors.base import failed
from .manifest import Manifest, ShardInfo
from .progress import Progress, ProgressArg
from .shards import check_prefix, manifest_name, shard_name
from .storage import Staging, display, existing_set_files, resolve
from .tasks import (
    PartitionGroup,
    Partitions,
    assemble_task,
    pieces_task,
    plan_assembly,
    stream_task,
)
from .writing import FileFacts, check_options, check_reader

__all__ = ["ConvertResult", "convert"]

log = logging.getLogger("recprep")


@dataclass
class ConvertResult:
    """What :func:`convert` wrote.

    ``paths`` are the final shard paths in shard order (URLs for remote storage);
    ``records_per_shard`` and ``bytes_per_shard`` line up with them.
    """

    output_path: str
    manifest_path: str
    paths: list[str]
    records_per_shard: list[int]
    bytes_per_shard: list[int]
    elapsed: float
    manifest: Manifest = field(repr=False)
    #: what readers reported (their ``notes`` attribute), in partition order
    notes: list[Any] = field(default_factory=list, repr=False)

    @property
    def num_records(self) -> int:
        return sum(self.records_per_shard)

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes_per_shard)

    def __str__(self) -> str:
        return (
            f"{self.num_records} instances -> {len(self.paths)} shards, "
            f"{self.total_bytes} bytes in {self.output_path} ({self.elapsed:.2f} s)"
        )


@dataclass(frozen=True)
class _Task:
    description: str
    fn: Any
    args: tuple[Any, ...]
    live: bool = False  # takes a tick callback when run in this process


def _run_tasks(backend: Backend, tasks: Sequence[_Task], progress: Progress) -> list[Any]:
    """Run ``tasks`` on ``backend``; their results in task order."""
    results: list[Any] = [None] * len(tasks)
    if backend.in_process:
        for index, task in enumerate(tasks):
            extra = (progress.add_instances,) if task.live else ()
            try:
                results[index] = task.fn(*task.args, *extra)
            except Exception as err:
                failed(err).unwrap(task.description)
            if task.live:
                progress.add_tasks()
        return results
    payloads = [serialize(t.fn, t.args, t.description) for t in tasks]
    for index, outcome in backend.run(payloads):
        results[index] = outcome.unwrap(tasks[index].description)
        if tasks[index].live:
            progress.add_instances(results[index].records)
            progress.add_tasks()
    return results


def _write(
    reader: Any,
    backend: Backend,
    fs: Any,
    staging: Staging,
    names: list[str],
    options: Any,
    progress: Progress,
) -> tuple[list[FileFacts], list[Any]]:
    """Run the tasks that produce the staged shards: their facts in shard order, and the
    readers' notes in partition order."""
    if not isinstance(reader, Partitions):
        if not callable(reader) and not backend.in_process:
            log.info("recprep: a one-shot iterable is read once, in this process")
            backend = get_backend("serial")
        elif not backend.in_process:
            log.info(
                "recprep: a single reader runs as one task on %s; pass partitions([...]) "
                "for parallel work",
                backend.name or type(backend).__name__,
            )
        task = _Task("the reader", stream_task, (reader, fs, staging.path, names, options), True)
        (result,) = _run_tasks(backend, [task], progress)
        progress.add_shards(len(names))
        return [f for f in result.files if f is not None], result.notes
    n = len(names)
    piece_tasks = []
    for start, end in reader.groups():
        group = reader.readers[start] if end - start == 1 else PartitionGroup(
            reader.readers[start:end]
        )
        label = f"partition {start}" if end - start == 1 else f"partitions {start}-{end - 1}"
        args = (start, group, fs, staging.path, n, options)
        piece_tasks.append(_Task(label, pieces_task, args, True))
    pieces = _run_tasks(backend, piece_tasks, progress)
    assemble = [
        _Task(f"shard {s} ({names[s]})", assemble_task, (names[s], parts, fs, staging.path))
        for s, parts in enumerate(plan_assembly([p.files for p in pieces], n))
    ]
    shards: list[FileFacts] = []
    for facts in _run_tasks(backend, assemble, progress):
        shards.append(facts)
        progress.add_shards()
    return shards, [note for p in pieces for note in p.notes]


def convert(
    output_path: str,
    reader: Any,
    num_shards: int,
    name_prefix: str,
    *,
    format: str = "recordio",
    codec: str | Codec = "recprep",
    compressor: str | None = None,
    overwrite: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    progress: ProgressArg | Progress = None,
    chunk_bytes: int | None = None,
    executor: str | cf.Executor | Backend = "serial",
    num_workers: int | None = None,
    executor_options: Mapping[str, Any] | None = None,
) -> ConvertResult:
    """Write the instances of ``reader`` into ``num_shards`` shard files.

    Parameters
    ----------
    output_path
        A directory, local or an fsspec URL (``s3://bucket/ds``, ``memory://x``); created
        if missing. With a cluster executor, storage every worker reaches.
    reader
        A PaddlePaddle-style reader (a no-argument callable returning an iterable of
        instances), a one-shot iterable (read once, in this process), or
        :func:`~recprep.partitions` of readers (each read by its own task). Each instance
        is a value or a tuple of values.
    num_shards
        How many shard files to write; instance ``i`` goes to shard ``i % num_shards``.
        A shard that gets no instance is an empty (zero-byte) file.
    name_prefix
        Shards are named ``{name_prefix}-00000-of-{num_shards-1:05d}`` and so on; the
        manifest is ``{name_prefix}.manifest.json``.
    format
        ``"recordio"`` (Go/PaddlePaddle/ElasticDL) or ``"recordio-legacy"`` (pyrecordio
        0.0.4), or any registered format.
    codec
        ``"recprep"`` (typed, exact), ``"pickle"``, ``"raw"`` (bytes as is), a registered
        name or a :class:`~recprep.codecs.Codec`.
    compressor
        ``None`` for the format's default (``"snappy"`` for RecordIO), ``"gzip"``, ``"none"``.
    overwrite
        Replace an existing set with this prefix, once the new one is complete. Without
        it, an existing set raises :class:`~recprep.errors.OutputExistsError`.
    storage_options
        Passed to fsspec (credentials, endpoint...).
    progress
        ``None`` (a bar when stderr is a terminal), ``True``, ``False``, or
        ``callback(instances_done, shards_done)``.
    chunk_bytes
        Uncompressed bytes per chunk (default 1 MiB, less when there are many shards, so
        that all chunk buffers together stay under 256 MiB).
    executor
        ``"serial"`` (default), ``"processes"``, ``"spark"``, ``"ray"``, a registered name,
        or a ``concurrent.futures.Executor`` (never shut down by recprep). The output is
        byte-identical whichever runs it.
    num_workers
        Parallelism for executors recprep starts (processes: CPU count by default).
    executor_options
        Engine settings: ``{"start_method": "spawn"}`` for processes; ``master``/``conf``
        for Spark; ``ray.init`` arguments (``address``, ``num_cpus``...) for Ray.

    Returns
    -------
    ConvertResult
        The shard paths, records and bytes per shard, and the elapsed time.

    Examples
    --------
    >>> import numpy as np
    >>> from recprep import convert, RecordIO
    >>> def reader():
    ...     for i in range(10):
    ...         yield np.full(3, i, dtype=np.float32), i
    >>> result = convert("memory://doc/convert", reader, 3, "demo")
    >>> [p.rsplit("/", 1)[1] for p in result.paths]
    ['demo-00000-of-00002', 'demo-00001-of-00002', 'demo-00002-of-00002']
    >>> result.records_per_shard
    [4, 3, 3]
    >>> [label for _, label in RecordIO("memory://doc/convert/demo-*-of-*")()]
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    """
    started = time.perf_counter()
    options = check_options(format, compressor, codec, num_shards, chunk_bytes)
    check_prefix(name_prefix)
    if not isinstance(reader, Partitions):
        check_reader(reader)
    backend = get_backend(executor, num_workers, executor_options)
    fs, out = resolve(output_path, storage_options)
    try:
        if not overwrite:
            _refuse_existing(fs, out, name_prefix)
        names = [shard_name(name_prefix, i, num_shards) for i in range(num_shards)]
        fs.makedirs(out, exist_ok=True)
        staging = Staging(fs, out, name_prefix)
        bar = (
            progress
            if isinstance(progress, Progress)
            else Progress(progress, total_shards=num_shards, desc=name_prefix)
        )
        try:
            facts, notes = _write(reader, backend, fs, staging, names, options, bar)
            shards = [
                ShardInfo(name, f.records, f.bytes, f.crc32c)
                for name, f in zip(names, facts, strict=True)
            ]
            manifest = Manifest(
                name_prefix=name_prefix,
                format=options.format,
                codec=options.codec.name,
                compressor=options.compressor,
                shards=shards,
                schema=options.codec.schema(),
            )
            if not overwrite:
                _refuse_existing(fs, out, name_prefix)  # a set may have appeared meanwhile
            replaced = existing_set_files(fs, out, name_prefix) if overwrite else []
            staged = {name: f.path for name, f in zip(names, facts, strict=True)}
            staging.commit(staged, manifest.to_json(), replaced=replaced)
        except BaseException:
            staging.remove()
            raise
        finally:
            bar.close()
    finally:
        backend.close()
    result = ConvertResult(
        output_path=display(fs, out),
        manifest_path=display(fs, posixpath.join(out, manifest_name(name_prefix))),
        paths=[display(fs, posixpath.join(out, n)) for n in names],
        records_per_shard=[s.records for s in shards],
        bytes_per_shard=[s.bytes for s in shards],
        elapsed=time.perf_counter() - started,
        manifest=manifest,
        notes=notes,
    )
    log.info("recprep: %s", result)
    return result


def _refuse_existing(fs: Any, out: str, prefix: str) -> None:
    existing = existing_set_files(fs, out, prefix)
    if existing:
        raise OutputExistsError(display(fs, out), [display(fs, p) for p in existing])
