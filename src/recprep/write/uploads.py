"""Uploads to an object store with several parts in flight, each part's CRC-32C checked by
the store where it checks one.

A file opened for writing on an object store through fsspec (s3fs's ``S3File``) sends a
part when its buffer is full and waits for it: one request in flight per file, and a task
writing its shards round-robin waits for each. Where the filesystem speaks the S3 API on
an event loop (:func:`speaks_s3`: an fsspec async filesystem with ``_call_s3``, as s3fs
is), :class:`PartUpload` is used instead. It looks like a file opened for writing
(``write``, ``close``) but:

* each part (:data:`PART_BYTES`, less when many files are open: see
  :mod:`recprep.write.filepool`), once a byte more was written, goes out at once on
  the filesystem's event loop while the writer goes on; the parts of all the uploads
  sharing one :class:`UploadSlots` are at most ``slots.parts`` in flight (the
  filesystem's ``max_concurrency`` — s3fs's own knob,
  ``storage_options={"max_concurrency": 16}`` — else :data:`PARTS_IN_FLIGHT`): a
  writer that would pass it waits for a part to finish. Memory: ``slots.parts`` parts in
  flight plus one part filling per open file;
* ``close`` sends the last part and completes the upload without waiting (a file smaller
  than a part is one ``PutObject``); :meth:`UploadSlots.wait` waits for every upload and
  raises the first failure as :class:`~recprep.errors.WriteError` naming the file;
* with ``deferred=True`` the upload is left incomplete — invisible to readers and
  listings — once every part is uploaded (even a small file: one part), and
  :attr:`PartUpload.pending` (:class:`~recprep.storage.multipart.PendingUpload`) says
  how to complete it: a commit completes it where a staged file would be moved in;
* a failed upload, or one discarded (:meth:`PartUpload.discard`), is aborted: no parts
  are left behind on the store;
* where the store verifies a CRC-32C on upload (:func:`store_checks`), every part (or the
  whole object) carries its ``x-amz-checksum-crc32c``, so a byte changed on the way is
  refused by the store (``BadDigest``) and becomes a ``WriteError``;
* with ``receipt=True``, the MD5 of every part is computed as it goes out, and compared
  with the ETag the store answers for the object (:func:`md5_etag`), else each part's:
  :attr:`PartUpload.vouched` says whether the store's receipt shows it holds exactly the
  bytes sent (not where no ETag is an MD5: then the caller reads the object back).

The output's bytes are what ``fs.open(path, "wb")`` would have written: only how they
travel changes. Part ``k`` (from 1) is ``part_bytes << ((k - 1) // 1000)`` bytes: a part
size that doubles every 1,000 parts keeps any object under S3's 10,000 parts.

Example
-------
>>> import fsspec
>>> speaks_s3(fsspec.filesystem("memory"))
False
>>> part_size(8 << 20, 1) == 8 << 20, part_size(8 << 20, 1001) == 16 << 20
(True, True)
"""

from __future__ import annotations

import asyncio
import base64
import collections
import concurrent.futures as cf
import contextlib
import hashlib
import logging
import posixpath
import threading
import uuid
import weakref
from collections.abc import Iterator
from typing import Any

import google_crc32c

from ..errors import WriteError
from ..storage.fs import display
from ..storage.multipart import Part, PendingUpload
from ..storage.multipart import error_code as _code

__all__ = ["PARTS_IN_FLIGHT", "PART_BYTES", "PROBE_PREFIX", "SINGLE_PUT_BYTES", "PartUpload",
           "UploadSlots", "md5_etag", "open_upload", "part_size", "settle_probes", "speaks_s3",
           "store_checks"]

log = logging.getLogger("recprep")

PART_BYTES = 8 << 20
"""The size of an upload's parts (the first 1,000; then it doubles every 1,000 parts)."""
#: parts in flight at once when the filesystem doesn't say (s3fs: ``max_concurrency``)
PARTS_IN_FLIGHT = 8
#: a file of known size up to this goes out in one ``PutObject``; larger, in parts
SINGLE_PUT_BYTES = 32 << 20
#: what :func:`store_checks` answers: the store checks a CRC-32C sent with an upload and
#: refuses a wrong one; it accepts the header and ignores it; it refuses the header
VERIFIED, IGNORED, UNSUPPORTED = "verified", "ignored", "unsupported"
#: the error codes an S3 store answers a wrong ``x-amz-checksum-*`` with
_DIGEST_ERRORS = frozenset({"BadDigest", "InvalidDigest", "XAmzContentChecksumMismatch"})
_PROBE = b"recprep: does this store check x-amz-checksum-crc32c?"
#: how :func:`store_checks`'s probe objects are named (hidden: no listing shows them)
PROBE_PREFIX = ".recprep-cp-probe-"
_checks: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()
_checks_lock = threading.Lock()
_removals: list[cf.Future[Any]] = []  # the probes' deletes under way


