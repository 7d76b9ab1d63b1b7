"""Step 1 of ``copy`` (:mod:`recprep.tools.copy`): the destination checked and made
ready before any file is written.

On local storage one step after another, under the destination directory's ``cp`` lock
and each destination set's lock; on an object store, every question asked at once. Either
way: the files the copy would replace (refused without ``overwrite``), temporaries a
killed ``cp`` left (removed), each set's staging swept. On an object store that speaks
S3, a set copied whole where nothing of it is yet is committed early
(:mod:`~recprep.storage.earlycommit`): its journal is written before any of its files,
and the journal of a copy killed before such a commit is settled first (its files
removed), so that copying again needs no ``overwrite``.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import functools
import hashlib
import logging
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgumentError, OutputExistsError, UntrustedFileError, WriteError
from ..storage.fs import display
from ..storage.listing import DirectoryEntry, classify, list_entries
from ..storage.locking import ShardSetLock
from ..storage.multipart import is_object, listed_in
from ..storage.staging import Staging
from ..write.uploads import PROBE_PREFIX, settle_probes, speaks_s3
from .copyplan import CopyItem, replaced_files, replaced_in
from .transfer import Destination

__all__ = ["TEMP_PREFIX", "CopyJob", "prepare_local", "prepare_remote"]

log = logging.getLogger("recprep")

#: temporaries are named ``{TEMP_PREFIX}{token}-{name}`` in the destination directory
TEMP_PREFIX = ".recprep-cp-"


@dataclass(frozen=True)
class CopyJob:
    """One copy, planned: the destination, the items, their final paths, their sets."""

    fs: Any
    path: str
    items: Sequence[CopyItem]
    finals: Mapping[str, str]
    groups: Mapping[str | None, list[CopyItem]]
    overwrite: bool

    @property
    def shown(self) -> str:
        return display(self.fs, self.path)

    def refuse_replacing(self, replaced: Sequence[str]) -> None:
        if replaced and not self.overwrite:
            raise OutputExistsError(self.shown, [display(self.fs, p) for p in replaced])

    def stagings(self) -> dict[str, Staging]:
        return {p: Staging(self.fs, self.path, p) for p in self.groups if p is not None}


def prepare_local(job: CopyJob, stack: contextlib.ExitStack
                   ) -> tuple[list[str], dict[str, Staging], Destination | None, set[str]]:
    """On local storage, one step after another: the checks, the directory, the locks
    (the checks again, now that no one else writes), leftovers removed."""
    dfs, dpath = job.fs, job.path
    if dfs.isfile(dpath):
        raise InvalidArgumentError(f"{job.shown} is a file; the destination must be a directory")
    job.refuse_replacing(replaced_files(dfs, dpath, job.items, job.finals))
    try:
        dfs.makedirs(dpath, exist_ok=True)
    except OSError as err:
        raise WriteError(job.shown, err) from err
    for name in ["{cp}", *sorted(p for p in job.groups if p is not None)]:
        stack.enter_context(ShardSetLock(dfs, dpath, name))
    replaced = replaced_files(dfs, dpath, job.items, job.finals)
    job.refuse_replacing(replaced)
    _remove_leftovers(dfs, [e.path for e in _destination_entries(dfs, dpath)])
    return replaced, job.stagings(), None, set()


def prepare_remote(job: CopyJob, stack: contextlib.ExitStack
                    ) -> tuple[list[str], dict[str, Staging], Destination | None, set[str]]:
    """On a store (where a request is a round trip, and no lock is taken), every question
    asked at once: is the destination a file, what it holds (one listing: the files the
    copy replaces, temporaries a killed copy left), the directory (bucket) made, whether
    the store checks checksums, each set's staging swept (the files of a copy killed
    before an early commit removed: its journal, found by the sweep, names them). Returns
    the files replaced, the stagings, the destination — its writes held until
    :func:`_before_writes` is done — and the sets committed early."""
    dfs, dpath = job.fs, job.path
    stagings = job.stagings()
    with cf.ThreadPoolExecutor(4 + len(stagings), thread_name_prefix="recprep-cp") as pool:
        store = speaks_s3(dfs)  # (then one request each: fsspec's may make two)
        is_file = (pool.submit(is_object, dfs, dpath) if store
                   else pool.submit(dfs.isfile, dpath))
        listing = pool.submit(_destination_entries, dfs, dpath, store)
        made = pool.submit(dfs.makedirs, dpath, exist_ok=True)
        destination = pool.submit(Destination.of, dfs, dpath)
        created = [(s, pool.submit(s.create, keep=False)) for s in stagings.values()]
        try:
            made.result()
        except OSError as err:
            raise WriteError(job.shown, err) from err
        if is_file.result():
            raise InvalidArgumentError(
                f"{job.shown} is a file; the destination must be a directory")
        for staging, future in created:
            _again_if_missing(future, functools.partial(staging.create, keep=False))
        entries = listing.result()
        settled = [_settled(s) for s in stagings.values() if store and not s.fresh]
        if any(settled):  # (a killed copy's files gone: listed again)
            entries = _destination_entries(dfs, dpath, store)
        replaced = replaced_in(entries, job.items, job.finals)
        job.refuse_replacing(replaced)
        dest = _again_if_missing(destination, functools.partial(Destination.of, dfs, dpath))
    _remove_leftovers(dfs, [e.path for e in entries])
    early = _early_sets(job, stagings, entries) if store else set()
    gates = stack.enter_context(cf.ThreadPoolExecutor(1, thread_name_prefix="recprep-cp"))
    dest.hold(gates.submit(_before_writes, job, {p: stagings[p] for p in early}))
    return replaced, stagings, dest, early


def _before_writes(job: CopyJob, early: Mapping[str, Staging]) -> None:
    """What must be done before a copy's first byte goes to the store, at once: the
    checksum probe removed (so that a copy killed later leaves none behind: a probe's
    name is hidden, but hidden isn't gone), the journal of each set committed early
    written."""
    with cf.ThreadPoolExecutor(max(1, len(early)), thread_name_prefix="recprep-cp") as pool:
        begun = [pool.submit(s.begin_early, *_early_journal(job, p)) for p, s in early.items()]
        settle_probes()
        for future in begun:
            future.result()


def _settled(staging: Staging) -> bool:
    """Whether the journal in ``staging`` was an early commit's, now settled; one this
    user's runs didn't write is left as it is (this copy's commit replaces it)."""
    try:
        return staging.settle_early()
    except UntrustedFileError as err:
        log.warning("recprep: %s", err)
        return False


def _early_sets(job: CopyJob, stagings: Mapping[str, Staging],
                entries: Sequence[DirectoryEntry]) -> set[str]:
    """The sets this copy commits early (:mod:`~recprep.storage.earlycommit`): copied
    whole (with their manifest) into a directory holding nothing of them, no journal of
    an earlier commit in their staging."""
    names = [posixpath.basename(e.path.rstrip("/")) for e in entries]
    return {prefix for prefix, staging in stagings.items()
            if staging.fresh and any(it.is_manifest for it in job.groups[prefix])
            and not any(classify(name).of_set(prefix) for name in names)}


def _early_journal(job: CopyJob, prefix: str) -> tuple[list[str], str]:
    """What the early journal of the set ``prefix`` names: its files but the manifest,
    and the manifest's SHA-256 where planning read it."""
    members = job.groups[prefix]
    data = next((it.data for it in members if it.is_manifest), None)
    digest = "" if data is None else hashlib.sha256(data).hexdigest()
    return [it.name for it in members if not it.is_manifest], digest


def _again_if_missing(future: cf.Future[Any], again: Any) -> Any:
    """The future's result; once more, by ``again()``, when it failed because the bucket
    didn't exist yet (it was being made at the same time)."""
    try:
        return future.result()
    except FileNotFoundError:
        return again()


def _destination_entries(fs: Any, directory: str, store: bool = False) -> list[DirectoryEntry]:
    """The listing of ``directory`` (empty when an object store has nothing there);
    ``store``: of a store that speaks S3, listed by one request."""
    try:
        if store:
            return sorted((DirectoryEntry.of(i) for i in listed_in(fs, directory)),
                          key=lambda e: e.path)
        return list_entries(fs, directory)
    except FileNotFoundError:
        return []


def _remove_leftovers(dfs: Any, paths: Sequence[str]) -> None:
    """Temporaries of ``cp`` runs that were killed, of the destination's listing
    ``paths``: on local storage this run holds the directory's ``cp`` lock, so no other
    ``cp`` writes here (on object stores, as for ``convert``, two writers into one
    directory at once are not supported). A store's checksum probe is one too: a run
    killed while its set-up's requests were out leaves its probe behind, the delete
    never sent. This run's own probe, if the listing caught it, goes the same way (its
    own delete then finds it gone, which a delete on S3 doesn't mind)."""
    for entry in paths:
        name = posixpath.basename(entry.rstrip("/"))
        if name.startswith(TEMP_PREFIX):
            log.info("recprep: removing %s, %s", display(dfs, entry),
                     "a checksum probe" if name.startswith(PROBE_PREFIX)
                     else "left by a killed copy")
            try:
                dfs.rm(entry, recursive=True)
            except FileNotFoundError:
                continue  # gone meanwhile (this run's probe, by its own delete)
            except OSError as err:
                raise WriteError(display(dfs, entry), err) from err
