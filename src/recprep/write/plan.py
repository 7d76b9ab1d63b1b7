"""The units of work of a conversion, and the plan that ties them together.

* **stream** — one reader, every shard: instance ``i`` to shard ``i % N`` (the core rule).
* **pieces** — partition ``p`` of a :func:`partitions` input: its ``k``-th instance to
  piece ``k % N``. Each task writes into a directory of its own (per attempt), so an
  engine's retry or speculative copy never mixes with another attempt's files.
* **assemble** — shard ``s``: the pieces destined to it, concatenated in partition order
  (:mod:`recprep.write.assembly`).
  RecordIO chunks are independent, so a concatenation is a valid file and no record is
  decoded again.

Which piece goes to which shard is settled after the fact, from the pieces' counts:
partition ``p`` starts where partition ``p - 1`` stopped (``offset_p``), so its piece ``k``
belongs to shard ``(k + offset_p) % N``. The result is exactly what one reader yielding
partition 0, then partition 1, ... would give, whatever the executor.

Example
-------
>>> facts = [FileFacts("a", 1, 10, 0), FileFacts("b", 1, 10, 0), None]  # partition 0: 2
>>> plan = plan_assembly([facts, [FileFacts("c", 1, 10, 0), None, None]], 3)
>>> [[f.path for f in shard] for shard in plan]
[['a'], ['b'], ['c']]
"""

from __future__ import annotations

import posixpath
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._core.arguments import checked
from ..errors import InvalidArgumentError
from ..storage.staging import FileFacts
from . import loop
from .assembly import PieceSlice, build_shard
from .inputs import as_input
from .loop import LoopTarget, Tick, as_iterable, write_round_robin
from .options import WriteOptions

DEFAULT_MAX_TASKS = 256