def settle_probes() -> None:
    """Wait for the removal of the probes :func:`store_checks` made (it doesn't wait)."""
    with _checks_lock:
        removals = _removals[:]
        del _removals[:]
    for removal in removals:
        with contextlib.suppress(Exception):  # (its probe is hidden: harmless if left)
            removal.result(timeout=60)


def speaks_s3(fs: Any) -> bool:
    """Whether ``fs`` is an fsspec filesystem that calls the S3 API on an event loop
    (``_call_s3`` coroutines, a running ``loop``): what :class:`PartUpload` needs."""
    call = getattr(fs, "_call_s3", None)
    return (asyncio.iscoroutinefunction(call) and getattr(fs, "loop", None) is not None
            and not getattr(fs, "asynchronous", False))


def part_size(part_bytes: int, number: int) -> int:
    """The size of part ``number`` (from 1) of an upload whose first parts are
    ``part_bytes``: doubled every 1,000 parts (S3 allows 10,000)."""
    return part_bytes << min((number - 1) // 1000, 20)


def md5_etag(digests: list[bytes], multipart: bool) -> str:
    """The ETag S3 gives an object uploaded as parts of these MD5 ``digests`` (in order),
    unquoted: a single ``PutObject``, the hex MD5 of its bytes; a multipart upload, the
    hex MD5 of the parts' digests put together, ``-`` the number of parts.

    >>> import hashlib
    >>> md5_etag([hashlib.md5(b"abc").digest()], multipart=False)
    '900150983cd24fb0d6963f7d28e17f72'
    >>> md5_etag([hashlib.md5(b"abc").digest()], multipart=True)[-2:]
    '-1'
    """
    if not multipart:
        return digests[0].hex()
    joined = hashlib.md5(b"".join(digests), usedforsecurity=False).hexdigest()
    return f"{joined}-{len(digests)}"


def _md5(data: bytes) -> bytes:
    return hashlib.md5(data, usedforsecurity=False).digest()


def _b64(crc: int) -> str:
    return base64.b64encode(crc.to_bytes(4, "big")).decode("ascii")


def store_checks(fs: Any, path: str) -> str:
    """Whether the store under ``path`` (a directory to write into) checks the CRC-32C
    sent with an upload: :data:`VERIFIED` (a wrong one is refused: sending it makes the
    store verify every byte it received), :data:`IGNORED` (accepted, not checked: moto,
    or a store that drops the header) or :data:`UNSUPPORTED` (the header itself is
    refused, or ``fs`` doesn't speak S3: nothing is sent).

    Found out once per filesystem and bucket in a process, by one ``PutObject`` of a
    small object with a deliberately wrong ``x-amz-checksum-crc32c`` into ``path``: a store
    that checks refuses it (``BadDigest``) and stores nothing; one that doesn't stores it,
    and the object is removed (the request sent, not waited for: :func:`settle_probes`).
    A bucket that doesn't exist raises ``FileNotFoundError`` (nothing is remembered: ask
    again once it is made).
    """
    if not speaks_s3(fs):
        return UNSUPPORTED
    bucket = fs.split_path(path)[0]
    with _checks_lock:
        known = _checks.setdefault(fs, {}).get(bucket)
    if known is not None:
        return known
    probe = posixpath.join(path, f"{PROBE_PREFIX}{uuid.uuid4().hex[:12]}")
    wrong = google_crc32c.value(_PROBE) ^ 0xFFFFFFFF
    key = fs.split_path(probe)[1]
    try:
        fs.call_s3("put_object", Bucket=bucket, Key=key, Body=_PROBE, ChecksumCRC32C=_b64(wrong))
    except FileNotFoundError:  # no bucket (yet): no answer
        raise
    except Exception as err:  # noqa: BLE001 - the answer is the capability
        found = VERIFIED if _code(err) in _DIGEST_ERRORS else UNSUPPORTED
        if found == UNSUPPORTED:
            log.info("recprep: %s refused a CRC-32C with an upload (%s); uploads there go "
                     "without one", display(fs, path), err)
    else:
        found = IGNORED
        removal = asyncio.run_coroutine_threadsafe(  # not waited for here: settle_probes()
            fs._call_s3("delete_object", Bucket=bucket, Key=key), fs.loop)
        with _checks_lock:
            _removals.append(removal)
    log.debug("recprep: the store of %s: checksums on upload %s", display(fs, path), found)
    with _checks_lock:
        _checks.setdefault(fs, {})[bucket] = found
    return found


class UploadSlots:
    """The parts in flight of the uploads sharing it, at most ``parts`` at once, and the
    uploads to wait for. One per write task (or ``recprep cp`` run); thread-safe."""

    def __init__(self, fs: Any, parts: int | None = None) -> None:
        default = getattr(fs, "max_concurrency", None)
        if parts is None:
            parts = default if isinstance(default, int) and default > 0 else PARTS_IN_FLIGHT
        self.parts = max(1, parts)
        self._free = threading.Semaphore(self.parts)
        self._lock = threading.Lock()
        self.uploads: list[PartUpload] = []
        self.most_in_flight = 0  # the most parts that were in flight at once
        self._in_flight = 0

    def take(self) -> None:
        self._free.acquire()
        with self._lock:
            self._in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self._in_flight)

    def give(self) -> None:
        with self._lock:
            self._in_flight -= 1
        self._free.release()

    def wait(self) -> None:
        """Wait for every upload closed so far (those still being written stay open);
        the first failure raises :class:`~recprep.errors.WriteError` (naming its file)
        once all are done."""
        with self._lock:
            uploads = [u for u in self.uploads if u.closed]
            self.uploads = [u for u in self.uploads if not u.closed]
        first: BaseException | None = None
        for upload in uploads:
            try:
                upload.result()
            except WriteError as err:
                first = first or err
        if first is not None:
            raise first

    def discard(self) -> None:
        """Abort every upload not yet complete (a failure elsewhere: nothing is kept)."""
        with self._lock:
            uploads, self.uploads = self.uploads, []
        for upload in uploads:
            upload.discard()


