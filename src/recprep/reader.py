"""``RecordIO``: a reader creator over shard sets, for training loops.

``RecordIO(pattern)`` resolves its files once; every call returns a fresh iterator over
the instances. The shards of a set are read round-robin, which gives back exactly the
order ``convert`` was fed.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator, Mapping, Sequence
from itertools import cycle, islice
from typing import Any

from .codecs import Codec, get_codec
from .containers import DEFAULT_MAX_CHUNK_BYTES, Format, detect_format, get_format
from .containers.recordio import scan_index
from .errors import CorruptDataError, InvalidArgumentError, _Located
from .manifest import Manifest, read_manifest
from .shards import ShardSet, resolve_shard_sets
from .storage import display, resolve

__all__ = ["RecordIO"]

log = logging.getLogger("recprep")

_SNIFF_BYTES = 64


def _roundrobin(iterators: list[Iterator[Any]]) -> Iterator[Any]:
    """One item from each iterator in turn, dropping exhausted ones."""
    active: Iterator[Iterator[Any]] = iter(iterators)
    for num_active in range(len(iterators), 0, -1):
        active = cycle(islice(active, num_active))
        yield from map(next, active)


class RecordIO:
    """A reader creator over RecordIO shard sets (and single files).

    Parameters
    ----------
    pattern
        A glob (``out/train-*-of-*``), a directory, a single file, or a list of them;
        local paths or fsspec URLs. A glob that matches part of a shard set whose other
        shards are missing raises :class:`~recprep.errors.MissingShardsError`.
    codec
        How records are decoded. ``None`` takes it from the set's manifest, or uses
        ``"recprep"`` (whose tag byte makes a wrong guess fail loudly).
    allow_pickle
        Unpickle pickled values. Off by default: unpickling runs code chosen by whoever
        wrote the file.
    storage_options
        Passed to fsspec.
    max_chunk_bytes
        The most one chunk may claim or decompress to (256 MiB); larger is reported as
        damage. Raise it for files with unusually large chunks.
    format
        Force a container format instead of detecting it from the bytes.
    on_corrupt
        ``"raise"`` (default): damage stops the read with a
        :class:`~recprep.errors.CorruptDataError` naming the file and byte offset.
        ``"skip"``: a damaged chunk is dropped with a logged warning (file, offset,
        records lost) and reading goes on; a damaged record is never yielded.

    Examples
    --------
    >>> from recprep import convert, RecordIO
    >>> _ = convert("memory://doc/reader", [(i, str(i)) for i in range(5)], 2, "ds")
    >>> read = RecordIO("memory://doc/reader/ds-*-of-*")
    >>> list(read())
    [(0, '0'), (1, '1'), (2, '2'), (3, '3'), (4, '4')]
    >>> len(read)
    5
    """

    def __init__(
        self,
        pattern: str | Sequence[str],
        *,
        codec: str | Codec | None = None,
        allow_pickle: bool = False,
        storage_options: Mapping[str, Any] | None = None,
        max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
        format: str | None = None,
        on_corrupt: str = "raise",
    ) -> None:
        patterns = [pattern] if isinstance(pattern, str) else list(pattern)
        if not patterns or not all(isinstance(p, str) for p in patterns):
            raise InvalidArgumentError(
                f"pattern must be a path, URL or glob (str) or a non-empty list of them, "
                f"got {pattern!r}"
            )
        if not isinstance(max_chunk_bytes, int) or max_chunk_bytes < 1:
            raise InvalidArgumentError(
                f"max_chunk_bytes must be a positive int, got {max_chunk_bytes!r}"
            )
        if on_corrupt not in ("raise", "skip"):
            raise InvalidArgumentError(
                f"on_corrupt must be 'raise' or 'skip', got {on_corrupt!r}"
            )
        self.on_corrupt = on_corrupt
        self._codec = None if codec is None else get_codec(codec)
        self._format = None if format is None else get_format(format)
        self.allow_pickle = allow_pickle
        self.max_chunk_bytes = max_chunk_bytes
        self.fs, _ = resolve(patterns[0], storage_options)
        paths = [resolve(p, storage_options)[1] for p in patterns]
        self.shard_sets: list[ShardSet] = resolve_shard_sets(self.fs, paths)
        self._manifests = [
            read_manifest(self.fs, s.manifest_path) if s.manifest_path else None
            for s in self.shard_sets
        ]

    @property
    def paths(self) -> list[str]:
        """Every file this reader reads, in reading order of sets (shard order within)."""
        return [display(self.fs, p) for s in self.shard_sets for p in s.paths]

    def codec_for(self, index: int) -> Codec:
        """The codec used for shard set ``index``."""
        if self._codec is not None:
            return self._codec
        manifest = self._manifests[index]
        if manifest is None:
            return get_codec("recprep")
        return get_codec(manifest.codec).with_schema(manifest.schema)

    def __call__(self) -> Iterator[Any]:
        """A fresh pass over every instance."""
        for index, shard_set in enumerate(self.shard_sets):
            codec = self.codec_for(index)
            streams = [self._file_instances(path, codec) for path in shard_set.paths]
            yield from _roundrobin(streams)

    __iter__ = __call__

    def __len__(self) -> int:
        """How many instances a pass yields, from manifests or chunk headers (no decoding)."""
        total = 0
        for shard_set, manifest in zip(self.shard_sets, self._manifests, strict=True):
            counts = _manifest_counts(manifest)
            for path in shard_set.paths:
                name = path.rsplit("/", 1)[-1]
                if name in counts:
                    total += counts[name]
                else:
                    with self.fs.open(path, "rb") as f:
                        total += sum(c.num_records for c in scan_index(f, path=path))
        return total

    def _container(self, file: Any, path: str) -> Format | None:
        if self._format is not None:
            return self._format
        head = file.read(_SNIFF_BYTES)
        file.seek(0)
        if not head:
            return None
        found = detect_format(head)
        if found is None:
            raise CorruptDataError(
                f"not a RecordIO file (starts with {head[:8].hex()}); pass format= to say "
                "what it is",
                path=display(self.fs, path),
                offset=0,
            )
        return found

    def _file_instances(self, path: str, codec: Codec) -> Iterator[Any]:
        shown = display(self.fs, path)
        decode = functools.partial(codec.decode, allow_pickle=self.allow_pickle)
        with self.fs.open(path, "rb") as file:
            container = self._container(file, path)
            if container is None:
                return
            chunks = container.read_chunks(
                file, path=shown, max_chunk_bytes=self.max_chunk_bytes,
                on_corrupt=self.on_corrupt,
            )
            for chunk in chunks:
                try:
                    values = list(map(decode, chunk.records))
                except _Located as err:
                    index = _failing_index(decode, chunk.records)
                    raise err.located(
                        path=shown, offset=chunk.offset, record_index=index
                    ) from None
                yield from values


def _failing_index(decode: Any, records: list[bytes]) -> int | None:
    """Which record of a chunk fails to decode (the slow path, after a failure)."""
    for index, record in enumerate(records):
        try:
            decode(record)
        except Exception:
            return index
    return None


def _manifest_counts(manifest: Manifest | None) -> dict[str, int]:
    if manifest is None:
        return {}
    return {s.name: s.records for s in manifest.shards}
