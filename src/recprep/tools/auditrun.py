"""How :func:`~recprep.tools.audit.check_exactly_once` drives a user's readers: the
identity of an instance, the ranks of a job read in lockstep, stops and resumes.

A *rank* is what ``make_reader(rank, world)`` built: a reader creator (``reader()`` gives
a pass: :class:`~recprep.RecordIO`, an index split, a ``mix``) or an iterable (a torch
``IterableDataset``, whose iterator may hold the state, as ``RecordIODataset``'s does);
with ``workers=N`` it is read through torchdata's ``StatefulDataLoader`` with ``N``
worker processes, and the loader's state is the rank's. The ranks of a job advance in
lockstep, one instance each in rank order, as data-parallel training steps do.

The default identity of an instance is a digest of its decoded value
(:func:`instance_id`): equal values have equal ids, so the checker compares multisets
(a set that holds a value twice must yield it twice).

>>> instance_id((1, "a")) == instance_id((1, "a")), instance_id(1) == instance_id(1.0)
(True, False)
>>> len(instance_id({"x": [1, 2], "y": b"z"}))
16
"""

from __future__ import annotations

import hashlib
import json
import pickle
import reprlib
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError, MissingDependencyError

__all__ = ["Job", "Notes", "Seen", "instance_id", "preview"]

class _Short(reprlib.Repr):
    """``reprlib`` with arrays (and tensors) said by dtype, shape and first items: an
    array's own ``repr`` formats every item, milliseconds for a large one."""

    def repr_ndarray(self, x: np.ndarray, level: int) -> str:
        head = ", ".join(self.repr1(v, level - 1) for v in x.ravel()[:3].tolist())
        more = ", ..." if x.size > 3 else ""
        return f"array({x.dtype}, shape {x.shape}, [{head}{more}])"

    def repr_Tensor(self, x: Any, level: int) -> str:
        return "tensor:" + self.repr_ndarray(x.detach().cpu().numpy(), level)


_SHORT = _Short()
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlist, _SHORT.maxtuple = 40, 40, 4, 4


def preview(instance: Any) -> str:
    """A short ``repr`` of ``instance`` for a report.

    >>> preview(("a" * 100, 3))
    "('aaaaaaaaaaaaaaaaa...aaaaaaaaaaaaaaaaaa', 3)"
    >>> preview((np.arange(784, dtype=np.float32), 7))
    '(array(float32, shape (784,), [0.0, 1.0, 2.0, ...]), 7)'
    """
    return _SHORT.repr(instance)


def _feed(h: Any, x: Any) -> None:
    """Feed a canonical encoding of ``x`` to the hash ``h`` (type-tagged, length-framed)."""
    if hasattr(x, "detach") and hasattr(x, "numpy"):  # a torch tensor
        x = x.detach().cpu().numpy()
    if x is None or isinstance(x, (bool, int, float, complex)):
        h.update(f"{type(x).__name__}:{x!r};".encode())
    elif isinstance(x, str):
        data = x.encode("utf-8", "surrogatepass")
        h.update(b"s%d:" % len(data) + data)
    elif isinstance(x, (bytes, bytearray, memoryview)):
        data = bytes(x)
        h.update(b"y%d:" % len(data) + data)
    elif isinstance(x, (np.ndarray, np.generic)):
        a = np.asarray(x)
        h.update(f"a{a.dtype.str}{a.shape}:".encode())
        if a.dtype.hasobject:
            for item in a.ravel():
                _feed(h, item)
        else:
            h.update(np.ascontiguousarray(a).tobytes())
    elif isinstance(x, (tuple, list)):
        h.update(b"%s%d:" % (type(x).__name__.encode(), len(x)))
        for item in x:
            _feed(h, item)
    elif isinstance(x, dict):
        h.update(b"d%d:" % len(x))
        for key in sorted(x, key=repr):
            _feed(h, key)
            _feed(h, x[key])
    else:
        h.update(b"p:" + pickle.dumps(x, protocol=4))


def instance_id(instance: Any) -> str:
    """The default identity of an instance: 16 hex digits of a BLAKE2b digest of its
    decoded value (numbers, strings, bytes, numpy arrays by dtype, shape and bytes, torch
    tensors as arrays, tuples, lists and dicts by their items; anything else pickled)."""
    h = hashlib.blake2b(digest_size=8)
    _feed(h, instance)
    return h.hexdigest()


@dataclass(frozen=True, slots=True)
class Seen:
    """One instance a run yielded: its id, the epoch, the phase (0 before the first
    stop), the rank and its position in that rank's stream of that epoch."""

    id: Hashable
    epoch: int
    phase: int
    rank: int
    position: int


def _roundtrip(state: Any) -> Any:
    """``state`` as a checkpoint file gives it back: through JSON, else pickle."""
    try:
        return json.loads(json.dumps(state))
    except (TypeError, ValueError):
        return pickle.loads(pickle.dumps(state))


def _loader_class() -> Any:
    try:
        from torchdata.stateful_dataloader import (  # type: ignore[import-untyped]
            StatefulDataLoader,
        )
    except ImportError:
        raise MissingDependencyError("torchdata", "torch",
                                     "checking with worker processes (workers=)") from None
    return StatefulDataLoader


