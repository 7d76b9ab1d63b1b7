"""HF accelerate: ``Accelerator.prepare`` on a ``StatefulDataLoader`` over a
``RecordIODataset``, ``save_state`` after every step, the process killed with SIGKILL and
resumed with ``load_state``: it trains on the stream an uninterrupted run does.

Each run is a process of its own (tests/support/train_job.py): 40 instances, batches of 4
made by the dataset, 3 epochs of 10 steps, the state saved after every step and at each
epoch's end, the process killing itself at the start of a chosen step.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("torchdata.stateful_dataloader")
pytest.importorskip("accelerate")

from ..support.train_job import launch, trained_on, write_training_set  # noqa: E402

PER_EPOCH, EPOCHS = 10, 3


@pytest.fixture(scope="module")
def pattern(tmp_path_factory) -> str:
    return write_training_set(tmp_path_factory.mktemp("accelerate-set"))


def run(pattern, work, *options):
    done = launch("accelerate", pattern, work, "--epochs", str(EPOCHS), *options)
    assert done.returncode == 0, done.stderr[-3000:]


def kill_and_resume(pattern, work, step, *options, resume_options=()):
    done = launch("accelerate", pattern, work, "--epochs", str(EPOCHS), "--kill-at",
                  str(step), *options)
    assert done.returncode == -9, done.stderr[-3000:]
    assert len(trained_on(work)) == step
    run(pattern, work, "--resume", *options, *resume_options)
    return trained_on(work)


@pytest.fixture(scope="module")
def uninterrupted(pattern, tmp_path_factory):
    """The batches (ids) an uninterrupted run trains on, by number of DataLoader workers."""
    found: dict[int, list[list[int]]] = {}

    def of(workers: int) -> list[list[int]]:
        if workers not in found:
            work = tmp_path_factory.mktemp(f"whole{workers}")
            run(pattern, work, "--workers", str(workers))
            found[workers] = batches = trained_on(work)
            assert len(batches) == EPOCHS * PER_EPOCH
            epochs = [batches[e * PER_EPOCH:(e + 1) * PER_EPOCH] for e in range(EPOCHS)]
            for ids in epochs:  # each epoch: every instance once, in an order of its own
                assert sorted(i for batch in ids for i in batch) == list(range(40))
            assert epochs[0] != epochs[1] != epochs[2]
        return found[workers]

    return of


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("step", [13, PER_EPOCH], ids=["mid-epoch", "epoch-boundary"])
def test_a_killed_run_resumes_the_stream_exactly(pattern, uninterrupted, tmp_path, workers,
                                                 step):
    """The state saved by ``save_state`` (the prepared loader's ``dl_state_dict``), loaded
    by ``load_state``, with ``data.set_epoch(epoch)`` after it. At the epoch boundary the
    loaded pass is over and accelerate sets the next epoch before the loader loads it:
    the epoch set stands (on main, the loaded state's epoch 0 came back for epoch 1)."""
    seen = kill_and_resume(pattern, tmp_path, step, "--workers", str(workers),
                           resume_options=("--set-epoch",))
    assert seen == uninterrupted(workers)


def test_without_set_epoch_the_epochs_after_a_resume_repeat(pattern, uninterrupted, tmp_path):
    """accelerate's prepared loader sets the dataset's epoch to its own count of passes,
    which starts at 0 in every process: the epoch after a resume repeats the order of
    the one resumed. Why the docs say ``data.set_epoch(epoch)`` after ``load_state``."""
    seen = kill_and_resume(pattern, tmp_path, 13)
    whole = uninterrupted(0)
    assert seen[:2 * PER_EPOCH] == whole[:2 * PER_EPOCH]
    assert seen[2 * PER_EPOCH:] == whole[PER_EPOCH:2 * PER_EPOCH] != whole[2 * PER_EPOCH:]


def test_prepare_without_use_stateful_dataloader_keeps_no_loader_state(
    pattern, uninterrupted, tmp_path
):
    """``prepare`` rebuilds the loader: without ``use_stateful_dataloader=True`` it is a
    plain DataLoader, ``save_state`` saves no loader state, and a resumed run starts the
    interrupted epoch over (steps 10-12 twice). Why the docs ask for it."""
    seen = kill_and_resume(pattern, tmp_path, 13, "--plain", resume_options=("--set-epoch",))
    whole = uninterrupted(0)
    assert seen[:13] == whole[:13]
    assert seen[13:] == whole[PER_EPOCH:]  # epoch 1 from its start: 3 batches again


def test_an_epoch_set_before_a_finished_state_is_loaded_stands(pattern):
    """What accelerate's prepared loader does on resume, in this process: ``set_epoch(1)``
    on the dataset, then the loader loads the state of epoch 0's finished pass. Epoch 1
    comes next (on main: epoch 0's order again)."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    from recprep.torch import RecordIODataset

    def loader():
        ds = RecordIODataset(pattern, shuffle=True, seed=7, batch_size=4)
        return ds, StatefulDataLoader(ds, batch_size=None)

    ds, dl = loader()
    whole = []
    for epoch in range(2):
        ds.set_epoch(epoch)
        whole.append([ids.tolist() for ids, _ in dl])
    ds, dl = loader()
    ds.set_epoch(0)
    assert [ids.tolist() for ids, _ in dl] == whole[0]
    state = dl.state_dict()
    assert state["_iterator_finished"] and state["fetcher_state"]["dataset_iter_state"][
        "reader"]["epoch_set"]
    ds, dl = loader()
    ds.set_epoch(1)
    dl.load_state_dict(state)
    assert [ids.tolist() for ids, _ in dl] == whole[1]
