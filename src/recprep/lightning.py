"""PyTorch Lightning: :class:`RecprepResume`, a callback that makes sure a resumed
``Trainer.fit`` continues each recprep stream where its checkpoint left it.

``import recprep.lightning`` imports neither torch nor Lightning: the callback class is
made on first use, and a missing Lightning raises
:class:`~recprep.errors.MissingDependencyError` naming the extra to install.

Lightning saves the state of every stateful train loader (torchdata's
``StatefulDataLoader`` over a :class:`~recprep.torch.RecordIODataset`) in its
checkpoints, and loads it back when ``fit(ckpt_path=...)`` resumes, but not always
(Lightning 2.5-2.6, read in its fit loop):

* when anything asks ``trainer.estimated_stepping_batches`` in ``configure_optimizers``
  (as ``OneCycleLR`` users do), the train loader is set up, and iterated, before the
  checkpoint is restored; the restored loader state is then never loaded (Lightning issue
  #20550): the stream starts a new pass of epoch 0 in the middle of the epoch;
* when the checkpoint was taken after the last batch of an epoch (``every_n_train_steps``
  landing on an epoch's end), Lightning loads that finished pass and takes its empty rest
  as the whole next epoch: an epoch is skipped;
* when the checkpoint was taken at an epoch's end (``on_train_epoch_end``), Lightning
  loads nothing, and a new dataset's first pass is of epoch 0 whatever epoch the trainer
  is at: a shuffled set repeats epoch 0's order.

All three are silent. :class:`RecprepResume` records the recprep reader states of the
train loaders in each checkpoint (``checkpoint["recprep"]``) and, when training starts
after a resume, compares the streams the loaders are about to yield with them: each
stream must continue the saved pass, or, when Lightning goes on with the next epoch,
start that epoch afresh. A stream that doesn't is restored from the checkpoint
(``on_missing="load"``, the default), or reported (``"warn"``: a
:class:`~recprep.errors.ResumeMismatchWarning`; ``"raise"``: a
:class:`~recprep.errors.ResumeMismatchError`).

Examples
--------
>>> import pytest; _ = pytest.importorskip("lightning")
>>> from recprep.lightning import RecprepResume
>>> callback = RecprepResume(on_missing="raise")  # Trainer(callbacks=[callback], ...)
>>> callback.on_missing, callback.state_key
('raise', 'RecprepResume')
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator, Mapping
from typing import Any, Literal

from .errors import (
    InvalidArgumentError,
    MissingDependencyError,
    ResumeMismatchError,
    ResumeMismatchWarning,
    warn,
)

__all__ = ["RecprepResume", "reader_states"]  # noqa: F822 (RecprepResume: built lazily)

#: what :class:`RecprepResume` does with a stream that is not where its checkpoint left it
OnMissing = Literal["load", "warn", "raise"]
ON_MISSING: tuple[OnMissing, ...] = ("load", "warn", "raise")
#: the key of :class:`RecprepResume`'s record in a Lightning checkpoint
CHECKPOINT_KEY = "recprep"


def _import_lightning() -> Any:
    """``lightning.pytorch``, else the older ``pytorch_lightning`` package."""
    for name in ("lightning.pytorch", "pytorch_lightning"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise MissingDependencyError("lightning", "lightning", "recprep.lightning")


def reader_states(loader_state: Any) -> list[dict[str, Any]]:
    """The recprep reader states inside a loader's ``state_dict()`` (one per DataLoader
    worker of a :class:`~recprep.torch.RecordIODataset`), in the order the state holds
    them.

    Examples
    --------
    >>> state = {"_snapshot": {"_worker_snapshots": {"worker_0": {"fetcher_state": {
    ...     "dataset_iter_state": {"reader": {"recprep_state": 1, "yielded": 8}}}}}}}
    >>> reader_states(state)
    [{'recprep_state': 1, 'yielded': 8}]
    >>> reader_states({"_num_yielded": 3})
    []
    """
    found: list[dict[str, Any]] = []
    stack = [loader_state]
    while stack:
        value = stack.pop()
        if isinstance(value, Mapping):
            if "recprep_state" in value:
                found.append(dict(value))
            else:
                stack.extend(reversed(list(value.values())))
        elif isinstance(value, (list, tuple)):
            stack.extend(reversed(value))
    return found


def _stateful_loaders(trainer: Any) -> list[Any]:
    """The train loaders of ``trainer`` that have a state with recprep reader states."""
    loaders = _flattened(getattr(trainer, "train_dataloader", None))
    return [dl for dl in loaders if callable(getattr(dl, "state_dict", None))
            and callable(getattr(dl, "load_state_dict", None))
            and _has_recprep_dataset(dl)]


def _flattened(value: Any) -> Iterator[Any]:
    if value is None:
        return
    if isinstance(value, Mapping):
        for item in value.values():
            yield from _flattened(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _flattened(item)
    elif hasattr(value, "flattened") and not hasattr(value, "dataset"):  # CombinedLoader
        yield from value.flattened
    else:
        yield value


def _has_recprep_dataset(loader: Any) -> bool:
    """Whether ``loader`` reads a :class:`~recprep.torch.RecordIODataset` (or a subclass)."""
    return any(c.__module__ == "recprep.torch" and c.__name__ == "RecordIODataset"
               for c in type(getattr(loader, "dataset", None)).__mro__)


def _key(state: dict[str, Any]) -> str:
    return json.dumps(state, sort_keys=True)


def _fresh_pass_of(state: dict[str, Any], after: dict[str, Any]) -> bool:
    """Whether ``state`` is the start of the pass that follows the pass ``after``."""
    if state.get("yielded") or state.get("done") or state.get("base"):
        return False
    if after.get("epoch_set"):  # the user fixes epochs: theirs to choose
        return True
    return bool(state.get("epoch") == after.get("epoch", -1) + 1)


def _finished(loader_state: Any) -> Any:
    """``loader_state`` with its pass over: each recprep reader state ``done``, the
    loader's iterator finished (so the next ``iter()`` starts the next epoch)."""
    if isinstance(loader_state, Mapping):
        if "recprep_state" in loader_state:
            return {**loader_state, "done": True}
        out = {k: _finished(v) for k, v in loader_state.items()}
        if "_iterator_finished" in out:
            out["_iterator_finished"] = True
        return out
    if isinstance(loader_state, list):
        return [_finished(v) for v in loader_state]
    return loader_state


