"""The moves of a commit: staged files and uploads into place, the manifest last.

:class:`CommitMoves` is the part of :class:`~recprep.storage.staging.Staging` that gives
each file of a committing set its final name (a rename; on an object store that speaks
S3, a ``CopyObject`` and a ``DeleteObject``, or the completion of the file's multipart
upload: :mod:`~recprep.storage.multipart`), all at once on a store, and then writes the
manifest, with each shard's ETag as the store answered it (asked where it wasn't).
Every step is idempotent: a journal's replay does them again.
"""

from __future__ import annotations

import hashlib
import posixpath
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from . import failpoints
from .fs import is_local
from .listing import Kind, classify
from .multipart import (
    PendingUpload,
    complete,
    move_object,
    objects_under,
    put_checked,
    with_etags,
)
from .records import Journal
from .shardnames import manifest_name

#: files moved into place (each a server-side copy + delete) or uploads completed at once
#: on an object store, at most; the manifest still goes last, after all of them
MOVES_IN_FLIGHT = 64


class CommitMoves:
    """The moves of a :class:`~recprep.storage.staging.Staging`'s commit (see the module
    docs): a mix-in, using the staging's filesystem, directories and manifest."""

    fs: Any
    output: str
    area: str
    prefix: str
    path: str
    _store: bool
    _staged_manifest: bytes | None
    _etags: dict[str, str]

    def file(self, name: str) -> str:
        raise NotImplementedError

    def _read(self, name: str) -> bytes | None:
        raise NotImplementedError

    def _move_all_in(self, journal: Journal) -> None:
        """Move the staged files in and complete the uploads (on a store, all at once, up
        to :data:`MOVES_IN_FLIGHT`)."""
        calls: list[tuple[Any, ...]] = [(self._move_in, *m) for m in journal.staged.items()]
        calls += [(self._complete, name, upload) for name, upload in journal.uploads.items()]
        threads = 1 if is_local(self.fs) else max(1, min(len(calls), MOVES_IN_FLIGHT))
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda call: call[0](*call[1:]), calls))

    def _complete(self, name: str, upload: PendingUpload) -> None:
        etag = complete(self.fs, posixpath.join(self.output, name), upload)
        if etag is not None and etag.strip('"') == upload.etag:  # S3's, from its parts'
            self._etags[name] = etag  # (as a HEAD would say: the manifest records it)
        failpoints.hit("commit.complete")

    def _manifest_in(self, journal: Journal, staged: str, final: str) -> list[str] | None:
        """:meth:`_move_manifest`; on a store, staging listed at the same time (nothing is
        written there any more): what it holds, for the cleanup's one request (None: not
        listed)."""
        if not self._store:
            self._move_manifest(journal, staged, final)
            return None
        with ThreadPoolExecutor(2) as pool:
            listed = pool.submit(objects_under, self.fs, self.path)
            self._move_manifest(journal, staged, final)
            try:
                return listed.result()
            except OSError:  # (the cleanup lists again)
                return None

    def _move_in(self, name: str, staged: str) -> None:
        """Move one staged file to its final name (a replay: if it is still staged)."""
        fs = self.fs
        source = posixpath.join(self.area, staged)
        target = posixpath.join(self.output, name)
        if self._store:  # a copy and a delete, nothing asked first (the ETag recorded)
            try:
                etag = move_object(fs, source, target)
            except FileNotFoundError:  # a replay: moved already
                pass
            else:
                if etag is not None:
                    self._etags[name] = etag
                failpoints.hit("commit.move")
                return
        elif fs.exists(source):
            fs.mv(source, target)
            failpoints.hit("commit.move")
            return
        if classify(name).kind is Kind.SHARD_SIDE and fs.exists(target):
            fs.rm(target)  # moved or not, an index is rebuilt on demand

    def _move_manifest(self, journal: Journal, staged: str, final: str) -> None:
        """Move the staged manifest to its final name, the commit point; on a store that
        gives ETags, with each shard's ETag under its final name recorded in it (asked
        now, after the moves and uploads, several at once: a copy may give an object
        another ETag), written there (an S3 PUT is atomic) or to a temporary moved
        in the same way."""
        fs = self.fs
        data = self._staged_manifest
        if data is None or hashlib.sha256(data).hexdigest() != journal.manifest_sha256:
            data = self._read(manifest_name(self.prefix))  # a replay: as staged
        pinned = None if data is None else with_etags(fs, self.output, data, self._etags)
        if self._store and data is not None:  # a PUT is atomic, a move a copy (the staged
            put_checked(fs, final, data if pinned is None else pinned)  # one goes with the
            return  # journal)
        if pinned is None or pinned == data:
            fs.mv(staged, final)
            return
        temp = self.file(f".{manifest_name(self.prefix)}.final")
        with fs.open(temp, "wb") as f:
            f.write(pinned)
        fs.mv(temp, final)
        fs.rm(staged)
