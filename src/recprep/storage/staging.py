"""The staging directory of a conversion, its side files, and the atomic commit.

Everything a conversion writes goes first under ``{output}/.recprep-staging-{prefix}/``
— hidden, so no glob a user writes reaches it. The commit protocol
(``docs/format.md`` §3, ``docs/reliability.md``):

1. ``options.json`` records the run (what staged work depends on, and whether it
   replaces a set); each finished task is recorded in ``done-{key}.json`` (its files,
   their sizes and CRC-32C), so ``resume=True`` can reuse what a killed run finished.
2. When every shard is complete, the manifest and a journal (``commit.json``: which
   staged file becomes which shard, which old files go) are written into staging.
3. The old manifest is removed (the old set is uncommitted), each staged shard is moved
   to its final name, old files the new set doesn't have are removed, and the manifest is
   moved to its final name — **the manifest is the commit point** — then ``options.json``,
   the journal and staging go, in that order.

On an object store that speaks S3, a shard need not be staged at all (a move there is a
server-side copy): it is uploaded as a multipart upload to its final name and left
incomplete — invisible to readers and listings — and the journal records the upload
(id, parts, their ETags, sizes, CRC-32C: :mod:`~recprep.storage.multipart`); step 3
completes it where it would move a staged file in. (A copy of a whole set where nothing
of it is yet commits early instead: :mod:`~recprep.storage.earlycommit`.) Uploads no
journal records (a run killed or failed before its commit, or one whose journal a later
commit replaced) are aborted when a run starts, fails or commits (only those of the
set's names).

While a journal exists and the manifest is missing, the set is *not committed*: readers
refuse it (:mod:`recprep.read.committed`), ``verify`` reports it. A journal is replayed by
``resume=True``: every step is idempotent, so a replay killed at any step is replayed
again.

**Side files are input, not trusted** (the threat model is in ``docs/reliability.md``):
``options.json``, ``done-*.json`` and ``commit.json`` carry an HMAC-SHA256 made with the
user's resume key (:func:`~recprep.storage.seals.resume_key`, kept outside the output)
over their content and the staging directory they belong to (:mod:`recprep.storage.seals`);
their paths are single names resolved inside the staging directory (staged files) or the
output directory (final names). A side file that fails either check is refused with
:class:`~recprep.errors.UntrustedFileError`, never acted on.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import posixpath
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..errors import (
    CorruptDataError,
    RecprepError,
    Unfinishable,
    UntrustedFileError,
    WriteError,
    add_note,
)
from . import failpoints
from .commitmoves import CommitMoves
from .earlycommit import EarlyCommit
from .fs import display, is_local, read_regular
from .listing import classify
from .multipart import (
    PendingUpload,
    abort_unrecorded,
    objects_under,
    open_uploads,
    put_checked,
    resumable,
)
from .records import FileFacts, Journal, Run, facts_intact
from .seals import safe_name, seal, unseal
from .shardnames import manifest_name
from .writers import JOURNAL, STAGING_PREFIX

log = logging.getLogger("recprep")

FINGERPRINT = "options.json"
#: a staging side file (``options.json``, ``done-*.json``, ``commit.json``, the staged
#: manifest) larger than this is refused before it is read
MAX_SIDE_BYTES = 64 << 20


# -- staged files ----------------------------------------------------------------------------


def note_cleanup_failure(err: BaseException | None, what: str, failure: BaseException) -> None:
    """Record that cleaning up after ``err`` failed too — as a note on ``err`` (the
    error the user must see), else in the log."""
    text = f"recprep: {what} failed too: {type(failure).__name__}: {failure}"
    if err is None:
        log.warning(text)
        return
    add_note(err, text)


class Staging(CommitMoves, EarlyCommit):
    """The hidden directory one shard set is written into before it commits.

    ``path`` holds the side files; staged files may live in ``area`` (``path`` unless a
    writer stages elsewhere, as ``recprep.spark`` does).
    """

    def __init__(
        self, fs: Any, output: str, prefix: str, path: str | None = None,
        area: str | None = None,
    ) -> None:
        self.fs = fs
        self.output = output
        self.prefix = prefix
        self.path = path or posixpath.join(output, f"{STAGING_PREFIX}{prefix}")
        self.area = area or self.path
        self.committing = False  # this object wrote the journal now in place
        self._staged_manifest: bytes | None = None  # the manifest this object staged
        #: an S3 store (PUTs atomic, a move a copy): no temporaries, no existence checks
        self._store = callable(getattr(fs, "_call_s3", None))
        self._swept = False  # no upload was open here, but those a journal records
        #: ``create`` found no journal of an earlier commit here (so a manifest may be
        #: staged before this run's commit: :meth:`stage_manifest`)
        self._fresh = False
        self._early: bytes | None = None  # the manifest staged before the commit
        self._etags: dict[str, str] = {}  # final name -> the ETag its completion answered

    @property
    def fresh(self) -> bool:
        """:meth:`create` found no journal of an earlier commit (or it was settled)."""
        return self._fresh

    def exists(self) -> bool:
        self._check_not_a_link()
        return bool(self.fs.exists(self.path))

    def _check_not_a_link(self) -> None:
        """Refuse a staging directory that is a symbolic link: listing and removing its
        entries would reach files outside the output directory."""
        if is_local(self.fs) and os.path.islink(self.path):
            raise UntrustedFileError(self.path, "a symbolic link where recprep keeps its "
                                                "staging directory")

    def file(self, name: str) -> str:
        """A path inside the staging directory."""
        return posixpath.join(self.path, name)

    def _shown(self, name: str) -> str:
        return display(self.fs, self.file(name))

    def create(self, *, keep: bool) -> None:
        """Make the directory; a dead run's leftovers are kept (``keep``) or removed (but
        a pending journal stays until this run's commit replaces it: the set it marks is
        not committed, and readers must keep seeing that)."""
        if self._store and not keep:  # one listing tells all: no directories there
            with ThreadPoolExecutor(2) as pool:  # and the open uploads, asked at once
                listed = pool.submit(objects_under, self.fs, self.path)
                uploads = pool.submit(open_uploads, self.fs, self.output)
                entries, opened = listed.result(), uploads.result()
            left = [e for e in entries if posixpath.basename(e) != JOURNAL]
            if left:
                log.info("recprep: removing the temporaries of an earlier run in %s", self.path)
                self.fs.rm(left)
            pending = len(left) < len(entries)
            self._swept = not self.abort_unrecorded(pending=pending, uploads=opened)
            self._fresh = not pending
            return
        if not keep and self.exists():
            log.info("recprep: removing the temporaries of an earlier run in %s", self.path)
            self.clear()
        try:
            self.fs.makedirs(self.path, exist_ok=True)
            if not keep:
                self._swept = not self.abort_unrecorded()
        except OSError as err:
            raise WriteError(self.path, err) from err

    def _write_atomic(self, name: str, data: bytes) -> None:
        tmp, path = self.file(f".{name}.tmp"), self.file(name)
        try:
            if self._store:  # a PUT is atomic there: no temporary to copy (its bytes checked)
                failpoints.hit("staging.rename")
                put_checked(self.fs, path, data)
                return
            with self.fs.open(tmp, "wb") as f:
                f.write(data)
            failpoints.hit("staging.rename")
            self.fs.mv(tmp, path)
        except OSError as err:
            with contextlib.suppress(Exception):
                self.fs.rm(tmp)
            raise WriteError(path, err) from err

    def _read(self, name: str) -> bytes | None:
        """A side file's bytes (None when there is none); one that is not a regular file
        or is larger than :data:`MAX_SIDE_BYTES` is refused, never read whole."""
        try:
            return read_regular(self.fs, self.file(name), MAX_SIDE_BYTES,
                                what="a staging side file")
        except FileNotFoundError:
            return None
        except CorruptDataError as err:
            raise UntrustedFileError(self._shown(name), err.detail) from None

    # -- the run and its task records ----------------------------------------------------

    def run(self) -> Run | None:
        """The run the staged work belongs to (None when none was recorded); a record
        this user's runs didn't write raises :class:`~recprep.errors.UntrustedFileError`."""
        data = self._read(FINGERPRINT)
        if data is None:
            return None
        doc = unseal(data, kind="run", staging=self.path, shown=self._shown(FINGERPRINT))
        if not isinstance(doc.get("fingerprint"), str):
            raise UntrustedFileError(self._shown(FINGERPRINT), "no fingerprint")
        return Run(doc["fingerprint"], bool(doc.get("overwrite")))

    def unrecorded_run(self) -> bool:
        """Whether a run was killed while recording itself: the temporary of its
        ``options.json`` is here and was never renamed into place."""
        fs = self.fs
        return bool(fs.exists(self.file(f".{FINGERPRINT}.tmp"))
                    and not fs.exists(self.file(FINGERPRINT)))

    def start_run(self, fingerprint: str, overwrite: bool) -> None:
        """Record the options staged work depends on (and whether the run replaces a
        set), so a resume can tell whether to reuse it and what to finish."""
        doc = {"kind": "run", "staging": self.path, "fingerprint": fingerprint,
               "overwrite": overwrite}
        self._write_atomic(FINGERPRINT, seal(doc))

    def _name_of(self, path: str) -> str:
        rel = posixpath.relpath(path, self.area)
        return safe_name(rel, path)

    def record(
        self, key: str, files: list[FileFacts | None], notes: list[Any],
        pickled: Mapping[str, int] | None = None,
    ) -> None:
        """Remember a finished task (skipped when its notes aren't JSON), with the types
        its codec pickled (so that a resumed run's manifest says the same)."""
        listed = [None if f is None else f.to_doc(self._name_of(f.path)) for f in files]
        doc = {"kind": "done", "staging": self.path, "key": key, "files": listed,
               "notes": notes, "pickled": dict(pickled or {})}
        try:
            data = seal(doc)
        except (TypeError, ValueError):
            return
        if len(data) > MAX_SIDE_BYTES:  # too many chunks to keep: the commit finds them
            doc["files"] = [None if f is None else {**f, "chunks": None} for f in listed]
            data = seal(doc)
        self._write_atomic(f"done-{key}.json", data)
        failpoints.hit("staging.record")

    def recorded(
        self, key: str
    ) -> tuple[list[FileFacts | None], list[Any], dict[str, int]] | None:
        """A finished task's files, notes and pickled types, if recorded and still intact
        on storage.
        A record this user's runs didn't write for this task raises
        :class:`~recprep.errors.UntrustedFileError`."""
        name = f"done-{key}.json"
        data = self._read(name)
        if data is None:
            return None
        shown = self._shown(name)
        doc = unseal(data, kind="done", staging=self.path, shown=shown)
        try:
            if doc["key"] != key:
                raise ValueError(f"it records task {doc['key']!r}")
            files = [
                None if f is None else FileFacts.from_doc(
                    f, posixpath.join(self.area, safe_name(f["path"], shown)))
                for f in doc["files"]
            ]
            notes = list(doc.get("notes") or [])
            pickled = {str(k): int(v) for k, v in dict(doc.get("pickled") or {}).items()}
        except (KeyError, TypeError, ValueError) as err:
            raise UntrustedFileError(shown, f"not a valid task record ({err})") from None
        if not all(f is None or facts_intact(self.fs, f) for f in files):
            log.warning("recprep: the staged output of task %s changed; running it again", key)
            return None
        return files, notes, pickled

    # -- the commit ----------------------------------------------------------------------

    def stage_manifest(self, manifest: bytes) -> None:
        """Stage the manifest the commit will write, before it (while a copy's files are
        still on their way: its request is then not one more round trip of the commit) —
        on an object store whose staging :meth:`create` found without an earlier commit's
        journal (whose staged manifest this would replace); elsewhere nothing is done
        until :meth:`commit`."""
        if self._store and self._fresh:
            self._write_atomic(manifest_name(self.prefix), manifest)
            self._early = manifest

    def commit(
        self, staged: Mapping[str, str], manifest: bytes, *, replaced: Iterable[str] = (),
        uploads: Mapping[str, PendingUpload] | None = None, old_manifest: bool | None = None,
    ) -> None:
        """Move each staged file (final name -> staged path) to its final name, complete
        each of ``uploads`` (final name -> its pending multipart upload), drop the
        ``replaced`` files of an old set (paths in the output directory), then move the
        manifest in last. ``old_manifest``: whether a manifest is committed there now, as
        the caller's listing says (False: none to remove first; None: not known)."""
        if self._early != manifest:  # (staged already: :meth:`stage_manifest`)
            self._write_atomic(manifest_name(self.prefix), manifest)
        self._staged_manifest = manifest  # not read back to be moved in
        names = {name: self._name_of(path) for name, path in staged.items()}
        old = sorted({posixpath.basename(p) for p in replaced
                      if posixpath.dirname(p) == self.output})
        digest = hashlib.sha256(manifest).hexdigest()
        doc = {"kind": "journal", "staging": self.path, "area": self.area,
               "prefix": self.prefix, "staged": names, "replaced": old,
               "manifest_sha256": digest}
        pending = dict(uploads or {})
        if pending:  # (absent otherwise: a journal as before)
            doc["uploads"] = {name: u.to_doc() for name, u in pending.items()}
        self._write_atomic(JOURNAL, seal(doc))
        self.committing = True
        failpoints.hit("commit.journal")
        self._finish(Journal(names, old, digest, pending), old_manifest)

    def pending_commit(self) -> bool:
        """Whether a commit was started (its journal is there) and not finished."""
        return bool(self.fs.exists(self.file(JOURNAL)))

    def journal(self) -> Journal:
        """The pending commit's journal, checked: written by this user's runs for this
        staging directory, every name inside it or the output directory."""
        shown = self._shown(JOURNAL)
        data = self._read(JOURNAL)
        if data is None:
            raise Unfinishable(f"{shown} disappeared")
        doc = unseal(data, kind="journal", staging=self.path, shown=shown)
        try:
            if doc["area"] != self.area or doc["prefix"] != self.prefix:
                raise ValueError(f"it stages in {doc['area']!r} for {doc['prefix']!r}")
            staged = {safe_name(k, shown): safe_name(v, shown)
                      for k, v in dict(doc["staged"]).items()}
            replaced = [safe_name(name, shown) for name in doc["replaced"]]
            digest = str(doc["manifest_sha256"])
            uploads = {safe_name(k, shown): PendingUpload.from_doc(v)
                       for k, v in dict(doc.get("uploads") or {}).items()}
            early = tuple(safe_name(name, shown) for name in doc.get("early") or ())
        except (KeyError, TypeError, ValueError) as err:
            raise UntrustedFileError(shown, f"not a valid commit journal ({err})") from None
        return Journal(staged, replaced, digest, uploads, early)

    def staged_manifest(self, journal: Journal) -> bytes | None:
        """The staged manifest of ``journal`` (None once it was moved in: committed)."""
        name = manifest_name(self.prefix)
        data = self._read(name)
        if data is not None and hashlib.sha256(data).hexdigest() != journal.manifest_sha256:
            raise UntrustedFileError(self._shown(name), "it is not the manifest its commit "
                                                        "journal names (SHA-256 differs)")
        return data

    def finish_commit(self, journal: Journal, intact: Mapping[str, FileFacts]) -> None:
        """Finish a commit a killed run started (idempotent: a replay killed at any step
        can be replayed again). ``intact`` are the shards' facts per final name, to check
        the staged files before they move and those already moved; a shard neither staged
        nor committed intact raises :class:`Unfinishable`."""
        if self.staged_manifest(journal) is not None:  # the commit point isn't passed
            for name, staged in journal.staged.items():
                facts = intact.get(name)  # None: a side file (an index), rebuilt on demand
                if facts is None:
                    continue
                here = FileFacts(posixpath.join(self.area, staged), facts.records,
                                 facts.bytes, facts.crc32c)
                if self.fs.exists(here.path):
                    ok = facts_intact(self.fs, here)
                else:
                    ok = facts_intact(self.fs, facts)
                if not ok:
                    raise Unfinishable(f"{facts.path}: neither staged nor committed intact")
            for name, upload in journal.uploads.items():  # still open, or completed
                if not resumable(self.fs, posixpath.join(self.output, name), upload):
                    raise Unfinishable(f"{display(self.fs, posixpath.join(self.output, name))}"
                                       ": its upload is neither open nor completed")
        self._finish(journal)

    def _finish(self, journal: Journal, old_manifest: bool | None = None) -> None:
        try:
            self._replay(journal, old_manifest)
        except OSError as err:  # storage failed mid-commit: the journal stays, to finish it
            if isinstance(err, RecprepError):
                raise
            raise WriteError(display(self.fs, self.output), err) from err

    def _replay(self, journal: Journal, old_manifest: bool | None = None) -> None:
        fs = self.fs
        final_manifest = posixpath.join(self.output, manifest_name(self.prefix))
        staged_manifest = self.file(manifest_name(self.prefix))
        left: list[str] | None = None  # (a store's staging, listed with the commit)
        if self._staged_manifest is not None or fs.exists(staged_manifest):
            if old_manifest is False:  # none there, as the caller listed: nothing to undo
                pass
            elif self._store:  # (no error if there is none)
                fs.rm_file(final_manifest)  # uncommit the old set before touching its files
                failpoints.hit("commit.uncommit")
            elif fs.exists(final_manifest):
                fs.rm(final_manifest)  # uncommit the old set before touching its files
                failpoints.hit("commit.uncommit")
            self._move_all_in(journal)
            for name in journal.replaced:
                path = posixpath.join(self.output, name)
                if (name not in journal.staged and name not in journal.uploads
                        and path != final_manifest and fs.exists(path)):
                    fs.rm(path)
                    failpoints.hit("commit.replaced")
            left = self._manifest_in(journal, staged_manifest, final_manifest)
            failpoints.hit("commit.manifest")
        if self._store:  # the run is over, and the commit: both in one request
            fs.rm(sorted({*(left or ()), *(self.file(name) for name in (
                manifest_name(self.prefix), FINGERPRINT, JOURNAL))}))
            failpoints.hit("commit.cleanup")
        for name in () if self._store else (FINGERPRINT, JOURNAL):  # the run, the commit
            if fs.exists(self.file(name)):
                fs.rm(self.file(name))
                failpoints.hit("commit.cleanup")
        self.committing = False
        if not self._swept:  # those of killed runs, or of a journal this one replaced
            self.abort_unrecorded(pending=False)
        if left is None:  # else all it held is gone with the request above
            self.remove()
        else:
            fs.invalidate_cache(self.path)

    def abort_unrecorded(self, owned: Any = None, pending: bool | None = None,
                         uploads: list[tuple[str, str]] | None = None) -> int:
        """Abort the open multipart uploads in the output directory of names ``owned``
        says are this set's (default: its files) that no pending journal records, so no
        parts of a killed or failed run are left billed; returns how many it records.
        ``uploads``: the open uploads, when the caller listed them already."""
        keep: set[str] = set()
        if self._store and (self.pending_commit() if pending is None else pending):
            with contextlib.suppress(RecprepError):
                keep = {u.upload_id for u in self.journal().uploads.values()}
        if self._store:
            abort_unrecorded(self.fs, self.output, owned or self._owns, keep, uploads)
        return len(keep)

    def _owns(self, name: str) -> bool:
        return classify(name).of_set(self.prefix)

    # -- cleanup -------------------------------------------------------------------------

    def _entries(self) -> Iterator[str]:
        try:
            yield from self.fs.ls(self.path, detail=False)
        except FileNotFoundError:
            return

    def clear(self, error: BaseException | None = None) -> None:
        """Remove this run's work: all of staging, but a journal that this object didn't
        write (its set is not committed; this run's commit will replace it). Failures
        become notes on ``error``."""
        try:
            self._check_not_a_link()
            if not self.committing and self.pending_commit():
                for entry in self._entries():
                    if posixpath.basename(entry.rstrip("/")) != JOURNAL:
                        self.fs.rm(entry, recursive=True)
                self.abort_unrecorded()
                return
            self.committing = False
            if self.fs.exists(self.path):
                self.fs.rm(self.path, recursive=True)
            self.abort_unrecorded()
        except Exception as failure:  # cleanup must not hide the error that led here
            note_cleanup_failure(error, f"removing the temporaries in {self.path}", failure)

    def remove(self, error: BaseException | None = None) -> None:
        """Delete the staging directory and everything in it (best effort; failures are
        notes on ``error``)."""
        try:
            if self._store:  # one listing, one delete (none: nothing to do)
                if left := objects_under(self.fs, self.path):
                    self.fs.rm(left)
                self.fs.invalidate_cache(self.path)
            elif self.exists():
                self.fs.rm(self.path, recursive=True)
        except Exception as failure:  # cleanup must not hide the error that led here
            if error is None and isinstance(failure, UntrustedFileError):
                raise
            note_cleanup_failure(error, f"removing {self.path}", failure)
