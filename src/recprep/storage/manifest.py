"""The manifest: ``{name_prefix}.manifest.json``, written last, the commit point of a set.

It records how the set was written (format, codec, compressor), each shard's name,
record count, byte size and CRC-32C (and, on a store that gives them, its ETag), and a
free ``schema`` object that codecs fill. It has no timestamps, so the same input and
options give the same manifest, byte for byte.

A manifest is input like any file in the output directory: :meth:`Manifest.from_json`
validates all of it (at most :data:`MAX_MANIFEST_BYTES`; types; counts and sizes
non-negative ints below 2**63, and no more records than a shard's bytes can hold; shard
names those of the prefix, in order; CRCs of 8 hex digits; ETags of at most
:data:`MAX_ETAG_CHARS` visible ASCII characters; a schema object at most
:data:`MAX_SCHEMA_DEPTH` deep), and anything else raises
:class:`~recprep.errors.CorruptDataError`, never another exception.

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

import builtins
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .._version import __version__
from ..containers import get_format
from ..errors import CorruptDataError, InvalidArgumentError, RecprepError
from .fs import read_regular
from .shardlist import ShardListText, cut_shard_list
from .shardnames import check_prefix, shard_name
from .shardtable import ShardInfo, ShardTable, shard_total

MANIFEST_VERSION = 1
#: a manifest file larger than this is refused before it is parsed
MAX_MANIFEST_BYTES = 64 << 20
#: how deeply the ``schema`` object may nest
MAX_SCHEMA_DEPTH = 32
_MANIFEST_INT_LIMIT = 1 << 63
_CRC_HEX = re.compile(r"[0-9a-fA-F]{8}")
#: the longest ETag a manifest may record (S3's are 34 to 45 characters, quotes included)
MAX_ETAG_CHARS = 256
#: an ETag: visible ASCII, no space or control character (it goes into a request header)
_ETAG = re.compile(rf"[\x21-\x7e]{{1,{MAX_ETAG_CHARS}}}")
#: the keys of a file's facts (``fs.info``) that tell one file from its replacement
_IDENTITY_KEYS = ("size", "ino", "mtime", "created", "LastModified", "last_modified",
                  "generation", "VersionId", "version_id")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
#: the most one byte inflates to, per compressor
_EXPANSION = {"none": 1, "snappy": 22, "gzip": 1032, "zlib": 1032}


def _min_record_bytes(format: str) -> int:
    """The fewest bytes a record takes in ``format`` (1 for a format not registered here:
    the bound stays sound)."""
    try:
        return get_format(format).min_record_bytes
    except RecprepError:
        return 1


@dataclass(frozen=True)
class SideFileInfo:
    """A side file of a set that the manifest vouches for (its chunk index, a shard's
    record index): readers use it only when its size and SHA-256 are these. (Not a
    CRC: a CRC is made to catch damage, and a forger can match one at will.)

    >>> info = SideFileInfo.of(".s.chunks", b"{}")
    >>> info.mismatch(b"{}") is None, info.mismatch(b"[]")[:24]
    (True, 'it is not the file the m')
    """

    name: str
    bytes: int
    sha256: str

    @classmethod
    def of(cls, name: str, data: builtins.bytes) -> SideFileInfo:
        """What the manifest says of the side file ``name`` holding ``data``."""
        return cls(name, len(data), hashlib.sha256(data).hexdigest())

    def mismatch(self, data: builtins.bytes) -> str | None:
        """Why ``data`` is not the side file this entry vouches for, or None."""
        if len(data) == self.bytes and hashlib.sha256(data).hexdigest() == self.sha256:
            return None
        size = f"{len(data)}" if len(data) <= self.bytes else f"more than {self.bytes}"
        return (f"it is not the file the manifest vouches for ({size} bytes, SHA-256 "
                f"{hashlib.sha256(data).hexdigest()[:16]}...; the manifest says {self.bytes} "
                f"bytes, {self.sha256[:16]}...): forged, damaged or of another set")


@dataclass
class Manifest:
    """What a manifest file holds."""

    name_prefix: str
    format: str
    codec: str
    compressor: str
    #: a :class:`~.shardtable.ShardTable` in a manifest read from a file
    shards: Sequence[ShardInfo]
    schema: dict[str, Any] = field(default_factory=dict)
    #: types the codec stored as pickles by its fallback (readers need ``allow_pickle``);
    #: written only when there are some, so other manifests keep their bytes
    pickled: list[str] = field(default_factory=list)
    recprep_version: str = __version__
    #: the side files the set's readers may trust (``side_file``); written only when
    #: there are some, so other manifests keep their bytes
    side_files: list[SideFileInfo] = field(default_factory=list)

    def side_file(self, name: str) -> SideFileInfo | None:
        """The manifest's entry for the side file ``name``, if it vouches for one."""
        return next((f for f in self.side_files if f.name == name), None)

    @property
    def num_shards(self) -> int:
        return len(self.shards)

    @property
    def num_records(self) -> int:
        return shard_total(self.shards, "records")

    @property
    def total_bytes(self) -> int:
        return shard_total(self.shards, "bytes")

    def max_records(self, size: int) -> int:
        """The most records a shard of ``size`` bytes can hold in this set's format and
        compressor (a record takes at least 4 bytes in RecordIO, 16 in TFRecord, once
        decompressed; deflate inflates a byte to at most 1032).

        >>> Manifest("p", "tfrecord", "raw", "none", []).max_records(160)
        10
        """
        ratio = _EXPANSION.get(self.compressor, _EXPANSION["gzip"])
        return size * ratio // _min_record_bytes(self.format)

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
            "shards": [s.to_doc() for s in self.shards],
            "schema": self.schema,
        }
        if self.pickled:
            doc["pickled"] = sorted(self.pickled)
        if self.side_files:
            doc["side_files"] = [asdict(f) for f in sorted(self.side_files,
                                                            key=lambda f: f.name)]
        return (json.dumps(doc, indent=2, sort_keys=False) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes | str, path: str | None = None) -> Manifest:
        """Parse and validate a manifest file's bytes; anything malformed raises
        :class:`~recprep.errors.CorruptDataError` naming ``path``.

        >>> Manifest.from_json('{"shards": 1}')  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        recprep.errors.CorruptDataError: not a valid recprep manifest: name_prefix ...
        """
        try:
            if len(data) > MAX_MANIFEST_BYTES:
                raise _Invalid(f"{len(data)} bytes, more than a manifest may have "
                               f"({MAX_MANIFEST_BYTES})")
            if (lean := _lean_parse(cls, data)) is not None:
                return lean
            try:
                doc = json.loads(data, parse_constant=_no_constant)
            except RecursionError:
                raise _Invalid("the JSON nests too deeply") from None
            except ValueError as err:  # also UnicodeDecodeError, a too long int
                raise _Invalid(f"not JSON ({err})") from None
            return _parse_manifest(cls, doc)
        except _Invalid as err:
            raise CorruptDataError(f"not a valid recprep manifest: {err}", path=path) from None


