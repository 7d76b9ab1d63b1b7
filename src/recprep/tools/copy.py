"""``copy``: shard sets from one filesystem to another, every file checked, manifests last.

The sources are expanded first (see :mod:`recprep.tools._sets`): a directory copies
every visible file in it; a glob its matches; ``dir/prefix`` or a manifest the whole set.
Copying every shard of a set copies its manifest too; copying some shards of a set
doesn't (the destination would claim shards it hasn't got).

Then, as in ``convert``'s commit protocol (``docs/format.md`` §3):

1. The destination directory's ``cp`` lock and each destination set's lock are taken
   (local storage), and temporaries a killed ``cp`` left are removed. On a store that
   speaks S3, a set copied whole where nothing of it is yet is committed early
   (:mod:`~recprep.storage.earlycommit`): its journal, naming its files, is written
   before any of them (a copy killed before such a commit is rolled back first).
2. Each file is streamed, several at a time, into a hidden temporary — a set's files into
   the set's staging directory ``.recprep-staging-{prefix}/``, other files as
   ``.recprep-cp-{token}-{name}`` — while its CRC-32C is computed; a source whose CRC-32C
   differs from its manifest's is refused. Each copy is checked: where the destination
   store checks the CRC-32C sent with each uploaded part (S3's ``x-amz-checksum-crc32c``;
   found out once per run, :func:`~recprep.write.uploads.store_checks`), by the store;
   else where the store's ETag is the MD5 of the bytes sent, by that receipt; elsewhere
   each temporary is read back and its size and CRC-32C compared. On a store that
   speaks S3, the files of a whole set aren't written to temporaries: each is uploaded
   to its final name — over a set there, as a multipart upload left incomplete
   (invisible until completed), which the commit completes instead of a move (there a
   server-side copy); for a set committed early, whole, as ``s3fs.put`` would.
3. Only when every file checks out: files of no set are moved to their names, and each
   set is committed with the journal: its old manifest removed, its files moved in, the
   manifest moved in **last** (a set committed early: the manifest written, then its
   journal removed). Readers see the old set, the new one, or an error (a set without a
   manifest whose journal is there is not committed), never a mix; a copy killed
   mid-commit is finished by copying again (or ``convert(..., resume=True)``).
4. Any failure before that removes the temporaries (and the files a set committed early
   wrote): no partial set is ever read as one, and the destination is as it was.

Example
-------
>>> from recprep import RecordIO, convert
>>> _ = convert("memory://doc/cp-src", list(range(5)), 2, "p")
>>> result = copy("memory://doc/cp-src/p", "memory://doc/cp-dst")
>>> [f.dest.rsplit("/", 1)[1] for f in result.files]
['.p.chunks', 'p-00000-of-00001', 'p-00001-of-00001', 'p.manifest.json']
>>> list(RecordIO("memory://doc/cp-dst")())
[0, 1, 2, 3, 4]

The steps live in four modules: :mod:`~recprep.tools.copyplan` expands the sources
(step 0), :mod:`~recprep.tools.copyprepare` takes the locks and readies the destination
(step 1), :mod:`~recprep.tools.transfer` streams and checks each file (step 2), and this
one commits and cleans up (steps 3 and 4).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import functools
import logging
import posixpath
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import google_crc32c

from .._core.arguments import checked
from ..errors import CorruptDataError, InvalidArgumentError, WriteError
from ..storage.fs import display, is_local, resolve
from ..storage.multipart import PendingUpload
from ..storage.shardnames import manifest_name
from ..storage.staging import Staging, note_cleanup_failure
from ..write.uploads import settle_probes
from .copyplan import CopyItem, is_manifest_or_side_file, items_by_set, plan_copy
from .copyprepare import TEMP_PREFIX, CopyJob, prepare_local, prepare_remote
from .transfer import (
    ByteProgress,
    CopiedFile,
    CopySources,
    Destination,
    copy_one,
    move_file,
    remove_temporaries,
    run_all_or_stop,
)

__all__ = ["TEMP_PREFIX", "CopiedFile", "CopyResult", "copy"]

log = logging.getLogger("recprep")

#: files of at most this many bytes (a set's manifest and chunk index, side files) are
#: copied beside the ``num_workers`` files in transfer, not instead of one: each is a
#: request or two, and a shard waiting for them would start its upload a round later
SMALL_FILE = 1 << 20


@dataclass
class CopyResult:
    """What :func:`copy` copied, in commit order (manifests last)."""

    dest: str
    files: list[CopiedFile]
    elapsed: float

    @property
    def total_bytes(self) -> int:
        return sum(f.bytes for f in self.files)

    def __str__(self) -> str:
        """What was copied: the files a listing shows, and the hidden side files (a set's
        chunk index) that travel with their set, counted apart."""
        rate = self.total_bytes / 1e6 / self.elapsed if self.elapsed > 0 else 0.0
        hidden = sum(posixpath.basename(f.dest).startswith(".") for f in self.files)
        side = f" and {hidden} hidden side file(s)" if hidden else ""
        return (
            f"{len(self.files) - hidden} file(s){side}, {self.total_bytes} bytes -> "
            f"{self.dest} in {self.elapsed:.2f} s ({rate:.1f} MB/s), every file checked "
            "(size, CRC-32C)"
        )


@checked
def copy(
    sources: str | Sequence[str],
    dest: str,
    *,
    storage_options: Mapping[str, Any] | None = None,
    dest_storage_options: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    num_workers: int = 8,
    progress: Any = None,
) -> CopyResult:
    """Copy files and shard sets into the directory ``dest``, checking every copy.

    Parameters
    ----------
    sources
        Directories, globs, ``dir/prefix`` (a whole set), manifests or files; local paths
        or fsspec URLs. Each file lands in ``dest`` under its own name.
    dest
        The destination directory (created if missing); any fsspec URL.
    storage_options
        Passed to fsspec for the sources, and for ``dest`` unless ``dest_storage_options``.
    dest_storage_options
        Passed to fsspec for ``dest`` (to copy between two differently-configured stores).
    overwrite
        Replace destination files of the same name (and uncommit the destination sets
        being replaced first). Without it, any such file raises
        :class:`~recprep.errors.OutputExistsError` before anything is copied.
    num_workers
        Files transferred at the same time (threads); small files (up to 1 MiB: a set's
        manifest and chunk index) travel beside them.
    progress
        ``None`` (a bar of bytes when stderr is a terminal), ``True``, ``False``, or
        ``callback(bytes_done, files_checked)``.

    Returns
    -------
    CopyResult
        Each file copied (source, destination, size, CRC-32C), manifests last.

    Examples
    --------
    >>> from recprep import convert
    >>> _ = convert("memory://doc/cp2", list(range(4)), 2, "a")
    >>> copy("memory://doc/cp2/a-*-of-*", "memory://doc/cp2-out").total_bytes > 0
    True
    >>> copy("memory://doc/cp2/a", "memory://doc/cp2-out")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    recprep.errors.OutputExistsError: memory:///doc/cp2-out already holds 4 file(s) of this ...
    """
    started = time.perf_counter()
    names = [sources] if isinstance(sources, str) else list(sources)
    if not names or not all(isinstance(s, str) for s in names):
        raise InvalidArgumentError(f"sources must be a path or a list of paths, got {sources!r}")
    if not isinstance(num_workers, int) or num_workers < 1:
        raise InvalidArgumentError(f"num_workers must be a positive int, got {num_workers!r}")
    items = plan_copy(names, storage_options)
    options = storage_options if dest_storage_options is None else dest_storage_options
    dfs, dpath = resolve(dest, options)
    finals = {it.name: posixpath.join(dpath, it.name) for it in items}
    for it in items:
        if display(it.fs, it.path) == display(dfs, finals[it.name]):
            raise InvalidArgumentError(f"{display(it.fs, it.path)} would be copied onto itself")
    job = CopyJob(dfs, dpath, items, finals, items_by_set(items), overwrite)
    prepare = prepare_local if is_local(dfs) else prepare_remote
    with contextlib.ExitStack() as stack:
        replaced, stagings, destination, early = prepare(job, stack)
        copied = _copy_and_commit(job, replaced, stagings, destination, progress, num_workers,
                                  early)
    result = CopyResult(job.shown, copied, time.perf_counter() - started)
    log.info("recprep: %s", result)
    return result


def _manifest_copy(item: CopyItem, sources: CopySources, final: str, staging: Staging,
                   bar: ByteProgress, early: bool, dest: Destination | None
                   ) -> tuple[CopiedFile, bytes]:
    """A set's manifest, read (or as planning read it), for its commit to write: never
    uploaded to a temporary (staged at once where its staging allows, but for a set
    committed ``early``: its commit writes it, nothing else reads it). Staged once the
    destination's gate is open, as every other write: a copy killed as it stages the
    manifest must not leave the checksum probe behind."""
    data = item.data
    if data is None:
        data = b"".join(sources.blocks(item.fs, item.path, item.size))
    if len(data) != item.size:
        raise CorruptDataError(f"read {len(data)} bytes where the listing said {item.size}: "
                               "the manifest changed during the copy; copy it again",
                               path=display(item.fs, item.path))
    if not early and dest is not None:
        dest.opened()  # (what must come first failed: its error as it is, not this file's)
    try:
        if not early:
            staging.stage_manifest(data)
    except WriteError as err:  # named by the manifest's final name
        raise WriteError(display(staging.fs, final), err.original) from err
    bar.add(len(data), files=1)
    crc = google_crc32c.value(data)
    return CopiedFile(display(item.fs, item.path), display(staging.fs, final), len(data),
                      f"{crc:08x}"), data


def _copy_and_commit(
    job: CopyJob, replaced: Sequence[str], stagings: Mapping[str, Staging],
    dest: Destination | None, progress: Any, num_workers: int, early: set[str],
) -> list[CopiedFile]:
    """Copy every item into a temporary (a set's files into its staging directory; on a
    store a whole set's files into incomplete uploads, or those of a set committed
    ``early`` to their final names), check them all, then commit: files of no set by a
    rename, each set with the journaled commit protocol (manifest last)."""
    dfs, dpath, groups = job.fs, job.path, job.groups
    temps = _temporaries(job, stagings)
    moved = [it for it in job.items if not it.is_manifest]
    manifests = [(it, p) for p, ms in groups.items() if p is not None for it in ms
                 if it.is_manifest]
    bar = ByteProgress(progress, sum(it.size for it in job.items), len(job.items))
    stop = threading.Event()
    sources = CopySources()
    try:
        if dest is None:  # (local: made here, after the locks)
            for staging in stagings.values():
                staging.create(keep=False)
            dest = Destination.of(dfs, dpath)
        placed, whole = _ways(job, early)
        small = sum(it.is_manifest or it.size <= SMALL_FILE for it in job.items)
        threads = num_workers + min(small, num_workers)  # (a small file: a request or two)
        with cf.ThreadPoolExecutor(threads, thread_name_prefix="recprep-cp") as pool:
            calls: list[tuple[Any, ...]] = [  # the manifests first: small, staged at once
                (_manifest_copy, it, sources, job.finals[it.name], stagings[p], bar,
                 p in early, dest) for it, p in manifests]
            calls += [(functools.partial(copy_one, deferred=it.name in whole), it, sources,
                       dest, job.finals[it.name] if it.name in placed else temps[it.name],
                       job.finals[it.name], bar, stop) for it in moved]
            done = run_all_or_stop(pool, calls, stop)
            read = dict(zip([it.name for it, _ in manifests], done[:len(manifests)],
                            strict=True))
            copied = done[len(manifests):]
            lone = [it.name for it in groups.get(None, [])]
            run_all_or_stop(pool, [(move_file, dfs, temps[n], job.finals[n]) for n in lone],
                            stop)
        dest.opened()  # (the early journals are in, even where no file was written)
        etags = {it.name: c.etag for it, c in zip(moved, copied, strict=True) if c.etag}
        for prefix, staging in stagings.items():
            manifest = next((read[it.name][1] for it in groups[prefix] if it.is_manifest),
                            None)
            if prefix in early and manifest is not None:  # (a set copied whole)
                staging.commit_early(manifest, etags)
            else:
                _commit_set(dfs, dpath, staging, groups[prefix], temps, replaced,
                            dest.take(job.finals[it.name] for it in groups[prefix]), manifest)
    except BaseException as err:
        if dest is not None:
            dest.abort_pending(err)
            dest.opened(quiet=True)  # (a journal still on its way would outlive its undo)
        remove_temporaries(dfs, [temps[it.name] for it in groups.get(None, [])], err)
        for prefix, staging in stagings.items():
            if prefix in early:  # the files it wrote in place go, then its journal
                _roll_back(staging, err)
            elif not staging.committing:  # else its journal says how to finish: keep it
                staging.clear(err)
        raise
    finally:
        sources.close()
        bar.close()
        settle_probes()
    return copied + [read[it.name][0] for it in job.items if it.is_manifest]


def _ways(job: CopyJob, early: set[str]) -> tuple[set[str], set[str]]:
    """The items written to their final names (a set committed ``early``), and those of
    other sets copied whole (on a store, incomplete uploads their commit completes)."""
    placed = {m.name for p in early for m in job.groups[p]}
    whole = {m.name for p, ms in job.groups.items() if p is not None and p not in early
             and any(m.is_manifest for m in ms) for m in ms}
    return placed, whole


def _temporaries(job: CopyJob, stagings: Mapping[str, Staging]) -> dict[str, str]:
    """Where each item is copied before the commit: a set's files into its staging
    directory, other files to hidden names in the destination directory."""
    token = uuid.uuid4().hex[:12]
    return {it.name: (stagings[prefix].file(f"cp-{it.name}") if prefix is not None
                      else posixpath.join(job.path, f"{TEMP_PREFIX}{token}-{it.name}"))
            for prefix, members in job.groups.items() for it in members}


def _roll_back(staging: Staging, error: BaseException) -> None:
    try:
        staging.roll_back_early()
    except Exception as failure:  # cleanup must not hide the error that led here
        note_cleanup_failure(error, f"removing the files copied into {staging.output}",
                             failure)


def _commit_set(
    dfs: Any, dpath: str, staging: Staging, members: Sequence[CopyItem],
    temps: Mapping[str, str], replaced: Sequence[str],
    uploads: Mapping[str, PendingUpload], manifest: bytes | None,
) -> None:
    """Commit one destination set: with its ``manifest``, journaled (readers never see a
    mix of the old and new files; ``uploads``, final path -> incomplete upload, are
    completed where the other files are moved in); without (some shards of a set only),
    the old manifest is removed and the shards moved in — the result is not a committed
    set."""
    pending = {posixpath.basename(p): u for p, u in uploads.items()}
    data = {it.name: temps[it.name] for it in members
            if not it.is_manifest and it.name not in pending}
    prefix = staging.prefix
    files = {**data, **pending}
    old = [p for p in replaced if posixpath.basename(p) in files
           or is_manifest_or_side_file(posixpath.basename(p), prefix, files)]
    final_manifest = posixpath.join(dpath, manifest_name(prefix))
    try:
        if manifest is not None:
            staging.commit(data, manifest, replaced=old, uploads=pending,
                           old_manifest=final_manifest in replaced)
            return
        if dfs.exists(final_manifest):
            dfs.rm(final_manifest)  # uncommit the destination set first
        for name, temp in data.items():
            dfs.mv(temp, posixpath.join(dpath, name))
        staging.clear()  # a journal an interrupted commit left still marks the set
    except OSError as err:
        raise WriteError(display(dfs, dpath), err) from err