@dataclass(frozen=True)
class Partitions:
    """Input that is already split: one reader per file, date, table partition...

    Made by :func:`partitions`; each reader is read where its task runs. ``row_bounds``:
    for a sized input cut into row ranges (:func:`~recprep.write.inputs.split_sized`),
    where each range starts in the input, and its length last — what a task's errors
    count instances from, and what the tasks are called by, since the user never made
    these partitions.
    """

    readers: tuple[Any, ...]
    max_tasks: int = DEFAULT_MAX_TASKS
    row_bounds: tuple[int, ...] | None = None

    def __len__(self) -> int:
        return len(self.readers)

    def groups(self) -> list[tuple[int, int]]:
        """``[start, end)`` ranges of consecutive partitions, one reading task each.

        At most ``max_tasks`` of them, as even as can be; they depend only on the number of
        partitions and ``max_tasks``, never on the executor.
        """
        count = len(self.readers)
        tasks = min(count, self.max_tasks)
        bounds = [count * t // tasks for t in range(tasks + 1)]
        return list(zip(bounds[:-1], bounds[1:], strict=True))


class PartitionGroup:
    """Consecutive partitions read as one stream by one task; gathers their notes."""

    def __init__(self, readers: Sequence[Any]) -> None:
        self.readers = list(readers)
        self.notes: list[Any] = []

    def __call__(self) -> Iterable[Any]:
        self.notes = []
        return self._read()

    def _read(self) -> Iterable[Any]:
        for reader in self.readers:
            yield from as_iterable(reader)
            self.notes.extend(reader_notes(reader))


@checked
def partitions(readers: Iterable[Any], *, max_tasks: int = DEFAULT_MAX_TASKS) -> Partitions:
    """Mark ``readers`` as the partitions of one input, in order.

    Each reader is a PaddlePaddle-style reader (a no-argument callable returning an
    iterable) — or a list-like iterable. With a parallel executor each partition is read
    where its task runs; the result is the same as one reader yielding partition 0, then
    partition 1, and so on. Up to ``max_tasks`` partitions get a task each; with more,
    consecutive partitions share a task (many tiny partitions — one per small file — would
    otherwise cost more in task overhead than in work). Raise it for clusters with more
    cores; the result (which instance goes where) doesn't change, only chunk boundaries.

    Examples
    --------
    >>> from recprep import convert, partitions, RecordIO
    >>> parts = partitions([lambda: iter(range(0, 3)), lambda: iter(range(3, 5))])
    >>> _ = convert("memory://doc/partitions", parts, 2, "p")
    >>> list(RecordIO("memory://doc/partitions/p-*")())
    [0, 1, 2, 3, 4]
    """
    items = tuple(readers)
    if not items:
        raise InvalidArgumentError("partitions() needs at least one reader")
    if isinstance(max_tasks, bool) or not isinstance(max_tasks, int) or max_tasks < 1:
        raise InvalidArgumentError(f"max_tasks must be an int >= 1, got {max_tasks!r}")
    checked = []
    for index, reader in enumerate(items):
        try:
            checked.append(as_input(reader))
        except InvalidArgumentError as err:
            raise InvalidArgumentError(f"partition {index}: {err}") from None
    return Partitions(tuple(checked), max_tasks)


def _attempt(staging: str, label: str) -> str:
    """A unique name prefix inside the staging directory for one task attempt's files.

    Files, not a directory per attempt: on local disks a directory per task costs more
    than the writing of a small partition.
    """
    return posixpath.join(staging, f"{label}-{uuid.uuid4().hex}")


@dataclass(frozen=True)
class TaskResult:
    """What a writing task sends back: its files (``None`` for an empty piece) and the
    reader's notes (see :func:`reader_notes`)."""

    files: list[FileFacts | None]
    notes: list[Any]
    #: types the codec stored as pickles by its fallback: type name -> first instance
    #: index (in this task's stream)
    pickled: dict[str, int] = field(default_factory=dict)

    @property
    def records(self) -> int:
        return sum(f.records for f in self.files if f is not None)


def reader_notes(reader: Any) -> list[Any]:
    """What a reader has to report after a pass: its ``notes`` attribute, if it has one.

    A reader object (a callable class) may set ``self.notes`` while it runs — e.g. the
    files it skipped. The task reads it on the worker, after the pass, and sends it back
    with its result, so nothing extra crosses the hot loop.
    """
    notes = getattr(reader, "notes", None)
    return list(notes) if notes else []


def stream_task(
    reader: Any,
    fs: Any,
    staging: str,
    names: Sequence[str],
    options: WriteOptions,
    cuts: Sequence[int] = (),
    tick: Tick | None = None,
) -> TaskResult:
    """Write one reader's instances into the ``names`` shards (all created), cutting the
    writers before the instances ``cuts`` (see :func:`~recprep.write.loop.write_round_robin`)."""
    attempt = _attempt(staging, "stream")
    target = LoopTarget(fs, [f"{attempt}-{name}" for name in names], options, cuts=cuts)
    pickled: dict[str, int] = {}
    facts = write_round_robin(as_iterable(reader), target, tick=tick, pickled=pickled)
    return TaskResult(facts, reader_notes(reader), pickled)


def pieces_task(
    index: int,
    reader: Any,
    fs: Any,
    staging: str,
    num_shards: int,
    options: WriteOptions,
    first_row: int = 0,
    tick: Tick | None = None,
) -> TaskResult:
    """Write partition ``index`` as ``num_shards`` pieces (``None`` for an empty piece);
    an instance that fails to encode is named counting from ``first_row``."""
    attempt = _attempt(staging, f"part-{index:05d}")
    target = LoopTarget(
        fs, [f"{attempt}-piece-{k:05d}" for k in range(num_shards)], options,
        create_empty=False, pack_into=f"{attempt}-pieces", spill_bytes=loop.SPILL_BYTES,
    )
    pickled: dict[str, int] = {}
    facts = write_round_robin(as_iterable(reader), target, tick=tick, pickled=pickled,
                              first_row=first_row)
    return TaskResult(facts, reader_notes(reader), pickled)


def plan_assembly(
    pieces: Sequence[Sequence[FileFacts | None]], num_shards: int
) -> list[list[FileFacts]]:
    """For each shard, the pieces it is made of, in partition order."""
    per_shard: list[list[FileFacts]] = [[] for _ in range(num_shards)]
    offset = 0
    for partition in pieces:
        for k, piece in enumerate(partition):
            if piece is not None:
                per_shard[(k + offset) % num_shards].append(piece)
        offset = (offset + sum(p.records for p in partition if p is not None)) % num_shards
    return per_shard


def assemble_task(
    name: str, pieces: Sequence[FileFacts], fs: Any, staging: str, options: WriteOptions
) -> TaskResult:
    """Make the shard ``name`` of ``pieces``, in order, checking each piece's CRC-32C
    (:func:`recprep.write.assembly.build_shard`): concatenated byte for byte when the
    format allows it (no record is decoded), else their records written again (a zlib
    TFRecord)."""
    path = f"{_attempt(staging, 'shard')}-{name}"
    return TaskResult([build_shard(fs, path, [PieceSlice(p) for p in pieces], options)], [])
