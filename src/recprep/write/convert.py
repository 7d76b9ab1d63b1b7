"""``convert``: a reader's instances in, a committed shard set out.

Instance ``i`` goes to shard ``i % num_shards``, at position ``i // num_shards``, so
shards are balanced to within one instance and a round-robin read gives the instances
back in their original order. The same holds for :func:`~recprep.partitions` input, as
if its partitions were one reader, whichever executor runs the work (``write/plan.py``).

The steps, and where each lives: the arguments are checked into one
:class:`~recprep.write.job.ConvertJob`; holding the set's lock, a resume finishes or
verifies what a killed run left (:mod:`recprep.write.resume`); the tasks write the shards
into the staging directory (:mod:`recprep.write.tasks`, run by
:mod:`recprep.executors.dispatch`); the side files are built from what the tasks reported
(:mod:`recprep.write.sidefiles`), and the set is committed, manifest last
(:mod:`recprep.storage.staging`).
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import os
import posixpath
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._core.arguments import checked
from .._core.names import CodecName, CompressorName, ExecutorName, FormatName
from ..codecs import Codec
from ..errors import (
    PickleFallbackWarning,
    RecprepError,
    RecprepWarning,
    WriteError,
    warn,
)
from ..executors import Backend, get_backend
from ..storage.discovery import Kind, set_files
from ..storage.fs import display, resolve
from ..storage.listing import DirectoryEntry
from ..storage.locking import ShardSetLock
from ..storage.manifest import Manifest, ShardInfo
from ..storage.shardnames import check_prefix, manifest_name
from ..storage.staging import FileFacts
from .inputs import as_input, is_sized, part_rows
from .job import ConvertJob
from .options import check_options
from .plan import Partitions
from .progress import Progress, ProgressArg
from .resume import read_only, refuse_existing, resumed_set, verified_set
from .sidefiles import side_files
from .tasks import write_staged

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
    rows = part_rows(reader, options.codec, num_shards, options.chunk_bytes) if is_sized(
        reader) else None
    job = ConvertJob(fs, out, name_prefix, num_shards, options, backend, progress,
                     overwrite, resume, rows)
    try:
        try:
            fs.makedirs(out, exist_ok=True)
        except OSError as err:
            raise WriteError(display(fs, out), err) from err
        manifest, notes = _locked(job, reader)
    finally:
        backend.close()
    result = ConvertResult(
        output_path=display(fs, out),
        manifest_path=display(fs, posixpath.join(out, manifest_name(name_prefix))),
        paths=[display(fs, posixpath.join(out, n)) for n in job.names],
        records_per_shard=[s.records for s in manifest.shards],
        bytes_per_shard=[s.bytes for s in manifest.shards],
        elapsed=time.perf_counter() - started,
        manifest=manifest,
        notes=notes,
    )
    log.info("recprep: %s", result)
    _warn_empty(result, num_shards)
    return result


def _warn_empty(result: ConvertResult, num_shards: int) -> None:
    """Warn when most shards got no instance: the readers and ranks that get them read
    nothing."""
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


def _locked(job: ConvertJob, reader: Any) -> tuple[Manifest, list[Any]]:
    """Holding the set's lock: with ``resume``, finish or verify what a killed run left;
    otherwise (or then) write and commit the set."""
    lock = ShardSetLock(job.fs, job.output, job.prefix)
    try:
        lock.acquire()
    except WriteError as err:  # read-only: a complete set needs no writing to verify
        if not (job.resume and not job.overwrite and read_only(err)):
            raise  # (an overwrite must write: the set there may be the old one)
        manifest = verified_set(job)
        if manifest is None:
            raise
        return manifest, []
    try:
        fingerprint = job.fingerprint(reader)
        replace = job.overwrite
        if job.resume:
            try:
                manifest, replace = resumed_set(job, fingerprint, lock.killed_takers)
            except OSError as err:  # storage failed (a RecprepError that is one stays)
                if isinstance(err, RecprepError):
                    raise
                raise WriteError(display(job.fs, job.staging.path), err) from err
            if manifest is not None:
                return manifest, []
            replace = replace or job.overwrite
        if not replace:
            refuse_existing(job)
        return _write_and_commit(job, reader, replace, fingerprint)
    finally:
        lock.release()


def _write_and_commit(
    job: ConvertJob, reader: Any, replace: bool, fingerprint: str
) -> tuple[Manifest, list[Any]]:
    """Write, then commit, the shard set (holding its lock); ``replace``: replace the
    set there."""
    staging = job.staging
    run = staging.run() if job.resume and staging.exists() else None
    reuse = run is not None and run.fingerprint == fingerprint
    staging.create(keep=reuse)
    staging.start_run(fingerprint, replace)
    bar = (
        job.progress
        if isinstance(job.progress, Progress)
        else Progress(job.progress, total_shards=job.num_shards, desc=job.prefix,
                      total_instances=_input_length(reader))
    )
    try:
        facts, notes, pickled = write_staged(job, reader, bar, reuse)
        notes.extend(_warn_pickled(pickled))
        manifest = _new_manifest(job, facts, pickled)
        if not replace:
            refuse_existing(job)  # a set may have appeared meanwhile
        # replace: the old set's files; else only a side file of the set left alone
        listed = set_files(job.fs, job.output, job.prefix)
        replaced = [e.path for e in listed if replace or e.kind is Kind.SET_SIDE]
        shards = dict(zip(job.names, facts, strict=True))
        staged = {name: f.path for name, f in shards.items()}
        staged.update(side_files(job, shards, manifest))
        staging.commit(staged, manifest.to_json(), replaced=replaced,
                       old_manifest=_old_manifest(job, listed, replace))
    except BaseException as err:
        if not staging.committing:  # else the journal says how to finish: keep it all
            staging.clear(err)  # cleanup failures are notes on err, never hide it
        raise
    finally:
        bar.close()
    return manifest, notes


def _old_manifest(job: ConvertJob, listed: Sequence[DirectoryEntry], replace: bool
                  ) -> bool | None:
    """Whether the commit finds a manifest of the prefix to remove first: yes when the
    listing holds one; no when it doesn't and nothing is replaced (the listing just
    refused any set there); else not known (the commit removes one if it is there)."""
    name = manifest_name(job.prefix)
    if any(posixpath.basename(e.path) == name for e in listed):
        return True
    return None if replace else False


def _new_manifest(job: ConvertJob, facts: list[FileFacts], pickled: Mapping[str, int]
                  ) -> Manifest:
    """The manifest of the staged shards ``facts`` (in shard order)."""
    options = job.options
    shards = [ShardInfo(name, f.records, f.bytes, f.crc32c)
              for name, f in zip(job.names, facts, strict=True)]
    return Manifest(
        name_prefix=job.prefix,
        format=options.format,
        codec=options.codec.name,
        compressor=options.compressor,
        shards=shards,
        schema=options.codec.schema(),
        pickled=sorted(pickled),
    )


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