class PartUpload:
    """One object uploaded in parts, several in flight (see the module docs).

    ``checksums``: send each part's CRC-32C for the store to check. ``receipt``: compute
    each part's MD5, and once complete set :attr:`vouched` to whether the store's ETag is
    the one S3 gives exactly the bytes sent (``deferred``: whether each part's ETag is the
    MD5 of that part). ``deferred``: leave the upload incomplete, :attr:`pending` set.
    """

    def __init__(self, fs: Any, path: str, slots: UploadSlots, *,
                 part_bytes: int = PART_BYTES, checksums: bool = False,
                 receipt: bool = False, deferred: bool = False) -> None:
        self.fs, self.path, self.slots = fs, path, slots
        self.bucket, self.key = fs.split_path(path)[:2]
        self.part_bytes = max(1, part_bytes)
        self.checksums = checksums
        self.receipt = receipt
        self._md5s: list[bytes] = []  # each part's, in order (with ``receipt``)
        self.etag: str | None = None  # the store's, once complete (a receipt, if asked)
        #: the store's ETag is the MD5 receipt of exactly the bytes sent (once complete)
        self.vouched = False
        self.deferred = deferred
        #: with ``deferred``, once every part is uploaded: how to complete the upload
        self.pending: PendingUpload | None = None
        self._sizes: list[int] = []
        self.shown = display(fs, path)
        self._chunks: collections.deque[memoryview] = collections.deque()  # written, unsent
        self._filled = 0  # their bytes
        self._parts: list[cf.Future[dict[str, Any]]] = []
        self._upload_id: asyncio.Future[str] | None = None  # (on the loop)
        self._done: cf.Future[Any] | None = None
        self._begun: cf.Future[str] | None = None  # (:meth:`begin`'s)
        self._error: BaseException | None = None
        self.closed = False
        self.size = 0
        with slots._lock:
            slots.uploads.append(self)

    # -- the writer's side ---------------------------------------------------------------

    def write(self, data: bytes) -> int:
        if self.closed:
            raise ValueError(f"write to closed upload {self.shown}")
        self._raise_failure()
        if size := len(data):  # kept as written (bytes aren't copied until a part is made)
            self._chunks.append(memoryview(data if isinstance(data, bytes) else bytes(data)))
        self._filled += size
        self.size += size
        # a part goes once it is full (deferred: its upload is multipart anyway), else
        # once a byte more came (a file of one part's size stays one PutObject)
        more = 0 if self.deferred else 1
        while self._filled >= (part := part_size(self.part_bytes, len(self._parts) + 1)) + more:
            self._send(self._take(part))
        return size

    def _take(self, size: int) -> bytes:
        """The first ``size`` bytes written and not yet sent, in one bytes object (one
        copy of them, none when a write was exactly that)."""
        out: list[memoryview] = []
        got = 0
        while got < size and self._chunks:
            chunk = self._chunks[0]
            if got + len(chunk) <= size:
                out.append(self._chunks.popleft())
                got += len(chunk)
            else:
                out.append(chunk[:size - got])
                self._chunks[0] = chunk[size - got:]
                got = size
        self._filled -= got
        if len(out) == 1 and isinstance(out[0].obj, bytes) and len(out[0]) == len(out[0].obj):
            return out[0].obj
        return b"".join(out)

    def close(self) -> None:
        """Send what is left and complete the upload, without waiting for it."""
        if self.closed:
            return
        self.closed = True
        self._raise_failure()
        if self.deferred:  # every part out (at least one), the upload left open
            if self._filled or not self._parts:
                self._send(self._take(self._filled))
            self._done = self._submit(self._uploaded())
            return
        if not self._parts:  # one request: the whole object
            data = self._take(self._filled)
            if self.receipt:
                self._md5s.append(_md5(data))
            self.slots.take()
            self._done = self._submit(self._put(data))
            self._done.add_done_callback(lambda _: self.slots.give())
            return
        if self._filled:
            self._send(self._take(self._filled))
        self._done = self._submit(self._complete())

    def begin(self) -> None:
        """Ask for the multipart upload now, while its first part is written (not one more
        round trip before it): for an upload sure to be one (``deferred``)."""
        self._begun = self._submit(self._id())

    def result(self) -> None:
        """Wait for the upload; a failure raises :class:`~recprep.errors.WriteError`."""
        if self._done is None:
            self.close()
        assert self._done is not None
        try:
            done = self._done.result()
        except Exception as err:  # an object store's errors aren't all OSErrors
            self._error = self._error or err
            self.discard()
            raise self._failure() from err
        if self.deferred:
            self._pend(done)
            return
        if self.receipt and self.etag is not None:  # the object's ETag, or each part's
            expected = md5_etag(self._md5s, multipart=bool(self._parts))
            parts = [str(p.result()["ETag"]).strip('"') for p in self._parts]
            if self.etag.strip('"') != expected:  # no receipt: not kept (ask the store)
                log.debug("recprep: %s: ETag %s, not %s", self.shown, self.etag, expected)
                self.etag = None
            self.vouched = self.etag is not None or (
                bool(parts) and parts == [d.hex() for d in self._md5s])
        with contextlib.suppress(Exception):
            self.fs.invalidate_cache(self.path)

    def _pend(self, done: tuple[str, list[dict[str, Any]]]) -> None:
        upload_id, parts = done
        self.pending = PendingUpload(upload_id, tuple(
            Part(p["PartNumber"], str(p["ETag"]), size, p.get("ChecksumCRC32C"))
            for p, size in zip(parts, self._sizes, strict=True)))
        if self.receipt:
            self.vouched = [p.etag.strip('"') for p in self.pending.parts] == [
                d.hex() for d in self._md5s]

    def discard(self) -> None:
        """Abort the upload (after the parts in flight end): no part stays on the store;
        never raises."""
        self.closed = True
        for future in [*self._parts, *(f for f in (self._done, self._begun) if f)]:
            with contextlib.suppress(Exception):
                future.result()
        if self._upload_id is None:
            return
        upload_id, self._upload_id = self._upload_id, None
        with contextlib.suppress(Exception):
            self._submit(self._abort(upload_id)).result()

    # -- on the loop ---------------------------------------------------------------------

    def _submit(self, coro: Any) -> cf.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.fs.loop)

    def _send(self, data: bytes) -> None:
        number = len(self._parts) + 1
        crc = google_crc32c.value(data) if self.checksums else None
        if self.receipt:
            self._md5s.append(_md5(data))
        self._sizes.append(len(data))
        self.slots.take()
        future = self._submit(self._part(number, data, crc))
        future.add_done_callback(self._part_done)
        self._parts.append(future)

    def _part_done(self, future: cf.Future[Any]) -> None:
        self.slots.give()
        if not future.cancelled() and future.exception() is not None and self._error is None:
            self._error = future.exception()

    def _raise_failure(self) -> None:
        if self._error is not None:
            self.discard()
            raise self._failure() from self._error

    def _failure(self) -> WriteError:
        err = self._error
        assert err is not None
        if (code := _code(err)) in _DIGEST_ERRORS:
            err = OSError(f"the store refused the bytes it received: their checksum isn't "
                          f"the CRC-32C recprep computed ({code}: {err}); they changed on "
                          "the way (run it again)")
        return WriteError(self.shown, err)

    async def _create(self) -> str:
        kw = {"ChecksumAlgorithm": "CRC32C"} if self.checksums else {}
        out = await self.fs._call_s3("create_multipart_upload", Bucket=self.bucket,
                                     Key=self.key, **kw)
        return str(out["UploadId"])

    async def _id(self) -> str:
        if self._upload_id is None:
            self._upload_id = asyncio.ensure_future(self._create())
        return await self._upload_id

    async def _part(self, number: int, data: bytes, crc: int | None) -> dict[str, Any]:
        upload_id = await self._id()
        kw = {} if crc is None else {"ChecksumCRC32C": _b64(crc)}
        out = await self.fs._call_s3("upload_part", Bucket=self.bucket, Key=self.key,
                                     UploadId=upload_id, PartNumber=number, Body=data, **kw)
        return {"PartNumber": number, "ETag": out["ETag"], **kw}

    async def _put(self, data: bytes) -> None:
        kw = {"ChecksumCRC32C": _b64(google_crc32c.value(data))} if self.checksums else {}
        out = await self.fs._call_s3("put_object", Bucket=self.bucket, Key=self.key,
                                     Body=data, **kw)
        self.etag = out.get("ETag")

    async def _complete(self) -> None:
        parts = await asyncio.gather(*(asyncio.wrap_future(p) for p in self._parts))
        upload_id = await self._id()
        out = await self.fs._call_s3("complete_multipart_upload", Bucket=self.bucket,
                                     Key=self.key, UploadId=upload_id,
                                     MultipartUpload={"Parts": list(parts)})
        self.etag = out.get("ETag")
        self._upload_id = None  # complete: nothing to abort

    async def _uploaded(self) -> tuple[str, list[dict[str, Any]]]:
        parts = await asyncio.gather(*(asyncio.wrap_future(p) for p in self._parts))
        return await self._id(), list(parts)

    async def _abort(self, upload_id: asyncio.Future[str]) -> None:
        with contextlib.suppress(Exception):
            await self.fs._call_s3("abort_multipart_upload", Bucket=self.bucket,
                                   Key=self.key, UploadId=await upload_id)