class _Check:
    """What :class:`RecprepResume` found for one loader after a resume."""

    def __init__(self, index: int, saved: Any, now: Any, next_epoch: bool) -> None:
        self.index, self.saved, self.next_epoch = index, saved, next_epoch
        before, after = reader_states(saved), reader_states(now)
        self.before, self.after = before, after
        if len(before) != len(after):
            self.ok = False
        elif next_epoch:
            self.ok = all(_fresh_pass_of(a, b) for a, b in zip(
                sorted(after, key=_worker), sorted(before, key=_worker), strict=True))
        else:
            self.ok = sorted(map(_key, before)) == sorted(map(_key, after))

    def target(self) -> Any:
        """The loader state that makes the stream right."""
        return _finished(self.saved) if self.next_epoch else self.saved

    def describe(self) -> str:
        def where(states: list[dict[str, Any]]) -> str:
            return ", ".join(f"epoch {s.get('epoch')} at {s.get('yielded')}"
                             + (" (over)" if s.get("done") else "") for s in states) or "none"

        expected = ("a new pass of the next epoch, after the saved one: "
                    if self.next_epoch else "the saved pass: ")
        return (f"train loader {self.index}: expected {expected}{where(self.before)}; "
                f"found {where(self.after)}")


def _worker(state: dict[str, Any]) -> tuple[int, int]:
    return int(state.get("rank") or 0), int(state.get("worker") or 0)


def _restart(trainer: Any, checks: list[_Check], loaders: list[Any]) -> None:
    """Load each mismatched loader's right state and have Lightning iterate anew."""
    fetcher = getattr(getattr(trainer, "fit_loop", None), "_data_fetcher", None)
    if fetcher is None:
        raise ResumeMismatchError(
            "the resumed streams are not where the checkpoint left them, and this "
            "version of Lightning gives no way to restart its train iterator: "
            + "; ".join(c.describe() for c in checks if not c.ok)
        )
    for check in checks:
        if not check.ok:
            loaders[check.index].load_state_dict(check.target())
    iter(fetcher)  # the loaders' next iterators, from the states just loaded


