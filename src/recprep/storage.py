"""Storage: fsspec filesystems, the hidden staging directory, and the atomic commit.

All file access in recprep goes through fsspec, so a local path, ``memory://``,
``s3://`` or any other protocol fsspec knows works the same way.

The commit protocol (``docs/format.md``, "Safety of the output"):

1. Shards are written under ``{output}/.recprep-staging-{prefix}-{token}/``, hidden, so
   no glob a user writes reaches them.
2. When every shard is complete, the old manifest (if any, with ``overwrite``) is
   removed, each staged shard is moved to its final name, old shards the new run
   doesn't produce are removed, and the manifest is written (staged, then moved) —
   **the manifest is the commit point**.
3. On any failure before that, the staging directory is removed: the output is as it
   was.
"""

from __future__ import annotations

import logging
import posixpath
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, BinaryIO

import fsspec
import google_crc32c

from .shards import manifest_name, parse_shard_name

log = logging.getLogger("recprep")

STAGING_PREFIX = ".recprep-staging-"


def resolve(url: str, storage_options: Mapping[str, Any] | None = None) -> tuple[Any, str]:
    """``(filesystem, path)`` for a local path or fsspec URL."""
    fs, path = fsspec.core.url_to_fs(str(url), **dict(storage_options or {}))
    return fs, path.rstrip("/") or path


def display(fs: Any, path: str) -> str:
    """A path as the user would write it (``s3://b/k``, ``memory://x``, ``/local``)."""
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    if protocol in ("file", "local"):
        return path
    return fs.unstrip_protocol(path)


class ChecksumWriter:
    """A write-only file wrapper that counts bytes and keeps a running CRC-32C."""

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        self.crc32c = 0
        self.size = 0

    def write(self, data: bytes) -> int:
        self._file.write(data)
        self.crc32c = google_crc32c.extend(self.crc32c, data)
        self.size += len(data)
        return len(data)

    def tell(self) -> int:
        return self.size

    def retarget(self, file: BinaryIO) -> None:
        """Write to ``file`` from now on (which already holds what was written)."""
        self._file = file


def existing_set_files(fs: Any, directory: str, prefix: str) -> list[str]:
    """Files in ``directory`` that belong to the shard set ``prefix`` (shards, manifest)."""
    if not fs.isdir(directory):
        return []
    found = []
    for path in sorted(fs.ls(directory, detail=False)):
        name = posixpath.basename(path.rstrip("/"))
        parsed = parse_shard_name(name)
        if (parsed is not None and parsed.prefix == prefix) or name == manifest_name(prefix):
            found.append(path)
    return found


class Staging:
    """The hidden directory one conversion writes into before it commits."""

    def __init__(self, fs: Any, output: str, prefix: str, token: str | None = None) -> None:
        self.fs = fs
        self.output = output
        self.prefix = prefix
        self.path = posixpath.join(output, f"{STAGING_PREFIX}{prefix}-{token or uuid.uuid4().hex}")
        fs.makedirs(self.path, exist_ok=True)

    def file(self, name: str) -> str:
        """A path inside the staging directory."""
        return posixpath.join(self.path, name)

    def commit(
        self, staged: Mapping[str, str], manifest: bytes, *, replaced: Iterable[str] = ()
    ) -> None:
        """Move each staged file (final name -> staged path) to its final name, drop the
        ``replaced`` leftovers of an old set, then write the manifest last."""
        fs = self.fs
        final = {posixpath.join(self.output, name) for name in staged}
        replaced = list(replaced)
        manifest_final = posixpath.join(self.output, manifest_name(self.prefix))
        if manifest_final in replaced:
            fs.rm(manifest_final)  # uncommit the old set before touching its shards
        for name, path in staged.items():
            fs.mv(path, posixpath.join(self.output, name))
        for old in replaced:
            if old not in final and old != manifest_final and fs.exists(old):
                fs.rm(old)
        staged_manifest = self.file(manifest_name(self.prefix))
        with fs.open(staged_manifest, "wb") as f:
            f.write(manifest)
        fs.mv(staged_manifest, manifest_final)
        self.remove()

    def remove(self) -> None:
        """Delete the staging directory and everything in it (best effort)."""
        try:
            if self.fs.exists(self.path):
                self.fs.rm(self.path, recursive=True)
        except Exception:  # cleanup must not hide the error that led here
            log.warning("could not remove staging directory %s", self.path, exc_info=True)
