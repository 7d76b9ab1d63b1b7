"""The manifest: ``{name_prefix}.manifest.json``, written last, the commit point of a set.

It records how the set was written (format, codec, compressor), each shard's name,
record count, byte size and CRC-32C, and a free ``schema`` object that codecs fill. It
has no timestamps, so the same input and options give the same manifest, byte for byte.

Example
-------
>>> m = Manifest(name_prefix="p", format="recordio", codec="recprep", compressor="snappy",
...              shards=[ShardInfo("p-00000-of-00000", records=3, bytes=60, crc32c=1)])
>>> Manifest.from_json(m.to_json()) == m
True
>>> m.num_records
3
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from ._version import __version__
from .errors import CorruptDataError

MANIFEST_VERSION = 1


@dataclass(frozen=True)
class ShardInfo:
    """One shard of a set, as the manifest records it."""

    name: str
    records: int
    bytes: int
    crc32c: int


@dataclass
class Manifest:
    """What a manifest file holds."""

    name_prefix: str
    format: str
    codec: str
    compressor: str
    shards: list[ShardInfo]
    schema: dict[str, Any] = field(default_factory=dict)
    #: types the codec stored as pickles by its fallback (readers need ``allow_pickle``);
    #: written only when there are some, so other manifests keep their bytes
    pickled: list[str] = field(default_factory=list)
    recprep_version: str = __version__

    @property
    def num_shards(self) -> int:
        return len(self.shards)

    @property
    def num_records(self) -> int:
        return sum(s.records for s in self.shards)

    @property
    def total_bytes(self) -> int:
        return sum(s.bytes for s in self.shards)

    def to_json(self) -> bytes:
        """The manifest file's bytes (stable key order, CRCs in hex)."""
        doc = {
            "manifest_version": MANIFEST_VERSION,
            "recprep_version": self.recprep_version,
            "name_prefix": self.name_prefix,
            "format": self.format,
            "codec": self.codec,
            "compressor": self.compressor,
            "num_shards": self.num_shards,
            "num_records": self.num_records,
            "total_bytes": self.total_bytes,
            "shards": [
                {**asdict(s), "crc32c": f"{s.crc32c:08x}"} for s in self.shards
            ],
            "schema": self.schema,
        }
        if self.pickled:
            doc["pickled"] = sorted(self.pickled)
        return (json.dumps(doc, indent=2, sort_keys=False) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes | str, path: str | None = None) -> Manifest:
        """Parse a manifest file's bytes; a malformed one raises ``CorruptDataError``."""
        try:
            doc = json.loads(data)
            shards = [
                ShardInfo(s["name"], int(s["records"]), int(s["bytes"]), int(s["crc32c"], 16))
                for s in doc["shards"]
            ]
            manifest = cls(
                name_prefix=doc["name_prefix"],
                format=doc["format"],
                codec=doc["codec"],
                compressor=doc["compressor"],
                shards=shards,
                schema=dict(doc.get("schema") or {}),
                recprep_version=doc.get("recprep_version", "unknown"),
                pickled=[str(name) for name in doc.get("pickled") or []],
            )
            if doc.get("num_shards", len(shards)) != len(shards):
                raise ValueError("num_shards does not match the shard list")
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise CorruptDataError(
                f"not a valid recprep manifest ({type(err).__name__}: {err})", path=path
            ) from None
        return manifest


def read_manifest(fs: Any, path: str) -> Manifest | None:
    """The manifest at ``path``, or None when there is none."""
    try:
        data = fs.cat_file(path)
    except FileNotFoundError:
        return None
    return Manifest.from_json(data, path=path)
