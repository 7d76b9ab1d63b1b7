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

With ``columnar`` (for batches), a chunk the codec's ``decode_columns`` decodes whole
comes out as its :class:`~recprep.batching.Columns` instead (a block of its own, see
:mod:`recprep.read.blocks`), and any other chunk as a list of instances, as before:

>>> codec = get_codec("recprep")
>>> chunk = Chunk(0, [codec.encode((i, "a")) for i in range(4)])
>>> [block] = decoded([(chunk, 0)], codec, "file", columnar=True)
>>> block.tree, block.instances()[1]
((array([0, 1, 2, 3]), array(['a', 'a', 'a', 'a'], dtype=object)), (1, 'a'))
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from .._core.batching import Columns
from ..codecs import Codec, get_codec
from ..codecs.guess import codec_first
from ..codecs.schema import codec_with_schema
from ..containers import Chunk, Gap, nbytes
from ..errors import DecodeError, LocatedError
from ..storage.manifest import Manifest
from .arrowout import chunk_batch
from .readstats import ReadCounter

__all__ = ["BATCH_BYTES", "SetCodecs", "decoded"]

#: with threads, decoded chunks are handed over in lists of about this many record bytes
BATCH_BYTES = 1 << 20


def decoded(
    chunks: Iterable[tuple[Chunk, int] | Gap],
    codec: Codec,
    path: str,
    *,
    allow_pickle: bool = False,
    batch_bytes: int = 0,
    decoding: AbstractContextManager[Any] | None = None,
    columnar: bool | str = False,
    written_with: str | None = None,
    counter: ReadCounter | None = None,
) -> Iterator[list[Any] | Columns | Gap]:
    """Blocks of the instances in ``chunks`` of the file ``path``, in order: lists, and
    with ``columnar`` the :class:`~recprep.batching.Columns` of chunks decoded whole; a
    :class:`~recprep.containers.base.Gap` (records lost to damage) passes through as it is.

    ``batch_bytes``: gather chunks until their records reach that many bytes (0: a list
    per chunk; columns always come a chunk at a time). ``decoding`` is held while
    decoding (a lock, so that prefetch threads decode one at a time: decoding holds the
    GIL, so more would only take turns); ``columnar="arrow"``: columns as Arrow record
    batches (``batches(format="arrow")``). ``written_with``: the codec the file's manifest
    names, which a decode error suggests first when ``codec`` is another. ``counter``
    counts each chunk's seconds fetching (getting it from ``chunks``) and decoding, and
    its records' bytes (:class:`~recprep.read.readstats.ReadCounter`).
    """
    lock = decoding or nullcontext()
    timed = (counter or ReadCounter()).chunk
    pending: list[Any] = []
    size = 0
    source, now = iter(chunks), time.perf_counter
    try:
        while True:
            began = now()
            item = next(source, None)
            if item is None:
                break
            if isinstance(item, Gap):  # records lost to damage hold their places
                if pending:
                    yield pending
                    pending, size = [], 0
                yield item
                continue
            chunk, skipped = item
            fetched = now()
            with lock:  # waiting for it is neither fetching nor decoding
                unlocked = fetched if decoding is None else now()
                columns = _chunk_columns(codec, allow_pickle, chunk, columnar == "arrow"
                                         ) if columnar else None
                values: list[Any] | Columns = _decode_chunk(
                    codec, allow_pickle, chunk, skipped, path, written_with
                ) if columns is None else columns
                held = nbytes(chunk.records)
                timed(fetched - began, now() - unlocked, held)
            if not batch_bytes:
                yield values
                continue
            if isinstance(values, Columns):
                if pending:
                    yield pending
                    pending, size = [], 0
                yield values
                continue
            pending += values
            size += held
            if size >= batch_bytes:
                yield pending
                pending, size = [], 0
    except Exception:
        if pending:
            yield pending
        raise
    if pending:
        yield pending


def _chunk_columns(codec: Codec, allow_pickle: bool, chunk: Chunk, arrow: bool = False
                   ) -> Columns | None:
    """The chunk's columns, if the codec decodes it whole (``decode`` gives its
    instances, should a batch need them); with ``arrow``, a ``pyarrow.RecordBatch`` of
    them (:func:`~recprep.read.arrowout.chunk_batch`)."""
    records = chunk.records
    columns = chunk_batch(codec, records) if arrow else codec.decode_columns(
        records)  # type: ignore[arg-type]
    if columns is not None:
        columns.decode = lambda: codec.decode_many(records, allow_pickle=allow_pickle)
    return columns


def _decode_chunk(
    codec: Codec, allow_pickle: bool, chunk: Chunk, skipped: int, path: str,
    written_with: str | None = None,
) -> list[Any]:
    try:
        return codec.decode_many(chunk.records, allow_pickle=allow_pickle)
    except LocatedError as err:
        index = _failing_index(codec, allow_pickle, chunk.records)
        located = err.located(
            path=path,
            offset=chunk.offset,
            record_index=None if index is None else index + skipped,
        )
        if written_with is not None and isinstance(located, DecodeError):
            located = codec_first(located, written_with, codec.name)
        raise located from None


def _failing_index(codec: Codec, allow_pickle: bool, records: Sequence[bytes]) -> int | None:
    """Which record of a chunk fails to decode (the slow path, after a failure)."""
    for index, record in enumerate(records):
        try:
            codec.decode(record, allow_pickle=allow_pickle)
        except Exception:
            return index
    return None


class SetCodecs:
    """The codec of each shard set a reader reads: the one passed to the reader, else the
    one the set's manifest names, else ``"recprep"``. A codec with no schema of its own (a
    name, or an object without features) takes the schema the manifest records when the
    manifest names that same codec, so naming the codec the manifest names changes
    nothing; a codec object with its own schema (an ``ExampleCodec`` with features) wins
    over the manifest. Made once per set.

    >>> SetCodecs([None], [None], None).codec(0).name
    'recprep'
    """

    def __init__(self, manifests: Sequence[Manifest | None], sets: Sequence[Any],
                 forced: Codec | None) -> None:
        self._manifests, self._sets, self._forced = manifests, sets, forced
        self._made: dict[int, Codec] = {}

    def codec(self, index: int) -> Codec:
        """The codec of shard set ``index``."""
        made = self._made.get(index)
        if made is not None:
            return made
        manifest = self._manifests[index]
        codec = self._forced
        if codec is None:
            codec = get_codec("recprep" if manifest is None else manifest.codec)
        if manifest is not None and manifest.codec == codec.name and not codec.schema():
            codec = codec_with_schema(  # a bad schema is a damaged manifest
                codec, manifest.schema, self._sets[index].manifest_path)
        self._made[index] = codec
        return codec

    def written_with(self, index: int) -> str | None:
        """The codec the manifest of shard set ``index`` names (None without one): a
        decode error of another codec passed to the reader suggests it first."""
        manifest = self._manifests[index]
        return None if manifest is None else manifest.codec
