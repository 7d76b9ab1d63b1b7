"""PyTorch Lightning: a ``Trainer.fit`` killed with SIGKILL and resumed from its checkpoint
trains on the stream an uninterrupted run does; :class:`recprep.lightning.RecprepResume`
catches, and repairs, the resumes where Lightning doesn't restore the loader state.

Each run is a process of its own (tests/support/train_job.py): 40 instances, batches of 4
made by the dataset, 2 epochs of 10 steps, a checkpoint after every step (or at each
epoch's end), the process killing itself with SIGKILL at the start of a chosen step.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from recprep.errors import InvalidArgumentError, MissingDependencyError

pytest.importorskip("torch")
pytest.importorskip("torchdata.stateful_dataloader")
pytest.importorskip("lightning")

import torch  # noqa: E402

from recprep.lightning import RecprepResume, reader_states  # noqa: E402

from ..support.train_job import (  # noqa: E402
    finish,
    launch,
    start,
    trained_on,
    write_training_set,
)

pytestmark = pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")
STEPS, PER_EPOCH = 20, 10


@pytest.fixture(scope="module")
def pattern(tmp_path_factory) -> str:
    return write_training_set(tmp_path_factory.mktemp("lightning-set"))


@pytest.fixture(scope="module")
def uninterrupted(pattern, tmp_path_factory):
    """The batches (ids) an uninterrupted run trains on, by number of DataLoader workers."""
    found: dict[int, list[list[int]]] = {}

    def of(workers: int) -> list[list[int]]:
        if workers not in found:
            work = tmp_path_factory.mktemp(f"whole{workers}")
            done = launch("lightning", pattern, work, "--workers", str(workers))
            assert done.returncode == 0, done.stderr[-3000:]
            found[workers] = trained_on(work)
            assert len(found[workers]) == STEPS
            for epoch in range(2):  # each epoch: every instance once
                ids = found[workers][epoch * PER_EPOCH:(epoch + 1) * PER_EPOCH]
                assert sorted(i for batch in ids for i in batch) == list(range(40))
        return found[workers]

    return of


def killed(pattern: str, work: Path, step: int, *options: str) -> None:
    done = launch("lightning", pattern, work, "--kill-at", str(step), *options)
    assert done.returncode == -9, done.stderr[-3000:]  # SIGKILL, at the chosen step
    assert len(trained_on(work)) == step


def resumed(pattern: str, work: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return launch("lightning", pattern, work, "--resume", *options)


def resumed_copies(pattern: str, tmp_path: Path, guards: tuple[str, ...], *options: str
                   ) -> dict[str, subprocess.CompletedProcess[str]]:
    """Resume copies of the killed run in ``tmp_path / "run"`` at once, one per guard
    (``none``: without RecprepResume), each in ``tmp_path / guard``."""
    jobs = {}
    for guard in guards:
        shutil.copytree(tmp_path / "run", tmp_path / guard)
        extra = () if guard == "none" else ("--guard", guard)
        jobs[guard] = start("lightning", pattern, tmp_path / guard, "--resume", *options,
                            *extra)
    return {guard: finish(job) for guard, job in jobs.items()}


def saved_loader_state(work: Path) -> list[dict]:
    """What Lightning itself saved of the train loader in the last checkpoint."""
    checkpoint = torch.load(work / "ckpt" / "last.ckpt", weights_only=False)
    return checkpoint["loops"]["fit_loop"]["state_dict"]["combined_loader"]


@pytest.mark.parametrize("workers", [0, 2])
def test_a_killed_fit_resumes_the_stream_exactly(pattern, uninterrupted, tmp_path, workers):
    """Killed in the middle of epoch 1: Lightning saved the StatefulDataLoader's state
    (each worker's reader position, not a count to replay) and restores it."""
    killed(pattern, tmp_path, 13, "--workers", str(workers))
    [state] = saved_loader_state(tmp_path)
    readers = reader_states(state)
    assert len(readers) == max(workers, 1) and {r["epoch"] for r in readers} == {1}
    assert sum(r["yielded"] for r in readers) == 3 * 4  # steps 10, 11, 12 of epoch 1
    done = resumed(pattern, tmp_path, "--workers", str(workers))
    assert done.returncode == 0, done.stderr[-3000:]
    assert trained_on(tmp_path) == uninterrupted(workers)


def test_lightning_20550_is_caught_and_repaired(pattern, uninterrupted, tmp_path):
    """``configure_optimizers`` asks ``estimated_stepping_batches``: Lightning loads no
    loader state on resume, and the stream silently restarts epoch 0 mid-epoch 1."""
    killed(pattern, tmp_path / "run", 13, "--workers", "2", "--stepping", "--guard", "load")
    runs = resumed_copies(pattern, tmp_path, ("none", "raise", "load"), "--workers", "2",
                          "--stepping")
    whole = uninterrupted(2)

    assert runs["none"].returncode == 0, runs["none"].stderr[-3000:]
    again = trained_on(tmp_path / "none")[13:]
    assert again == whole[:7], "Lightning #20550 looks fixed: the stream continued"

    assert runs["raise"].returncode == 1 and len(trained_on(tmp_path / "raise")) == 13
    assert "ResumeMismatchError: the resumed streams are not where the checkpoint left " \
           "them: train loader 0: expected the saved pass: epoch 1 at " in runs["raise"].stderr
    assert "found epoch 0 at 0, epoch 0 at 0" in runs["raise"].stderr

    assert runs["load"].returncode == 0, runs["load"].stderr[-3000:]
    assert trained_on(tmp_path / "load") == whole


def test_a_checkpoint_after_an_epochs_last_step_resumes_into_the_next_epoch(
    pattern, uninterrupted, tmp_path
):
    """The last checkpoint is the one after step 9, the last of epoch 0. Lightning loads
    that finished pass and takes its empty rest for all of epoch 1."""
    killed(pattern, tmp_path / "run", PER_EPOCH, "--guard", "load")
    for done in resumed_copies(pattern, tmp_path, ("none", "load")).values():
        assert done.returncode == 0, done.stderr[-3000:]
    assert trained_on(tmp_path / "none") == uninterrupted(0)[:PER_EPOCH], (
        "Lightning now trains on epoch 1 after this resume")
    assert trained_on(tmp_path / "load") == uninterrupted(0)


def test_an_epoch_end_checkpoint_resumes_with_the_next_epochs_order(
    pattern, uninterrupted, tmp_path
):
    """Checkpoints at each epoch's end: Lightning loads no loader state, and the new
    process's dataset shuffles its first pass as epoch 0."""
    killed(pattern, tmp_path / "run", 13, "--every", "epoch", "--guard", "warn")
    runs = resumed_copies(pattern, tmp_path, ("none", "warn", "load"), "--every", "epoch")
    for guard, done in runs.items():
        assert done.returncode == 0, done.stderr[-3000:]
        if guard == "warn":
            assert "ResumeMismatchWarning" not in done.stderr  # shown by its message:
            assert "expected a new pass of the next epoch, after the saved one: epoch 0 " \
                   "at 40; found epoch 0 at 0; training goes on from there" in done.stderr
    whole = uninterrupted(0)
    assert trained_on(tmp_path / "none") == whole[:PER_EPOCH] * 2
    assert trained_on(tmp_path / "warn") == whole[:PER_EPOCH] * 2
    assert trained_on(tmp_path / "load") == whole


# -- the parts, in this process ----------------------------------------------------------------


def test_reader_states_are_found_in_both_loader_layouts():
    reader = {"recprep_state": 1, "epoch": 2, "yielded": 8, "worker": 1}
    single = {"_num_yielded": 2, "fetcher_state": {"dataset_iter_state": {"reader": reader}}}
    multi = {"_snapshot": {"_worker_snapshots": {
        "worker_0": {"fetcher_state": {"dataset_iter_state": {"reader": {**reader,
                                                                         "worker": 0}}}},
        "worker_1": {"fetcher_state": {"dataset_iter_state": {"reader": reader}}}}}}
    assert reader_states(single) == [reader]
    assert [r["worker"] for r in reader_states(multi)] == [0, 1]
    assert reader_states({"_num_yielded": 2, "fetcher_state": None}) == []


def test_on_missing_is_checked():
    with pytest.raises(InvalidArgumentError, match="'load', 'warn', 'raise', got 'skip'"):
        RecprepResume(on_missing="skip")


def test_the_module_imports_neither_lightning_nor_torch():
    code = textwrap.dedent("""
        import sys
        import recprep.lightning
        print(sorted(m for m in ("lightning", "torch", "pytorch_lightning") if m in sys.modules))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.strip() == "[]", done.stderr


def test_a_missing_lightning_names_the_extra(monkeypatch):
    import recprep.lightning as module

    for name in ("lightning", "lightning.pytorch", "pytorch_lightning"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'recprep\[lightning\]'"):
        module._build_callback_class()