class _Rank:
    """One rank's reader, as the checker drives it: passes, its state, a load."""

    def __init__(self, reader: Any, workers: int) -> None:
        self.reader = reader
        self.loader = None
        if workers:
            self.loader = _loader_class()(reader, batch_size=None, num_workers=workers)
        self.stream: Iterator[Any] | None = None
        self._state: Any = None  # to load into the next pass

    def start(self, epoch: int) -> Iterator[Any]:
        """A pass of ``epoch``, as a training loop makes one: the state loaded first (if
        any), then ``set_epoch(epoch)``, then the pass begun; a state held by a pass's
        iterator is loaded into the fresh iterator."""
        state, self._state = self._state, None
        if self.loader is not None:
            if state is not None:
                self.loader.load_state_dict(state)
            self._set_epoch(epoch)
            self.stream = iter(self.loader)
        elif state is not None and hasattr(self.reader, "load_state_dict"):
            self.reader.load_state_dict(state)
            self._set_epoch(epoch)
            self.stream = self._pass()
        else:
            self._set_epoch(epoch)
            self.stream = self._pass()
            if state is not None:
                _holder(self.stream, self.reader).load_state_dict(state)
        return self.stream

    def _set_epoch(self, epoch: int) -> None:
        set_epoch = getattr(self.reader, "set_epoch", None)
        if callable(set_epoch):
            set_epoch(epoch)

    def _pass(self) -> Iterator[Any]:
        return iter(self.reader() if callable(self.reader) else self.reader)

    def load(self, state: Any) -> None:
        self._state = state

    def state_dict(self) -> Any:
        holder = self.loader or _holder(self.stream, self.reader)
        return holder.state_dict()

    def close(self) -> None:
        close = getattr(self.stream, "close", None)
        if callable(close):
            close()
        if self.loader is not None:  # ends the worker processes
            shutdown = getattr(self.stream, "_shutdown_workers", None)
            if callable(shutdown):
                shutdown()
        self.stream = None


def _holder(stream: Any, reader: Any) -> Any:
    """What holds a rank's state: the pass's iterator when it has ``state_dict`` (a torch
    dataset's), else the reader."""
    for candidate in (stream, reader):
        if hasattr(candidate, "state_dict") and hasattr(candidate, "load_state_dict"):
            return candidate
    raise InvalidArgumentError(
        f"the reader {reader!r:.80} has no state_dict/load_state_dict (nor has its "
        "iterator): a reader that can't say where it is can't resume; give the checker "
        "a RecordIO, an index_split, a mix or a torch dataset with states"
    )


@dataclass
class Notes:
    """What a check keeps of each id: a short ``repr`` of its instance (not the instance:
    memory), and the source ``source`` says it comes from."""

    source: Callable[[Any], Hashable] | None = None
    previews: dict[Hashable, str] = field(default_factory=dict)
    groups: dict[Hashable, Hashable] = field(default_factory=dict)

    def add(self, ident: Hashable, instance: Any) -> None:
        if ident not in self.previews:
            self.previews[ident] = preview(instance)
            if self.source is not None:
                self.groups[ident] = self.source(instance)


@dataclass
class Job:
    """The ranks of one phase of a run, read in lockstep."""

    make_reader: Callable[[int, int], Any]
    world: int
    workers: int
    phase: int
    notes: Notes
    ranks: list[_Rank] = field(default_factory=list)

    def __post_init__(self) -> None:
        readers = [self.make_reader(r, self.world) for r in range(self.world)]
        seeds = [getattr(reader, "seed", None) if getattr(reader, "shuffle", True) else None
                 for reader in readers]  # an unshuffled RecordIO's seed is of no matter
        for r, seed in enumerate(seeds):
            if seed != seeds[0]:
                raise InvalidArgumentError(
                    f"rank 0 and rank {r} of {self.world} read with different seeds "
                    f"({seeds[0]!r} and {seed!r}): the ranks of a job must share one "
                    "seed, or they disagree on the order; have make_reader pass a fixed "
                    "seed= to every rank")
        self.ranks = [_Rank(reader, self.workers) for reader in readers]

    def run(self, epochs: range, key: Callable[[Any], Hashable], out: list[Seen],
            until: int | None) -> int | None:
        """Read ``epochs`` in lockstep into ``out`` until it holds ``until`` instances;
        the epoch the job stopped in (None: it read every epoch to the end)."""
        notes = self.notes
        for epoch in epochs:
            streams: dict[int, Iterator[Any]] = {
                r: rank.start(epoch) for r, rank in enumerate(self.ranks)}
            counts = dict.fromkeys(streams, 0)
            while streams:
                for r in list(streams):
                    if until is not None and len(out) >= until:
                        return epoch
                    try:
                        instance = next(streams[r])
                    except StopIteration:
                        del streams[r]
                        continue
                    ident = key(instance)
                    notes.add(ident, instance)
                    out.append(Seen(ident, epoch, self.phase, r, counts[r]))
                    counts[r] += 1
        return None

    def states(self) -> list[Any]:
        """Every rank's state (as a checkpoint gives it back), the streams then closed."""
        try:
            return [_roundtrip(rank.state_dict()) for rank in self.ranks]
        finally:
            self.close()

    def close(self) -> None:
        for rank in self.ranks:
            rank.close()

    def load(self, states: list[Any], combine: Callable[[list[Any]], Any] | None) -> None:
        """Load ``states`` of the previous phase: one per rank when the world is the same,
        else one state combined from all (``combine``) into every rank."""
        if len(states) == self.world:
            for rank, state in zip(self.ranks, states, strict=True):
                rank.load(state)
            return
        if self.workers:
            raise InvalidArgumentError(
                f"the plan changes the world from {len(states)} to {self.world} ranks with "
                f"workers={self.workers}: the states are StatefulDataLoader's, which don't "
                "combine; check world-size changes without workers")
        if combine is None:
            raise InvalidArgumentError(
                f"the plan changes the world from {len(states)} to {self.world} ranks, but "
                f"{type(self.ranks[0].reader).__name__} has no combine_states: its states "
                "load only into the same rank and world size"
            )
        combined = _roundtrip(combine(states))
        for rank in self.ranks:
            rank.load(combined)
