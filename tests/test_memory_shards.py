"""What a reader costs per shard, and per instance of its state.

A DataLoader worker holds the reader of its trainer: inherited by ``fork``, unpickled by
``spawn``. What the reader keeps per shard is then paid once per worker, and for a set
of 100,000 shards every byte per shard is 100 kB a worker. These tests pin it down by
content, in a fresh interpreter (this file run as a script): the Python memory a reader
holds once made (``tracemalloc``, after a collection) and the size of its pickled
dataset, each at 50 and at 5,000 shards; the difference, per shard, must stay within
what the shard's own facts take (its path's characters, its manifest entry) and a
small, fixed overhead — not a dozen objects per file as before (a ``SourceFile``, a
path lookup of two keys, a count in a dict, an instance dict per manifest entry: about
560 bytes held and 200 pickled per shard, ``benchmarks/RESULTS-memory.md``).

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
#: held per shard beyond its path's characters: the path's and name's str objects
#: (~115 B), its manifest entry (~100 B), its count (8 B), list slots — measured 243
#: (before: 483)
HELD_OVERHEAD = 300
#: pickled per shard beyond its path's characters: its name and manifest entry — measured 54
#: (before: 121)
PICKLED_OVERHEAD = 72


def _measure(pattern: str) -> dict[str, int]:
    """In this (fresh) interpreter: what a dataset over ``pattern`` holds and pickles."""
    from recprep.torch import RecordIODataset  # its module imported before measuring

    gc.collect()
    tracemalloc.start()
    dataset = RecordIODataset(pattern, shuffle=True, seed=1)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    path = dataset.reader._sources.files[0].path
    return {"held": held, "pickled": len(pickle.dumps(dataset)), "path": len(path)}


def _in_child(pattern: str) -> dict[str, int]:
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
    assert small["path"] == large["path"] - 2  # "s50/" vs "s5000/": two digits more
    per_shard = {key: (large[key] - small[key]) / (LARGE - SMALL)
                 for key in ("held", "pickled")}
    path = large["path"]
    assert per_shard["held"] <= path + HELD_OVERHEAD, (per_shard, path)
    assert per_shard["pickled"] <= path + PICKLED_OVERHEAD, (per_shard, path)


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
