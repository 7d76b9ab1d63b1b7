"""PyTorch: ``RecordIODataset``, an ``IterableDataset`` split by rank and DataLoader worker.

``import recprep`` never imports torch; neither does ``import recprep.torch``. Torch is
imported when :class:`RecordIODataset` is first used, and a missing torch raises
:class:`~recprep.errors.MissingDependencyError` naming the extra to install.

Each DataLoader worker reads its part of its rank's share
(:meth:`recprep.RecordIO.for_worker`), so the ``world_size x num_workers`` readers of a
job see every instance exactly once per epoch. The rank comes from the arguments, or from
``torch.distributed`` when it is initialised.

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

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .batching import check_batch_size
from .errors import InvalidArgumentError, MissingDependencyError
from .read.reader import RecordIO

__all__ = ["RecordIODataset", "distributed_rank"]  # noqa: F822 (RecordIODataset: built lazily)


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
    ) -> None:
        self.reader = reader
        self._batch_size = batch_size
        self._drop_last = drop_last
        self._transform = transform
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
        return item if self._transform is None else self._transform(item)

    def state_dict(self) -> dict[str, Any]:
        """The position of this pass: ``{"reader": RecordIO.state_dict()}`` of the reader
        (of this DataLoader worker) that makes it."""
        return {"reader": self.reader.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue the pass ``state`` (from :meth:`state_dict`) describes instead."""
        if not isinstance(state, dict) or "reader" not in state:
            raise InvalidArgumentError(
                f"expected the state of a RecordIODataset pass (a dict with a 'reader' "
                f"key, from its iterator's state_dict()), got {state!r:.100}"
            )
        close = getattr(self._items, "close", None)
        if close is not None:
            close()
        self.reader.load_state_dict(state["reader"])
        self._items = self._start()


def _build() -> type:
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
            each batch with ``batch_size``.
        batch_size
            Yield batches of this many instances, collated by
            :meth:`recprep.RecordIO.batches` (tuples/dicts of columns; numbers and
            equal-shape arrays stacked into numpy arrays), instead of single instances.
            Use it with ``DataLoader(ds, batch_size=None)``, which then only converts the
            arrays to tensors. Each DataLoader worker batches its own part, so every
            worker's last batch can be short.
        drop_last
            With ``batch_size``: leave out each worker's last, short batch.
        **options
            ``RecordIO`` options, when ``source`` is not a reader already.

        Notes
        -----
        Call :meth:`set_epoch` at the start of every epoch, as with
        ``DistributedSampler``: DataLoader workers are fresh copies of the dataset, so
        the shuffle order is the one for the epoch last set. (With
        ``persistent_workers=True`` the workers keep their copies: don't call
        ``set_epoch``, and each worker's pass ``n`` uses epoch ``n``.)

        ``len(dataset)`` is the rank's share, which all its workers together yield; with
        ``batch_size``, the number of batches of that share read by one process (with
        ``num_workers > 1`` each worker cuts its own last batch, so there can be up to
        ``num_workers - 1`` more, or fewer with ``drop_last``).
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
            if transform is not None and not callable(transform):
                raise InvalidArgumentError(f"transform must be callable, got {transform!r}")
            if batch_size is not None:
                batch_size = check_batch_size(batch_size)
            elif drop_last:
                raise InvalidArgumentError("drop_last=True needs a batch_size")
            self.reader = reader
            self.transform = transform
            self.batch_size = batch_size
            self.drop_last = bool(drop_last)

        def set_epoch(self, epoch: int) -> None:
            """Shuffle the following passes for ``epoch`` (see the notes)."""
            self.reader.set_epoch(epoch)

        def __iter__(self) -> _Stream:
            info = torch.utils.data.get_worker_info()
            reader = self.reader
            if info is not None:
                # One copy per worker, kept: with persistent_workers=True this dataset
                # lives on in the worker, and its passes must count epochs (pass n, epoch n)
                key = (info.id, info.num_workers)
                cached = self.__dict__.get("_worker_reader")
                if cached is None or cached[0] != key:
                    cached = self._worker_reader = (key, reader.for_worker(*key))
                reader = cached[1]
            return _Stream(reader, self.batch_size, self.drop_last, self.transform)

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
        cls = globals()[name] = _build()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
