"""The executor contract, run against every registered executor and a user's Executor.

Same bytes out whichever runs; every instance exactly once, in order; a failed task
leaves nothing committed; what can't travel fails up front.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import posixpath
import threading

import numpy as np
import pytest

from recprep import (
    InvalidArgumentError,
    MissingDependencyError,
    RecordIO,
    TaskFailedError,
    UnsplitInputWarning,
    available_executors,
    convert,
    partitions,
)
from recprep.executors import get_backend
from recprep.storage import resolve

SIZES = [0, 7, 13, 1, 20]  # partition sizes: an empty one, uneven ones
N = 4


def instance(i: int):
    return (i, i / 3, f"s{i}", np.arange(i % 7, dtype=np.int32))


def part(start: int, size: int):
    return iter([instance(i) for i in range(start, start + size)])


def starts(sizes):
    return [sum(sizes[:p]) for p in range(len(sizes))]


def parts(sizes=SIZES):
    return partitions(
        [functools.partial(part, s, n) for s, n in zip(starts(sizes), sizes, strict=True)]
    )


def single_reader():
    return part(0, sum(SIZES))


def broken(start: int, size: int):
    yield instance(start)
    raise ValueError(f"bad data in partition starting at {start}")


def files(url: str) -> dict[str, bytes]:
    fs, path = resolve(url)
    if not fs.exists(path):
        return {}
    found = fs.find(path, withdirs=False)
    return {posixpath.relpath(p, path): fs.cat_file(p) for p in found}


def decoded(url: str, prefix: str) -> list:
    return list(RecordIO(f"{url}/{prefix}-*")())


def same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x[:3] == y[:3] and np.array_equal(x[3], y[3]) and x[3].dtype == y[3].dtype


# -- one parametrized fixture from the registry ---------------------------------------------

VARIANTS = [
    *available_executors(),
    "processes-spawn",
    "processes-forkserver",
    "user-threads",
    "user-processes",
]


@pytest.fixture(params=VARIANTS)
def run_with(request):
    """``convert`` bound to one executor: ``run_with(out, reader, prefix, **kw)``."""
    name = request.param
    kwargs: dict = {}
    owned = None
    if name == "spark":
        request.getfixturevalue("spark_session")
        kwargs["executor"] = "spark"
    elif name == "ray":
        request.getfixturevalue("ray_local")
        kwargs["executor"] = "ray"
    elif name.startswith("processes-"):
        kwargs.update(executor="processes", num_workers=2,
                      executor_options={"start_method": name.split("-")[1]})
    elif name == "processes":
        kwargs.update(executor="processes", num_workers=2)
    elif name == "user-threads":
        owned = kwargs["executor"] = cf.ThreadPoolExecutor(2)
    elif name == "user-processes":
        owned = kwargs["executor"] = cf.ProcessPoolExecutor(2)
    else:
        kwargs["executor"] = name

    def run(out, reader, prefix, **extra):
        return convert(out, reader, N, prefix, **{**kwargs, **extra})

    run.name = name
    yield run
    if owned is not None:
        assert owned.submit(int, "7").result() == 7  # recprep never shuts a user's pool down
        owned.shutdown()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The serial executor's output for the partitioned input and the single reader."""
    out = str(tmp_path_factory.mktemp("reference"))
    convert(out, parts(), N, "parts", executor="serial")
    convert(out, single_reader, N, "single", executor="serial")
    return files(out)


def test_partitions_are_byte_identical_to_serial(run_with, tmp_path, reference):
    out = str(tmp_path)
    result = run_with(out, parts(), "parts")
    got = files(out)
    assert {k: v for k, v in got.items() if k.lstrip(".").startswith("parts")} == {
        k: v for k, v in reference.items() if k.lstrip(".").startswith("parts")
    }
    # exactly once, in the order of partition 0, then 1, ...
    same(decoded(out, "parts"), [instance(i) for i in range(sum(SIZES))])
    # balanced like one reader: shard s gets instances s, s + N, ...
    assert result.records_per_shard == [len(range(s, sum(SIZES), N)) for s in range(N)]


def test_single_reader_is_byte_identical_to_serial(run_with, tmp_path, reference):
    out = str(tmp_path)
    run_with(out, single_reader, "single")
    got = files(out)
    # the shards, the manifest and the set's hidden chunk index, all byte-identical
    assert got == {k: v for k, v in reference.items() if k.lstrip(".").startswith("single")}


def test_failed_task_commits_nothing(run_with, tmp_path):
    out = str(tmp_path)
    convert(out, [1, 2, 3], 2, "old")
    before = files(out)
    sizes = [3, 3, 3]
    readers = [functools.partial(part, 0, 3), functools.partial(part, 3, 3),
               functools.partial(broken, 6, 3)]
    with pytest.raises(TaskFailedError) as info:
        run_with(out, partitions(readers), "new")
    err = info.value
    assert err.task == "partition 2" and err.original_type == "ValueError"
    assert err.original_message == "bad data in partition starting at 6"
    assert "in broken" in err.original_traceback and "partition 2" in str(err)
    assert files(out) == before  # no shard, no manifest, no staging directory
    del sizes


