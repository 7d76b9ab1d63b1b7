"""Records of a chunk and what a walk through a file yields: :class:`Records`,
:class:`Chunk` and :class:`Gap` — the types every layer above the base passes around.

>>> records = Records(b"..ab..cde", [2, 6], [4, 9])
>>> Chunk(0, records).records[1], len(Gap(3))
(b'cde', 3)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np

__all__ = ["Chunk", "Gap", "PayloadBuffer", "Records", "nbytes"]

#: a chunk's payload: ``bytes``, or a view of a scratch buffer (:mod:`recprep._core.scratch`)
PayloadBuffer = bytes | bytearray | memoryview


class Records(Sequence[bytes]):
    """The records of a chunk as spans of its payload: record ``i`` is
    ``payload[starts[i]:ends[i]]``, cut out only when asked for.

    A sequence of ``bytes`` like a list of them (slicing gives ``Records``); decoders of
    whole chunks read :attr:`payload`, :attr:`starts` and :attr:`ends` instead, so that
    no record is copied out on its own.

    The payload is ``bytes``, or a ``memoryview`` of a reader's scratch buffer
    (:mod:`recprep._core.scratch`), whose memory is used again once nothing refers to
    it: records cut out of one are ``bytes`` all the same (the payload made ``bytes``
    first, once: :meth:`payload_bytes`), so that no record handed on keeps it.

    >>> records = Records(b"..ab..cde", [2, 6], [4, 9])
    >>> len(records), records[1], list(records[:1]), records.nbytes
    (2, b'cde', [b'ab'], 5)
    >>> Records(memoryview(b"..ab..cde"), [2, 6], [4, 9])[1]
    b'cde'
    """

    __slots__ = ("_list", "_nbytes", "ends", "payload", "starts")

    def __init__(self, payload: PayloadBuffer, starts: Sequence[int] | np.ndarray,
                 ends: Sequence[int] | np.ndarray, nbytes: int | None = None) -> None:
        self.payload = payload
        self.starts = np.asarray(starts, dtype=np.int64)
        self.ends = np.asarray(ends, dtype=np.int64)
        self._list: list[bytes] | None = None
        self._nbytes = nbytes  # the records' bytes together, where the caller knows

    def __len__(self) -> int:
        return len(self.ends)

    @property
    def nbytes(self) -> int:
        """The records' bytes, together."""
        if self._nbytes is None:
            self._nbytes = int((self.ends - self.starts).sum())
        return self._nbytes

    def payload_bytes(self) -> bytes:
        """The payload as ``bytes`` (a scratch buffer's copied out, once, and let go)."""
        payload = self.payload
        if type(payload) is not bytes:
            payload = self.payload = bytes(payload)
        return payload

    def list(self) -> list[bytes]:
        """The records as ``bytes`` objects (cut out once)."""
        if self._list is None:
            self._list = list(map(self.payload_bytes().__getitem__,
                                  map(slice, self.starts.tolist(), self.ends.tolist())))
        return self._list

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.list())

    @overload
    def __getitem__(self, index: int) -> bytes: ...

    @overload
    def __getitem__(self, index: slice) -> Records: ...

    def __getitem__(self, index: int | slice) -> bytes | Records:
        if isinstance(index, slice):
            return Records(self.payload, self.starts[index], self.ends[index])
        if self._list is not None:
            return self._list[index]
        start, end = int(self.starts[index]), int(self.ends[index])
        payload = self.payload
        return payload[start:end] if type(payload) is bytes else bytes(payload[start:end])

    def __reduce__(self) -> tuple[type[Records], tuple[Any, ...]]:
        return Records, (self.payload_bytes(), self.starts, self.ends, self._nbytes)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Records, list, tuple)):
            return self.list() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Records({self.list()!r})"


def nbytes(records: Sequence[bytes]) -> int:
    """The bytes of ``records`` together (a list of them, or :class:`Records`).

    >>> nbytes([b"ab", b"c"])
    3
    """
    if isinstance(records, Records):
        return records.nbytes
    return sum(map(len, records))


@dataclass
class Chunk:
    """The records of one chunk and where the chunk starts in its file: a list of
    ``bytes``, or :class:`Records` (spans of the chunk's payload)."""

    offset: int
    records: Sequence[bytes] = field(default_factory=list)


@dataclass(frozen=True)
class Gap:
    """``n`` consecutive records of a file lost to damage, in a stream of chunks (or of
    blocks of instances) that a reader skipped with ``on_corrupt="skip"``: nothing to
    hand out, but they hold their places, so that every record after them keeps its
    number (see ``docs/reliability.md``).

    >>> len(Gap(3))
    3
    """

    n: int

    def __len__(self) -> int:
        return self.n
