"""Issue 12 (trust): no silent wrong data, one way to name a set, errors that blame right.

Each test here failed on the code before the fix it keeps: an explicit codec dropping the
manifest's schema, DataFrames written as their column names, a directory of two sets read
as one stream, pickles written without a word, a damaged manifest blocking ``skip``, the
reader's ``OSError`` reported as the output's, drifting argument checks, quadratic opening,
``processes`` silently serial, unreadable reprs.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import pathlib
import time
import typing
import warnings

import numpy as np
import pytest

from recprep import (
    AmbiguousPathError,
    ConvertResult,
    CorruptDataWarning,
    Feature,
    InvalidArgumentError,
    NotFoundError,
    PickleFallbackWarning,
    PickleRefusedError,
    RecordIO,
    RecprepWarning,
    TaskFailedError,
    UnsplitInputWarning,
    WriteError,
    convert,
    partitions,
)
from recprep.codecs.example import ExampleCodec

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")


def digests(directory: pathlib.Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.iterdir())
        if p.is_file()
    }


# -- 1. an explicit codec keeps the manifest's schema ------------------------------------


def test_naming_the_manifests_codec_changes_nothing(tmp_path):
    features = [Feature("image", "float32", (6, 5)), Feature("label", "int32")]
    data = [{"image": np.full((6, 5), i, np.float32), "label": np.int32(i)} for i in range(4)]
    convert(tmp_path, data, 2, "ex", format="tfrecord", codec=ExampleCodec(features))
    by_manifest = list(RecordIO(tmp_path / "ex")())
    by_name = list(RecordIO(tmp_path / "ex", codec="example")())
    for read in (by_manifest, by_name):
        assert [r["image"].shape for r in read] == [(6, 5)] * 4
        assert [r["label"].shape for r in read] == [()] * 4
        assert {r["label"].dtype for r in read} == {np.dtype("int32")}
        assert [int(r["label"]) for r in read] == [0, 1, 2, 3]
    # a codec object with features of its own wins over the manifest
    own = ExampleCodec([Feature("image", "float32", (30,)), Feature("label", "int64")])
    read = list(RecordIO(tmp_path / "ex", codec=own)())
    assert read[0]["image"].shape == (30,) and read[0]["label"].dtype == np.int64


# -- 2. DataFrames and Arrow tables are first-class input ---------------------------------


def frame() -> pd.DataFrame:
    return pd.DataFrame({
        "i": np.arange(4, dtype=np.int32),
        "f": [0.5, np.nan, 1.5, 2.5],
        "s": ["a", None, "c", "d"],
        "when": pd.to_datetime(["2024-01-01", None, "2024-01-03", "2024-01-04"]),
        "n": pd.array([1, None, 3, 4], dtype="Int64"),
        "b": [True, False, True, False],
        "vec": [np.arange(3, dtype=np.float32) + k for k in range(4)],
    })


def test_a_dataframe_is_one_instance_per_row(tmp_path):
    df = frame()
    convert(tmp_path, df, 3, "df")
    rows = list(RecordIO(tmp_path / "df")())
    assert len(rows) == 4 and all(list(r) == list(df.columns) for r in rows)
    assert [r["i"] for r in rows] == [0, 1, 2, 3]
    assert {type(r["i"]) for r in rows} == {np.int32}
    assert type(rows[0]["f"]) is np.float64 and np.isnan(rows[1]["f"])  # a float value
    assert [r["s"] for r in rows] == ["a", None, "c", "d"]
    assert type(rows[0]["s"]) is str
    assert rows[0]["when"] == np.datetime64("2024-01-01") and rows[1]["when"] is None
    assert isinstance(rows[0]["when"], np.datetime64)
    assert [r["n"] for r in rows] == [1, None, 3, 4] and type(rows[0]["n"]) is np.int64
    assert type(rows[0]["b"]) is np.bool_
    np.testing.assert_array_equal(rows[2]["vec"], np.arange(3, dtype=np.float32) + 2)


def test_arrow_tables_and_batches_read_like_their_rows(tmp_path):
    table = pa.table({
        "x": pa.array([1, None, 3], pa.int16()),
        "name": ["a", "b", None],
        "day": pa.array([0, 1, None], pa.date32()),
        "at": pa.array([0, 10**6, 2 * 10**6], pa.timestamp("us", tz="Europe/Paris")),
        "tags": [[1, 2], [], None],
    })
    for source, prefix in ((table, "t"), (table.to_batches()[0], "b")):
        convert(tmp_path, source, 2, prefix)
        rows = list(RecordIO(tmp_path / prefix)())
        assert [r["x"] for r in rows] == [1, None, 3] and type(rows[0]["x"]) is np.int16
        assert [r["name"] for r in rows] == ["a", "b", None]
        assert rows[1]["day"] == np.datetime64("1970-01-02") and rows[2]["day"] is None
        assert rows[1]["at"] == np.datetime64(10**6, "us")  # the UTC instant
        assert [r["tags"] for r in rows] == [[1, 2], [], None]


def test_a_dataframes_index_is_not_lost_silently(tmp_path):
    df = frame().set_index("s")
    with pytest.warns(RecprepWarning, match="index .* is not written.*reset_index"):
        convert(tmp_path, df, 2, "ix")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        convert(tmp_path, frame(), 2, "noix")  # the default index: nothing to say


@pytest.mark.parametrize("value", ["abc", b"abc", {"a": 1}])
def test_accidental_iterables_are_still_refused(tmp_path, value):
    with pytest.raises(InvalidArgumentError, match="iterable only by accident"):
        convert(tmp_path, value, 2, "x")


def test_big_frames_are_split_identically_on_every_executor(tmp_path):
    df = pd.DataFrame({"k": np.arange(20_000), "v": np.arange(20_000) * 0.5})
    convert(tmp_path / "serial", df, 3, "d")
    convert(tmp_path / "proc", df, 3, "d", executor="processes", num_workers=2)
    assert digests(tmp_path / "serial") == digests(tmp_path / "proc")
    back = list(RecordIO(tmp_path / "serial" / "d")())
    assert [r["k"] for r in back] == list(range(20_000))


# -- 3. one way to name a set --------------------------------------------------------------


def test_a_directory_of_two_sets_is_an_error_that_lists_them(tmp_path):
    convert(tmp_path, range(10), 3, "train")
    convert(tmp_path, range(100, 104), 2, "test")
    with pytest.raises(AmbiguousPathError) as info:
        RecordIO(tmp_path)
    assert info.value.sets == {"test": 2, "train": 3}
    assert "train (3 shards)" in str(info.value) and f"{tmp_path}/test" in str(info.value)
    assert list(RecordIO(tmp_path / "train")()) == list(range(10))
    assert list(RecordIO(str(tmp_path / "test.manifest.json"))()) == list(range(100, 104))
    assert list(RecordIO(tmp_path / "train-*-of-*")()) == list(range(10))
    assert list(RecordIO([tmp_path / "test", tmp_path / "train"])()) == [
        *range(100, 104), *range(10)
    ]
    with pytest.raises(NotFoundError, match="nor a shard set of that prefix"):
        RecordIO(tmp_path / "valid")


def test_a_directory_of_one_set_still_reads(tmp_path):
    convert(tmp_path, range(7), 2, "only")
    assert list(RecordIO(tmp_path)()) == list(range(7))


# -- 4. pickles are never written without a word -------------------------------------------


class Opaque:
    def __init__(self, n: int) -> None:
        self.n = n

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and other.n == self.n


def test_a_pickle_fallback_warns_at_write_time_and_is_recorded(tmp_path):
    data = [(0, "a"), (1, Opaque(1)), (2, Opaque(2))]
    with pytest.warns(PickleFallbackWarning, match="test_trust.Opaque.*instance 1") as seen:
        result = convert(tmp_path, data, 2, "pk")
    assert [w.message.instance_index for w in seen if  # type: ignore[union-attr]
            isinstance(w.message, PickleFallbackWarning)] == [1]
    assert any("holds pickles" in str(n) and "Opaque" in n for n in result.notes)
    doc = json.loads((tmp_path / "pk.manifest.json").read_text())
    assert doc["pickled"] == ["tests.test_trust.Opaque"]
    assert "pickled" in repr(result)
    with pytest.raises(PickleRefusedError):
        list(RecordIO(tmp_path / "pk")())
    assert list(RecordIO(tmp_path / "pk", allow_pickle=True)()) == data


def test_partitions_report_the_global_index_of_the_first_pickle(tmp_path):
    parts = partitions([lambda: iter(range(5)), lambda: iter([5, Opaque(6)])])
    with pytest.warns(PickleFallbackWarning) as seen:
        convert(tmp_path, parts, 2, "pp")
    (warning,) = [w.message for w in seen if isinstance(w.message, PickleFallbackWarning)]
    assert warning.instance_index == 6  # type: ignore[union-attr]


def test_sets_without_pickles_keep_their_manifest_bytes(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", PickleFallbackWarning)
        convert(tmp_path, range(3), 1, "plain")
    assert "pickled" not in json.loads((tmp_path / "plain.manifest.json").read_text())


# -- 6. a damaged manifest doesn't block on_corrupt="skip" --------------------------------


def test_a_damaged_manifest_is_read_around_with_skip(tmp_path):
    convert(tmp_path, range(9), 3, "m")
    (tmp_path / "m.manifest.json").write_text('{"shards": [')
    with pytest.raises(Exception, match="not a valid recprep manifest"):
        RecordIO(tmp_path / "m")
    with pytest.warns(CorruptDataWarning, match="manifest is damaged"):
        reader = RecordIO(tmp_path / "m", on_corrupt="skip")
    assert list(reader()) == list(range(9)) and len(reader) == 9
    assert reader.skipped.events == 1 and reader.skipped.unknown == 1


# -- 7. the input's errors are the input's ---------------------------------------------------


def test_the_readers_oserror_is_not_blamed_on_the_output(tmp_path):
    def reader():
        yield 1
        open(tmp_path / "missing-input.csv")  # noqa: SIM115

    with pytest.raises(TaskFailedError) as info:
        convert(tmp_path / "out", reader, 2, "x")
    err = info.value
    assert isinstance(err.original, FileNotFoundError)
    assert not isinstance(err.original, WriteError) and "output_path" not in str(err)
    assert any("raised by the input" in n for n in err.original.__notes__)
    assert "missing-input.csv" in str(err)


# -- 9. one argument check for every public entry point --------------------------------------


def _public_entry_points() -> list[tuple[typing.Any, tuple[typing.Any, ...]]]:
    """Every public entry point, with valid values of its required arguments."""
    import recprep
    import recprep.tools

    return [
        (recprep.convert, ("out", [1], 1, "p")),
        (recprep.RecordIO, ("somewhere",)),
        (recprep.prepare, ("model.py", "raw", "out")),
        (recprep.partitions, ([[1]],)),
        (recprep.tools.copy, (["a"], "b")),
        (recprep.tools.verify, ("a",)),
        (recprep.tools.head, ("a",)),
        (recprep.tools.list_datasets, ("a",)),
    ]


def _bad_values(annotation: typing.Any) -> list[typing.Any]:
    """Values an annotation must refuse: a bool for an int, a str for a bool..."""
    from recprep._core.arguments import validator

    check = validator(annotation)
    if check is None:
        return []
    return [v for v in (True, "nope", 2.5, object()) if check(v) is not None]


@pytest.mark.parametrize(
    "entry,required", _public_entry_points(), ids=lambda e: getattr(e, "__qualname__", "")
)
def test_every_public_entry_point_checks_its_arguments(entry, required):
    target = entry.__init__ if inspect.isclass(entry) else entry
    assert hasattr(target, "__wrapped__"), f"{entry.__qualname__} is not @checked"
    hints = typing.get_type_hints(target.__wrapped__)
    parameters = [p for p in inspect.signature(target).parameters.values() if p.name != "self"]
    tried = 0
    for position, param in enumerate(parameters):
        for bad in _bad_values(hints.get(param.name, typing.Any))[:2]:
            tried += 1
            args = list(required)
            kwargs = {}
            if position < len(args):
                args[position] = bad
            else:
                kwargs[param.name] = bad
            with pytest.raises(InvalidArgumentError, match=f"{param.name} must be"):
                entry(*args, **kwargs)
    assert tried > 0


def test_the_drifted_checks_agree_now(tmp_path):
    convert(tmp_path, range(3), 1, "a")
    with pytest.raises(InvalidArgumentError, match="max_chunk_bytes must be an int"):
        RecordIO(tmp_path / "a", max_chunk_bytes=True)
    with pytest.raises(InvalidArgumentError, match="num_shards must be an int"):
        convert(tmp_path, range(3), True, "b")
    with pytest.raises(InvalidArgumentError, match="on_corrupt must be one of 'raise', 'skip'"):
        RecordIO(tmp_path / "a", on_corrupt="ignore")


# -- 15. opening is linear; most shards empty is said --------------------------------------


def test_opening_a_set_of_many_shards_is_linear(tmp_path):
    from recprep.storage.manifest import Manifest, ShardInfo
    from recprep.storage.shardnames import shard_name

    count = 30_000
    names = [shard_name("many", i, count) for i in range(count)]
    for name in names:
        (tmp_path / name).touch()
    manifest = Manifest("many", "recordio", "recprep", "snappy",
                        [ShardInfo(n, 0, 0, 0) for n in names])
    (tmp_path / "many.manifest.json").write_bytes(manifest.to_json())
    started = time.perf_counter()
    reader = RecordIO(tmp_path / "many")
    assert len(reader) == 0 and len(reader.paths) == count
    # quadratic opening took 6 s for 10,000 shards (and 9x that here)
    assert time.perf_counter() - started < 20


def test_convert_warns_when_most_shards_are_empty(tmp_path):
    with pytest.warns(RecprepWarning, match="8 of 10 shards are empty"):
        convert(tmp_path, range(2), 10, "sparse")


# -- 17. processes split what they can, and say when they can't ---------------------------


def test_processes_split_a_list_byte_identical_to_serial(tmp_path):
    data = [(i, f"value {i}", np.full(4, i, np.int16)) for i in range(20_000)]
    convert(tmp_path / "serial", data, 4, "l")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnsplitInputWarning)
        convert(tmp_path / "proc", data, 4, "l", executor="processes", num_workers=2)
    assert digests(tmp_path / "serial") == digests(tmp_path / "proc")


def test_a_generator_on_processes_warns_that_it_runs_as_one_task(tmp_path):
    def reader():
        yield from range(10)

    with pytest.warns(UnsplitInputWarning, match="partitions"):
        convert(tmp_path, reader, 2, "g", executor="processes", num_workers=2)
    with pytest.warns(UnsplitInputWarning, match="in this process"):
        convert(tmp_path, iter(range(10)), 2, "h", executor="processes", num_workers=2)


# -- 18. reprs a person can read -----------------------------------------------------------


def test_reader_and_result_reprs_are_short_and_useful(tmp_path):
    result = convert(tmp_path, [(i, "x" * 100) for i in range(500)], 100, "r")
    shown = repr(result)
    assert isinstance(result, ConvertResult) and len(shown) < 300
    for part in ("/r: 100 shards", "500 instances", "format='recordio'", "codec='recprep'"):
        assert part in shown
    reader = RecordIO(tmp_path / "r", shuffle=True, seed=3)
    shown = repr(reader)
    assert len(shown) < 300 and "r: 100 shards, 500 instances" in shown
    assert "shuffle(seed=3)" in shown and "recordio/recprep/snappy" in shown


def test_a_resumed_run_records_the_same_pickles(tmp_path):
    """The pickled types travel in the task records: a resumed run's manifest is
    byte-identical to an uninterrupted one's."""
    import os
    import subprocess
    import sys

    script = (
        "import types, warnings, sys\n"
        "from recprep import convert, partitions\n"
        "warnings.simplefilter('ignore')\n"
        "def part(k):\n"
        "    return lambda: iter([k, types.SimpleNamespace(k=k) if k == 0 else k])\n"
        "convert(sys.argv[1], partitions([part(k) for k in range(4)]), 2, 'rp',\n"
        "        resume=True)\n"
    )
    env = {**os.environ, "RECPREP_FAILPOINTS": "staging.record=3"}
    killed = subprocess.run([sys.executable, "-c", script, str(tmp_path / "resumed")],
                            env=env, capture_output=True)
    assert killed.returncode == 137, killed.stderr.decode()
    env.pop("RECPREP_FAILPOINTS")
    for out in ("resumed", "whole"):
        done = subprocess.run([sys.executable, "-c", script, str(tmp_path / out)], env=env,
                              capture_output=True)
        assert done.returncode == 0, done.stderr.decode()
    resumed = (tmp_path / "resumed" / "rp.manifest.json").read_bytes()
    assert resumed == (tmp_path / "whole" / "rp.manifest.json").read_bytes()
    assert json.loads(resumed)["pickled"] == ["types.SimpleNamespace"]


# -- issue 13, item 15: reading many shards round-robin holds a bounded number of files ---


def test_round_robin_over_many_shards_fits_a_low_fd_limit(tmp_path):
    """2,000 shards read round-robin under RLIMIT_NOFILE=256: one open file per shard
    used to end in a bare EMFILE."""
    import subprocess
    import sys

    convert(tmp_path, range(4_000), 2_000, "many")
    script = (
        "import pickle, resource, sys\n"
        "from recprep import RecordIO\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))\n"
        "reader = RecordIO(sys.argv[1])\n"
        "assert list(reader()) == list(range(4_000))\n"
        "assert list(RecordIO(sys.argv[1], num_threads=2)()) == list(range(4_000))\n"
        "assert list(pickle.loads(pickle.dumps(reader))())[:3] == [0, 1, 2]\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "many")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