class _Invalid(Exception):
    """Internal: what is wrong with a manifest's document."""


def _no_constant(name: str) -> Any:
    raise _Invalid(f"{name} is not a number a manifest can hold")


def _text(doc: dict[str, Any], key: str, default: str | None = None) -> str:
    value = doc.get(key, default)
    if not isinstance(value, str) or not value or len(value) > 1024:
        raise _Invalid(f"{key} must be a non-empty string, found {_shown_value(value)}")
    return value


def _manifest_int(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not (
            0 <= value < _MANIFEST_INT_LIMIT):
        raise _Invalid(f"{what} must be an int in [0, 2**63), found {_shown_value(value)}")
    return value


def _shown_value(value: Any) -> str:
    text = repr(value) if isinstance(value, (str, int, float, bool, type(None))) else (
        type(value).__name__
    )
    return text if len(text) <= 60 else text[:57] + "..."


def _depth_ok(value: Any, limit: int) -> bool:
    """Whether ``value`` (parsed JSON) nests at most ``limit`` levels (no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(
            item, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > limit:
                    return False
                stack.append((child, depth + 1))
    return True


def _parse_manifest(cls: type[Manifest], doc: Any) -> Manifest:
    if not isinstance(doc, dict):
        raise _Invalid(f"expected a JSON object, found {type(doc).__name__}")
    version = _manifest_int(doc.get("manifest_version", MANIFEST_VERSION), "manifest_version")
    if version > MANIFEST_VERSION:
        raise _Invalid(f"manifest_version {version} is newer than this recprep reads "
                       f"({MANIFEST_VERSION}): upgrade recprep")
    prefix = _text(doc, "name_prefix")
    try:
        check_prefix(prefix)
    except InvalidArgumentError as err:
        raise _Invalid(str(err)) from None
    manifest = cls(
        name_prefix=prefix,
        format=_text(doc, "format"),
        codec=_text(doc, "codec"),
        compressor=_text(doc, "compressor"),
        shards=[],
        recprep_version=_text(doc, "recprep_version", "unknown"),
    )
    listed = doc.get("shards")
    if isinstance(listed, ShardListText):  # (_lean_parse)
        listed = manifest.shards = listed.table(prefix, manifest.max_records, _ETAG.fullmatch)
    elif not isinstance(listed, list):
        raise _Invalid(f"shards must be a list, found {_shown_value(listed)}")
    else:
        manifest.shards = ShardTable.of(prefix, (_shard_entry(manifest, s, i, len(listed))
                                                 for i, s in enumerate(listed)))
    # the totals are informative (the properties add the shards up): checked for type,
    # and num_shards for agreement with the list, as always
    for key, value in (("num_shards", manifest.num_shards),
                       ("num_records", manifest.num_records),
                       ("total_bytes", manifest.total_bytes)):
        if value >= _MANIFEST_INT_LIMIT:
            raise _Invalid(f"the shards' {key} add up to {value}, past 2**63")
        if key in doc:
            _manifest_int(doc[key], key)
    if _manifest_int(doc.get("num_shards", len(listed)), "num_shards") != len(listed):
        raise _Invalid(f"num_shards is {doc['num_shards']}, but the shard list has "
                       f"{len(listed)}")
    schema = doc.get("schema")
    if schema is None:
        schema = {}
    if not isinstance(schema, dict) or not _depth_ok(schema, MAX_SCHEMA_DEPTH):
        raise _Invalid(f"schema must be a JSON object at most {MAX_SCHEMA_DEPTH} levels "
                       f"deep, found {_shown_value(schema)}")
    manifest.schema = schema
    pickled = doc.get("pickled") or []
    if not isinstance(pickled, list) or not all(isinstance(p, str) for p in pickled):
        raise _Invalid(f"pickled must be a list of type names, found {_shown_value(pickled)}")
    manifest.pickled = list(pickled)
    sides = doc.get("side_files") or []
    if not isinstance(sides, list) or len(sides) > len(listed) + 1:
        raise _Invalid(f"side_files must be a list of at most one entry per shard and one "
                       f"for the set, found {_shown_value(sides)}")
    manifest.side_files = [_side_file_entry(manifest, entry, i) for i, entry in enumerate(sides)]
    if len({f.name for f in manifest.side_files}) != len(manifest.side_files):
        raise _Invalid("side_files lists a name twice")
    return manifest


def _side_file_entry(manifest: Manifest, entry: Any, index: int) -> SideFileInfo:
    """An entry of ``side_files``: a hidden file name of this set (``.{prefix}...`` or
    ``.{shard}...``, no directories), its size and CRC-32C."""
    where = f"side_files[{index}]"
    if not isinstance(entry, dict):
        raise _Invalid(f"{where} must be an object, found {_shown_value(entry)}")
    name = entry.get("name")
    if not isinstance(name, str) or "/" in name or "\\" in name or len(name) > 1024 or not (
        _side_file_owner(manifest, name)
    ):
        raise _Invalid(f"{where}.name must be a hidden side file of the set "
                       f"('.{manifest.name_prefix}.<kind>' or '.<shard>.<kind>'), found "
                       f"{_shown_value(name)}")
    size = _manifest_int(entry.get("bytes"), f"{where}.bytes")
    digest = entry.get("sha256")
    if not isinstance(digest, str) or not _SHA256_HEX.fullmatch(digest):
        raise _Invalid(f"{where}.sha256 must be 64 lowercase hex digits, found "
                       f"{_shown_value(digest)}")
    return SideFileInfo(name, size, digest)


def _side_file_owner(manifest: Manifest, name: str) -> bool:
    """Whether ``name`` is ``.{owner}.<kind>``, its owner the set's prefix or a shard's
    name (all of one length: a table's names are its prefix's)."""
    if name.startswith(f".{manifest.name_prefix}.") and len(name) > len(manifest.name_prefix) + 2:
        return True
    shards = manifest.shards
    if not isinstance(shards, ShardTable):
        return any(name.startswith(f".{s.name}.") and len(name) > len(s.name) + 2
                   for s in shards)
    size = len(shards.name(0)) if len(shards) else 0
    return (len(name) > size + 2 and name[0] == "." and name[size + 1] == "."
            and shards.find(name[1:size + 1]) is not None)


def _shard_entry(manifest: Manifest, entry: Any, index: int, count: int) -> ShardInfo:
    where = f"shards[{index}]"
    if not isinstance(entry, dict):
        raise _Invalid(f"{where} must be an object, found {_shown_value(entry)}")
    name = entry.get("name")
    expected = shard_name(manifest.name_prefix, index, count)
    if name != expected:
        raise _Invalid(f"{where}.name must be {expected!r} (shard {index} of {count} of "
                       f"{manifest.name_prefix!r}), found {_shown_value(name)}")
    records = _manifest_int(entry.get("records"), f"{where}.records")
    size = _manifest_int(entry.get("bytes"), f"{where}.bytes")
    crc = entry.get("crc32c")
    if not isinstance(crc, str) or not _CRC_HEX.fullmatch(crc):
        raise _Invalid(f"{where}.crc32c must be 8 hex digits, found {_shown_value(crc)}")
    most = manifest.max_records(size)
    if records > most:
        raise _Invalid(f"{where} claims {records} records in {size} bytes, which can hold at "
                       f"most {most} ({manifest.format}, {manifest.compressor})")
    etag = entry.get("etag")
    if etag is not None and (not isinstance(etag, str) or not _ETAG.fullmatch(etag)):
        raise _Invalid(f"{where}.etag must be 1 to {MAX_ETAG_CHARS} visible ASCII "
                       f"characters, found {_shown_value(etag)}")
    return ShardInfo(name, records, size, int(crc, 16), etag)


def _lean_parse(cls: type[Manifest], data: bytes | str) -> Manifest | None:
    """The manifest of ``data``, its shard list read entry by entry (:mod:`.shardlist`);
    None when it isn't as ``to_json`` writes it, or is refused (the careful parse says why)."""
    cut = cut_shard_list(data) if isinstance(data, builtins.bytes) else None
    try:
        doc = None if cut is None else json.loads(cut[0], parse_constant=_no_constant)
        if cut is None or not isinstance(doc, dict) or doc.get("shards") != cut[1]:
            return None
        doc["shards"] = cut[2]
        return _parse_manifest(cls, doc)
    except (_Invalid, ValueError, RecursionError):
        return None


def identity_of(info: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """What tells a file from its replacement, from its facts (``fs.info``, or the
    response to a GET): its ETag (and version, when versioned) on a store that gives
    one, else its size, inode and times.

    >>> identity_of({"ETag": '"9b2c"', "size": 10, "VersionId": None})
    (('etag', '"9b2c"'),)
    >>> identity_of({"size": 10, "created": 1.5, "name": "x"})
    (('size', '10'), ('created', '1.5'))
    """
    etag = info.get("ETag", info.get("etag"))
    if etag is None:
        return tuple((key, str(info[key])) for key in _IDENTITY_KEYS if key in info)
    version = info.get("VersionId") or info.get("version_id") or info.get("generation")
    return (("etag", str(etag)),) + ((("version", str(version)),) if version else ())


@dataclass(frozen=True)
class ManifestFile:
    """A manifest file's bytes and its identity (:func:`identity_of`), read together."""

    path: str
    data: builtins.bytes
    identity: tuple[tuple[str, str], ...]

    def parse(self) -> Manifest:
        """The manifest, validated (:meth:`Manifest.from_json`)."""
        return Manifest.from_json(self.data, path=self.path)


def fetch_manifest(fs: Any, path: str) -> ManifestFile | None:
    """The bytes and identity of the manifest at ``path`` (None when there is none), each
    checked as :func:`read_manifest` does: on S3 one GET, whose response gives the ETag
    (no HEAD); elsewhere ``fs.info`` and one read.

    >>> import fsspec
    >>> fs = fsspec.filesystem("memory")
    >>> fs.pipe_file("/doc/fetch/p.manifest.json", b"{}")
    >>> got = fetch_manifest(fs, "/doc/fetch/p.manifest.json")
    >>> got.data, dict(got.identity)["size"], fetch_manifest(fs, "/doc/fetch/q.manifest.json")
    (b'{}', '2', None)
    """
    try:
        got = _s3_get(fs, path, MAX_MANIFEST_BYTES)
        if got is None:
            info = fs.info(path)
            got = read_regular(fs, path, MAX_MANIFEST_BYTES, what="a manifest"), info
    except FileNotFoundError:
        return None
    except CorruptDataError as err:
        raise CorruptDataError(f"not a valid recprep manifest: {err.detail}",
                               path=err.path) from None
    return ManifestFile(path, got[0], identity_of(got[1]))


def _s3_get(fs: Any, path: str, limit: int) -> tuple[builtins.bytes, dict[str, Any]] | None:
    """At most ``limit`` bytes of the object at ``path`` and the response's facts (its
    ETag, version), by one ranged GET through s3fs; None when ``fs`` is not s3fs or the
    GET is refused for another reason than a missing key (an empty object, whose range is
    not satisfiable): the caller reads it the ordinary way. More than ``limit`` bytes
    raise :class:`~recprep.errors.CorruptDataError`."""
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
    if "s3" not in protocols or not hasattr(fs, "_call_s3"):
        return None
    from fsspec.asyn import sync

    bucket, key, version = fs.split_path(path)

    async def get() -> tuple[builtins.bytes, dict[str, Any]]:
        extra = {"VersionId": version} if version else {}
        response = await fs._call_s3("get_object", Bucket=bucket, Key=key,
                                     Range=f"bytes=0-{limit}", **extra)
        body = response["Body"]
        try:
            data = await body.read()
        finally:
            body.close()
        return data, response

    try:
        data, response = sync(fs.loop, get)
    except FileNotFoundError:
        raise
    except OSError:
        return None
    if len(data) > limit:
        total = str(response.get("ContentRange", "")).rpartition("/")[2]
        raise CorruptDataError(f"{total or 'more'} bytes, more than a manifest may have "
                               f"({limit})", path=fs.unstrip_protocol(path))
    return data, {"ETag": response.get("ETag"), "VersionId": response.get("VersionId")}


def read_manifest(fs: Any, path: str) -> Manifest | None:
    """The manifest at ``path``, or None when there is none. One larger than
    :data:`MAX_MANIFEST_BYTES` raises before it is parsed (a local one before it is read,
    a remote one after a read bounded by the limit), and so does one that is not a regular
    file (a FIFO, a link to ``/dev/zero``: :func:`~recprep.storage.fs.read_regular`)."""
    found = read_manifest_bytes(fs, path)
    return None if found is None else found[0]


def read_manifest_bytes(fs: Any, path: str) -> tuple[Manifest, bytes] | None:
    """:func:`read_manifest`, with the bytes it was parsed from (a copy of the set
    writes them as they are, without fetching them again)."""
    try:
        data = read_regular(fs, path, MAX_MANIFEST_BYTES, what="a manifest")
    except FileNotFoundError:
        return None
    except CorruptDataError as err:
        raise CorruptDataError(f"not a valid recprep manifest: {err.detail}",
                               path=err.path) from None
    return Manifest.from_json(data, path=path), data
