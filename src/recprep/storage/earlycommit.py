"""A set committed by its manifest alone: its files written in place before the commit,
under a journal that rolls them back.

``recprep cp`` of a whole set into an S3 directory that holds nothing of the set yet
(no file of its prefix, no journal of an earlier commit) has no old set to keep readable.
There, instead of incomplete multipart uploads completed at the commit
(:mod:`~recprep.storage.staging`), each file is uploaded straight to its final name, as
``s3fs.put`` would (one ``PutObject`` when small enough), and the commit is the manifest:

1. before any file is sent, the journal (``commit.json``, sealed like every journal)
   is written, naming every file the copy will write (``early``): while it is there
   and the manifest isn't, readers refuse the set (it is *not committed*), as they do
   during any commit;
2. the files are uploaded to their final names, each checked as it lands;
3. the manifest is written (the commit point), with each file's ETag as the store
   answered its upload; then the journal goes.

A copy that fails removes the files it wrote, then the journal. One that is killed
leaves the journal: the next ``cp`` (or ``convert(..., resume=True)``) into the set
settles it (:meth:`EarlyCommit.settle_early`): with the manifest in place the copy had
committed and only the journal goes; without, the files it names are removed, then the
journal, and the destination is as it was before the killed copy.
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import WriteError
from . import failpoints
from .fs import display
from .multipart import put_checked, with_etags
from .records import Journal
from .seals import seal
from .shardnames import manifest_name
from .writers import JOURNAL

log = logging.getLogger("recprep")


class EarlyCommit:
    """The early commit of a :class:`~recprep.storage.staging.Staging` (see the module
    docs): a mix-in, using the staging's filesystem, directories and journal."""

    fs: Any
    output: str
    prefix: str
    path: str
    area: str
    committing: bool
    _fresh: bool
    _early_names: tuple[str, ...] = ()  # the files this object's early journal names
    _early_done = False  # this object's early commit passed its commit point

    def file(self, name: str) -> str:
        raise NotImplementedError

    def journal(self) -> Journal:
        raise NotImplementedError

    def _write_atomic(self, name: str, data: bytes) -> None:
        raise NotImplementedError

    def _owns(self, name: str) -> bool:
        raise NotImplementedError

    def begin_early(self, names: Iterable[str], manifest_sha256: str = "") -> None:
        """Write the journal of an early commit of the files ``names`` (final names in
        the output directory), before any of them is written."""
        self._early_names = tuple(sorted(names))
        doc = {"kind": "journal", "staging": self.path, "area": self.area,
               "prefix": self.prefix, "staged": {}, "replaced": [],
               "manifest_sha256": manifest_sha256, "early": list(self._early_names)}
        self._write_atomic(JOURNAL, seal(doc))
        self.committing = True
        failpoints.hit("commit.journal")

    def commit_early(self, manifest: bytes, etags: Mapping[str, str]) -> None:
        """The commit point: ``manifest`` written to its final name, with each file's ETag
        (``etags``: final name -> the ETag its upload answered; others asked); then the
        journal removed."""
        fs = self.fs
        final = posixpath.join(self.output, manifest_name(self.prefix))
        pinned = with_etags(fs, self.output, manifest, etags)
        try:
            put_checked(fs, final, manifest if pinned is None else pinned)
        except OSError as err:
            raise WriteError(display(fs, final), err) from err
        self._early_done = True
        failpoints.hit("commit.manifest")
        fs.rm_file(self.file(JOURNAL))
        failpoints.hit("commit.cleanup")
        self.committing = False
        with contextlib.suppress(Exception):
            fs.invalidate_cache(self.path)

    def roll_back_early(self) -> None:
        """Undo this object's early commit after a failure: the files it named removed,
        then its journal (once past the commit point, only the journal). Should this
        fail, the journal stays, and the next run settles it."""
        names = [*self._early_names, manifest_name(self.prefix)]  # (the manifest: if its
        self._undo(names, committed=self._early_done)  # write failed, as it was checked)

    def settle_early(self, journal: Journal | None = None) -> bool:
        """Settle the pending journal (``journal``, when the caller read it already) if it
        is an early commit's (see the module docs): whether it was one (it is gone then).
        A journal this user's runs didn't write is refused
        (:class:`~recprep.errors.UntrustedFileError`), never acted on."""
        journal = self.journal() if journal is None else journal
        if not journal.early:
            return False
        final = posixpath.join(self.output, manifest_name(self.prefix))
        with contextlib.suppress(Exception):
            self.fs.invalidate_cache(self.output)
        committed = bool(self.fs.exists(final))
        if not committed:
            log.info("recprep: removing the files of a copy into %s killed before its "
                     "commit (%d file(s) of %s)", display(self.fs, self.output),
                     len(journal.early), self.prefix)
        self._undo(journal.early, committed=committed)
        self._fresh = True
        return True

    def _undo(self, names: Iterable[str], *, committed: bool) -> None:
        fs = self.fs
        if not committed:
            paths = [posixpath.join(self.output, n) for n in names if self._owns(n)]
            if paths:  # (one request on a store; a name never written is no error there)
                fs.rm(paths)
                failpoints.hit("commit.rollback")
        fs.rm_file(self.file(JOURNAL))
        self.committing = False
        self._early_names = ()
        for path in (self.output, self.path):
            with contextlib.suppress(Exception):
                fs.invalidate_cache(path)
