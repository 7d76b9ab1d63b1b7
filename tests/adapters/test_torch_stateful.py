"""RecordIODataset under torchdata's StatefulDataLoader: stop, restore, the same stream."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recprep import InvalidArgumentError, convert

pytest.importorskip("torch")
stateful = pytest.importorskip("torchdata.stateful_dataloader")

from recprep.torch import RecordIODataset  # noqa: E402

StatefulDataLoader = stateful.StatefulDataLoader
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "stateful_dataloader.py"
pytestmark = pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")


def dataset_files(path, n=50, num_shards=3):
    data = [(np.full(4, i, dtype=np.float32), i) for i in range(n)]
    convert(str(path), data, num_shards, "t", chunk_bytes=256, progress=False,
            overwrite=True)
    return str(path / "t-*-of-*")


def run(pattern, *, num_workers, batch_size=None, shuffle=True, stop=None, state=None,
        epochs=2, seed=3):
    """Train over ``epochs`` epochs (from ``state``), the labels of each batch; stop after
    ``stop`` steps with the checkpoint taken after the last (through JSON)."""
    ds = RecordIODataset(pattern, shuffle=shuffle, seed=seed, shuffle_buffer=8,
                         batch_size=batch_size)
    loader = StatefulDataLoader(ds, batch_size=None if batch_size else 4,
                                num_workers=num_workers)
    start = 0
    if state is not None:
        start = state["epoch"]
        loader.load_state_dict(state["loader"])
    seen, checkpoint = [], None
    for epoch in range(start, epochs):
        ds.set_epoch(epoch)
        for _, labels in loader:
            seen.append(labels.tolist())
            checkpoint = json.loads(json.dumps({"epoch": epoch,
                                                "loader": loader.state_dict()}))
            if stop is not None and len(seen) == stop:
                return seen, checkpoint
    return seen, checkpoint


@pytest.mark.parametrize("num_workers", [0, 1, 2])
@pytest.mark.parametrize("batch_size", [None, 5])  # the loader batches / the dataset does
@pytest.mark.parametrize("shuffle", [True, False])
def test_resumed_stream_is_the_uninterrupted_one(tmp_path, num_workers, batch_size, shuffle):
    pattern = dataset_files(tmp_path)
    whole, _ = run(pattern, num_workers=num_workers, batch_size=batch_size, shuffle=shuffle)
    assert sorted(y for b in whole for y in b) == sorted(list(range(50)) * 2)
    half = len(whole) // 2  # in epoch 0, at its end (empty rest of it), and in epoch 1
    for stop in (2, half - 1, half, half + 1, len(whole) - 1):
        first, state = run(pattern, num_workers=num_workers, batch_size=batch_size,
                           shuffle=shuffle, stop=stop)
        rest, _ = run(pattern, num_workers=num_workers, batch_size=batch_size,
                      shuffle=shuffle, state=state)
        assert first + rest == whole, (stop, first, rest)


def worker_states(loader_state):
    """The recprep reader states inside a StatefulDataLoader's state."""
    if "_snapshot" in loader_state:
        workers = loader_state["_snapshot"]["_worker_snapshots"].values()
        return [w["fetcher_state"]["dataset_iter_state"]["reader"] for w in workers]
    return [loader_state["fetcher_state"]["dataset_iter_state"]["reader"]]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_the_loader_state_holds_each_workers_position_not_a_replay_count(
    tmp_path, num_workers, caplog
):
    pattern = dataset_files(tmp_path)
    _, state = run(pattern, num_workers=num_workers, stop=3, epochs=1)
    readers = worker_states(state["loader"])
    assert [r["worker"] for r in readers] == list(range(max(num_workers, 1)))
    assert sum(r["yielded"] for r in readers) == 12 and not any(r["done"] for r in readers)
    assert all(len(json.dumps(r)) < 1024 for r in readers)
    with caplog.at_level("WARNING"):
        rest, _ = run(pattern, num_workers=num_workers, state=state, epochs=1)
    assert "fast-forwarding" not in caplog.text and len(rest) == 13 - 3 + (num_workers == 2)


def test_a_transform_applies_after_the_resume(tmp_path):
    pattern = dataset_files(tmp_path, n=20, num_shards=2)

    def loader():
        ds = RecordIODataset(pattern, shuffle=True, seed=1, transform=lambda x: x[1] * 10)
        ds.set_epoch(0)
        return StatefulDataLoader(ds, batch_size=3)

    whole = [b.tolist() for b in loader()]
    first = loader()
    it = iter(first)
    head = [next(it).tolist() for _ in range(2)]
    again = loader()
    again.load_state_dict(first.state_dict())
    assert head + [b.tolist() for b in again] == whole


def test_a_bad_iterator_state_raises(tmp_path):
    ds = RecordIODataset(dataset_files(tmp_path, n=10, num_shards=1))
    stream = iter(ds)
    with pytest.raises(InvalidArgumentError, match="'reader' key"):
        stream.load_state_dict({"yielded": 3})
    with pytest.raises(InvalidArgumentError, match="reader state"):
        stream.load_state_dict({"reader": {"yielded": 3}})


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 40), shards=st.integers(1, 4), seed=st.integers(0, 2**16),
       batch=st.sampled_from([None, 1, 3, 7]), stop=st.integers(1, 30))
def test_resume_property_single_process(tmp_path, n, shards, seed, batch, stop):
    pattern = dataset_files(tmp_path, n=n, num_shards=shards)
    whole, _ = run(pattern, num_workers=0, batch_size=batch, seed=seed)
    stop = min(stop, len(whole))
    first, state = run(pattern, num_workers=0, batch_size=batch, seed=seed, stop=stop)
    rest, _ = run(pattern, num_workers=0, batch_size=batch, seed=seed, state=state)
    assert first + rest == whole


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_example_runs():
    done = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "the same stream" in done.stdout


@pytest.mark.parametrize("num_workers", [0, 2])
def test_sigkilled_training_resumes_with_the_same_stream(tmp_path, num_workers):
    data = [(np.full(4, i, dtype=np.float32), i) for i in range(400)]
    convert(str(tmp_path / "set"), data, 4, "train", chunk_bytes=512, progress=False)
    pattern = str(tmp_path / "set" / "train-*-of-*")

    def job(name, log, pause=0.0):
        return [sys.executable, "-W", "ignore", str(EXAMPLE), "--data", pattern,
                "--checkpoint", str(tmp_path / f"{name}.json"), "--log",
                str(tmp_path / log), "--num-workers", str(num_workers),
                "--every", "3", "--pause", str(pause)]

    subprocess.run(job("whole", "whole.txt"), check=True, timeout=120)
    whole = lines(tmp_path / "whole.txt")
    log, checkpoint = tmp_path / "killed.txt", tmp_path / "killed.json"
    proc = subprocess.Popen(job("killed", "killed.txt", pause=0.05), start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (log.exists() and len(lines(log)) >= 10 and checkpoint.exists()):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the trainer and its DataLoader workers
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    step = json.loads(checkpoint.read_text())["step"]
    killed = lines(log)
    assert 9 <= step <= len(killed) < len(whole)  # batches after the checkpoint are redone
    subprocess.run(job("killed", "rest.txt"), check=True, timeout=120)
    assert killed[:step] + lines(tmp_path / "rest.txt") == whole
