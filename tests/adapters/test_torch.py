"""recprep.torch: RecordIODataset with real DataLoader workers, ranks, epochs."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from recprep import InvalidArgumentError, MissingDependencyError, RecordIO, convert

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

from recprep.torch import RecordIODataset, distributed_rank  # noqa: E402


def dataset_files(tmp_path, n=90, num_shards=3):
    data = [(np.full(4, i, dtype=np.float32), i) for i in range(n)]
    convert(str(tmp_path), data, num_shards, "t", chunk_bytes=256, progress=False)
    return str(tmp_path / "t-*-of-*")


def labels(loader) -> list[int]:
    return [int(y) for _, ys in loader for y in ys]


@pytest.mark.parametrize("num_shards", [1, 3])  # fewer shards than workers, and more
def test_two_workers_see_each_instance_once(tmp_path, num_shards):
    pattern = dataset_files(tmp_path, num_shards=num_shards)
    ds = RecordIODataset(pattern, shuffle=True, seed=3)
    ds.set_epoch(0)
    loader = DataLoader(ds, batch_size=8, num_workers=2)
    got = labels(loader)
    assert sorted(got) == list(range(90)) and len(ds) == 90
    batch = next(iter(loader))
    assert batch[0].dtype == torch.float32 and batch[0].shape == (8, 4)
    assert torch.equal(batch[0][:, 0].long(), batch[1])


def test_two_ranks_with_two_workers_each(tmp_path):
    pattern = dataset_files(tmp_path, n=101, num_shards=3)
    seen, lengths = [], []
    for rank in (0, 1):
        ds = RecordIODataset(pattern, rank=rank, world_size=2, shuffle=True, seed=11)
        ds.set_epoch(4)
        got = labels(DataLoader(ds, batch_size=5, num_workers=2))
        assert len(got) == len(ds)
        seen += got
        lengths.append(len(ds))
    assert sorted(seen) == list(range(101)) and sum(lengths) == 101


def test_set_epoch_reshuffles_deterministically(tmp_path):
    pattern = dataset_files(tmp_path)
    ds = RecordIODataset(pattern, shuffle=True, seed=5, shuffle_buffer=16)
    loader = DataLoader(ds, batch_size=10, num_workers=2)
    orders = {}
    for epoch in (0, 1, 0):
        ds.set_epoch(epoch)
        orders.setdefault(epoch, []).append(labels(loader))
    assert orders[0][0] == orders[0][1] != orders[1][0]
    assert sorted(orders[1][0]) == list(range(90))


def test_unshuffled_single_process_keeps_the_original_order(tmp_path):
    pattern = dataset_files(tmp_path)
    assert labels(DataLoader(RecordIODataset(pattern), batch_size=7)) == list(range(90))


def test_reader_source_transform_and_options(tmp_path):
    pattern = dataset_files(tmp_path, n=20, num_shards=2)
    reader = RecordIO(pattern, rank=1, world_size=2)
    ds = RecordIODataset(reader, transform=lambda x: x[1] * 10)
    assert ds.reader.rank == 1 and list(ds) == [10 * i for i in range(1, 20, 2)]
    assert RecordIODataset(reader, rank=0, world_size=2).reader.rank == 0
    with pytest.raises(InvalidArgumentError, match="RecordIO"):
        RecordIODataset(reader, shuffle=True)
    with pytest.raises(InvalidArgumentError, match="both"):
        RecordIODataset(pattern, rank=1)
    with pytest.raises(InvalidArgumentError, match="callable"):
        RecordIODataset(pattern, transform=3)


def test_rank_comes_from_torch_distributed(tmp_path, monkeypatch):
    pattern = dataset_files(tmp_path, n=30, num_shards=3)
    dist = torch.distributed
    monkeypatch.setattr(dist, "is_available", lambda: True)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_rank", lambda: 2)
    monkeypatch.setattr(dist, "get_world_size", lambda: 3)
    assert distributed_rank() == (2, 3)
    ds = RecordIODataset(pattern)
    assert (ds.reader.rank, ds.reader.world_size) == (2, 3)
    assert [x[1] for x in ds] == list(range(2, 30, 3))


def test_import_recprep_does_not_import_torch_and_missing_torch_is_named(monkeypatch):
    code = "import sys, recprep, recprep.torch, recprep.tf; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr
    import recprep.torch as adapter

    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "torch.utils", None)
    monkeypatch.setitem(sys.modules, "torch.utils.data", None)
    with pytest.raises(MissingDependencyError, match=r"recprep\[torch\]"):
        adapter._import_torch()


def test_batches_from_the_dataset_with_two_workers(tmp_path):
    pattern = dataset_files(tmp_path)  # 90 instances, 3 shards
    ds = RecordIODataset(pattern, shuffle=True, seed=3, batch_size=8)
    ds.set_epoch(0)
    batches = list(DataLoader(ds, batch_size=None, num_workers=2))
    images, ids = batches[0]
    assert isinstance(images, torch.Tensor) and images.dtype == torch.float32
    assert images.shape == (8, 4) and ids.dtype == torch.int64
    assert all(torch.equal(x[:, 0].long(), y) for x, y in batches)
    assert sorted(int(i) for _, y in batches for i in y) == list(range(90))
    assert len(ds) == 12 and all(len(y) <= 8 for _, y in batches)
    dropped = RecordIODataset(pattern, batch_size=8, drop_last=True)
    got = [y.tolist() for _, y in DataLoader(dropped, batch_size=None)]
    assert got == [list(range(k, k + 8)) for k in range(0, 88, 8)] and len(dropped) == 11


def test_batches_are_what_the_reader_batches_gives(tmp_path):
    pattern = dataset_files(tmp_path, n=30)
    ds = RecordIODataset(pattern, batch_size=7, transform=lambda b: b[1] * 2)
    assert [b.tolist() for b in ds] == [
        (2 * b[1]).tolist() for b in RecordIO(pattern).batches(7)]
    with pytest.raises(InvalidArgumentError, match="batch_size must be a positive int"):
        RecordIODataset(pattern, batch_size=0)
    with pytest.raises(InvalidArgumentError, match="drop_last=True needs a batch_size"):
        RecordIODataset(pattern, drop_last=True)


def test_persistent_workers_shuffle_each_epoch_anew(tmp_path):
    """With persistent_workers=True the workers keep their dataset: pass n must use epoch n
    (each pass used to take a fresh copy of the reader, so every epoch had epoch 0's order)."""
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from recprep import RecordIO, convert
    from recprep.torch import RecordIODataset

    convert(tmp_path, list(range(200)), 4, "p")
    loader = DataLoader(RecordIODataset(RecordIO(tmp_path / "p", shuffle=True, seed=5)),
                        batch_size=None, num_workers=2, persistent_workers=True)
    epochs = [[int(x) for x in loader] for _ in range(3)]
    assert all(sorted(e) == list(range(200)) for e in epochs)
    assert epochs[0] != epochs[1] != epochs[2]
    for n, epoch in enumerate(epochs):  # each worker's pass n reads its share of epoch n
        expected = []
        for w in (0, 1):
            reader = RecordIO(tmp_path / "p", shuffle=True, seed=5).for_worker(w, 2)
            reader.set_epoch(n)
            expected.append(list(reader()))
        assert sorted(epoch) == sorted(expected[0] + expected[1])
        assert [x for x in epoch if x in set(expected[0])] == expected[0]
