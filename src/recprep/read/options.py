"""How a reader turns files into instances: :class:`ReadOptions`, one value.

Everything a :class:`~recprep.RecordIO` is told about *how* to read — the codec and
whether it may unpickle, the limit on a chunk's size, what damage does, a forced format
and compression, the local cache of remote shards, the prefetch threads — checked once
and passed on as one frozen value. *Which* instances a pass hands out, and in which order,
is the :class:`~recprep.read.passes.Share`.

>>> options = ReadOptions.checked(on_corrupt="skip", num_threads=2)
>>> options.on_corrupt, options.num_threads, options.cache
('skip', 2, None)
>>> ReadOptions.checked(compressor="gzip")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
recprep.errors.InvalidArgumentError: compressor='gzip' needs a format that has it ...
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..codecs import Codec, get_codec
from ..containers import DEFAULT_MAX_CHUNK_BYTES, Format, get_format
from ..errors import InvalidArgumentError
from ..storage.fetch import FetchOptions
from .cache import ShardCache
from .prefetch import check_threads

__all__ = ["ReadOptions"]


@dataclass(frozen=True)
class ReadOptions:
    """How files become instances (see :class:`~recprep.RecordIO` for each option):
    ``codec`` (None: each set's manifest says), ``allow_pickle``, ``max_chunk_bytes``,
    ``on_corrupt``, a forced ``format`` and ``compressor``, the shard ``cache``, the
    prefetch ``num_threads`` and how object stores are streamed (``fetch``)."""

    codec: Codec | None = None
    allow_pickle: bool = False
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES
    on_corrupt: str = "raise"
    format: Format | None = None
    compressor: str | None = None
    cache: ShardCache | None = None
    num_threads: int = 0
    fetch: FetchOptions = FetchOptions()

    @classmethod
    def checked(
        cls, *, codec: str | Codec | None = None, allow_pickle: bool = False,
        max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES, on_corrupt: str = "raise",
        format: str | None = None, compressor: str | None = None,
        cache_dir: str | os.PathLike[str] | None = None, cache_bytes: int | None = None,
        num_threads: int = 0, fetch: FetchOptions | None = None,
    ) -> ReadOptions:
        """The options, each checked (:class:`~recprep.errors.InvalidArgumentError`
        naming what is wrong); names made objects (a codec, a format, the cache)."""
        if not isinstance(max_chunk_bytes, int) or max_chunk_bytes < 1:
            raise InvalidArgumentError(
                f"max_chunk_bytes must be a positive int, got {max_chunk_bytes!r}")
        if on_corrupt not in ("raise", "skip"):
            raise InvalidArgumentError(
                f"on_corrupt must be 'raise' or 'skip', got {on_corrupt!r}")
        container = None if format is None else get_format(format)
        if compressor is not None and (
            container is None or compressor not in container.compressors
        ):
            valid = "pass format= too" if container is None else list(container.compressors)
            raise InvalidArgumentError(
                f"compressor={compressor!r} needs a format that has it ({valid})")
        if fetch is not None and not isinstance(fetch, FetchOptions):
            raise InvalidArgumentError(
                f"fetch must be a recprep.FetchOptions, got {type(fetch).__name__}")
        if cache_bytes is not None and cache_dir is None:
            raise InvalidArgumentError("cache_bytes bounds a cache: pass cache_dir too")
        return cls(
            codec=None if codec is None else get_codec(codec),
            allow_pickle=bool(allow_pickle), max_chunk_bytes=max_chunk_bytes,
            on_corrupt=on_corrupt, format=container, compressor=compressor,
            cache=None if cache_dir is None else ShardCache(cache_dir, cache_bytes),
            num_threads=check_threads(num_threads), fetch=fetch or FetchOptions(),
        )