@contextlib.contextmanager
def open_upload(fs: Any, path: str, slots: UploadSlots | None = None,
                part_bytes: int = PART_BYTES, *, receipt: bool = False,
                deferred: bool = False) -> Iterator[Any]:
    """``path`` opened for writing: a :class:`PartUpload` (complete when the block ends —
    with ``deferred``, every part uploaded and the upload left open, its
    :attr:`~PartUpload.pending` set —, aborted if it raises; ``receipt``: its
    :attr:`~PartUpload.vouched` then says whether the store's ETag vouches for the bytes)
    where ``fs`` speaks S3, else ``fs.open(path, "wb")`` (``deferred`` is then ignored).

    >>> import fsspec
    >>> fs = fsspec.filesystem("memory")
    >>> with open_upload(fs, "/doc/uploads/x") as out:
    ...     _ = out.write(b"abc")
    >>> fs.cat_file("/doc/uploads/x")
    b'abc'
    """
    if not speaks_s3(fs):
        with fs.open(path, "wb") as out:
            yield out
        return
    slots = slots if slots is not None else UploadSlots(fs)
    checksums = store_checks(fs, posixpath.dirname(path)) == VERIFIED
    upload = PartUpload(fs, path, slots, part_bytes=part_bytes, checksums=checksums,
                        receipt=receipt, deferred=deferred)
    if deferred:
        upload.begin()
    try:
        yield upload
        upload.result()
    except BaseException:
        upload.discard()
        raise
