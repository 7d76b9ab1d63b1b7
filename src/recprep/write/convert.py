"""``convert``: a reader's instances in, a committed shard set out.

Instance ``i`` goes to shard ``i % num_shards``, at position ``i // num_shards``, so
shards are balanced to within one instance and a round-robin read gives the instances
back in their original order. The same holds for :func:`~recprep.partitions` input, as
if its partitions were one reader, whichever executor runs the work (``write/plan.py``).
"""

from __future__ import annotations

import concurrent.futures as cf
import errno
import json
import logging
import os
import posixpath
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from .._core.arguments import checked
from .._core.names import CodecName, CompressorName, ExecutorName, FormatName
from ..codecs import Codec
from ..errors import (
    REMEDY,
    CorruptDataError,
    InvalidArgumentError,
    KilledRunWarning,
    OutputExistsError,
    PickleFallbackWarning,
    RecprepError,
    RecprepWarning,
    Remedy,
    WriteError,
    warn,
)
from ..executors import Backend, get_backend, serialize
from ..executors.base import reraise
from ..storage.chunkindex import binding
from ..storage.discovery import Kind, set_files
from ..storage.fs import display, resolve
from ..storage.locking import ShardSetLock
from ..storage.manifest import Manifest, ShardInfo, read_manifest
from ..storage.shardnames import check_prefix, manifest_name, shard_name
from ..storage.staging import Staging, Unfinishable, facts_intact
from .inputs import as_input, is_sized, split_sized, warn_unsplit
from .loop import FileFacts, WriteOptions, check_options
from .plan import (
    DEFAULT_MAX_TASKS,
    PartitionGroup,
    Partitions,
    TaskResult,
    assemble_task,
    partitions,
    pieces_task,
    plan_assembly,
    stream_task,
)
from .progress import Progress, ProgressArg

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

    def __repr__(self) -> str:
        m = self.manifest
        pickles = f", pickled: {', '.join(m.pickled)}" if m.pickled else ""
        return (
            f"ConvertResult({self.output_path}/{m.name_prefix}: {len(self.paths)} shards, "
            f"{self.num_records} instances, {_size(self.total_bytes)}, "
            f"format={m.format!r}, codec={m.codec!r}, compressor={m.compressor!r}, "
            f"{self.elapsed:.2f} s{pickles})"
        )


def _size(size: float) -> str:
    """``1.5 MB``: a byte count for people."""
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"


@dataclass(frozen=True)
class _Task:
    key: str  # names the task's record in staging, for resume
    description: str
    fn: Any
    args: tuple[Any, ...]
    live: bool = False  # reads instances: takes a tick callback when run in this process
    #: the input partitions it reads (a group of them shares one task): what progress counts
    partitions: int = 1


def _run_tasks(
    backend: Backend,
    tasks: Sequence[_Task],
    progress: Progress,
    staging: Staging,
    resume: bool,
) -> list[TaskResult]:
    """Run ``tasks`` on ``backend`` (reusing the ones a killed run recorded, with
    ``resume``); their results in task order. Each finished task is recorded."""
    results: list[TaskResult | None] = [None] * len(tasks)
    todo = []
    for index, task in enumerate(tasks):
        done = staging.recorded(task.key) if resume else None
        if done is None:
            todo.append(index)
            continue
        results[index] = TaskResult(*done)
        log.debug("recprep: reusing the staged output of %s", task.description)
        if task.live:
            progress.add_instances(results[index].records)  # type: ignore[union-attr]
            progress.add_tasks(task.partitions)

    def finished(index: int, result: TaskResult, counted: bool) -> None:
        results[index] = result
        staging.record(tasks[index].key, result.files, result.notes, result.pickled)
        if tasks[index].live:
            if not counted:
                progress.add_instances(result.records)
            progress.add_tasks(tasks[index].partitions)

    if backend.in_process:
        for index in todo:
            task = tasks[index]
            extra = (progress.add_instances,) if task.live else ()
            try:
                result = task.fn(*task.args, *extra)
            except Exception as err:
                reraise(err, task.description)
            finished(index, result, counted=True)
        return results  # type: ignore[return-value]
    payloads = [serialize(tasks[i].fn, tasks[i].args, tasks[i].description) for i in todo]
    for position, outcome in backend.run(payloads):
        index = todo[position]
        finished(index, outcome.unwrap(tasks[index].description), counted=False)
    return results  # type: ignore[return-value]


