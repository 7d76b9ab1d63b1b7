"""``DataLoader(multiprocessing_context="spawn")`` over ``RecordIODataset``, and what a
spawned worker has to import and unpickle before its first instance.

A spawned worker starts a fresh interpreter, imports torch, unpickles the dataset (which
imports recprep) and then reads: the tests check that it reads every instance once with
its values, and that ``import recprep`` — and a worker's unpickling and first read —
bring in none of the write side and no heavy optional engine. (How long it takes is
``benchmarks/bench_memory.py``'s; what the pickle holds per shard,
``tests/test_memory_shards.py``'s.)
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from recprep import convert

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

from recprep.torch import RecordIODataset  # noqa: E402

#: what ``import recprep`` must not import: the write side (readers and spawned workers
#: don't need it) and the optional engines (imported where they are used)
NOT_ON_IMPORT = ("recprep.write", "recprep.spark", "recprep.torch", "pandas", "pyarrow",
                 "torch", "s3fs", "botocore", "aiobotocore", "aiohttp", "pyspark", "ray")


def _instance(i: int) -> tuple[int, np.ndarray]:
    return i, np.arange(4, dtype=np.float32) + i


@pytest.mark.parametrize("shuffle", [False, True])
def test_spawned_workers_read_every_instance_once(tmp_path: Path, shuffle: bool) -> None:
    convert(str(tmp_path), [_instance(i) for i in range(100)], 7, "s", progress=False)
    dataset = RecordIODataset(str(tmp_path / "s"), shuffle=shuffle, seed=3)
    loader = DataLoader(dataset, batch_size=8, num_workers=2,
                        multiprocessing_context="spawn")
    seen = [(int(i), x.tolist()) for ids, xs in loader for i, x in zip(ids, xs, strict=True)]
    assert sorted(i for i, _ in seen) == list(range(100))
    assert all(x == _instance(i)[1].tolist() for i, x in seen)
    again = [int(i) for ids, _ in loader for i in ids]  # the next epoch: spawned again
    assert sorted(again) == list(range(100))
    assert (again != [i for i, _ in seen]) == shuffle  # another epoch's order


def test_import_recprep_imports_no_write_side_and_no_engine() -> None:
    code = ("import json, sys; import recprep; "
            "print(json.dumps(sorted(m for m in sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    modules = json.loads(done.stdout)
    heavy = [m for m in modules if m.split(".")[0] in NOT_ON_IMPORT
             or m.startswith(tuple(f"{n}." for n in NOT_ON_IMPORT)) or m in NOT_ON_IMPORT]
    assert heavy == []
    assert "recprep.read.reader" in modules  # the read side is there, ready


def test_a_spawned_worker_needs_no_write_side_to_read(tmp_path: Path) -> None:
    """What a spawned worker does, in a fresh interpreter: unpickle the dataset, read its
    share's first instance — without importing the write side."""
    convert(str(tmp_path), [_instance(i) for i in range(40)], 4, "s", progress=False)
    blob = tmp_path / "dataset.pickle"
    blob.write_bytes(pickle.dumps(RecordIODataset(str(tmp_path / "s"))))
    code = ("import json, pickle, sys; "
            f"ds = pickle.loads(open({str(blob)!r}, 'rb').read()); "
            "first = next(iter(ds.reader.for_worker(1, 2)())); "
            "print(json.dumps([int(first[0]), sorted(m for m in sys.modules "
            "if m.startswith('recprep.write'))]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    first, write_side = json.loads(done.stdout)
    assert write_side == []
    assert first == next(iter(RecordIODataset(str(tmp_path / "s")).reader.for_worker(1, 2)()))[0]
