"""Counting the requests sent to S3: :func:`s3_requests`.

Every request to S3 from this process — s3fs's (a filesystem method, an open file's
range read, an upload's part, all through ``S3FileSystem._call_s3``) and the streaming
fetcher's own range GETs (``storage/rangeget.py``, on s3fs's client) — is an API call of
an aiobotocore client, ``AioBaseClient._make_api_call``. :func:`s3_requests` wraps that
method for the whole process while the ``with`` block runs and counts each call by its
S3 operation name (``HeadObject``, ``ListObjectsV2``, ``GetObject``, ``PutObject``,
``CopyObject``, ``DeleteObject``...), whichever thread, filesystem or client sends it. A
request that botocore retries on its own is counted once; one s3fs or the fetcher tries
again is counted again (it is another call).

Use it as::

    with s3_requests() as sent:
        RecordIO(f"{s3_url}/set/p", storage_options=s3.storage_options)
    assert sent == {"GetObject": 1}, sent.log

``sent`` is a :class:`Requests`: a ``Counter`` of operation names, with :attr:`~Requests.log`
listing each request as ``(operation, "bucket/key")`` in the order sent (for a failing
assertion's message). ``bucket=`` counts only the requests to one bucket (an ``s3://``
URL or a bare name), so a test's own set-up on another bucket doesn't count.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Requests", "operation_name", "s3_requests"]


class Requests(Counter):
    """Requests sent, by S3 operation name; :attr:`log` has each one in order."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, str]] = []

    def keys_of(self, operation: str) -> list[str]:
        """The ``bucket/key`` of each ``operation`` request, in order.

        >>> sent = Requests()
        >>> sent.note("HeadObject", "b/k")
        >>> sent.keys_of("HeadObject"), sent.keys_of("GetObject")
        (['b/k'], [])
        """
        return [key for op, key in self.log if op == operation]

    def note(self, operation: str, key: str) -> None:
        """Count one request."""
        self[operation] += 1
        self.log.append((operation, key))


def operation_name(method: str) -> str:
    """The S3 operation name of a botocore client method.

    >>> operation_name("list_objects_v2"), operation_name("head_object")
    ('ListObjectsV2', 'HeadObject')
    """
    return "".join(part[:1].upper() + part[1:] for part in method.split("_"))


@contextmanager
def s3_requests(bucket: str | None = None) -> Iterator[Requests]:
    """Count every S3 request this process sends while the block runs (to ``bucket``
    only, when given); see the module docstring."""
    from aiobotocore.client import AioBaseClient

    only = None if bucket is None else bucket.removeprefix("s3://").strip("/")
    sent = Requests()
    lock = threading.Lock()
    original = AioBaseClient._make_api_call

    async def counted(self: Any, operation: str, params: dict[str, Any]) -> Any:
        target = params.get("Bucket")
        if only is None or target == only:
            key = params.get("Key", params.get("Prefix", ""))
            with lock:
                sent.note(operation, f"{target}/{key}")
        return await original(self, operation, params)

    AioBaseClient._make_api_call = counted  # type: ignore[method-assign]
    try:
        yield sent
    finally:
        AioBaseClient._make_api_call = original  # type: ignore[method-assign]
