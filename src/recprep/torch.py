"""PyTorch: ``RecordIODataset``, an ``IterableDataset`` split by rank and DataLoader worker.

``import recprep`` never imports torch; neither does ``import recprep.torch``. Torch is
imported when :class:`RecordIODataset` is first used, and a missing torch raises
:class:`~recprep.errors.MissingDependencyError` naming the extra to install.

Each DataLoader worker reads its part of its rank's share
(:meth:`recprep.RecordIO.for_worker`), so the ``world_size x num_workers`` readers of a
job see every instance exactly once per epoch. The rank comes from the arguments, or from
``torch.distributed`` when it is initialised. Pass ``n`` of the dataset is of epoch ``n``
(or of the epoch :meth:`set_epoch` set), with ``num_workers=0`` or N, persistent or not:
the count is shared with the workers (:mod:`recprep.read.epochclock`). ``datetime64``
and ``timedelta64`` values reach torch as int64 nanoseconds (see :func:`torchable`).

Example
-------
>>> import pytest; torch = pytest.importorskip("torch")
>>> from torch.utils.data import DataLoader
>>> from recprep import convert
>>> from recprep.torch import RecordIODataset
>>> _ = convert("memory://doc/torch", [(i, float(i)) for i in range(6)], 3, "t")
>>> ds = RecordIODataset("memory://doc/torch/t-*", shuffle=True, seed=1)
>>> ds.set_epoch(0)
>>> batches = list(DataLoader(ds, batch_size=4))
>>> sorted(int(i) for ids, _ in batches for i in ids), len(ds)
([0, 1, 2, 3, 4, 5], 6)

With ``batch_size=``, the dataset yields whole batches (:meth:`recprep.RecordIO.batches`:
numpy columns, collated once per batch), and the DataLoader only turns them into tensors:

>>> ds = RecordIODataset("memory://doc/torch/t-*", batch_size=4)
>>> [(ids.tolist(), x.dtype) for ids, x in DataLoader(ds, batch_size=None)], len(ds)
([([0, 1, 2, 3], torch.float64), ([4, 5], torch.float64)], 2)
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ._core.batching import check_batch_size
from .errors import InvalidArgumentError, MissingDependencyError, RecprepWarning, warn
from .read.epochclock import EpochClock
from .read.reader import RecordIO
from .read.readstats import ReadStats
from .read.statsboard import PUBLISH_SECONDS, StatsBoard
from .read.workerstart import freeze_once
from .storage.shmsweep import SHM_DIRECTORY, sweep_torch_shm

__all__ = [  # noqa: F822 (RecordIODataset: built lazily)
    "RecordIODataset", "distributed_rank", "torchable",
]


def _import_torch() -> Any:
    try:
        import torch.utils.data
    except ImportError:
        raise MissingDependencyError("torch", "torch", "recprep.torch") from None
    return torch


def distributed_rank() -> tuple[int, int]:
    """``(rank, world_size)`` from ``torch.distributed`` when initialised, else ``(0, 1)``."""
    torch = _import_torch()
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _choose_rank(
    reader: RecordIO, rank: int | None, world_size: int | None
) -> tuple[int, int]:
    if (rank is None) != (world_size is None):
        raise InvalidArgumentError(
            f"pass both rank and world_size, or neither (got rank={rank!r}, "
            f"world_size={world_size!r})"
        )
    if rank is not None and world_size is not None:
        return rank, world_size
    if reader.world_size > 1:  # the reader was built for a rank already
        return reader.rank, reader.world_size
    return distributed_rank()


def torchable(value: Any, where: str = "the item") -> Any:
    """``value`` (an instance or a batch) with its numpy ``datetime64`` and ``timedelta64``
    values — arrays and scalars, in tuples, lists and dicts — as int64 nanoseconds (since
    the Unix epoch, or long), which torch holds; ``NaT`` is ``-2**63``, as numpy and pandas
    store it. Everything else is left as it is (and tuples, lists, dicts without such
    values are the same objects).

    Raises
    ------
    InvalidArgumentError
        For a value int64 nanoseconds can't hold exactly (before 1677 or after 2262, or
        in units finer than ns, or years/months of a ``timedelta64``): convert it in a
        ``transform``.

    Examples
    --------
    >>> day = np.array(["2024-01-02", "NaT"], dtype="datetime64[D]")
    >>> when, took, name = torchable((day, np.timedelta64(3, "s"), "x"))
    >>> when.tolist(), int(took), name
    ([1704153600000000000, -9223372036854775808], 3000000000, 'x')
    """
    return _converted(value, where) if _has_times(value) else value


def _has_times(value: Any) -> bool:
    """Whether ``value`` holds a datetime64/timedelta64 (cheap: called per instance)."""
    kind = type(value)
    if kind is np.ndarray:
        return value.dtype.kind in "mM"
    if kind is tuple or kind is list:
        return any(map(_has_times, value))
    if kind is dict:
        return any(map(_has_times, value.values()))
    if kind in _PLAIN:
        return False
    if isinstance(value, (np.datetime64, np.timedelta64)):
        return True
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "mM"
    if isinstance(value, (tuple, list)):
        return any(map(_has_times, value))
    return isinstance(value, dict) and any(map(_has_times, value.values()))


_PLAIN = frozenset({int, float, str, bytes, bool, type(None), np.int64, np.float64,
                    np.float32, np.int32})


def _converted(value: Any, where: str) -> Any:
    if isinstance(value, np.ndarray):
        return _nanoseconds(value, where) if value.dtype.kind in "mM" else value
    if isinstance(value, (np.datetime64, np.timedelta64)):
        return _nanoseconds(np.asarray(value), where)[()]
    if isinstance(value, (tuple, list)):
        items = [_converted(v, f"{where}[{k}]") if _has_times(v) else v
                 for k, v in enumerate(value)]
        if isinstance(value, list):
            return items
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, dict):
        return {k: _converted(v, f"{where}[{k!r}]") if _has_times(v) else v
                for k, v in value.items()}
    return value


def _nanoseconds(array: np.ndarray, where: str) -> np.ndarray:
    kind = "datetime64" if array.dtype.kind == "M" else "timedelta64"
    ns = array.astype(f"{kind}[ns]")
    exact = (ns.astype(array.dtype) == array) | np.isnat(array)
    if kind == "timedelta64" and np.datetime_data(array.dtype)[0] in ("Y", "M"):
        exact &= np.isnat(array)  # years and months have no length in nanoseconds
    if not exact.all():
        bad = array[~exact].flat[0]
        raise InvalidArgumentError(
            f"{where}: the {array.dtype} value {bad} can't be held exactly as int64 "
            "nanoseconds, which is how datetime64/timedelta64 values reach torch (from "
            "1677-09-21 to 2262-04-11, to the nanosecond); convert it yourself in "
            "transform="
        )
    return ns.view(np.int64)


class _Stream:
    """One pass of a :class:`RecordIODataset` (what its ``__iter__`` returns): instances
    or batches, transformed, with the pass's position as a state.

    It is what ``torchdata.stateful_dataloader.StatefulDataLoader`` checkpoints: the
    loader calls :meth:`state_dict` on the iterator of each worker (or of the main
    process, with ``num_workers=0``) after the batches it hands out, and
    :meth:`load_state_dict` on the fresh iterator of the same worker when it resumes.
    """

    def __init__(
        self,
        reader: RecordIO,
        batch_size: int | None,
        drop_last: bool,
        transform: Callable[[Any], Any] | None,
        clock: EpochClock | None = None,
        identity: tuple[int, int] | None = None,
    ) -> None:
        self.reader = reader
        self._batch_size = batch_size
        self._drop_last = drop_last
        self._transform = transform
        self._clock = clock
        self._identity = identity
        self._over: dict[str, Any] | None = None  # the state of a pass that was over
        self._items = self._start()

    def _start(self) -> Iterator[Any]:
        # A pass starts lazily: nothing is read before the first next().
        if self._batch_size is None:
            return self.reader()
        return self.reader.batches(self._batch_size, drop_last=self._drop_last)

    def __iter__(self) -> _Stream:
        return self

    def __next__(self) -> Any:
        item = next(self._items)
        if self._transform is not None:
            item = self._transform(item)
        return torchable(item, "the batch" if self._batch_size else "the instance")

    def state_dict(self) -> dict[str, Any]:
        """The position of this pass: ``{"reader": RecordIO.state_dict()}`` of the reader
        (of this DataLoader worker) that makes it."""
        if self._over is not None:
            return {"reader": dict(self._over)}
        return {"reader": self.reader.state_dict()}

    def _set_since(self, loaded: dict[str, Any]) -> bool:
        """Whether ``loaded`` is of a pass that is over, of an epoch set, and an epoch was
        set for the passes after it since (``set_epoch`` before the loader loads the state,
        as accelerate's prepared loaders do): that epoch stands."""
        assert self._clock is not None
        over = loaded.get("done") or (
            loaded.get("rank") is not None and loaded["yielded"] >= len(self.reader))
        return bool(over and loaded["epoch_set"] and self._clock.fixed is not None)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue the pass ``state`` (from :meth:`state_dict`) describes instead; a state
        of a pass that was over ends this one (the next pass is the next epoch's)."""
        if not isinstance(state, dict) or "reader" not in state:
            raise InvalidArgumentError(
                f"expected the state of a RecordIODataset pass (a dict with a 'reader' "
                f"key, from its iterator's state_dict()), got {state!r:.100}"
            )
        loaded = self.reader._checked_state(state["reader"])
        close = getattr(self._items, "close", None)
        if close is not None:
            close()
        self.reader.load_state_dict(loaded)
        if self._clock is not None and not self._set_since(loaded):
            self._clock.resumed(self._identity, loaded["epoch"], loaded["epoch_set"])
        if loaded.get("done"):
            self.reader._passes.resume = None
            self._over, self._items = loaded, iter(())
        else:
            self._over, self._items = None, self._start()


_SWEPT: list[bool] = []  # this process swept /dev/shm (see recprep.storage.shmsweep)


def _sweep_once() -> None:
    """Once per process: remove torch's /dev/shm files killed DataLoader workers left
    (:func:`~recprep.storage.shmsweep.sweep_torch_shm`), saying so."""
    if _SWEPT:
        return
    _SWEPT.append(True)
    removed = sweep_torch_shm()
    if removed:
        shown = ", ".join(removed[:3]) + (", ..." if len(removed) > 3 else "")
        warn(RecprepWarning(
            f"removed {len(removed)} file(s) in {SHM_DIRECTORY} ({shown}): torch's "
            "shared memory of DataLoader workers that were killed while handing a batch "
            "over (their processes no longer exist), held until the machine restarts"))


def _token(state: dict[str, Any]) -> int:
    """A 63-bit hash of a reader state."""
    text = json.dumps(state, sort_keys=True).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big") >> 1


def _dataset_reader(source: RecordIO | str | Sequence[str], rank: int | None,
                    world_size: int | None, options: dict[str, Any]) -> RecordIO:
    """The reader of a :class:`RecordIODataset`: ``source`` (or a ``RecordIO`` of it and
    ``options``), for the rank chosen (:func:`_choose_rank`)."""
    if isinstance(source, RecordIO):
        if options:
            raise InvalidArgumentError(
                f"options {sorted(options)} are RecordIO's: pass them to "
                "RecordIO(...), or pass a pattern here instead of a reader"
            )
        reader = source
    else:
        reader = RecordIO(source, **options)
    rank, world_size = _choose_rank(reader, rank, world_size)
    if (rank, world_size) != (reader.rank, reader.world_size):
        reader = reader.for_rank(rank, world_size)
    return reader


def _checked_batching(transform: Any, batch_size: int | None, drop_last: bool) -> int | None:
    """``batch_size``, checked, with ``transform`` and ``drop_last`` checked against it."""
    if transform is not None and not callable(transform):
        raise InvalidArgumentError(f"transform must be callable, got {transform!r}")
    if batch_size is not None:
        return check_batch_size(batch_size)
    if drop_last:
        raise InvalidArgumentError("drop_last=True needs a batch_size")
    return None


def _worker_share(dataset: Any, info: Any) -> tuple[RecordIO, tuple[int, int] | None, int]:
    """The reader a pass of ``dataset`` reads in this process (``info``: the DataLoader
    worker's, None in the main process), the pass's identity, and how many workers share
    the pass.

    Each worker's copy of the reader is kept: with ``persistent_workers=True`` the dataset
    lives on in the worker, and makes a pass every epoch. The workers of one iterator
    share its base seed: they take one epoch."""
    if info is None:
        return dataset.reader, None, 1
    key = (info.id, info.num_workers)
    cached = dataset.__dict__.get("_worker_reader")
    if cached is None or cached[0] != key:
        freeze_once()  # what the worker holds: see read/workerstart.py
        copy = dataset.reader.for_worker(*key, batch_size=dataset.batch_size)
        cached = dataset._worker_reader = (key, copy)
        dataset._worker_passes = 0
    identity = (info.seed - info.id, dataset._worker_passes)
    dataset._worker_passes += 1
    return cached[1], identity, info.num_workers


def _publish_from(board: StatsBoard, worker: int, reader: RecordIO) -> None:
    """In a DataLoader worker: publish ``reader``'s figures on ``board`` as passes go."""
    publish = board.attach(worker, reader.stats)
    if publish is not None:
        reader._counter.listen(publish, PUBLISH_SECONDS)


def _build_dataset_class() -> type:
    """Make :class:`RecordIODataset` (a subclass of torch's ``IterableDataset``: torch is
    imported here, on first use)."""
    torch = _import_torch()

    class RecordIODataset(torch.utils.data.IterableDataset):  # type: ignore[name-defined]
        """An ``IterableDataset`` over RecordIO shard sets.

        Parameters
        ----------
        source
            A :class:`~recprep.RecordIO` reader, or what ``RecordIO`` takes (a glob, a
            directory, files) together with its keyword options (``shuffle``, ``seed``,
            ``num_threads``, ``codec``...).
        rank, world_size
            This process's rank. ``None`` (both): the reader's own, when it was built for
            a rank; else ``torch.distributed``'s when initialised; else ``0`` of ``1``.
        transform
            A function applied to each instance (turning arrays into tensors, say), or to
            each batch with ``batch_size``. What it returns goes through
            :func:`torchable` (``datetime64``/``timedelta64`` values become int64
            nanoseconds); what it gets is as recprep reads it.
        batch_size
            Yield batches of this many instances, collated by
            :meth:`recprep.RecordIO.batches` (tuples/dicts of columns; numbers and
            equal-shape arrays stacked into numpy arrays), instead of single instances.
            Use it with ``DataLoader(ds, batch_size=None)``, which then only converts the
            arrays to tensors. With DataLoader workers, each worker's part of the share is
            a whole number of batches (:meth:`recprep.RecordIO.for_worker`): only the last
            batch of the epoch can be short, whatever ``num_workers``.
        drop_last
            With ``batch_size``: leave out the epoch's last, short batch.
        **options
            ``RecordIO`` options, when ``source`` is not a reader already.

        Notes
        -----
        Pass ``n`` of the dataset (the ``n``-th time a DataLoader, or a loop, iterates it)
        shuffles for epoch ``n``, with ``num_workers=0`` or more, ``persistent_workers``
        or not: the count is shared with the worker processes. :meth:`set_epoch` fixes the
        epoch of every following pass instead, workers included (persistent ones too),
        as with ``DistributedSampler``; :attr:`epoch` is the epoch of the next pass.

        ``len(dataset)`` is the rank's share, which all its workers together yield; with
        ``batch_size``, the number of batches all its workers together yield (so
        ``len(DataLoader(ds, batch_size=None))`` is the batches of an epoch).
        """

        def __init__(
            self,
            source: RecordIO | str | Sequence[str],
            *,
            rank: int | None = None,
            world_size: int | None = None,
            transform: Callable[[Any], Any] | None = None,
            batch_size: int | None = None,
            drop_last: bool = False,
            **options: Any,
        ) -> None:
            super().__init__()
            reader = _dataset_reader(source, rank, world_size, options)
            self.reader = reader
            self.transform = transform
            self.batch_size = _checked_batching(transform, batch_size, drop_last)
            self.drop_last = bool(drop_last)
            self._clock = EpochClock(reader.epoch, reader._passes.fixed)
            self._board = StatsBoard()  # what each DataLoader worker read
            _sweep_once()

        @property
        def epoch(self) -> int:
            """The epoch of the next pass (see the notes)."""
            return self._clock.epoch

        def set_epoch(self, epoch: int) -> None:
            """Shuffle every following pass for ``epoch``, in DataLoader workers too."""
            self._clock.fix(epoch)
            self.reader.set_epoch(epoch)

        def __iter__(self) -> _Stream:
            info = torch.utils.data.get_worker_info()
            reader, identity, parties = _worker_share(self, info)
            if info is not None:
                _publish_from(self._board, info.id, reader)
            if reader._passes.resume is not None and identity is not None and not (
                self._clock.take_up(_token(reader._passes.resume), identity)
            ):  # a copy of a state an earlier iterator's workers resumed: not again
                reader._passes.resume = None
            if reader._passes.resume is not None:  # a loaded state: its pass goes on
                self._clock.resumed(identity, reader.epoch, reader._passes.fixed is not None)
            else:
                epoch, fixed = self._clock.claim(identity, parties, reader._passes.fixed)
                reader._passes.next_pass(epoch, fixed)
            return _Stream(reader, self.batch_size, self.drop_last, self.transform,
                           self._clock, identity)

        def stats(self) -> ReadStats:
            """What this process and every DataLoader worker read, and where the time
            went (:meth:`recprep.RecordIO.stats`, added up; see :meth:`worker_stats`)."""
            return sum(self.worker_stats().values(), self.reader.stats())

        def worker_stats(self) -> dict[int, ReadStats]:
            """Each DataLoader worker's :class:`~recprep.ReadStats`, by worker id: what
            the worker processes of that id read since this dataset was made, published
            twice a second and when a pass ends (:mod:`recprep.read.statsboard`)."""
            return self._board.read()

        def __len__(self) -> int:
            instances = len(self.reader)
            if self.batch_size is None:
                return instances
            if self.drop_last:
                return instances // self.batch_size
            return math.ceil(instances / self.batch_size)

    RecordIODataset.__module__ = __name__
    RecordIODataset.__qualname__ = "RecordIODataset"
    return RecordIODataset


def __getattr__(name: str) -> Any:
    if name == "RecordIODataset":  # built on first use, so torch is imported only then
        cls = globals()[name] = _build_dataset_class()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
