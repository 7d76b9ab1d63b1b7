"""Issue 22 (trust, second round), items 8 and 21: the PyTorch adapter, with real
DataLoaders (and torchdata's StatefulDataLoader).

Each test here failed on the code before: with ``num_workers=2`` and no ``set_epoch``
every epoch had epoch 0's order (with ``num_workers=0`` it changed), ``set_epoch`` didn't
reach persistent workers, a resumed loader counted its epochs from the wrong pass,
``len(loader)`` was less than the batches of an epoch with workers, and ``datetime64``
columns made the DataLoader raise unless a ``transform`` converted them.
"""

from __future__ import annotations

import json
import multiprocessing

import numpy as np
import pandas as pd
import pytest

from recprep import InvalidArgumentError, RecordIO, convert

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

from recprep.torch import RecordIODataset  # noqa: E402

N = 60


@pytest.fixture(scope="module")
def pattern(tmp_path_factory):
    where = tmp_path_factory.mktemp("h2torch")
    convert(str(where), list(range(N)), 3, "p", chunk_bytes=64, progress=False)
    return str(where / "p")


def epoch_order(pattern, epoch, num_workers, **options):
    """What each worker's pass of ``epoch`` yields, read with plain readers."""
    out = []
    for w in range(max(num_workers, 1)):
        reader = RecordIO(pattern, shuffle=True, seed=5, **options)
        if num_workers:
            reader = reader.for_worker(w, num_workers)
        reader.set_epoch(epoch)
        out.append(list(reader()))
    return out


def assert_epoch(got, pattern, epoch, num_workers):
    """``got`` (one loader pass) is epoch ``epoch``: every instance once, and each
    worker's instances in that worker's order for the epoch."""
    assert sorted(got) == list(range(N))
    for part in epoch_order(pattern, epoch, num_workers):
        mine = set(part)
        assert [x for x in got if x in mine] == part, epoch


MODES = [(0, False), (1, False), (2, False), (2, True), (3, False)]


@pytest.mark.parametrize("num_workers,persistent", MODES)
def test_each_pass_is_the_next_epoch_in_every_mode(pattern, num_workers, persistent):
    """Without set_epoch, loader pass n is epoch n whatever num_workers (the workers
    used to be fresh copies counting from 0: the same order every epoch)."""
    ds = RecordIODataset(RecordIO(pattern, shuffle=True, seed=5))
    options = {"persistent_workers": persistent} if num_workers else {}
    loader = DataLoader(ds, batch_size=None, num_workers=num_workers, **options)
    epochs = []
    for n in range(3):
        assert ds.epoch == n
        epochs.append([int(x) for x in loader])
        assert_epoch(epochs[-1], pattern, n, num_workers)
    assert epochs[0] != epochs[1] != epochs[2]


def test_the_epoch_sequence_goes_on_across_loaders_and_modes(pattern):
    ds = RecordIODataset(RecordIO(pattern, shuffle=True, seed=5))
    first = [int(x) for x in DataLoader(ds, batch_size=None)]  # epoch 0, in this process
    second = [int(x) for x in DataLoader(ds, batch_size=None, num_workers=2)]  # epoch 1
    third = [int(x) for x in DataLoader(ds, batch_size=None)]  # epoch 2
    assert_epoch(first, pattern, 0, 0)
    assert_epoch(second, pattern, 1, 2)
    assert_epoch(third, pattern, 2, 0)


@pytest.mark.parametrize("persistent", [False, True])
def test_set_epoch_reaches_every_worker(pattern, persistent):
    """set_epoch used to miss persistent workers: they kept counting their own passes."""
    ds = RecordIODataset(RecordIO(pattern, shuffle=True, seed=5))
    loader = DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=persistent)
    for epoch in (4, 4, 1):
        ds.set_epoch(epoch)
        assert ds.epoch == epoch
        assert_epoch([int(x) for x in loader], pattern, epoch, 2)


@pytest.mark.slow
@pytest.mark.skipif("spawn" not in multiprocessing.get_all_start_methods(),
                    reason="no spawn start method")
def test_spawned_workers_share_the_count(pattern):
    """Workers started with spawn get the dataset pickled: the count travels with it."""
    ds = RecordIODataset(RecordIO(pattern, shuffle=True, seed=5))
    loader = DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="spawn")
    for n in range(2):
        assert_epoch([int(x) for x in loader], pattern, n, 2)


# -- exact resume through torchdata's StatefulDataLoader, counting epochs ------------------