def _write(
    reader: Any,
    backend: Backend,
    fs: Any,
    staging: Staging,
    names: list[str],
    options: Any,
    progress: Progress,
    resume: bool,
) -> tuple[list[FileFacts], list[Any], dict[str, int]]:
    """Run the tasks that produce the staged shards: their facts in shard order, the
    readers' notes in partition order, and the types stored as pickles by the codec's
    fallback (each with the first instance that held one)."""
    parts = None
    if not isinstance(reader, Partitions) and is_sized(reader):
        # Row ranges cut by the input's length alone: a parallel executor reads them as
        # partitions; this process streams them, cutting chunks at the same places, so
        # the bytes are the same either way.
        parts = split_sized(reader, DEFAULT_MAX_TASKS)
        if parts is not None and not backend.in_process:
            reader, parts = partitions(parts), None
    if not isinstance(reader, Partitions):
        if not backend.in_process:
            if not is_sized(reader):  # (a sized input this small isn't worth splitting)
                warn_unsplit(reader, backend.name or type(backend).__name__)
            if not callable(reader):
                backend = get_backend("serial")  # a one-shot iterable is read here, once
        cuts = list(accumulate(len(part) for part in parts[:-1])) if parts else []
        args = (reader, fs, staging.path, names, options, cuts)
        task = _Task("stream", "the reader's task", stream_task, args, True)
        (result,) = _run_tasks(backend, [task], progress, staging, resume)
        progress.add_shards(len(names))
        return [f for f in result.files if f is not None], result.notes, result.pickled
    n = len(names)
    piece_tasks = []
    for start, end in reader.groups():
        group = reader.readers[start] if end - start == 1 else PartitionGroup(
            reader.readers[start:end]
        )
        label = f"partition {start}" if end - start == 1 else f"partitions {start}-{end - 1}"
        key = f"part-{start:05d}-{end:05d}"
        part_args = (start, group, fs, staging.path, n, options)
        piece_tasks.append(_Task(key, label, pieces_task, part_args, True, end - start))
    pieces = _run_tasks(backend, piece_tasks, progress, staging, resume)
    pickled: dict[str, int] = {}
    offset = 0  # instances of the partitions before this task's
    for piece in pieces:
        for type_name, index in piece.pickled.items():
            pickled.setdefault(type_name, offset + index)
        offset += piece.records
    assemble = [
        _Task(f"shard-{s:05d}", f"shard {s} ({names[s]})", assemble_task,
              (names[s], parts, fs, staging.path, options))
        for s, parts in enumerate(plan_assembly([p.files for p in pieces], n))
    ]
    shards: list[FileFacts] = []
    for result in _run_tasks(backend, assemble, progress, staging, resume):
        (facts,) = result.files
        assert facts is not None
        shards.append(facts)
        progress.add_shards()
    return shards, [note for p in pieces for note in p.notes], pickled


