"""What staging's side files record: what was written to a staged file — records, bytes,
CRC-32C, its chunk index — and whether storage still holds exactly that
(:func:`facts_intact`: a resume reuses a killed run's staged work only when it does); the
run (:class:`Run`); a commit in progress (:class:`Journal`).

Example
-------
>>> import fsspec
>>> fs = fsspec.filesystem("memory")
>>> fs.pipe("/doc/facts/x", b"abc")
>>> facts = FileFacts("/doc/facts/x", records=1, bytes=3, crc32c=0x364B3FB7)
>>> facts_intact(fs, facts), FileFacts.from_doc(facts.to_doc("x"), "/doc/facts/x") == facts
(True, True)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from .fs import checksum, open_regular
from .multipart import PendingUpload

__all__ = ["FileFacts", "Journal", "Run", "facts_intact"]


@dataclass(frozen=True)
class FileFacts:
    """What was written to one file (or to ``bytes`` bytes of it from ``offset``):
    records, bytes and the CRC-32C of those bytes; and ``chunks`` when its writer reported
    them (:attr:`~recprep.containers.base.RecordWriter.chunks`): ``(offset, records)`` of
    each chunk, offsets counted from ``offset`` — the chunk index of those bytes, known
    without reading them back (``None``: not known)."""

    path: str
    records: int
    bytes: int
    crc32c: int
    offset: int = 0
    chunks: tuple[tuple[int, int], ...] | None = field(default=None, repr=False)

    def to_doc(self, name: str) -> dict[str, Any]:
        """These facts as JSON data (a task record's), the file called ``name``."""
        return {**asdict(self), "path": name}

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any], path: str) -> FileFacts:
        """The facts :meth:`to_doc` made, of the file at ``path`` (a record without
        ``chunks``, as older versions wrote, leaves them unknown); a value of the wrong
        kind raises ``KeyError``, ``TypeError`` or ``ValueError``."""
        chunks = doc.get("chunks")
        return cls(path, int(doc["records"]), int(doc["bytes"]), int(doc["crc32c"]),
                   int(doc["offset"]),
                   None if chunks is None else tuple((int(o), int(n)) for o, n in chunks))


def facts_intact(fs: Any, facts: FileFacts) -> bool:
    """Whether ``facts`` still describe what is on storage (size and CRC-32C)."""
    try:  # a FIFO planted in staging is refused (ValueError), never read
        with open_regular(fs, facts.path, what="a staged file") as f:
            crc, size = checksum(f, start=facts.offset, size=facts.bytes)
    except (OSError, ValueError):
        return False
    return size == facts.bytes and crc == facts.crc32c


@dataclass(frozen=True)
class Run:
    """What ``options.json`` says of the run that made the staged work."""

    fingerprint: str
    overwrite: bool


@dataclass(frozen=True)
class Journal:
    """A commit in progress: final name -> staged name, old names that go, the SHA-256
    of the staged manifest, and final name -> the multipart upload that completes it (on
    an object store: :mod:`~recprep.storage.multipart`); ``early``: the final names a
    copy writes in place before its commit (:mod:`~recprep.storage.earlycommit`), which
    are rolled back unless the manifest is in."""

    staged: dict[str, str]
    replaced: list[str]
    manifest_sha256: str
    uploads: dict[str, PendingUpload] = field(default_factory=dict)
    early: tuple[str, ...] = ()