def run(pattern, *, num_workers, persistent=False, batch_size=None, epochs=3, stop=None,
        after_loop=False, state=None):
    """Train ``epochs`` epochs without set_epoch (from ``state``): the labels of each
    batch; stop after ``stop`` batches with the checkpoint taken then (or, with
    ``after_loop``, at the end of the epoch the stop falls in, after its loop)."""
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    ds = RecordIODataset(pattern, shuffle=True, seed=3, shuffle_buffer=8,
                         batch_size=batch_size)
    options = {"persistent_workers": persistent} if num_workers else {}
    loader = stateful.StatefulDataLoader(ds, batch_size=None if batch_size else 4,
                                         num_workers=num_workers, **options)
    start = 0
    if state is not None:
        start = state["epoch"]
        loader.load_state_dict(state["loader"])
    seen = []
    for epoch in range(start, epochs):
        for labels in loader:
            seen.append(labels.tolist())
            if stop is not None and len(seen) == stop and not after_loop:
                return seen, json.loads(json.dumps({"epoch": epoch,
                                                    "loader": loader.state_dict()}))
        if after_loop and stop is not None and len(seen) >= stop:
            return seen, json.loads(json.dumps({"epoch": epoch + 1,
                                                "loader": loader.state_dict()}))
    return seen, None


@pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")
@pytest.mark.parametrize("num_workers,persistent", [(0, False), (2, False), (2, True)])
@pytest.mark.parametrize("batch_size", [None, 5])
def test_a_resumed_loader_goes_on_counting_epochs(pattern, num_workers, persistent,
                                                  batch_size):
    """Without set_epoch, a loader restored mid-epoch, at an epoch's end or after its loop
    goes on with the same epochs as the uninterrupted run (it used to replay or skip an
    epoch, or read the next one inside the current loop)."""
    whole, _ = run(pattern, num_workers=num_workers, persistent=persistent,
                   batch_size=batch_size)
    per_epoch = len(whole) // 3
    assert whole[:per_epoch] != whole[per_epoch:2 * per_epoch]
    for stop in (1, per_epoch - 1, per_epoch, per_epoch + 1, 2 * per_epoch + 1):
        for after_loop in (False, True):
            first, state = run(pattern, num_workers=num_workers, persistent=persistent,
                               batch_size=batch_size, stop=stop, after_loop=after_loop)
            rest, _ = run(pattern, num_workers=num_workers, persistent=persistent,
                          batch_size=batch_size, state=state)
            assert first + rest == whole, (stop, after_loop)


# -- item 21: len(loader) and datetime64 columns --------------------------------------------