def test_progress_counts_instances_and_shards(run_with, tmp_path):
    seen = []
    run_with(str(tmp_path), parts(), "p", progress=lambda i, s: seen.append((i, s)))
    assert seen[-1] == (sum(SIZES), N)
    assert [i for i, _ in seen] == sorted(i for i, _ in seen)


def test_unpicklable_reader_fails_up_front(run_with, tmp_path):
    lock = threading.Lock()

    def reader():
        with lock:
            yield from range(3)

    if run_with.name == "serial":
        run_with(str(tmp_path), partitions([reader]), "ok")  # nothing travels
        return
    with pytest.raises(InvalidArgumentError, match="can't be sent to workers") as info:
        run_with(str(tmp_path), partitions([reader]), "bad")
    assert "partition 0" in str(info.value)
    assert files(str(tmp_path)) == {}


class NotingReader:
    """A reader object that reports what it did through ``notes``."""

    def __init__(self, start: int, size: int) -> None:
        self.start, self.size = start, size

    def __call__(self):
        self.notes = [f"read {self.size} from {self.start}"]
        return part(self.start, self.size)


def test_reader_notes_come_back_in_partition_order(run_with, tmp_path):
    readers = [NotingReader(s, n) for s, n in zip(starts(SIZES), SIZES, strict=True)]
    result = run_with(str(tmp_path), partitions(readers), "notes")
    assert result.notes == [
        f"read {n} from {s}" for s, n in zip(starts(SIZES), SIZES, strict=True)
    ]


def test_spilled_pieces_give_the_same_shards(tmp_path, reference, monkeypatch):
    """Pieces past the memory budget go to their own files; the shards don't change."""
    import recprep.write.loop

    monkeypatch.setattr(recprep.write.loop, "SPILL_BYTES", 200)
    out = str(tmp_path)
    convert(out, parts(), N, "parts", executor="serial")
    assert files(out) == {
        k: v for k, v in reference.items() if k.lstrip(".").startswith("parts")
    }


# -- the registry --------------------------------------------------------------------------


def test_unknown_executor_lists_the_valid_ones(tmp_path):
    with pytest.raises(InvalidArgumentError, match=r"valid executors are \['processes', 'ray'"):
        convert(str(tmp_path), [1], 1, "p", executor="dask")
    assert files(str(tmp_path)) == {}


def test_missing_engine_names_the_extra(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_pyspark(name, *args, **kwargs):
        if name.startswith("pyspark"):
            raise ImportError("No module named 'pyspark'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyspark)
    with pytest.raises(MissingDependencyError, match=r"pip install 'recprep\[spark\]'"):
        get_backend("spark")


def test_bad_executor_options():
    with pytest.raises(InvalidArgumentError, match="start_method"):
        get_backend("processes", 2, {"start_method": "teleport"})
    with pytest.raises(InvalidArgumentError, match="num_workers"):
        get_backend("processes", 0)


def test_one_shot_iterable_runs_in_the_driver(tmp_path):
    gen = (instance(i) for i in range(9))
    with pytest.warns(UnsplitInputWarning, match="one-shot iterable .* in this process"):
        convert(str(tmp_path), gen, N, "once", executor="processes", num_workers=2)
    same(decoded(str(tmp_path), "once"), [instance(i) for i in range(9)])


def test_a_killed_worker_is_a_task_failure(tmp_path):
    def die():
        import os

        os._exit(3)
        yield 1  # pragma: no cover

    with pytest.raises(TaskFailedError) as info:
        convert(str(tmp_path), partitions([die]), 2, "dead", executor="processes", num_workers=1)
    assert "BrokenProcessPool" in info.value.original_type
    assert files(str(tmp_path)) == {}


@pytest.mark.parametrize("compressor", ["none", "gzip", "zlib"])
def test_tfrecord_shards_assembled_from_pieces_read_back(tmp_path, compressor):
    """zlib streams can't be joined byte for byte: their pieces are written again."""
    out = str(tmp_path)
    convert(out, parts(), N, "tf", format="tfrecord", compressor=compressor,
            executor="processes", num_workers=2)
    same(decoded(out, "tf"), [instance(i) for i in range(sum(SIZES))])
    serial = str(tmp_path / "serial")
    convert(serial, parts(), N, "tf", format="tfrecord", compressor=compressor)
    ours = {k: v for k, v in files(out).items() if not k.startswith("serial/")}
    assert files(serial) == ours  # shards, manifest and (plain) side indexes alike