@checked
def convert(
    output_path: str | os.PathLike[str],
    reader: Any,
    num_shards: int,
    name_prefix: str,
    *,
    format: FormatName | str = "recordio",
    codec: CodecName | str | Codec = "recprep",
    compressor: CompressorName | str | None = None,
    overwrite: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    progress: ProgressArg | Progress = None,
    chunk_bytes: int | None = None,
    executor: ExecutorName | str | cf.Executor | Backend = "serial",
    num_workers: int | None = None,
    executor_options: Mapping[str, Any] | None = None,
    resume: bool = False,
) -> ConvertResult:
    """Write the instances of ``reader`` into ``num_shards`` shard files.

    Parameters
    ----------
    output_path
        A directory, local or an fsspec URL (``s3://bucket/ds``, ``memory://x``); created
        if missing. With a cluster executor, storage every worker reaches.
    reader
        A PaddlePaddle-style reader (a no-argument callable returning an iterable of
        instances), a one-shot iterable (read once, in this process),
        :func:`~recprep.partitions` of readers (each read by its own task), or a table —
        a pandas ``DataFrame``, a pyarrow ``Table`` or ``RecordBatch`` — one instance per
        row, a dict ``{column: value}`` (see :mod:`recprep.write.inputs`; a table without
        columns is refused). Each instance is a value or a tuple of values. Sized input (a
        list, array or table) is split by row ranges for parallel executors, with the
        same bytes as ``serial``.
    num_shards
        How many shard files to write; instance ``i`` goes to shard ``i % num_shards``.
        A shard that gets no instance is an empty (zero-byte) file. Any number works
        under the usual open-files limit: a task keeps at most 256 of its files open (a
        quarter of ``RLIMIT_NOFILE`` if less; :mod:`recprep.write.filepool`).
    name_prefix
        Shards are named ``{name_prefix}-00000-of-{num_shards-1:05d}`` and so on; the
        manifest is ``{name_prefix}.manifest.json``.
    format
        ``"recordio"`` (Go/PaddlePaddle/ElasticDL), ``"recordio-legacy"`` (pyrecordio
        0.0.4), ``"tfrecord"``, or any registered format.
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
        Uncompressed bytes per chunk (default 512 KiB, less when there are many shards, so
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
    resume
        Complete the work of a run that was killed: finish its commit, or reuse the tasks
        it finished (verified by size and CRC-32C) and run the rest. The result is
        byte-identical to an uninterrupted run. On a complete set, verify it and return;
        on an empty output, simply run. With ``overwrite=True`` too, a complete set is
        returned only as the end of this conversion's own commit: where nothing of it is
        staged (an overwrite killed before it recorded its run leaves no trace), the set
        there may be the old one, so the conversion runs and replaces it.

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
        reader = as_input(reader)
    backend = get_backend(executor, num_workers, executor_options)
    fs, out = resolve(os.fspath(output_path), storage_options)
    names = [shard_name(name_prefix, i, num_shards) for i in range(num_shards)]
    notes: list[Any] = []
    try:
        try:
            fs.makedirs(out, exist_ok=True)
        except OSError as err:
            raise WriteError(display(fs, out), err) from err
        manifest, notes = _locked(
            reader, backend, fs, Staging(fs, out, name_prefix), names, options, progress,
            overwrite, resume,
        )
    finally:
        backend.close()
    result = ConvertResult(
        output_path=display(fs, out),
        manifest_path=display(fs, posixpath.join(out, manifest_name(name_prefix))),
        paths=[display(fs, posixpath.join(out, n)) for n in names],
        records_per_shard=[s.records for s in manifest.shards],
        bytes_per_shard=[s.bytes for s in manifest.shards],
        elapsed=time.perf_counter() - started,
        manifest=manifest,
        notes=notes,
    )
    log.info("recprep: %s", result)
    empty = result.records_per_shard.count(0)
    if empty * 2 > num_shards:
        warn(
            RecprepWarning(
                f"{empty} of {num_shards} shards are empty ({result.num_records} "
                f"instance{'' if result.num_records == 1 else 's'} for {num_shards} shards): "
                "readers and ranks that get them read nothing; "
                "use fewer shards"
            )
        )
    return result


def _fingerprint(options: WriteOptions, names: list[str], reader: Any) -> str:
    """What staged work depends on: a resumed run reuses it only if this is unchanged."""
    groups = reader.groups() if isinstance(reader, Partitions) else None
    doc = {
        "format": options.format, "compressor": options.compressor,
        "codec": options.codec.name, "schema": options.codec.schema(),
        "chunk_bytes": options.chunk_bytes, "shards": names, "groups": groups,
    }
    return json.dumps(doc, sort_keys=True, default=str)


def _locked(
    reader: Any,
    backend: Backend,
    fs: Any,
    staging: Staging,
    names: list[str],
    options: WriteOptions,
    progress: ProgressArg | Progress,
    overwrite: bool,
    resume: bool,
) -> tuple[Manifest, list[Any]]:
    """Holding the set's lock: with ``resume``, finish or verify what a killed run left;
    otherwise (or then) write and commit the set."""
    out = staging.output
    lock = ShardSetLock(fs, out, staging.prefix)
    try:
        lock.acquire()
    except WriteError as err:  # read-only: a complete set needs no writing to verify
        if not (resume and not overwrite and _read_only(err)):
            raise  # (an overwrite must write: the set there may be the old one)
        manifest = _verified(fs, out, options, names, staging.prefix)
        if manifest is None:
            raise
        return manifest, []
    try:
        fingerprint = _fingerprint(options, names, reader)
        replace = overwrite
        if resume:
            try:
                manifest, replace = _committed(fs, out, staging, options, names, fingerprint,
                                               overwrite, lock.killed_takers)
            except OSError as err:  # storage failed (a RecprepError that is one stays)
                if isinstance(err, RecprepError):
                    raise
                raise WriteError(display(fs, staging.path), err) from err
            if manifest is not None:
                return manifest, []
            replace = replace or overwrite
        if not replace:
            _refuse_existing(fs, out, staging.prefix)
        return _convert(reader, backend, fs, out, staging, names, options, progress, replace,
                        resume, fingerprint)
    finally:
        lock.release()


def _read_only(err: WriteError) -> bool:
    original = err.original
    return isinstance(original, OSError) and original.errno in (
        errno.EROFS, errno.EACCES, errno.EPERM)


def _convert(
    reader: Any,
    backend: Backend,
    fs: Any,
    out: str,
    staging: Staging,
    names: list[str],
    options: WriteOptions,
    progress: ProgressArg | Progress,
    overwrite: bool,
    resume: bool,
    fingerprint: str,
) -> tuple[Manifest, list[Any]]:
    """Write, then commit, the shard set (holding its lock); ``overwrite``: replace the
    set there."""
    run = staging.run() if resume and staging.exists() else None
    reuse = run is not None and run.fingerprint == fingerprint
    staging.create(keep=reuse)
    staging.start_run(fingerprint, overwrite)
    bar = (
        progress
        if isinstance(progress, Progress)
        else Progress(progress, total_shards=len(names), desc=staging.prefix,
                      total_instances=_input_length(reader))
    )
    try:
        facts, notes, pickled = _write(
            reader, backend, fs, staging, names, options, bar, reuse
        )
        notes.extend(_warn_pickled(pickled))
        shards = [
            ShardInfo(name, f.records, f.bytes, f.crc32c)
            for name, f in zip(names, facts, strict=True)
        ]
        manifest = Manifest(
            name_prefix=staging.prefix,
            format=options.format,
            codec=options.codec.name,
            compressor=options.compressor,
            shards=shards,
            schema=options.codec.schema(),
            pickled=sorted(pickled),
        )
        if not overwrite:
            _refuse_existing(fs, out, staging.prefix)  # a set may have appeared meanwhile
        # overwrite: the old set's files; else only a side file of the set left alone
        replaced = [e.path for e in set_files(fs, out, staging.prefix)
                    if overwrite or e.kind is Kind.SET_SIDE]
        staged = {name: f.path for name, f in zip(names, facts, strict=True)}
        sides = _record_indexes(fs, staging, staged, options)
        sides.update(_chunk_indexes(fs, staging, staged, manifest, options))
        manifest.side_files = [binding(fs, path) for path in sides.values()]  # vouched for
        staged.update(sides)
        staging.commit(staged, manifest.to_json(), replaced=replaced)
    except BaseException as err:
        if not staging.committing:  # else the journal says how to finish: keep it all
            staging.clear(err)  # cleanup failures are notes on err, never hide it
        raise
    finally:
        bar.close()
    return manifest, notes


def _input_length(reader: Any) -> int | None:
    """How many instances the input holds, when that is known without reading it (a list,
    an array, a table, partitions of those): the progress bar's total."""
    readers = reader.readers if isinstance(reader, Partitions) else (reader,)
    if not all(is_sized(r) for r in readers):
        return None
    return sum(len(r) for r in readers)


