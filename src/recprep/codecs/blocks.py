"""The records of a block of rows, made at once: as ``bytes``, or placed into a buffer.

A codec that encodes a block of rows given as columns
(:meth:`~recprep.codecs.base.Codec.encode_block`) hands back a :class:`RecordBlock`: the
records' lengths, the records as ``bytes`` (:meth:`RecordBlock.records`), and the records
written straight into a buffer where the caller says (:meth:`RecordBlock.place`). The
write loop places a block's records into one buffer, each with the room its container's
framing takes around it (a chunk's payload as it will be written, shard by shard), so no
record is ever a ``bytes`` of its own; a container without such framing gets ``bytes``.

:class:`RecordList` is a block of records made as ``bytes`` already (what
:meth:`~recprep.codecs.base.Codec.encode_columns` gives): placing them would only copy
them again, so it says it is not :attr:`~RecordBlock.laid_out`.

A column of Python values whose types the table reader found already comes as
:class:`TypedValues`, a list that carries the set of its values' types, so a codec
encoding the column at once needn't look at each value again.

>>> block = RecordList([b"ab", b"", b"c"])
>>> block.n, block.lengths().tolist(), block.laid_out
(3, [2, 0, 1], False)
>>> buffer = np.zeros(8, np.uint8)
>>> block.place(buffer, np.array([0, 3, 6]))
>>> buffer.tobytes()
b'ab\\x00\\x00\\x00\\x00c\\x00'
"""

from __future__ import annotations

import abc
from typing import Any

import numpy as np

__all__ = ["RecordBlock", "RecordList", "TypedValues"]


class RecordBlock(abc.ABC):
    """The ``n`` records of a block of rows, made at once (see the module docs)."""

    n: int
    #: whether the records are made by placing them (:meth:`place` costs no more than
    #: :meth:`records`): a writer then lays them out in its own buffer; else it takes the
    #: ``bytes`` of :meth:`records`
    laid_out: bool = True

    @abc.abstractmethod
    def lengths(self) -> np.ndarray:
        """Each record's length in bytes (``n`` int64)."""

    @abc.abstractmethod
    def records(self) -> list[bytes]:
        """The ``n`` records, each a ``bytes``."""

    @abc.abstractmethod
    def place(self, buffer: np.ndarray, starts: np.ndarray) -> None:
        """Write record ``i`` into ``buffer`` (uint8) at ``starts[i]`` (``n`` ints, the
        records' places not overlapping); nothing else of ``buffer`` is written."""


class RecordList(RecordBlock):
    """A block of records that are ``bytes`` already."""

    laid_out = False

    def __init__(self, records: list[bytes]) -> None:
        self._records = records
        self.n = len(records)

    def lengths(self) -> np.ndarray:
        return np.fromiter(map(len, self._records), np.int64, self.n)

    def records(self) -> list[bytes]:
        return self._records

    def place(self, buffer: np.ndarray, starts: np.ndarray) -> None:
        lengths = self.lengths()
        data = np.frombuffer(b"".join(self._records), np.uint8)
        if len(data):
            src = np.cumsum(lengths) - lengths
            buffer[np.repeat(np.asarray(starts, np.int64) - src, lengths)
                   + np.arange(len(data))] = data


class TypedValues(list[Any]):
    """A column's Python values (a ``list``) with :attr:`types`, the set of their types
    (exactly: ``set(map(type, values))``), found once by whoever made the list.

    >>> column = TypedValues(["a", None])
    >>> column == ["a", None], sorted(t.__name__ for t in column.types)
    (True, ['NoneType', 'str'])
    """

    def __init__(self, values: list[Any], types: set[type] | None = None) -> None:
        super().__init__(values)
        self.types = set(map(type, values)) if types is None else types
