"""Decoding a piece's chunks into lists of instances, with errors located.

:func:`decoded` turns ``(chunk, records cut off its front)`` pairs into lists of
instances with the codec's ``decode_many``: one list per chunk, or — with prefetch
threads — chunks gathered to about :data:`BATCH_BYTES` of records, so that handing a list
over to the consumer costs little per record. A record that fails to decode is named by
file, chunk offset and its index in the chunk; what was decoded before an error (or
before damage the container found) is handed over first, so the consumer sees the same
instances up to the error with or without threads:

>>> from recprep.codecs import get_codec
>>> from recprep.containers import Chunk
>>> pairs = [(Chunk(0, [b"a", b"b"]), 0), (Chunk(9, [b"c"]), 0)]
>>> list(decoded(pairs, get_codec("raw"), "file"))
[[b'a', b'b'], [b'c']]
>>> list(decoded(pairs, get_codec("raw"), "file", batch_bytes=3))
[[b'a', b'b', b'c']]

For batches, :class:`ColumnarCodec` wraps a codec so that a chunk its ``decode_columns``
can decode whole comes out as :class:`~recprep.batching.Row` handles into its columns
(see :mod:`recprep.batching`), and any other chunk as instances, as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from ..batching import Columns
from ..codecs import Codec
from ..containers import Chunk
from ..errors import _Located

__all__ = ["BATCH_BYTES", "ColumnarCodec", "decoded"]

#: with threads, decoded chunks are handed over in lists of about this many record bytes
BATCH_BYTES = 1 << 20


def decoded(
    chunks: Iterable[tuple[Chunk, int]],
    codec: Codec,
    path: str,
    *,
    allow_pickle: bool = False,
    batch_bytes: int = 0,
    decoding: AbstractContextManager[Any] | None = None,
) -> Iterator[list[Any]]:
    """Lists of the instances in ``chunks`` of the file ``path``, in order.

    ``batch_bytes``: gather chunks until their records reach that many bytes (0: a list
    per chunk). ``decoding`` is held while decoding (a lock, so that prefetch threads
    decode one at a time: decoding holds the GIL, so more would only take turns).
    """
    lock = decoding or nullcontext()
    pending: list[Any] = []
    size = 0
    try:
        for chunk, skipped in chunks:
            with lock:
                values = _decode_chunk(codec, allow_pickle, chunk, skipped, path)
            if not batch_bytes:
                yield values
                continue
            pending += values
            size += sum(map(len, chunk.records))
            if size >= batch_bytes:
                yield pending
                pending, size = [], 0
    except Exception:
        if pending:
            yield pending
        raise
    if pending:
        yield pending


def _decode_chunk(
    codec: Codec, allow_pickle: bool, chunk: Chunk, skipped: int, path: str
) -> list[Any]:
    try:
        return codec.decode_many(chunk.records, allow_pickle=allow_pickle)
    except _Located as err:
        index = _failing_index(codec, allow_pickle, chunk.records)
        raise err.located(
            path=path,
            offset=chunk.offset,
            record_index=None if index is None else index + skipped,
        ) from None


def _failing_index(codec: Codec, allow_pickle: bool, records: list[bytes]) -> int | None:
    """Which record of a chunk fails to decode (the slow path, after a failure)."""
    for index, record in enumerate(records):
        try:
            codec.decode(record, allow_pickle=allow_pickle)
        except Exception:
            return index
    return None


class ColumnarCodec(Codec):
    """``codec`` whose ``decode_many`` gives :class:`~recprep.batching.Row` handles into
    the chunk's :class:`~recprep.batching.Columns` when ``codec.decode_columns`` decodes
    the chunk whole, and the instances otherwise. For :meth:`recprep.RecordIO.batches`.

    >>> from recprep.codecs import get_codec
    >>> codec = get_codec("recprep")
    >>> records = [codec.encode((i, "a")) for i in range(4)]
    >>> rows = ColumnarCodec(codec, min_record_bytes=0).decode_many(records)
    >>> type(rows[0]).__name__, rows[2].instance()
    ('Row', (2, 'a'))
    """

    #: chunks of smaller records (on average) are decoded record by record: a pass hands
    #: instances over one at a time, and for small records a Row handle costs about what
    #: decoding does (measured: ``benchmarks/bench_reading.py``, small tuples)
    min_record_bytes = 256

    def __init__(self, codec: Codec, min_record_bytes: int | None = None) -> None:
        self.codec = codec
        if min_record_bytes is not None:
            self.min_record_bytes = min_record_bytes
        self.name = codec.name  # type: ignore[misc]

    def encode(self, instance: Any) -> bytes:
        return self.codec.encode(instance)

    def decode(self, record: bytes | memoryview, *, allow_pickle: bool = False) -> Any:
        return self.codec.decode(record, allow_pickle=allow_pickle)

    def decode_many(self, records: list[bytes], *, allow_pickle: bool = False) -> list[Any]:
        if sum(map(len, records)) < self.min_record_bytes * len(records):
            return self.codec.decode_many(records, allow_pickle=allow_pickle)
        columns = self.codec.decode_columns(records)  # type: ignore[arg-type]
        if columns is None:
            return self.codec.decode_many(records, allow_pickle=allow_pickle)
        inner = self.codec

        def decode() -> list[Any]:
            return inner.decode_many(records, allow_pickle=allow_pickle)

        columns.decode = decode
        return columns.rows()

    def decode_columns(self, records: list[bytes | memoryview]) -> Columns | None:
        return self.codec.decode_columns(records)

    def schema(self) -> dict[str, Any]:
        return self.codec.schema()