def _build_callback_class() -> type:
    """Make :class:`RecprepResume` (a subclass of Lightning's ``Callback``)."""
    pl = _import_lightning()

    class RecprepResume(pl.Callback):  # type: ignore[name-defined]
        """Check, and restore, the recprep streams of a resumed ``Trainer.fit``.

        Parameters
        ----------
        on_missing
            What to do when, after ``fit(ckpt_path=...)``, a train loader's stream is not
            where the checkpoint left it: ``"load"`` (load the checkpoint's state into the
            loader and restart Lightning's train iterator: the stream continues
            exactly), ``"warn"`` (a :class:`~recprep.errors.ResumeMismatchWarning`, and
            training goes on from where the loader is), ``"raise"`` (a
            :class:`~recprep.errors.ResumeMismatchError` before the first batch).

        Notes
        -----
        Add it to the ``Trainer``'s callbacks in every run, the first too: what it
        checks is the record it adds to each checkpoint. A checkpoint without that record
        (taken without the callback) is not checked. It checks train loaders that have
        ``state_dict``/``load_state_dict`` (torchdata's ``StatefulDataLoader``) over a
        :class:`~recprep.torch.RecordIODataset`.

        Examples
        --------
        >>> import pytest; _ = pytest.importorskip("lightning")
        >>> from recprep.lightning import RecprepResume
        >>> from recprep.errors import InvalidArgumentError
        >>> try:
        ...     RecprepResume(on_missing="later")
        ... except InvalidArgumentError as err:
        ...     print(err)
        on_missing must be one of 'load', 'warn', 'raise', got 'later'
        """

        def __init__(self, on_missing: OnMissing = "load") -> None:
            if on_missing not in ON_MISSING:
                raise InvalidArgumentError(
                    f"on_missing must be one of {', '.join(map(repr, ON_MISSING))}, got "
                    f"{on_missing!r}")
            self.on_missing = on_missing
            self._saved: dict[str, Any] | None = None

        def on_save_checkpoint(self, trainer: Any, pl_module: Any,
                               checkpoint: dict[str, Any]) -> None:
            loaders = _stateful_loaders(trainer)
            if loaders:
                checkpoint[CHECKPOINT_KEY] = {
                    "version": 1, "epoch": trainer.current_epoch,
                    "loaders": [dl.state_dict() for dl in loaders]}

        def on_load_checkpoint(self, trainer: Any, pl_module: Any,
                               checkpoint: dict[str, Any]) -> None:
            self._saved = checkpoint.get(CHECKPOINT_KEY)

        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            saved, self._saved = self._saved, None
            if saved is None:
                return
            loaders = _stateful_loaders(trainer)
            if len(loaders) != len(saved["loaders"]):
                raise ResumeMismatchError(
                    f"the checkpoint holds the states of {len(saved['loaders'])} recprep "
                    f"train loaders, the trainer has {len(loaders)}: resume with the "
                    "loaders the checkpoint was taken with")
            next_epoch = trainer.current_epoch > saved["epoch"]
            checks = [_Check(i, state, dl.state_dict(), next_epoch)
                      for i, (dl, state) in enumerate(zip(loaders, saved["loaders"], strict=True))]
            if all(c.ok for c in checks):
                return
            found = "; ".join(c.describe() for c in checks if not c.ok)
            if self.on_missing == "raise":
                raise ResumeMismatchError(
                    f"the resumed streams are not where the checkpoint left them: {found} "
                    "(Lightning did not restore the loader state; see recprep.lightning: "
                    "RecprepResume(on_missing='load') restores it)")
            if self.on_missing == "warn":
                warn(ResumeMismatchWarning(
                    f"the resumed streams are not where the checkpoint left them: {found}; "
                    "training goes on from there"))
                return
            _restart(trainer, checks, loaders)

    RecprepResume.__module__ = __name__
    RecprepResume.__qualname__ = "RecprepResume"
    return RecprepResume


def __getattr__(name: str) -> Any:
    if name == "RecprepResume":  # built on first use, so Lightning is imported only then
        cls = globals()[name] = _build_callback_class()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