def _warn_pickled(pickled: Mapping[str, int]) -> list[str]:
    """Warn once per type that the codec stored as a pickle; the notes that say so."""
    notes = []
    for type_name, index in sorted(pickled.items(), key=lambda item: item[1]):
        warn(PickleFallbackWarning(type_name, index))
        notes.append(
            f"holds pickles: {type_name} (first in instance {index}); readers need "
            "allow_pickle=True"
        )
    return notes


def _record_indexes(
    fs: Any, staging: Staging, staged: Mapping[str, str], options: WriteOptions
) -> dict[str, str]:
    """Record index side files of the shards, when the format keeps one and it gives
    random access with this compressor (a plain TFRecord shard's ``.{shard}.tfindex``):
    counts and ranges without a scan; hidden names, committed with the shards."""
    from ..storage.sideindex import build_side_index

    container = options.container()
    kind = container.record_index
    if kind is None or not kind.seeks(options.compressor):
        return {}
    indexes = {}
    for name, path in staged.items():
        side = staging.file(kind.name_for(name))
        try:
            build_side_index(fs, path, container=container, index_file=side,
                        compressor=options.compressor)
        except WriteError:
            raise
        except OSError as err:
            raise WriteError(display(fs, side), err) from err
        indexes[kind.name_for(name)] = side
    return indexes


