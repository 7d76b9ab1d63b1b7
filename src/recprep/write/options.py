"""How a write task writes records: :class:`WriteOptions`, one value, and the chunk size.

:func:`check_options` checks ``convert``'s (or a Spark write's) format, compressor, codec
and chunk size once, before any file is touched, into a :class:`WriteOptions`: plain data,
so it travels to the workers that run the tasks.

Example
-------
>>> options = check_options("recordio", None, "raw", 4, None)
>>> options.format, options.compressor, options.codec.name, options.chunk_bytes
('recordio', 'snappy', 'raw', 524288)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..codecs import Codec, get_codec
from ..containers import Format, get_format
from ..errors import InvalidArgumentError

__all__ = [
    "DEFAULT_CHUNK_BYTES", "MIN_CHUNK_BYTES", "WRITE_BUFFER_BUDGET", "WriteOptions",
    "check_options",
]

DEFAULT_CHUNK_BYTES = 512 << 10
"""Records per chunk are cut at this many uncompressed bytes. Measured (benchmarks/
RESULTS-reading.md, "Chunk size"): with chunks moved whole through a batches pass, 512 KiB
chunks of MNIST-like records give 1.7x the batches of 128 KiB ones and faster writes, with
``read()`` unchanged and uncached random lookups (a whole chunk each) ~20% slower; 1 MiB
gains nothing more. Snappy compresses 64 KiB blocks independently, so larger chunks don't
compress better. (The earlier sweep, record by record, had 128 KiB within a few % of the
best: see benchmarks/RESULTS.md.)"""
WRITE_BUFFER_BUDGET = 256 << 20
"""Chunk buffers of all open shards together stay under this: many shards, smaller chunks."""
MIN_CHUNK_BYTES = 64 << 10

@dataclass(frozen=True)
class WriteOptions:
    """How records are written; plain data, so it travels to workers."""

    format: str
    compressor: str
    codec: Codec
    chunk_bytes: int
    #: the format itself: it travels to workers by class reference, so a format registered
    #: outside recprep is imported (and registered) where the task runs
    fmt: Format | None = field(default=None, compare=False, repr=False)

    def container(self) -> Format:
        return get_format(self.format) if self.fmt is None else self.fmt


def check_options(
    format: str, compressor: str | None, codec: str | Codec, num_shards: Any, chunk_bytes: Any
) -> WriteOptions:
    """Validate the writing arguments (before any file is touched)."""
    if isinstance(num_shards, bool) or not isinstance(num_shards, int) or num_shards < 1:
        raise InvalidArgumentError(f"num_shards must be an int >= 1, got {num_shards!r}")
    container = get_format(format)
    compressor = container.default_compressor if compressor is None else compressor
    if compressor not in container.compressors:
        raise InvalidArgumentError(
            f"format {format!r} has no compressor {compressor!r}; valid compressors are "
            f"{list(container.compressors)}"
        )
    if chunk_bytes is None:
        share = WRITE_BUFFER_BUDGET // num_shards
        chunk_bytes = min(DEFAULT_CHUNK_BYTES, max(MIN_CHUNK_BYTES, share))
    elif isinstance(chunk_bytes, bool) or not isinstance(chunk_bytes, int) or chunk_bytes < 1:
        raise InvalidArgumentError(f"chunk_bytes must be an int >= 1, got {chunk_bytes!r}")
    return WriteOptions(format, compressor, get_codec(codec), chunk_bytes, container)