@pytest.mark.parametrize("num_workers", [0, 1, 2, 3])
@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("shuffle", [False, True])
def test_len_of_the_loader_is_the_batches_of_an_epoch(tmp_path, num_workers, drop_last,
                                                      shuffle):
    """Each worker used to cut its own last, short batch: with 2 workers an epoch had
    one batch more than len(loader) (or, dropping them, fewer)."""
    convert(str(tmp_path), list(range(90)), 3, "b", chunk_bytes=64, progress=False)
    for rank, world_size in ((0, 1), (1, 2)):
        ds = RecordIODataset(str(tmp_path / "b"), batch_size=8, drop_last=drop_last,
                             shuffle=shuffle, seed=2, rank=rank, world_size=world_size)
        loader = DataLoader(ds, batch_size=None, num_workers=num_workers)
        batches = [b.tolist() for b in loader]
        share = len(ds.reader)
        assert len(loader) == len(batches) == (share // 8 if drop_last else -(-share // 8))
        assert sum(len(b) < 8 for b in batches) == (0 if drop_last or share % 8 == 0 else 1)
        got = sorted(x for b in batches for x in b)
        assert len(got) == len(set(got)) == (share // 8 * 8 if drop_last else share)


def test_resume_with_batch_aligned_workers(tmp_path):
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    convert(str(tmp_path), list(range(90)), 3, "b", chunk_bytes=64, progress=False)

    def loader():
        ds = RecordIODataset(str(tmp_path / "b"), batch_size=8, shuffle=True, seed=1)
        return stateful.StatefulDataLoader(ds, batch_size=None, num_workers=2)

    whole = [b.tolist() for b in loader()]
    first = loader()
    it = iter(first)
    head = [next(it).tolist() for _ in range(5)]
    state = json.loads(json.dumps(first.state_dict()))
    again = loader()
    again.load_state_dict(state)
    assert head + [b.tolist() for b in again] == whole and len(whole) == 12


@pytest.fixture(scope="module")
def times(tmp_path_factory):
    where = tmp_path_factory.mktemp("h2times")
    frame = pd.DataFrame({
        "id": np.arange(10),
        "when": pd.date_range("2024-01-01", periods=10, freq="37h"),
        "took": pd.to_timedelta(np.arange(10) * 1500, unit="ms"),
    })
    convert(str(where), frame, 2, "t", progress=False)
    when = frame["when"].to_numpy().astype("datetime64[ns]").view(np.int64)
    took = frame["took"].to_numpy().astype("timedelta64[ns]").view(np.int64)
    return str(where / "t"), dict(zip(frame["id"].tolist(), zip(when, took, strict=True),
                                      strict=True))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_datetime64_columns_reach_torch_as_int64_nanoseconds(times, num_workers):
    pattern, expected = times
    ds = RecordIODataset(pattern, batch_size=4)
    batches = list(DataLoader(ds, batch_size=None, num_workers=num_workers))
    assert len(batches) == len(ds) == 3
    for batch in batches:
        assert batch["when"].dtype == torch.int64 and batch["took"].dtype == torch.int64
        for i, when, took in zip(batch["id"].tolist(), batch["when"].tolist(),
                                 batch["took"].tolist(), strict=True):
            assert (when, took) == expected[i]
    instances = RecordIODataset(pattern)  # the DataLoader collates instances itself
    for batch in DataLoader(instances, batch_size=3, num_workers=num_workers):
        assert batch["when"].dtype == torch.int64
        assert [(w, t) for w, t in zip(batch["when"].tolist(), batch["took"].tolist(),
                                       strict=True)] == [expected[i] for i in
                                                         batch["id"].tolist()]


def test_a_transform_sees_the_values_as_read(times):
    pattern, expected = times
    seen = []

    def transform(batch):
        seen.append(batch["when"].dtype)
        return batch

    ds = RecordIODataset(pattern, batch_size=5, transform=transform)
    assert [b["when"].dtype for b in DataLoader(ds, batch_size=None)] == [torch.int64] * 2
    assert seen == [np.dtype("datetime64[us]")] * 2


def test_torchable_converts_exactly_or_refuses():
    from recprep.torch import torchable

    days = np.array(["1970-01-02", "NaT"], dtype="datetime64[D]")
    item = ({"d": days, "n": np.arange(2)}, [np.timedelta64(2, "m"), "x"], 5)
    out = torchable(item)
    assert out[0]["d"].tolist() == [86_400 * 10**9, np.iinfo(np.int64).min]
    assert out[0]["n"] is item[0]["n"] and out[1][1] == "x" and out[2] == 5
    assert out[1][0] == 120 * 10**9 and out[1][0].dtype == np.int64
    plain = (np.arange(3), {"a": [1.5, "s"]})
    assert torchable(plain) is plain  # nothing to convert: the same objects
    with pytest.raises(InvalidArgumentError, match=r"the batch\['d'\]: the datetime64\[D\] "
                                                   r"value 3000-01-01 can't be held exactly"):
        torchable({"d": np.array(["2000-01-01", "3000-01-01"], "datetime64[D]")}, "the batch")
    with pytest.raises(InvalidArgumentError, match="timedelta64\\[M\\]"):
        torchable(np.array([1], "timedelta64[M]"))
    with pytest.raises(InvalidArgumentError, match="datetime64\\[ps\\]"):
        torchable(np.array([1], "datetime64[ps]"))


def test_a_refused_value_names_where_it_is(tmp_path):
    convert(str(tmp_path), [(i, np.datetime64("2500-01-01", "D")) for i in range(3)], 1, "f",
            progress=False)
    ds = RecordIODataset(str(tmp_path / "f"), batch_size=2)
    with pytest.raises(InvalidArgumentError, match=r"the batch\[1\]: the datetime64\[D\]"):
        list(DataLoader(ds, batch_size=None))
    ds = RecordIODataset(str(tmp_path / "f"), transform=lambda x: (x[0], str(x[1])))
    assert [s for _, s in DataLoader(ds, batch_size=None)] == ["2500-01-01"] * 3


def test_the_clock_is_not_shared_with_a_pickled_copy(pattern):
    """A dataset pickled outside a worker start (to another job, say) takes a copy of the
    count, not the file: the copies then count apart."""
    import pickle

    ds = RecordIODataset(RecordIO(pattern, shuffle=True, seed=5))
    list(DataLoader(ds, batch_size=None))
    copy = pickle.loads(pickle.dumps(ds))
    assert copy.epoch == ds.epoch == 1
    list(DataLoader(copy, batch_size=None))
    assert (copy.epoch, ds.epoch) == (2, 1)


@pytest.mark.parametrize("persistent", [False, True])
def test_a_state_loaded_into_the_reader_is_resumed_once(pattern, persistent):
    """A (combined) state loaded into the dataset's reader before the workers start is
    in every epoch's copies of it: the first epoch resumes it, the next ones go on with
    the next epochs (they used to resume it again, every epoch)."""
    old = RecordIO(pattern, shuffle=True, seed=5)
    list(old())  # epoch 0
    stream = old()  # epoch 1
    head = [next(stream) for _ in range(17)]
    state = RecordIO.combine_states([json.loads(json.dumps(old.state_dict()))])
    reader = RecordIO(pattern, shuffle=True)
    reader.load_state_dict(state)
    ds = RecordIODataset(reader)
    loader = DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=persistent)
    rest = [int(x) for x in loader]
    assert sorted(head + rest) == list(range(N)) and len(rest) == N - 17
    for epoch in (2, 3):
        assert_epoch([int(x) for x in loader], pattern, epoch, 2)