def _chunk_indexes(
    fs: Any, staging: Staging, staged: Mapping[str, str], manifest: Manifest,
    options: WriteOptions,
) -> dict[str, str]:
    """The side file of a set of a format with chunk headers (``.{prefix}.chunks``: every
    shard's chunk offsets and counts, :mod:`recprep.storage.chunkindex`), from the staged shards'
    chunk headers hopped once here; committed with the shards, before the manifest."""
    import numpy as np

    from ..containers.fileindex import build_index as index_of
    from ..storage.chunkindex import chunks_name, write_table

    container = options.container()
    if not container.chunk_header_bytes:
        return {}
    chunks = {}
    for name, path in staged.items():
        try:
            with fs.open(path, "rb") as f:
                index = index_of(f, container, path=display(fs, path))
        except OSError as err:
            raise WriteError(display(fs, path), err) from err
        chunks[name] = (index.offsets.tolist(), np.diff(index.firsts).tolist())
    side = staging.file(chunks_name(manifest.name_prefix))
    try:
        write_table(fs, side, manifest, chunks)
    except OSError as err:
        raise WriteError(display(fs, side), err) from err
    return {chunks_name(manifest.name_prefix): side}


def _committed(
    fs: Any, out: str, staging: Staging, options: WriteOptions, names: list[str],
    fingerprint: str, overwrite: bool, killed_takers: int = 0,
) -> tuple[Manifest | None, bool]:
    """With ``resume``: ``(manifest, False)`` once a commit a killed run started is
    finished, or a complete set is verified; ``(None, replace)`` when there is work to do
    (``replace``: the work replaces the set there — a killed overwrite is continued).

    With ``overwrite``, a complete set is never the result on its own: when nothing of
    this conversion is staged (no journal, no run recorded with this fingerprint), the
    set there may be the old one — an overwrite killed before it recorded its run (while
    it took the lock, or before its ``options.json`` was renamed into place) leaves no
    trace — so the conversion runs and replaces it. A resume never returns the old data
    as this conversion's result. Without ``overwrite``, nothing tells the set there from
    the one such a run was to write: it is returned, with a
    :class:`~recprep.errors.KilledRunWarning` when that run left a trace (its lock's
    temporary, ``killed_takers``, or its record's)."""
    if staging.pending_commit():
        journal = staging.journal()  # checked: this user's, names inside the directory
        data = staging.staged_manifest(journal)
        source = staging.file(manifest_name(staging.prefix))
        if data is None:  # moved in: the commit point was passed
            source = posixpath.join(out, manifest_name(staging.prefix))
            committed = read_manifest(fs, source)
            data = None if committed is None else committed.to_json()
        if data is not None:
            manifest = Manifest.from_json(data, path=display(fs, source))
            if overwrite and not _same(manifest, options, names):
                log.info("recprep: the interrupted commit in %s is of other options; this "
                         "overwrite replaces it", display(fs, out))
                return None, True
            _check_same(manifest, options, names, display(fs, out))
            intact = {
                s.name: FileFacts(posixpath.join(out, s.name), s.records, s.bytes, s.crc32c)
                for s in manifest.shards
            }
            log.info("recprep: finishing the commit of an interrupted run in %s", out)
            try:
                staging.finish_commit(journal, intact)
                return manifest, False
            except Unfinishable as why:
                log.warning("recprep: the interrupted commit in %s can't be finished (%s); "
                            "writing the set again", display(fs, out), why)
        return None, True  # a new commit replaces what the interrupted one left
    staged = staging.exists()
    run = staging.run() if staged else None
    if run is not None and run.fingerprint == fingerprint:
        # a killed run's work: finish what it was asked to do
        return None, run.overwrite or overwrite
    if overwrite:  # no trace of this conversion: the set there may be the old one
        log.info("recprep: nothing of this conversion is staged in %s; writing it",
                 display(fs, out))
        return None, True
    traces = []
    if killed_takers:
        traces.append("it died while taking the set's lock")
    if staged and run is None and staging.unrecorded_run():
        traces.append("its record in the staging directory was never renamed into place")
    complete = _verified(fs, out, options, names, staging.prefix)
    if complete is None:
        return None, False
    if traces:
        warn(KilledRunWarning(display(fs, out), "; ".join(traces)))
    staging.remove()  # leftovers of a run that died after committing
    return complete, False


