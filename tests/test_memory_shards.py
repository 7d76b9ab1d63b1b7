"""What a reader costs per shard, and per instance of its state.

A DataLoader worker holds the reader of its trainer: inherited by ``fork``, unpickled by
``spawn``. What the reader keeps per shard is then paid once per worker, and for a set
of 100,000 shards every byte per shard is 100 kB a worker. These tests pin it down by
content, in a fresh interpreter (this file run as a script): the Python memory a reader
holds once made (``tracemalloc``, after a collection), the objects it made
(``gc.get_objects()``), the size of its pickled dataset and what that holds once
unpickled, each at 50 and at 5,000 shards; the difference, per shard, must stay a few
numbers in arrays (a set's shards are a table: ``recprep.storage.shardtable``) — no
object per shard, as before (a manifest entry, its name, its path: about 330 bytes held
and 140 pickled per shard, and before that a dozen objects, 560 and 200,
``benchmarks/RESULTS-memory.md``).

A reader's state is counts and intervals, never a list per instance: the state of a
shuffled pass partway, combined across workers and resumed on another number of
them, is the same size for 10,000 instances as for 1,000,000.
"""

from __future__ import annotations

import gc
import itertools
import json
import pickle
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from recprep import RecordIO, convert

SMALL, LARGE = 50, 5000
#: held per shard, in the trainer and in a spawned worker's unpickled dataset: its
#: manifest entry's three numbers and its count (in arrays), a byte of checks — measured
#: 17, and 15 in a spawned worker (before: 281, and 277)
HELD_PER_SHARD = 40
#: pickled per shard (what spawn sends each worker) — measured 15 (before: 86)
PICKLED_PER_SHARD = 40
#: objects the garbage collector tracks, per shard: none (before: 1, its manifest entry —
#: and its name's and path's strings, untracked — which every collection walked, and a
#: spawned worker made as it started)
OBJECTS_PER_SHARD = 0.05


def _measure(pattern: str) -> dict[str, float]:
    """In this (fresh) interpreter: what a dataset over ``pattern`` holds, pickles, and
    holds once unpickled (as a spawned worker does), and how many objects it makes."""
    from recprep.torch import RecordIODataset  # its module imported before measuring

    gc.collect()
    objects = len(gc.get_objects())
    tracemalloc.start()
    dataset = RecordIODataset(pattern, shuffle=True, seed=1)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    objects = len(gc.get_objects()) - objects
    data = pickle.dumps(dataset)
    del dataset
    gc.collect()
    tracemalloc.start()
    unpickled = pickle.loads(data)
    gc.collect()
    worker = tracemalloc.get_traced_memory()[0]  # (data was made before: not traced)
    tracemalloc.stop()
    assert len(list(unpickled.reader._sources.files)) > 0
    return {"held": held, "pickled": len(data), "objects": objects, "worker": worker}


def _in_child(pattern: str) -> dict[str, float]:
    done = subprocess.run([sys.executable, __file__, pattern], capture_output=True,
                          text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_a_reader_holds_and_pickles_little_per_shard(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    found = {}
    for shards in (SMALL, LARGE):
        out = tmp_path / f"s{shards}"
        convert(str(out), [(i, float(i)) for i in range(2 * LARGE)], shards, "s",
                progress=False)
        found[shards] = _in_child(str(out / "s"))
    small, large = found[SMALL], found[LARGE]
    per_shard = {key: (large[key] - small[key]) / (LARGE - SMALL)
                 for key in ("held", "pickled", "objects", "worker")}
    assert per_shard["held"] <= HELD_PER_SHARD, per_shard
    assert per_shard["worker"] <= HELD_PER_SHARD, per_shard
    assert per_shard["pickled"] <= PICKLED_PER_SHARD, per_shard
    assert per_shard["objects"] <= OBJECTS_PER_SHARD, per_shard


def _frozen(item: object) -> int:
    """A transform: how many objects the process it runs in has frozen (``gc.freeze``)."""
    return gc.get_freeze_count()


def test_a_worker_freezes_what_it_holds_before_its_first_pass(tmp_path: Path) -> None:
    # a full collection walks every object a worker holds (100,000 paths and manifest
    # entries at 100,000 shards) again and again while its pass starts, and in a forked
    # worker copies the trainer's pages it writes the objects' headers in
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from recprep.torch import RecordIODataset

    convert(str(tmp_path), [(i, float(i)) for i in range(8)], 4, "s", progress=False)
    from recprep.read import workerstart

    dataset = RecordIODataset(str(tmp_path / "s"), shuffle=True, seed=1, transform=_frozen)
    assert workerstart._FROZEN == []
    counts = [int(c) for c in DataLoader(dataset, batch_size=None, num_workers=2)]
    assert len(counts) == 8 and min(counts) > 1000, counts  # the reader, torch, ...
    assert workerstart._FROZEN == []  # not in the trainer: only in its workers


def _state_size(out: Path, instances: int) -> int:
    """The JSON size of the state of a shuffled pass over ``instances`` records, read
    partway by 4 workers, combined, resumed by 3 and read partway again."""
    convert(str(out), itertools.repeat(b"", instances), 4, "s", codec="raw",
            progress=False)
    reader = RecordIO(str(out / "s"), shuffle=True, seed=4, shuffle_buffer=1000)
    old = [reader.for_worker(w, 4) for w in range(4)]
    for k, worker in enumerate(old):
        for _ in itertools.islice(worker(), 1000 + 37 * k):
            pass
    combined = RecordIO.combine_states([w.state_dict() for w in old])
    new = [reader.for_worker(w, 3) for w in range(3)]
    states = []
    for k, worker in enumerate(new):
        worker.load_state_dict(combined)
        for _ in itertools.islice(worker(), 500 + 11 * k):
            pass
        states.append(worker.state_dict())
    return len(json.dumps(RecordIO.combine_states(states)))


@pytest.mark.slow
def test_a_reader_state_does_not_grow_with_the_instances(tmp_path: Path) -> None:
    small = _state_size(tmp_path / "small", 10_000)
    large = _state_size(tmp_path / "large", 1_000_000)
    assert large - small <= 64, (small, large)  # a few more digits, nothing per instance
    assert large < 4096


if __name__ == "__main__":
    print(json.dumps(_measure(sys.argv[1])))
