"""Shards committed on an object store by completing multipart uploads, not by copies.

On a store that speaks the S3 API (s3fs), a move is a server-side copy and a delete: a
commit that moves each staged shard to its final name copies every byte again. Instead
a shard can be uploaded as a multipart upload **to its final key** and left incomplete —
an incomplete upload is invisible to every reader and listing — until the commit
completes it (:func:`complete`). A :class:`PendingUpload` is what a commit needs to do
that and to check it: the upload id and each part's number, ETag, size and CRC-32C.

Every step is idempotent, as a journal's replay needs: completing an upload that a
killed commit already completed is fine when the object at the key is the one those
parts make (S3 gives a completed upload the ETag :attr:`PendingUpload.etag`; where part
ETags aren't MD5s the object's size and CRC-32C are checked instead), and an error naming
the shard otherwise. Uploads nobody records (a killed run, a failed one) are found by
listing the open uploads under the output directory and aborted
(:func:`abort_unrecorded`), so no parts are left billed.

Example
-------
>>> upload = PendingUpload("id-1", (Part(1, '"900150983cd24fb0d6963f7d28e17f72"', 3),))
>>> upload.bytes, upload.etag
(3, 'af5da9f45af7a300e3aded972f8ff687-1')
>>> PendingUpload.from_doc(upload.to_doc()) == upload
True
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import logging
import posixpath
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..errors import CorruptDataError, WriteError
from .fs import checksum, display

log = logging.getLogger("recprep")

_MD5 = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class Part:
    """One uploaded part: its number (from 1), the ETag the store answered, its size and
    the CRC-32C sent with it (base64, as S3 spells it; None: none was sent)."""

    number: int
    etag: str
    size: int
    crc32c: str | None = None


@dataclass(frozen=True)
class PendingUpload:
    """A multipart upload whose parts are all uploaded, not yet completed: what a commit
    needs to complete it, and to check it once completed. ``crc32c``: of the whole
    object, when known (checked where the ETag can't be)."""

    upload_id: str
    parts: tuple[Part, ...]
    crc32c: int | None = None

    @property
    def bytes(self) -> int:
        return sum(p.size for p in self.parts)

    @property
    def etag(self) -> str | None:
        """The ETag S3 gives the object once completed (the MD5 of the parts' MD5s, ``-``
        their number), unquoted; None when a part's ETag isn't an MD5 (SSE-KMS, SSE-C,
        some S3-compatible stores)."""
        digests = [p.etag.strip('"') for p in self.parts]
        if not digests or not all(_MD5.fullmatch(d) for d in digests):
            return None
        joined = b"".join(bytes.fromhex(d) for d in digests)
        return f"{hashlib.md5(joined, usedforsecurity=False).hexdigest()}-{len(digests)}"

    def to_doc(self) -> dict[str, Any]:
        """As JSON data (a commit journal's)."""
        return {"upload_id": self.upload_id, "crc32c": self.crc32c,
                "parts": [dataclasses.astuple(p) for p in self.parts]}

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> PendingUpload:
        """The upload :meth:`to_doc` made; a value of the wrong kind raises ``KeyError``,
        ``TypeError`` or ``ValueError``."""
        parts = tuple(Part(int(n), str(e), int(s), None if c is None else str(c))
                      for n, e, s, c in doc["parts"])
        if [p.number for p in parts] != list(range(1, len(parts) + 1)) or not parts:
            raise ValueError("its parts aren't numbered 1, 2, ...")
        crc = doc.get("crc32c")
        return cls(str(doc["upload_id"]), parts, None if crc is None else int(crc))


def with_etags(fs: Any, directory: str, data: bytes,
               known: Mapping[str, str] | None = None) -> bytes | None:
    """The manifest ``data`` with each shard's ETag, as storage gives it now for the shard
    in ``directory`` (asked several at once; not of the shards in ``known``, name -> the
    ETag the store answered when it completed the object), recorded (and any it recorded
    dropped where storage gives none: a set copied from an object store to a disk); None
    when ``data`` is not a manifest."""
    from .manifest import Manifest

    try:
        manifest = Manifest.from_json(data)
    except CorruptDataError:
        return None

    def etag(name: str) -> str | None:
        if known and name in known:
            return known[name]
        path = posixpath.join(directory, name)
        with contextlib.suppress(Exception):
            fs.invalidate_cache(path)  # a listing taken before the move knows another
        try:
            info = fs.info(path)
        except FileNotFoundError:
            info = {}
        found = info.get("ETag", info.get("etag"))
        return None if found is None else str(found)

    names = [shard.name for shard in manifest.shards]
    asked = sum(not known or n not in known for n in names)
    with ThreadPoolExecutor(max(1, min(64, asked))) as pool:
        etags = list(pool.map(etag, names))
    manifest.shards = [dataclasses.replace(shard, etag=tag)
                       for shard, tag in zip(manifest.shards, etags, strict=True)]
    return manifest.to_json()


def error_code(err: BaseException) -> str | None:
    """The S3 error code behind ``err`` (s3fs raises an ``OSError`` caused by botocore's
    ``ClientError``)."""
    for e in (err, err.__cause__, err.__context__):
        response = getattr(e, "response", None)
        if isinstance(response, dict):
            return response.get("Error", {}).get("Code")
    return None


def put_checked(fs: Any, path: str, data: bytes) -> str | None:
    """Write the small object ``path`` in one ``PutObject``, checked: its MD5 is sent
    (``Content-MD5``: S3 refuses bytes that differ), and the store's answer vouches for
    it when its ETag is the MD5 of ``data`` (moto, which checks no ``Content-MD5``); where
    it isn't (SSE-KMS, SSE-C, some S3-compatible stores) the object is read back. Bytes
    that differ raise ``OSError``. Returns the ETag (None: not answered)."""
    digest = hashlib.md5(data, usedforsecurity=False).digest()
    out = _call(fs, "put_object", path, Body=data,
                ContentMD5=base64.b64encode(digest).decode("ascii"))
    etag = out.get("ETag")
    with contextlib.suppress(Exception):
        fs.invalidate_cache(path)
    if str(etag or "").strip('"') != digest.hex():
        got = bytes(fs.cat_file(path))
        if got != data:
            raise OSError(f"the store holds {len(got)} bytes of MD5 "
                          f"{hashlib.md5(got, usedforsecurity=False).hexdigest()}, the "
                          f"{len(data)} bytes sent have MD5 {digest.hex()}: the bytes changed "
                          "on the way (run it again)")
    return None if etag is None else str(etag)


def _call(fs: Any, method: str, path: str, **kwargs: Any) -> Any:
    bucket, key = fs.split_path(path)[:2]
    return fs.call_s3(method, Bucket=bucket, Key=key, **kwargs)


def _is_complete(fs: Any, path: str, upload: PendingUpload) -> bool:
    """Whether the object at ``path`` is the one ``upload``'s parts make."""
    with contextlib.suppress(Exception):
        fs.invalidate_cache(path)
    try:
        info = fs.info(path)
    except FileNotFoundError:
        return False
    if int(info.get("size", -1)) != upload.bytes:
        return False
    expected = upload.etag
    if expected is not None and str(info.get("ETag", info.get("etag", ""))).strip('"') == expected:
        return True
    if upload.crc32c is None:  # (a store whose ETags aren't MD5s: the bytes tell)
        return False
    with fs.open(path, "rb") as f:
        return checksum(f) == (upload.crc32c, upload.bytes)


def complete(fs: Any, path: str, upload: PendingUpload) -> str | None:
    """Complete ``upload`` of the object ``path`` (idempotent: one a killed commit
    completed is fine when the object there is the one its parts make; otherwise
    :class:`~recprep.errors.WriteError` naming it); returns the object's ETag, as the
    store answered it (None: not answered)."""
    parts = [{"PartNumber": p.number, "ETag": p.etag,
              **({} if p.crc32c is None else {"ChecksumCRC32C": p.crc32c})}
             for p in upload.parts]
    etag = None
    try:
        out = _call(fs, "complete_multipart_upload", path, UploadId=upload.upload_id,
                    MultipartUpload={"Parts": parts})
        etag = out.get("ETag")
    except Exception as err:  # noqa: BLE001 - the object decides
        if error_code(err) != "NoSuchUpload" or not _is_complete(fs, path, upload):
            raise WriteError(display(fs, path), OSError(
                f"its upload {upload.upload_id[:16]}... can't be completed ({err}) and the "
                "object there isn't the one its parts make")) from err
    with contextlib.suppress(Exception):
        fs.invalidate_cache(path)
    return None if etag is None else str(etag)


def resumable(fs: Any, path: str, upload: PendingUpload) -> bool:
    """Whether ``upload`` can still be completed (the store lists it open with exactly
    its parts: ``ListParts``) or was completed into the object at ``path``."""
    try:
        listed = _call(fs, "list_parts", path, UploadId=upload.upload_id, MaxParts=10000)
    except Exception as err:  # noqa: BLE001 - NoSuchUpload: completed, or aborted
        if error_code(err) != "NoSuchUpload":
            raise
        try:
            return _is_complete(fs, path, upload)
        except (OSError, CorruptDataError):
            return False
    found = [(int(p["PartNumber"]), str(p["ETag"]).strip('"'), int(p["Size"]))
             for p in listed.get("Parts", [])]
    return found == [(p.number, p.etag.strip('"'), p.size) for p in upload.parts]


def open_uploads(fs: Any, directory: str) -> list[tuple[str, str]]:
    """``(name, upload_id)`` of every open multipart upload of an object directly in
    ``directory`` (``ListMultipartUploads``)."""
    bucket, key = fs.split_path(directory)[:2]
    prefix = f"{key.rstrip('/')}/" if key else ""
    found: list[tuple[str, str]] = []
    marks: dict[str, str] = {}
    while True:
        out = fs.call_s3("list_multipart_uploads", Bucket=bucket, Prefix=prefix, **marks)
        for upload in out.get("Uploads", []):
            name = str(upload["Key"])[len(prefix):]
            if name and "/" not in name:
                found.append((name, str(upload["UploadId"])))
        if not out.get("IsTruncated"):
            return found
        marks = {"KeyMarker": out.get("NextKeyMarker", ""),
                 "UploadIdMarker": out.get("NextUploadIdMarker", "")}


def objects_under(fs: Any, directory: str) -> list[str]:
    """The paths (``bucket/key``) of every object under ``directory``, by listing its
    prefix (``ListObjectsV2``, one request per 1,000; no ``HeadObject``)."""
    bucket, key = fs.split_path(directory)[:2]
    return [f"{bucket}/{o['Key']}" for page in _pages(fs, bucket, f"{key.rstrip('/')}/")
            for o in page.get("Contents", [])]


def _pages(fs: Any, bucket: str, prefix: str, **params: str) -> Iterator[dict[str, Any]]:
    """The answers of ``ListObjectsV2`` of ``prefix`` in ``bucket`` (with ``params``),
    one per 1,000 keys, each request after the answer before it."""
    marks: dict[str, str] = {}
    while True:
        out = fs.call_s3("list_objects_v2", Bucket=bucket, Prefix=prefix, **params, **marks)
        yield out
        if not out.get("IsTruncated"):
            return
        marks = {"ContinuationToken": out["NextContinuationToken"]}


def move_object(fs: Any, source: str, target: str) -> str | None:
    """Move the object ``source`` to ``target`` on a store that speaks S3: one
    ``CopyObject`` and one ``DeleteObject`` (fsspec's ``mv`` asks about both paths first:
    several round trips more); returns the new object's ETag as the copy answered it
    (None: not answered). A ``source`` that isn't there raises ``FileNotFoundError``; an
    object too large for one ``CopyObject`` (over 5 GB) is moved by ``fs.mv``."""
    bucket, key = fs.split_path(source)[:2]
    try:
        out = _call(fs, "copy_object", target, CopySource={"Bucket": bucket, "Key": key})
    except FileNotFoundError:
        raise
    except Exception as err:  # noqa: BLE001 - botocore's, untranslated
        code = error_code(err)
        if code in ("NoSuchKey", "404"):
            raise FileNotFoundError(source) from err
        if code not in ("InvalidRequest", "EntityTooLarge"):
            raise
        fs.mv(source, target)
        return None
    _call(fs, "delete_object", source)
    for path in (source, target):
        with contextlib.suppress(Exception):
            fs.invalidate_cache(path)
    etag = out.get("CopyObjectResult", {}).get("ETag")
    return None if etag is None else str(etag)


def listed_in(fs: Any, directory: str) -> list[dict[str, Any]]:
    """What ``directory`` holds, as fsspec's ``ls(detail=True)`` gives it (``name``,
    ``size``, ``type``), by listing its prefix with a delimiter (``ListObjectsV2``, one
    request per 1,000; nothing where nothing is: no second listing of the parent, as
    s3fs's ``ls`` makes of a prefix that holds nothing)."""
    bucket, key = fs.split_path(directory)[:2]
    prefix = f"{key.rstrip('/')}/" if key else ""
    found: list[dict[str, Any]] = []
    for out in _pages(fs, bucket, prefix, Delimiter="/"):
        found += [{"name": f"{bucket}/{o['Key']}", "size": int(o.get("Size", 0)),
                   "type": "file"} for o in out.get("Contents", [])
                  if o["Key"] != prefix]
        found += [{"name": f"{bucket}/{p['Prefix'].rstrip('/')}", "size": 0,
                   "type": "directory"} for p in out.get("CommonPrefixes", [])]
    return found


def is_object(fs: Any, path: str) -> bool:
    """Whether an object is called ``path`` (one ``HeadObject``: a prefix that holds
    objects is not one, nor is a bucket)."""
    if not fs.split_path(path)[1]:
        return False
    try:
        _call(fs, "head_object", path)
    except FileNotFoundError:
        return False
    except Exception as err:  # noqa: BLE001 - botocore's, untranslated
        if error_code(err) not in ("404", "NoSuchKey", "NotFound"):
            raise
        return False
    return True


def abort(fs: Any, path: str, upload_id: str) -> None:
    """Abort an upload (one already gone is fine)."""
    try:
        _call(fs, "abort_multipart_upload", path, UploadId=upload_id)
    except Exception as err:  # noqa: BLE001
        if error_code(err) != "NoSuchUpload":
            raise


def abort_unrecorded(
    fs: Any, directory: str, owned: Callable[[str], bool], keep: Collection[str] = (),
    uploads: list[tuple[str, str]] | None = None,
) -> int:
    """Abort every open upload in ``directory`` of a name ``owned`` says is this run's,
    but the upload ids in ``keep`` (those a journal records); returns how many.
    ``uploads``: :func:`open_uploads` of ``directory``, when the caller has it already."""
    gone = 0
    for name, upload_id in open_uploads(fs, directory) if uploads is None else uploads:
        if owned(name) and upload_id not in keep:
            log.info("recprep: aborting an upload nobody records: %s",
                     display(fs, posixpath.join(directory, name)))
            abort(fs, posixpath.join(directory, name), upload_id)
            gone += 1
    return gone