def _verified(
    fs: Any, out: str, options: WriteOptions, names: list[str], prefix: str
) -> Manifest | None:
    """The committed set's manifest once every shard is checked against it (size and
    CRC-32C), None when there is none. Reads only."""
    final_manifest = posixpath.join(out, manifest_name(prefix))
    manifest = read_manifest(fs, final_manifest)
    if manifest is None:
        return None
    _check_same(manifest, options, names, display(fs, out))
    for shard in manifest.shards:
        path = posixpath.join(out, shard.name)
        if not facts_intact(fs, FileFacts(path, shard.records, shard.bytes, shard.crc32c)):
            raise CorruptDataError(
                f"the committed shard set doesn't match its manifest (size or CRC-32C of "
                f"{shard.name})",
                path=display(fs, path),
                remedy=Remedy("overwrite", True, effect="to write it again"),
            )
    log.info("recprep: %s is complete and verified; nothing to do", final_manifest)
    return manifest


def _same(manifest: Manifest, options: WriteOptions, names: list[str]) -> bool:
    """Whether ``manifest`` is of a set written with these options and shard names."""
    want = (options.format, options.codec.name, options.compressor, names)
    have = (manifest.format, manifest.codec, manifest.compressor,
            [s.name for s in manifest.shards])
    return want == have


def _check_same(manifest: Manifest, options: WriteOptions, names: list[str], out: str) -> None:
    want = (options.format, options.codec.name, options.compressor, names)
    have = (manifest.format, manifest.codec, manifest.compressor,
            [s.name for s in manifest.shards])
    if want != have:
        raise InvalidArgumentError(
            f"resume: the shard set in {out} was written as format={have[0]!r}, "
            f"codec={have[1]!r}, compressor={have[2]!r}, {len(have[3])} shards; this run "
            f"asks for {want[0]!r}, {want[1]!r}, {want[2]!r}, {len(want[3])} shards. Use "
            f"the same options{REMEDY}",
            remedy=Remedy("overwrite", True, effect="to start again"),
        )


def _refuse_existing(fs: Any, out: str, prefix: str) -> None:
    # a side file of the set alone is no set (the commit replaces it)
    existing = [e.path for e in set_files(fs, out, prefix) if e.kind is not Kind.SET_SIDE]
    if existing:
        raise OutputExistsError(
            display(fs, out), [display(fs, p) for p in existing],
            resumable=not fs.exists(posixpath.join(out, manifest_name(prefix))),
        )
