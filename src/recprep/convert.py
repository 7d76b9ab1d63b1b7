"""``convert``: a reader's instances in, a committed shard set out.

Instance ``i`` goes to shard ``i % num_shards``, at position ``i // num_shards``, so
shards are balanced to within one instance and a round-robin read gives the instances
back in their original order.
"""

from __future__ import annotations

import logging
import posixpath
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .codecs import Codec, get_codec
from .containers import Format, get_format
from .errors import EncodeError, InvalidArgumentError, OutputExistsError, WriteError
from .manifest import Manifest, ShardInfo
from .progress import Progress, ProgressArg
from .shards import check_prefix, manifest_name, shard_name
from .storage import ChecksumWriter, Staging, display, existing_set_files, resolve

__all__ = ["ConvertResult", "convert"]

log = logging.getLogger("recprep")

DEFAULT_CHUNK_BYTES = 1 << 20
"""Records per chunk are cut at this many uncompressed bytes (see benchmarks/RESULTS.md)."""
WRITE_BUFFER_BUDGET = 256 << 20
"""Chunk buffers of all open shards together stay under this: many shards, smaller chunks."""
MIN_CHUNK_BYTES = 64 << 10
_PROGRESS_EVERY = 1024


@dataclass
class ConvertResult:
    """What :func:`convert` wrote.

    ``paths`` are the final shard paths in shard order (URLs for remote storage),
    ``records_per_shard`` and ``bytes_per_shard`` line up with them.
    """

    output_path: str
    manifest_path: str
    paths: list[str]
    records_per_shard: list[int]
    bytes_per_shard: list[int]
    elapsed: float
    manifest: Manifest = field(repr=False)

    @property
    def num_records(self) -> int:
        return sum(self.records_per_shard)

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes_per_shard)

    def __str__(self) -> str:
        return (
            f"{self.num_records} instances -> {len(self.paths)} shards, "
            f"{self.total_bytes} bytes in {self.output_path} ({self.elapsed:.2f} s)"
        )


def as_iterable(reader: Any) -> Iterable[Any]:
    """The instances of a PaddlePaddle-style reader (callable) or a one-shot iterable."""
    accidental = (str, bytes, bytearray, memoryview, Mapping)
    if isinstance(reader, accidental):
        raise InvalidArgumentError(
            f"reader is a {type(reader).__name__}, which is iterable only by accident; pass "
            "a no-argument callable returning an iterable of instances, or an iterable"
        )
    if callable(reader):
        made = reader()
        if isinstance(made, accidental) or not hasattr(made, "__iter__"):
            raise InvalidArgumentError(
                f"calling the reader returned a {type(made).__name__}; a reader must "
                "return an iterable of instances (e.g. be a generator function)"
            )
        return made
    if hasattr(reader, "__iter__"):
        return reader
    raise InvalidArgumentError(
        f"reader must be a no-argument callable returning an iterable (a PaddlePaddle "
        f"reader) or an iterable of instances, got {type(reader).__name__}"
    )


@dataclass(frozen=True)
class WriteOptions:
    """How records are written; plain data, so it travels to workers."""

    format: str
    compressor: str
    codec: Codec
    chunk_bytes: int

    def container(self) -> Format:
        return get_format(self.format)


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
    return WriteOptions(format, compressor, get_codec(codec), chunk_bytes)


def write_shards(
    instances: Iterable[Any],
    staging: Staging,
    names: list[str],
    options: WriteOptions,
    progress: Progress,
) -> list[ShardInfo]:
    """Encode ``instances`` round-robin into the staged files ``names``; return their facts."""
    fs, container = staging.fs, options.container()
    files, sinks, writers = [], [], []
    try:
        for name in names:
            files.append(fs.open(staging.file(name), "wb"))
            sinks.append(ChecksumWriter(files[-1]))
            writers.append(container.writer(sinks[-1], options.compressor, options.chunk_bytes))
        _fill(instances, options.codec.encode, writers, staging, names, progress)
        for name, writer, file in zip(names, writers, files, strict=True):
            try:
                writer.close()
                file.close()
            except OSError as err:
                raise WriteError(staging.file(name), err) from err
            progress.add_shards()
    finally:
        for file in files:
            if not file.closed:
                file.close()
    return [
        ShardInfo(name, writer.num_records, sink.size, sink.crc32c)
        for name, writer, sink in zip(names, writers, sinks, strict=True)
    ]


def _fill(
    instances: Iterable[Any],
    encode: Callable[[Any], bytes],
    writers: list[Any],
    staging: Staging,
    names: list[str],
    progress: Progress,
) -> None:
    writes = [w.write for w in writers]
    n = len(writes)
    index = -1
    try:
        for index, instance in enumerate(instances):
            writes[index % n](encode(instance))
            if not index % _PROGRESS_EVERY:
                progress.add_instances(index + 1 - progress.instances)
    except EncodeError as err:
        raise EncodeError(err.detail, instance_index=index) from err
    except OSError as err:
        raise WriteError(staging.file(names[index % n]), err) from err
    progress.add_instances(index + 1 - progress.instances)


