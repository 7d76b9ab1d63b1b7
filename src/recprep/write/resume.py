"""The resume and commit checks of a conversion: what a killed run left, and whether a set
may be written where it goes.

The commit protocol is :mod:`recprep.storage.staging`'s; what a conversion decides from
it is here, all of it before anything is written:

* :func:`resumed_set` (``resume=True``): finish the commit a killed run started, or verify
  the complete set there (:func:`verified_set`), or say there is work to do and whether
  it replaces the set there;
* :func:`check_same_options`: a set or commit of other options is never taken for this
  conversion's;
* :func:`refuse_existing`: without ``overwrite``, a set there (not a side file alone) is
  an :class:`~recprep.errors.OutputExistsError`.
"""

from __future__ import annotations

import errno
import logging
import posixpath
from typing import Any

from ..errors import (
    REMEDY,
    CorruptDataError,
    InvalidArgumentError,
    KilledRunWarning,
    OutputExistsError,
    Remedy,
    Unfinishable,
    WriteError,
    warn,
)
from ..storage.discovery import Kind, set_files
from ..storage.fs import display
from ..storage.manifest import Manifest, read_manifest
from ..storage.records import Journal
from ..storage.shardnames import manifest_name
from ..storage.staging import FileFacts, facts_intact
from .job import ConvertJob

__all__ = ["check_same_options", "read_only", "refuse_existing", "resumed_set",
           "same_options", "verified_set"]

log = logging.getLogger("recprep")


def read_only(err: WriteError) -> bool:
    """Whether ``err`` says the output can't be written at all (a read-only place)."""
    original = err.original
    return isinstance(original, OSError) and original.errno in (
        errno.EROFS, errno.EACCES, errno.EPERM)


def resumed_set(
    job: ConvertJob, fingerprint: str, killed_takers: int = 0
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
    staging = job.staging
    journal = staging.journal() if staging.pending_commit() else None  # (checked)
    if journal is not None and not staging.settle_early(journal):  # (a killed copy's: gone)
        manifest = _finish_pending(job, journal)  # None: a new commit replaces what it left
        return manifest, manifest is None
    staged = staging.exists()
    run = staging.run() if staged else None
    if run is not None and run.fingerprint == fingerprint:
        # a killed run's work: finish what it was asked to do
        return None, run.overwrite or job.overwrite
    if job.overwrite:  # no trace of this conversion: the set there may be the old one
        log.info("recprep: nothing of this conversion is staged in %s; writing it", job.shown)
        return None, True
    traces = []
    if killed_takers:
        traces.append("it died while taking the set's lock")
    if staged and run is None and staging.unrecorded_run():
        traces.append("its record in the staging directory was never renamed into place")
    complete = verified_set(job)
    if complete is None:
        return None, False
    if traces:
        warn(KilledRunWarning(job.shown, "; ".join(traces)))
    staging.remove()  # leftovers of a run that died after committing
    return complete, False


def _finish_pending(job: ConvertJob, journal: Journal) -> Manifest | None:
    """The manifest of the commit a killed run started (``journal``, checked: this user's,
    names inside the directory), once finished; None when it is of other options (an
    overwrite replaces it) or can't be finished."""
    staging, fs = job.staging, job.fs
    data = staging.staged_manifest(journal)
    source = staging.file(manifest_name(job.prefix))
    if data is None:  # moved in: the commit point was passed
        source = posixpath.join(job.output, manifest_name(job.prefix))
        committed = read_manifest(fs, source)
        data = None if committed is None else committed.to_json()
    if data is None:
        return None
    manifest = Manifest.from_json(data, path=display(fs, source))
    if job.overwrite and not same_options(manifest, job):
        log.info("recprep: the interrupted commit in %s is of other options; this "
                 "overwrite replaces it", job.shown)
        return None
    check_same_options(manifest, job)
    intact = {
        s.name: FileFacts(posixpath.join(job.output, s.name), s.records, s.bytes, s.crc32c)
        for s in manifest.shards
    }
    log.info("recprep: finishing the commit of an interrupted run in %s", job.output)
    try:
        staging.finish_commit(journal, intact)
        return manifest
    except Unfinishable as why:
        log.warning("recprep: the interrupted commit in %s can't be finished (%s); "
                    "writing the set again", job.shown, why)
    return None


def verified_set(job: ConvertJob) -> Manifest | None:
    """The committed set's manifest once every shard is checked against it (size and
    CRC-32C), None when there is none. Reads only."""
    final_manifest = posixpath.join(job.output, manifest_name(job.prefix))
    manifest = read_manifest(job.fs, final_manifest)
    if manifest is None:
        return None
    check_same_options(manifest, job)
    for shard in manifest.shards:
        path = posixpath.join(job.output, shard.name)
        if not facts_intact(job.fs, FileFacts(path, shard.records, shard.bytes,
                                              shard.crc32c)):
            raise CorruptDataError(
                f"the committed shard set doesn't match its manifest (size or CRC-32C of "
                f"{shard.name})",
                path=display(job.fs, path),
                remedy=Remedy("overwrite", True, effect="to write it again"),
            )
    log.info("recprep: %s is complete and verified; nothing to do", final_manifest)
    return manifest


def _options_of(manifest: Manifest, job: ConvertJob) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """``(wanted, found)``: format, codec, compressor and shard names of ``job`` and of the
    set ``manifest`` describes."""
    options = job.options
    want = (options.format, options.codec.name, options.compressor, list(job.names))
    have = (manifest.format, manifest.codec, manifest.compressor,
            [s.name for s in manifest.shards])
    return want, have


def same_options(manifest: Manifest, job: ConvertJob) -> bool:
    """Whether ``manifest`` is of a set written with the job's options and shard names."""
    want, have = _options_of(manifest, job)
    return want == have


def check_same_options(manifest: Manifest, job: ConvertJob) -> None:
    """Raise :class:`~recprep.errors.InvalidArgumentError` unless :func:`same_options`."""
    want, have = _options_of(manifest, job)
    if want != have:
        raise InvalidArgumentError(
            f"resume: the shard set in {job.shown} was written as format={have[0]!r}, "
            f"codec={have[1]!r}, compressor={have[2]!r}, {len(have[3])} shards; this run "
            f"asks for {want[0]!r}, {want[1]!r}, {want[2]!r}, {len(want[3])} shards. Use "
            f"the same options{REMEDY}",
            remedy=Remedy("overwrite", True, effect="to start again"),
        )


def refuse_existing(job: ConvertJob) -> None:
    """Raise :class:`~recprep.errors.OutputExistsError` if a set of the job's prefix is in
    the output directory (a side file of the set alone is no set: the commit replaces
    it)."""
    fs = job.fs
    existing = [e.path for e in set_files(fs, job.output, job.prefix)
                if e.kind is not Kind.SET_SIDE]
    if existing:
        raise OutputExistsError(
            job.shown, [display(fs, p) for p in existing],
            resumable=not fs.exists(posixpath.join(job.output, manifest_name(job.prefix))),
        )
