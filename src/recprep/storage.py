"""Storage: fsspec filesystems, the hidden staging directory, and the atomic commit.

All file access in recprep goes through fsspec, so a local path, ``memory://``,
``s3://`` or any other protocol fsspec knows works the same way.

The staging directory and the commit protocol live in ``staging.py``.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Mapping
from typing import Any

import fsspec
import google_crc32c

from .containers.base import Sink
from .errors import InvalidArgumentError
from .shards import manifest_name, parse_shard_name

log = logging.getLogger("recprep")



def resolve(url: str, storage_options: Mapping[str, Any] | None = None) -> tuple[Any, str]:
    """``(filesystem, path)`` for a local path or fsspec URL."""
    options = dict(storage_options or {})
    try:
        fs, path = fsspec.core.url_to_fs(str(url), **options)
    except ImportError as err:
        raise InvalidArgumentError(
            f"{url!r} needs a filesystem that isn't installed ({err}); e.g. "
            "pip install 'recprep[s3]' for s3://"
        ) from None
    return fs, path.rstrip("/") or path


def display(fs: Any, path: str) -> str:
    """A path as the user would write it (``s3://b/k``, ``memory://x``, ``/local``)."""
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    if protocol in ("file", "local"):
        return path
    return fs.unstrip_protocol(path)


class ChecksumWriter:
    """A write-only file wrapper that counts bytes and keeps a running CRC-32C."""

    def __init__(self, file: Sink) -> None:
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

    def retarget(self, file: Sink) -> None:
        """Write to ``file`` from now on (which already holds what was written)."""
        self._file = file


def existing_set_files(fs: Any, directory: str, prefix: str) -> list[str]:
    """Files in ``directory`` that belong to the shard set ``prefix`` (shards, manifest)."""
    if not fs.isdir(directory):
        return []
    found = []
    for path in sorted(fs.ls(directory, detail=False)):
        name = posixpath.basename(path.rstrip("/"))
        if name.startswith(".") and name.endswith(".tfindex"):  # a shard's side index
            name = name[1 : -len(".tfindex")]
            parsed = parse_shard_name(name)
            if parsed is not None and parsed.prefix == prefix:
                found.append(path)
            continue
        parsed = parse_shard_name(name)
        if (parsed is not None and parsed.prefix == prefix) or name == manifest_name(prefix):
            found.append(path)
    return found