def convert(
    output_path: str,
    reader: Any,
    num_shards: int,
    name_prefix: str,
    *,
    format: str = "recordio",
    codec: str | Codec = "recprep",
    compressor: str | None = None,
    overwrite: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    progress: ProgressArg = None,
    chunk_bytes: int | None = None,
) -> ConvertResult:
    """Write the instances of ``reader`` into ``num_shards`` shard files.

    Parameters
    ----------
    output_path
        A directory, local or an fsspec URL (``s3://bucket/ds``, ``memory://x``); created
        if missing.
    reader
        A PaddlePaddle-style reader (a no-argument callable returning an iterable of
        instances) or a one-shot iterable. Each instance is a value or a tuple of values.
    num_shards
        How many shard files to write; instance ``i`` goes to shard ``i % num_shards``.
        A shard that gets no instance is an empty (zero-byte) file.
    name_prefix
        Shards are named ``{name_prefix}-00000-of-{num_shards-1:05d}`` and so on; the
        manifest is ``{name_prefix}.manifest.json``.
    format
        ``"recordio"`` (Go/PaddlePaddle/ElasticDL) or ``"recordio-legacy"`` (pyrecordio
        0.0.4), or any registered format.
    codec
        ``"recprep"`` (typed, exact), ``"pickle"``, ``"raw"`` (bytes as is), a registered
        name or a :class:`~recprep.codecs.Codec`.
    compressor
        ``"snappy"`` (the default for RecordIO), ``"gzip"`` or ``"none"``.
    overwrite
        Replace an existing set with this prefix, once the new one is complete. Without
        it, an existing set raises :class:`~recprep.errors.OutputExistsError`.
    storage_options
        Passed to fsspec (credentials, endpoint...).
    progress
        ``None`` (a bar when stderr is a terminal), ``True``, ``False``, or
        ``callback(instances_done, shards_done)``.
    chunk_bytes
        Uncompressed bytes per chunk (default 1 MiB, less when there are many shards, so
        that all chunk buffers together stay under 256 MiB).

    Returns
    -------
    ConvertResult
        The shard paths, records and bytes per shard, and the elapsed time.

    Examples
    --------
    >>> import numpy as np
    >>> from recprep import convert, RecordIO
    >>> def reader():
    ...     for i in range(10):
    ...         yield np.full(3, i, dtype=np.float32), i
    >>> result = convert("memory://doc/convert", reader, 3, "demo")
    >>> [p.rsplit("/", 1)[1] for p in result.paths]
    ['demo-00000-of-00002', 'demo-00001-of-00002', 'demo-00002-of-00002']
    >>> result.records_per_shard
    [4, 3, 3]
    >>> [label for _, label in RecordIO("memory://doc/convert/demo-*-of-*")()]
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    """
    started = time.perf_counter()
    options = check_options(format, compressor, codec, num_shards, chunk_bytes)
    check_prefix(name_prefix)
    instances = as_iterable(reader)
    fs, out = resolve(output_path, storage_options)
    if not overwrite:
        _refuse_existing(fs, out, name_prefix)
    names = [shard_name(name_prefix, i, num_shards) for i in range(num_shards)]
    fs.makedirs(out, exist_ok=True)
    staging = Staging(fs, out, name_prefix)
    bar = Progress(progress, total_shards=num_shards, desc=name_prefix)
    try:
        shards = write_shards(instances, staging, names, options, bar)
        manifest = Manifest(
            name_prefix=name_prefix,
            format=options.format,
            codec=options.codec.name,
            compressor=options.compressor,
            shards=shards,
            schema=options.codec.schema(),
        )
        if not overwrite:
            _refuse_existing(fs, out, name_prefix)  # a set may have appeared meanwhile
        replaced = existing_set_files(fs, out, name_prefix) if overwrite else []
        staging.commit(names, manifest.to_json(), replaced=replaced)
    except BaseException:
        staging.remove()
        raise
    finally:
        bar.close()
    result = ConvertResult(
        output_path=display(fs, out),
        manifest_path=display(fs, posixpath.join(out, manifest_name(name_prefix))),
        paths=[display(fs, posixpath.join(out, n)) for n in names],
        records_per_shard=[s.records for s in shards],
        bytes_per_shard=[s.bytes for s in shards],
        elapsed=time.perf_counter() - started,
        manifest=manifest,
    )
    log.info("recprep: %s", result)
    return result


def _refuse_existing(fs: Any, out: str, prefix: str) -> None:
    existing = existing_set_files(fs, out, prefix)
    if existing:
        raise OutputExistsError(display(fs, out), [display(fs, p) for p in existing])
