"""``recprep.ray.read``: a set as a Ray Data ``Dataset``, one read task per rank share.

The driver opens the set once (``RecordIO(path, **reader_options)``), fixes the shuffle
seed, and plans ``n`` read tasks: ``n`` is Ray's parallelism hint (or
``override_num_blocks``), at most the set's chunks and instances. Task ``i`` reads
``RecordIO(path, **reader_options).for_rank(i, n)`` — the reader's own split, so the
tasks together read every instance exactly once — in batches of :data:`ROWS_PER_BATCH`,
each turned into a ``pyarrow.Table``. A task's ``BlockMetadata`` gives its row count from
``len()`` of its share (manifests or chunk headers, nothing decoded) and its size from
the manifests' shard bytes.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import InvalidArgumentError, MissingDependencyError
from ..read.reader import RecordIO
from ..storage.chunkindex import load_table
from ..storage.fs import display, resolve
from .arrowbatch import ray_block

#: rows a read task decodes and hands to Ray as one table (Ray joins or splits them into
#: blocks of its target size)
ROWS_PER_BATCH = 8192

#: reader options Ray sets itself: a read task's share
RANK_OPTIONS = ("rank", "world_size")


def import_ray_data(purpose: str) -> Any:
    """``ray.data``, or :class:`~recprep.errors.MissingDependencyError` naming the extra."""
    try:
        import pyarrow  # noqa: F401  (blocks are Arrow tables)
        import ray.data
    except ImportError as err:
        raise MissingDependencyError(err.name or "ray", "ray", purpose) from None
    return ray.data


def ray_read(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    columns: Sequence[str] | None = None,
    override_num_blocks: int | None = None,
    ray_remote_args: dict[str, Any] | None = None,
    **reader_options: Any,
) -> Any:
    """Read a set (what :class:`recprep.RecordIO` reads) as a ``ray.data.Dataset``.

    See :mod:`recprep.ray`.
    """
    ray_data = import_ray_data("recprep.ray.read")
    taken = [name for name in RANK_OPTIONS if name in reader_options]
    if taken:
        raise InvalidArgumentError(
            f"recprep.ray.read got {', '.join(taken)}: Ray splits the set across its read "
            "tasks itself (one rank share each); leave them out, or read one share with "
            "RecordIO(..., rank=, world_size=)"
        )
    if columns is not None:
        if isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
            raise InvalidArgumentError(
                f"columns must be a list of column names, got {columns!r}")
        columns = list(columns)
    path = _absolute(path, reader_options.get("storage_options"))
    reader = RecordIO(path, **reader_options)
    if reader.shuffle:  # every task shuffles the same epoch order: one seed
        reader_options = {**reader_options, "seed": reader.seed}
    plan = RaySharePlan(path, reader_options, columns, len(reader), _set_bytes(reader),
                    _chunks(reader))
    source = _source_class(ray_data)(plan, reader)
    return ray_data.read_datasource(source, override_num_blocks=override_num_blocks,
                                    ray_remote_args=ray_remote_args)


def _absolute(path: Any, storage_options: Any) -> str | list[str]:
    """``path`` as the read tasks must see it: a local path made absolute here (a task's
    working directory is not the driver's), a URL as it is."""
    if isinstance(path, (str, os.PathLike)):
        return display(*resolve(os.fspath(path), storage_options))
    return [display(*resolve(os.fspath(p), storage_options)) for p in path]


class RaySharePlan:
    """What a read task needs, plain data that pickles: the set, the options, the columns
    kept, and the set's instances, bytes and chunks (for planning)."""

    def __init__(self, path: str | list[str], options: dict[str, Any],
                 columns: list[str] | None, rows: int, size: int | None, chunks: int) -> None:
        self.path = path
        self.options = options
        self.columns = columns
        self.rows, self.size, self.chunks = rows, size, chunks

    def tasks(self, parallelism: int) -> int:
        """How many read tasks: the hint, at most one per chunk and instance, at least 1."""
        wanted = parallelism if parallelism > 0 else 2 * (os.cpu_count() or 1)
        return max(1, min(wanted, self.chunks, self.rows))


def read_share(plan: RaySharePlan, rank: int, world_size: int) -> Iterator[Any]:
    """A read task: the share ``rank`` of ``world_size`` as Arrow tables, in order."""
    reader = RecordIO(plan.path, **plan.options).for_rank(rank, world_size)
    for batch in reader.batches(ROWS_PER_BATCH, format="arrow"):
        table = ray_block(batch)
        if plan.columns is not None:
            table = _selected(table, plan.columns, plan.path)
        yield table


def _selected(table: Any, columns: list[str], path: Any) -> Any:
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise InvalidArgumentError(
            f"columns={columns!r}: the set {path!r} has no column "
            f"{', '.join(map(repr, missing))}; its columns are {table.column_names}"
        )
    return table.select(columns)


def _set_bytes(reader: RecordIO) -> int | None:
    """The bytes of the set's shards, from its manifests (None if a set has none)."""
    sizes = [None if m is None else sum(s.bytes for s in m.shards) for m in reader.manifests]
    return None if None in sizes else sum(s for s in sizes if s is not None)


def _chunks(reader: RecordIO) -> int:
    """The set's chunks, from the chunk indexes ``convert`` writes beside each set; a file
    without one counts as one chunk (read tasks then split no file)."""
    total = 0
    for shard_set, manifest in zip(reader.shard_sets, reader.manifests, strict=True):
        table = None if manifest is None else load_table(
            reader.fs, shard_set.directory, manifest, reader.on_corrupt)
        if table is None:
            total += len(shard_set.paths)
            continue
        for shard in manifest.shards:  # type: ignore[union-attr]
            index = table.index(shard.name)
            total += 1 if index is None else max(1, len(index.offsets))
    return total


@functools.cache
def _source_class(ray_data: Any) -> type:
    """The ``Datasource`` class, made once ``ray.data`` is imported."""

    class RecordIODatasource(ray_data.Datasource):
        """A recprep set as read tasks, one per rank share (see :mod:`recprep.raydata`)."""

        def __init__(self, plan: RaySharePlan, reader: RecordIO) -> None:
            self.plan = plan
            self._reader = reader  # counts the tasks' shares (RecordIO pickles)

        def get_name(self) -> str:
            return "RecordIO"

        def estimate_inmemory_data_size(self) -> int | None:
            return self.plan.size

        def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None,
                           data_context: Any = None) -> list[Any]:
            plan = self.plan
            count = plan.tasks(parallelism)
            tasks = []
            for rank in range(count):
                rows = len(self._reader.for_rank(rank, count))
                size = None if plan.size is None or not plan.rows else (
                    plan.size * rows // plan.rows)
                meta = ray_data.block.BlockMetadata(
                    num_rows=rows, size_bytes=size, exec_stats=None, input_files=None)
                read = functools.partial(read_share, plan, rank, count)
                limit = {} if per_task_row_limit is None else {
                    "per_task_row_limit": per_task_row_limit}  # Ray >= 2.50 only
                tasks.append(ray_data.ReadTask(read, meta, **limit))
            return tasks

    return RecordIODatasource
