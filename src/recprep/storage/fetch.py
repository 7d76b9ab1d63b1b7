"""Streaming reads from object stores: many range requests in flight, bounded memory.

(Being built for issue 24.)
"""

from __future__ import annotations

__all__ = ["ObjectChangedError"]


class ObjectChangedError(OSError):
    """An object read under a pinned ETag (``If-Match``) is no longer that object: the
    store answered 412 Precondition Failed. Readers turn it into
    :class:`~recprep.errors.SetChangedError`."""

    def __init__(self, path: str, etag: str) -> None:
        super().__init__(f"{path} is no longer the object with ETag {etag}")
        self.path = path
        self.etag = etag
