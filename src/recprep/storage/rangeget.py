"""Range requests to a filesystem, one attempt each: what :mod:`recprep.storage.fetch`
retries, paces and counts.

A :class:`RangeGetter` turns "bytes ``[start, end)`` of ``path``" into an async iterator
of pieces as they arrive. It makes **one** attempt: every retry is the fetcher's, so it
can back off, resume at the byte where a transfer stopped and count what happened.
:func:`range_getter` picks the getter a filesystem supports:

* :class:`S3Ranges` for s3fs: its own ``get_object`` calls with ``Range`` (and
  ``If-Match`` when the object's ETag is pinned), the body read in pieces as it streams
  in, through a client of its own with botocore's and s3fs's retries off and a
  connection pool as large as the requests the fetcher may keep in flight (made from the
  filesystem's botocore session, once it has one: the service model and credentials
  are not loaded twice);
* :class:`AsyncRanges` for any other async fsspec filesystem (GCS, Azure, HTTP): its
  ``_cat_file(path, start, end)``, the range arriving whole;
* :class:`SyncRanges` for the rest: ``cat_file`` in a worker thread.

:func:`failure_of` says what a failure was: throttling, worth a retry, the object changed,
or final.

Example
-------
>>> import asyncio, fsspec
>>> fs = fsspec.filesystem("memory")
>>> fs.pipe_file("/doc/rangeget/x", b"0123456789")
>>> getter = range_getter(fs, max_requests=2)
>>> async def fetch():
...     return b"".join([piece async for piece in getter.get("/doc/rangeget/x", 2, 6)])
>>> asyncio.run(fetch())
b'2345'
>>> failure_of(ConnectionResetError("peer reset"))
'retry'
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

__all__ = ["AsyncRanges", "Failure", "ObjectChangedError", "RangeGetter", "S3Ranges",
           "SyncRanges", "failure_of", "range_getter", "status_of"]

#: bytes read from a streaming body at a time: the unit in which a range fills
PIECE_BYTES = 256 << 10



class ObjectChangedError(OSError):
    """An object read under a pinned ETag (``If-Match``) is no longer that object: the
    store answered 412 Precondition Failed. Readers turn it into
    :class:`~recprep.errors.SetChangedError`."""

    def __init__(self, path: str, etag: str) -> None:
        super().__init__(f"{path} is no longer the object with ETag {etag}")
        self.path = path
        self.etag = etag

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.path, self.etag))


Failure = Literal["throttled", "retry", "changed", "final"]

_THROTTLE_CODES = frozenset({"SlowDown", "Throttling", "ThrottlingException", "TooManyRequests",
                             "RequestLimitExceeded", "RequestThrottled", "429"})
_CHANGED_CODES = frozenset({"PreconditionFailed", "412"})
_FINAL_CODES = frozenset({"NoSuchKey", "NoSuchBucket", "AccessDenied", "InvalidRange",
                          "InvalidAccessKeyId", "SignatureDoesNotMatch", "404", "403", "416"})


def _response_of(err: BaseException) -> tuple[str, int | None]:
    """A botocore ClientError's code and HTTP status ("", None for anything else)."""
    response = getattr(err, "response", None)
    if not isinstance(response, dict):
        return "", None
    code = str(response.get("Error", {}).get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code, status if isinstance(status, int) else None


def failure_of(err: BaseException) -> Failure:
    """What a failed attempt was: ``"throttled"`` (503 SlowDown, 429: back off and slow
    down), ``"retry"`` (5xx, dropped connections, short bodies, timeouts),
    ``"changed"`` (412: the pinned object is another) or ``"final"`` (missing, denied,
    anything else)."""
    if isinstance(err, ObjectChangedError):
        return "changed"
    if isinstance(err, (FileNotFoundError, PermissionError, IsADirectoryError)):
        return "final"
    code, status = _response_of(err)
    if code in _THROTTLE_CODES or status in (429,) or (status == 503 and "Slow" in code):
        return "throttled"
    if code in _CHANGED_CODES or status == 412:
        return "changed"
    if code in _FINAL_CODES:
        return "final"
    if status is not None:
        return "retry" if status >= 500 or status == 408 else "final"
    if code:
        return "retry" if code.startswith(("Internal", "ServiceUnavailable", "5")) else "final"
    status = getattr(err, "status", None)  # aiohttp's ClientResponseError
    if isinstance(status, int):
        if status == 429:
            return "throttled"
        return "retry" if status >= 500 or status == 408 else "final"
    if isinstance(err, (ConnectionError, TimeoutError, asyncio.TimeoutError, EOFError)):
        return "retry"
    names = {k.__name__ for k in type(err).__mro__}
    if names & {"ClientError", "ClientPayloadError", "ServerDisconnectedError",
                "EndpointConnectionError", "ConnectionClosedError", "ReadTimeoutError",
                "ResponseStreamingError", "IncompleteReadError", "ProtocolError",
                "HTTPClientError", "ContentLengthError"}:
        return "retry"  # aiohttp/botocore transport failures
    if isinstance(err, OSError):
        return "retry"
    return "final"


def status_of(err: BaseException) -> str:
    """A failure in a few words, for messages: ``"503 SlowDown"``, ``"ConnectionResetError:
    peer reset"``."""
    code, status = _response_of(err)
    if code or status:
        return " ".join(str(x) for x in (status, code) if x)
    text = str(err)
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


class RangeGetter:
    """Fetches byte ranges of one filesystem's files, one attempt per call."""

    #: the event loop the getter's coroutines run on
    loop: asyncio.AbstractEventLoop
    #: whether a range arrives in pieces (else whole, once its client has buffered it)
    streams = False

    def get(self, path: str, start: int, end: int, etag: str | None = None
            ) -> AsyncIterator[bytes]:
        """Bytes ``[start, end)`` of ``path``, in pieces as they arrive (fewer than asked
        when the transfer stopped short: the caller resumes). With ``etag``, an object
        that is no longer that one raises :class:`ObjectChangedError`."""
        raise NotImplementedError

    def warm(self) -> None:
        """Start setting up what the first request needs, in the background."""

    def close(self) -> None:
        """Let go of connections and threads."""


class S3Ranges(RangeGetter):
    """Range GETs through an s3fs filesystem's settings, streamed, with no retries of its
    own (see the module docstring)."""

    streams = True

    def __init__(self, fs: Any, max_requests: int) -> None:
        options = dict(getattr(fs, "storage_options", {}) or {})
        config = dict(options.pop("config_kwargs", None) or {})
        config["retries"] = {"total_max_attempts": 1, "mode": "standard"}
        config["max_pool_connections"] = max(max_requests, 10)
        options.update(config_kwargs=config, skip_instance_cache=True)
        options.pop("asynchronous", None)
        options.pop("loop", None)
        session = getattr(fs, "session", None)
        if session is not None and "session" not in options:
            # botocore's loaded service model and resolved credentials, shared: a client
            # made from a fresh session parses them again (a few hundred ms of CPU)
            options["session"] = session
        self.fs = type(fs)(**options)
        self.fs.retries = 1  # s3fs's own retry loop: one attempt
        self.loop = self.fs.loop

    def warm(self) -> None:
        asyncio.run_coroutine_threadsafe(self.fs.set_session(), self.loop)

    async def get(self, path: str, start: int, end: int, etag: str | None = None
                  ) -> AsyncIterator[bytes]:
        fs = self.fs
        bucket, key, version = fs.split_path(path)
        s3 = await fs.set_session()
        kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key,
                                  "Range": f"bytes={start}-{end - 1}"}
        if version:
            kwargs["VersionId"] = version
        if etag:
            kwargs["IfMatch"] = etag
        extra = getattr(fs, "_get_s3_method_kwargs", None)
        if extra is not None:
            kwargs = extra(s3.get_object, **kwargs)
        try:
            response = await s3.get_object(**kwargs)
        except Exception as err:
            code, status = _response_of(err)
            if etag and failure_of(err) == "changed":
                raise ObjectChangedError(path, etag) from err
            if code in ("NoSuchKey", "NoSuchBucket") or status == 404:
                raise FileNotFoundError(path) from err
            if code == "AccessDenied" or status == 403:
                raise PermissionError(f"{path}: access denied") from err
            raise
        body = response["Body"]
        try:
            while True:
                piece = await body.read(PIECE_BYTES)
                if not piece:
                    return
                yield piece
        finally:
            body.close()

    def close(self) -> None:
        pass  # the client is closed with its filesystem, by s3fs


