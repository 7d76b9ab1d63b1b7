"""``copy``: shard sets from one filesystem to another, every file checked, manifests last.

The sources are expanded first (see :mod:`recprep.tools._sets`): a directory copies
every visible file in it; a glob its matches; ``dir/prefix`` or a manifest the whole set.
Copying every shard of a set copies its manifest too; copying some shards of a set
doesn't (the destination would claim shards it hasn't got).

Then, as in ``convert``'s commit protocol (``docs/format.md`` §3):

1. The destination directory's ``cp`` lock and each destination set's lock are taken
   (local storage), and temporaries a killed ``cp`` left are removed.
2. Each file is streamed, several at a time, into a hidden temporary — a set's files into
   the set's staging directory ``.recprep-staging-{prefix}/``, other files as
   ``.recprep-cp-{token}-{name}`` — while its CRC-32C is computed; a source whose CRC-32C
   differs from its manifest's is refused. Each copy is checked: where the destination
   store checks the CRC-32C sent with each uploaded part (S3's ``x-amz-checksum-crc32c``;
   found out once per run, :func:`~recprep.write.uploads.store_checks`), by the store;
   else where the store's ETag is the MD5 of the bytes sent, by that receipt; elsewhere
   each temporary is read back and its size and CRC-32C compared. On a store that
   speaks S3, the files of a whole set aren't written to temporaries: each is uploaded
   to its final name as a multipart upload left incomplete (invisible until completed),
   and the commit completes it instead of a move, which there is a server-side copy.
3. Only when every file checks out: files of no set are moved to their names, and each
   set is committed with the journal: its old manifest removed, its files moved in, the
   manifest moved in **last**. Readers see the old set, the new one, or an error (a set
   without a manifest whose journal is there is not committed), never a mix; a copy
   killed mid-commit is finished by copying again (or ``convert(..., resume=True)``).
4. Any failure before that removes the temporaries: no partial file ever has a final
   name, and the destination is as it was.

Example
-------
>>> from recprep import RecordIO, convert
>>> _ = convert("memory://doc/cp-src", list(range(5)), 2, "p")
>>> result = copy("memory://doc/cp-src/p", "memory://doc/cp-dst")
>>> [f.dest.rsplit("/", 1)[1] for f in result.files]
['.p.chunks', 'p-00000-of-00001', 'p-00001-of-00001', 'p.manifest.json']
>>> list(RecordIO("memory://doc/cp-dst")())
[0, 1, 2, 3, 4]

The steps live in three modules: :mod:`~recprep.tools.copyplan` expands the sources
(step 0), :mod:`~recprep.tools.transfer` streams and checks each file (step 2), and this
one takes the locks, commits and cleans up (steps 1, 3 and 4).
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

from .._core.arguments import checked
from ..errors import InvalidArgumentError, OutputExistsError, WriteError
from ..storage.fs import display, resolve
from ..storage.locking import ShardSetLock
from ..storage.multipart import PendingUpload
from ..storage.shardnames import manifest_name
from ..storage.staging import Staging
from .copyplan import (
    CopyItem,
    is_manifest_or_side_file,
    items_by_set,
    plan_copy,
    replaced_files,
)
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

#: temporaries are named ``{TEMP_PREFIX}{token}-{name}`` in the destination directory
TEMP_PREFIX = ".recprep-cp-"


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
        Files transferred at the same time (threads).
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
    shown = display(dfs, dpath)
    if dfs.isfile(dpath):
        raise InvalidArgumentError(f"{shown} is a file; the destination must be a directory")
    finals = {it.name: posixpath.join(dpath, it.name) for it in items}
    for it in items:
        if display(it.fs, it.path) == display(dfs, finals[it.name]):
            raise InvalidArgumentError(f"{display(it.fs, it.path)} would be copied onto itself")
    groups = items_by_set(items)
    replaced = replaced_files(dfs, dpath, items, finals)
    if replaced and not overwrite:
        raise OutputExistsError(shown, [display(dfs, p) for p in replaced])
    try:
        dfs.makedirs(dpath, exist_ok=True)
    except OSError as err:
        raise WriteError(shown, err) from err
    with contextlib.ExitStack() as stack:
        for name in ["{cp}", *sorted(p for p in groups if p is not None)]:
            stack.enter_context(ShardSetLock(dfs, dpath, name))
        replaced = replaced_files(dfs, dpath, items, finals)  # again, now that no one writes
        if replaced and not overwrite:
            raise OutputExistsError(shown, [display(dfs, p) for p in replaced])
        _remove_leftovers(dfs, dpath)
        copied = _copy_and_commit(dfs, dpath, items, finals, groups, replaced, progress,
                                  num_workers)
    result = CopyResult(shown, copied, time.perf_counter() - started)
    log.info("recprep: %s", result)
    return result



def _remove_leftovers(dfs: Any, dpath: str) -> None:
    """Temporaries of ``cp`` runs that were killed: on local storage this run holds the
    directory's ``cp`` lock, so no other ``cp`` writes here (on object stores, as for
    ``convert``, two writers into one directory at once are not supported)."""
    try:
        entries = dfs.ls(dpath, detail=False)
    except FileNotFoundError:  # an object store's empty "directory"
        return
    for entry in entries:
        name = posixpath.basename(entry.rstrip("/"))
        if name.startswith(TEMP_PREFIX):
            log.info("recprep: removing %s, left by a killed copy", display(dfs, entry))
            try:
                dfs.rm(entry, recursive=True)
            except OSError as err:
                raise WriteError(display(dfs, entry), err) from err


def _copy_and_commit(
    dfs: Any, dpath: str, items: Sequence[CopyItem], finals: Mapping[str, str],
    groups: Mapping[str | None, list[CopyItem]], replaced: Sequence[str], progress: Any,
    num_workers: int,
) -> list[CopiedFile]:
    """Copy every item into a temporary (a set's files into its staging directory),
    check them all, then commit: files of no set by a rename, each set with the journaled
    commit protocol (manifest last)."""
    token = uuid.uuid4().hex[:12]
    stagings = {p: Staging(dfs, dpath, p) for p in groups if p is not None}
    temps: dict[str, str] = {}
    for prefix, members in groups.items():
        for it in members:
            temps[it.name] = (stagings[prefix].file(f"cp-{it.name}") if prefix is not None
                              else posixpath.join(dpath, f"{TEMP_PREFIX}{token}-{it.name}"))
    bar = ByteProgress(progress, sum(it.size for it in items), len(items))
    stop = threading.Event()
    sources = CopySources()
    dest: Destination | None = None
    try:
        for staging in stagings.values():
            staging.create(keep=False)
        dest = Destination.of(dfs, dpath)
        whole = {n for p, ms in groups.items() if p is not None
                 and any(m.is_manifest for m in ms) for n in (m.name for m in ms)}
        with cf.ThreadPoolExecutor(num_workers, thread_name_prefix="recprep-cp") as pool:
            calls = [(functools.partial(copy_one, deferred=it.name in whole
                                        and not it.is_manifest), it, sources, dest,
                      temps[it.name], finals[it.name], bar, stop) for it in items]
            copied = run_all_or_stop(pool, calls, stop)
            lone = [it.name for it in groups.get(None, [])]
            run_all_or_stop(pool, [(move_file, dfs, temps[n], finals[n]) for n in lone], stop)
        for prefix, staging in stagings.items():
            uploads = dest.take(finals[it.name] for it in groups[prefix])
            _commit_set(dfs, dpath, staging, groups[prefix], temps, replaced, uploads)
    except BaseException as err:
        if dest is not None:
            dest.abort_pending(err)
        remove_temporaries(dfs, [temps[it.name] for it in groups.get(None, [])], err)
        for staging in stagings.values():
            if not staging.committing:  # else its journal says how to finish: keep it
                staging.clear(err)
        raise
    finally:
        sources.close()
        bar.close()
    return copied



def _commit_set(
    dfs: Any, dpath: str, staging: Staging, members: Sequence[CopyItem],
    temps: Mapping[str, str], replaced: Sequence[str],
    uploads: Mapping[str, PendingUpload],
) -> None:
    """Commit one destination set: with its manifest, journaled (readers never see a mix
    of the old and new files; ``uploads``, final path -> incomplete upload, are completed
    where the other files are moved in); without (some shards of a set only), the old
    manifest is removed and the shards moved in — the result is not a committed set."""
    pending = {posixpath.basename(p): u for p, u in uploads.items()}
    data = {it.name: temps[it.name] for it in members
            if not it.is_manifest and it.name not in pending}
    manifests = [it for it in members if it.is_manifest]
    prefix = staging.prefix
    files = {**data, **pending}
    old = [p for p in replaced if posixpath.basename(p) in files
           or is_manifest_or_side_file(posixpath.basename(p), prefix, files)]
    try:
        if manifests:
            manifest = bytes(dfs.cat_file(temps[manifests[0].name]))
            dfs.rm(temps[manifests[0].name])
            staging.commit(data, manifest, replaced=old, uploads=pending)
            return
        final_manifest = posixpath.join(dpath, manifest_name(prefix))
        if dfs.exists(final_manifest):
            dfs.rm(final_manifest)  # uncommit the destination set first
        for name, temp in data.items():
            dfs.mv(temp, posixpath.join(dpath, name))
        staging.clear()  # a journal an interrupted commit left still marks the set
    except OSError as err:
        raise WriteError(display(dfs, dpath), err) from err

