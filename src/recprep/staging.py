"""The staging directory of a conversion, its task records, and the atomic commit.

Everything a conversion writes goes first under ``{output}/.recprep-staging-{prefix}/``
— hidden, so no glob a user writes reaches it. The commit protocol
(``docs/format.md`` §3, ``docs/reliability.md``):

1. Each finished task is recorded in ``done-{key}.json`` (its files, their sizes and
   CRC-32C), so ``resume=True`` can reuse what a killed run finished, once verified.
2. When every shard is complete, the manifest and a journal (``commit.json``: which staged
   file becomes which shard, which old files go) are written into staging.
3. The old manifest (with ``overwrite``) is removed, each staged shard is moved to its
   final name, old shards the new run doesn't produce are removed, and the manifest is
   moved to its final name — **the manifest is the commit point** — then staging goes.

A run killed before 2 leaves only staging (removed or reused by the next run); killed
during 3, the journal says how to finish, and ``resume=True`` finishes it.
"""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from typing import Any

import google_crc32c

from . import _failpoints
from .shards import manifest_name
from .writing import FileFacts

log = logging.getLogger("recprep")

STAGING_PREFIX = ".recprep-staging-"
JOURNAL = "commit.json"
FINGERPRINT = "options.json"
_READ_BLOCK = 8 << 20


def facts_intact(fs: Any, facts: FileFacts) -> bool:
    """Whether ``facts`` still describe what is on storage (size and CRC-32C)."""
    try:
        with fs.open(facts.path, "rb") as f:
            f.seek(facts.offset)
            crc, left = 0, facts.bytes
            while left and (block := f.read(min(left, _READ_BLOCK))):
                crc = google_crc32c.extend(crc, block)
                left -= len(block)
    except (OSError, ValueError):
        return False
    return left == 0 and crc == facts.crc32c


class Staging:
    """The hidden directory one shard set is written into before it commits."""

    def __init__(self, fs: Any, output: str, prefix: str) -> None:
        self.fs = fs
        self.output = output
        self.prefix = prefix
        self.path = posixpath.join(output, f"{STAGING_PREFIX}{prefix}")

    def exists(self) -> bool:
        return bool(self.fs.exists(self.path))

    def create(self, *, keep: bool) -> None:
        """Make the directory; a dead run's leftovers are kept (``keep``) or removed."""
        if self.exists() and not keep:
            log.info("recprep: removing the temporaries of an earlier run in %s", self.path)
            self.remove()
        self.fs.makedirs(self.path, exist_ok=True)

    def file(self, name: str) -> str:
        """A path inside the staging directory."""
        return posixpath.join(self.path, name)

    def fingerprint(self) -> bytes | None:
        """What the staged work was made with (see :meth:`set_fingerprint`)."""
        try:
            return bytes(self.fs.cat_file(self.file(FINGERPRINT)))
        except FileNotFoundError:
            return None

    def set_fingerprint(self, fingerprint: bytes) -> None:
        """Remember the options staged work depends on, so a resume can tell."""
        self._write_atomic(FINGERPRINT, fingerprint)

    # -- task records --------------------------------------------------------------------

    def _write_atomic(self, name: str, data: bytes) -> None:
        tmp = self.file(f".{name}.tmp")
        with self.fs.open(tmp, "wb") as f:
            f.write(data)
        self.fs.mv(tmp, self.file(name))

    def record(self, key: str, files: list[FileFacts | None], notes: list[Any]) -> None:
        """Remember a finished task (skipped when its notes aren't JSON)."""
        doc = {"files": [None if f is None else asdict(f) for f in files], "notes": notes}
        try:
            data = json.dumps(doc).encode()
        except (TypeError, ValueError):
            return
        self._write_atomic(f"done-{key}.json", data)

    def recorded(self, key: str) -> tuple[list[FileFacts | None], list[Any]] | None:
        """A finished task's files and notes, if recorded and still intact on storage."""
        try:
            doc = json.loads(self.fs.cat_file(self.file(f"done-{key}.json")))
            files = [None if f is None else FileFacts(**f) for f in doc["files"]]
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            return None
        if not all(f is None or facts_intact(self.fs, f) for f in files):
            log.warning("recprep: the staged output of task %s changed; running it again", key)
            return None
        return files, list(doc.get("notes") or [])

    # -- the commit ----------------------------------------------------------------------

    def commit(
        self, staged: Mapping[str, str], manifest: bytes, *, replaced: Iterable[str] = ()
    ) -> None:
        """Move each staged file (final name -> staged path) to its final name, drop the
        ``replaced`` leftovers of an old set, then move the manifest in last."""
        self._write_atomic(manifest_name(self.prefix), manifest)
        journal = {"staged": dict(staged), "replaced": sorted(replaced)}
        self._write_atomic(JOURNAL, json.dumps(journal).encode())
        self._finish(journal)

    def pending_commit(self) -> bool:
        """Whether a commit was started (its journal is there) and not finished."""
        return bool(self.fs.exists(self.file(JOURNAL)))

    def finish_commit(self, intact: Mapping[str, FileFacts]) -> None:
        """Finish a commit a killed run started; ``intact`` are the shards' expected facts
        at their final paths, to check those already moved."""
        journal = json.loads(self.fs.cat_file(self.file(JOURNAL)))
        for name, path in journal["staged"].items():
            final = intact.get(name)  # None: a side file (an index), rebuilt on demand
            if final is not None and not self.fs.exists(path):
                if not facts_intact(self.fs, final):
                    raise FileNotFoundError(
                        f"{final.path}: neither staged nor committed intact; run the "
                        "conversion again without resume"
                    )
        self._finish(journal)

    def _finish(self, journal: Mapping[str, Any]) -> None:
        fs = self.fs
        staged: dict[str, str] = journal["staged"]
        replaced: list[str] = journal["replaced"]
        final = {posixpath.join(self.output, name) for name in staged}
        manifest_final = posixpath.join(self.output, manifest_name(self.prefix))
        if manifest_final in replaced and fs.exists(manifest_final):
            fs.rm(manifest_final)  # uncommit the old set before touching its shards
        for name, path in staged.items():
            if fs.exists(path):
                fs.mv(path, posixpath.join(self.output, name))
                _failpoints.hit("commit.move")
        for old in replaced:
            if old not in final and old != manifest_final and fs.exists(old):
                fs.rm(old)
        staged_manifest = self.file(manifest_name(self.prefix))
        if fs.exists(staged_manifest) or not fs.exists(manifest_final):
            fs.mv(staged_manifest, manifest_final)
        _failpoints.hit("commit.manifest")
        self.remove()

    def remove(self) -> None:
        """Delete the staging directory and everything in it (best effort)."""
        try:
            if self.fs.exists(self.path):
                self.fs.rm(self.path, recursive=True)
        except Exception:  # cleanup must not hide the error that led here
            log.warning("could not remove staging directory %s", self.path, exc_info=True)