class AsyncRanges(RangeGetter):
    """``_cat_file`` of an async fsspec filesystem: each range arrives whole."""

    def __init__(self, fs: Any) -> None:
        self.fs = fs
        self.loop = fs.loop

    async def get(self, path: str, start: int, end: int, etag: str | None = None
                  ) -> AsyncIterator[bytes]:
        yield await self.fs._cat_file(path, start=start, end=end)


class SyncRanges(RangeGetter):
    """``cat_file`` of a filesystem without async methods, in worker threads."""

    def __init__(self, fs: Any, max_requests: int) -> None:
        from fsspec.asyn import get_loop

        self.fs = fs
        self.loop = get_loop()
        self._pool = ThreadPoolExecutor(max_requests, thread_name_prefix="recprep-range")

    async def get(self, path: str, start: int, end: int, etag: str | None = None
                  ) -> AsyncIterator[bytes]:
        call = functools.partial(self.fs.cat_file, path, start=start, end=end)
        yield await asyncio.get_running_loop().run_in_executor(self._pool, call)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def range_getter(fs: Any, max_requests: int) -> RangeGetter:
    """The getter ``fs`` supports: streamed S3 GETs where it has s3fs's client calls,
    async whole ranges where it is async, else ranges in threads."""
    if callable(getattr(fs, "_call_s3", None)) and callable(getattr(fs, "split_path", None)):
        return S3Ranges(fs, max_requests)
    if getattr(fs, "async_impl", False):
        return AsyncRanges(fs)
    return SyncRanges(fs, max_requests)
