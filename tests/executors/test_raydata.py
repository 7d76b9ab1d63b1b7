"""recprep.ray: Ray Data reads a set (one read task per rank share, Arrow blocks) and
writes one (convert on the Ray executor, the dataset's blocks as partitions), on the
shared local Ray (fixture ``ray_local``), on S3 (moto) and on a ``ray start`` cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from recprep import (
    CorruptDataError,
    CorruptDataWarning,
    InvalidArgumentError,
    RecordIO,
    RecprepWarning,
)
from recprep import convert as recprep_convert

from ..support import flip_byte
from ..support.clusters import RAY_TEST_ENV, ray_head

pytest.importorskip("ray.data")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

ROOT = Path(__file__).parents[2]


def convert(*args, **kwargs):
    return recprep_convert(*args, progress=False, **kwargs)


def dict_set(path: str, n: int = 3000, **options) -> str:
    """A set of dict instances in 3 shards of many small chunks."""
    rows = [{"id": i, "x": i / 4, "s": f"w{i}", "v": np.full(3, i, np.float32)}
            for i in range(n)]
    convert(path, rows, 3, "d", chunk_bytes=2048, **options)
    return path


def plain(row: dict) -> tuple:
    """A row of the dict set as a hashable value."""
    return int(row["id"]), float(row["x"]), str(row["s"]), tuple(np.asarray(row["v"]).tolist())


@pytest.fixture
def rr(ray_local):
    import recprep.ray

    return recprep.ray


def test_read_gives_every_instance_once_across_its_tasks(rr, tmp_path):
    path = dict_set(str(tmp_path / "set"))
    ds = rr.read(path, override_num_blocks=4)
    blocks = ds.materialize()
    assert blocks.num_blocks() >= 4  # several read tasks, one rank share each
    want = list(RecordIO(path)())
    got = blocks.take_all()
    assert Counter(map(plain, got)) == Counter(map(plain, want)) and len(got) == 3000
    assert ds.count() == 3000
    assert set(blocks.schema().names) == {"id", "x", "s", "v"}


def test_one_task_reads_in_the_readers_order(rr, tmp_path):
    path = dict_set(str(tmp_path / "set"), n=500)
    got = rr.read(path, override_num_blocks=1).take_all()
    assert [plain(r) for r in got] == [plain(r) for r in RecordIO(path)()]
    assert isinstance(got[0]["v"], np.ndarray) and got[0]["v"].dtype == np.float32


def test_tuples_and_values_become_columns(rr, tmp_path):
    convert(str(tmp_path / "t"), [(i, f"s{i}") for i in range(10)], 2, "t")
    convert(str(tmp_path / "v"), list(range(10)), 2, "v")
    rows = rr.read(str(tmp_path / "t"), override_num_blocks=1).take_all()
    assert rows[:2] == [{"f0": 0, "f1": "s0"}, {"f0": 1, "f1": "s1"}]
    assert rr.read(str(tmp_path / "v"), override_num_blocks=1).take_all()[3] == {"value": 3}


def test_columns_prunes(rr, tmp_path):
    path = dict_set(str(tmp_path / "set"), n=200)
    ds = rr.read(path, columns=["s", "id"], override_num_blocks=2)
    assert ds.schema().names == ["s", "id"]
    assert sorted(r["id"] for r in ds.take_all()) == list(range(200))
    with pytest.raises(InvalidArgumentError, match=r"no column 'nope'; its columns are"):
        rr.read(path, columns=["nope"]).take_all()


def test_shuffle_is_the_readers_and_the_seed_reproduces_it(rr, tmp_path):
    path = dict_set(str(tmp_path / "set"), n=1000)
    one = [plain(r) for r in rr.read(path, shuffle=True, seed=5,
                                     override_num_blocks=1).take_all()]
    assert one == [plain(r) for r in RecordIO(path, shuffle=True, seed=5)()]
    assert one == [plain(r) for r in rr.read(path, shuffle=True, seed=5,
                                             override_num_blocks=1).take_all()]
    assert one != [plain(r) for r in RecordIO(path)()]
    # no seed: the driver draws one for every task, so the shares still cover the set once
    spread = rr.read(path, shuffle=True, override_num_blocks=4).take_all()
    assert sorted(int(r["id"]) for r in spread) == list(range(1000))


def test_rank_options_are_refused(rr, tmp_path):
    path = dict_set(str(tmp_path / "set"), n=10)
    with pytest.raises(InvalidArgumentError, match="Ray splits the set"):
        rr.read(path, rank=0, world_size=2)


def test_read_from_s3(rr, s3, s3_url):
    options = {"endpoint_url": s3.endpoint_url, "key": "testing", "secret": "testing"}
    url = f"{s3_url}/set"
    dict_set(url, n=600, storage_options=options)
    got = rr.read(url, storage_options=options, override_num_blocks=3).take_all()
    assert sorted(map(plain, got)) == sorted(map(plain, RecordIO(
        url, storage_options=options)()))
    assert len(got) == 600


def damaged_set(tmp_path: Path) -> str:
    data = [{"id": i, "v": np.full(8, i, np.float64)} for i in range(60)]
    convert(str(tmp_path), data, 2, "d", chunk_bytes=300)
    shard = sorted(tmp_path.glob("d-*-of-*"))[0]
    flip_byte(shard)
    return str(tmp_path)


def test_a_damaged_chunk_is_skipped_or_raised(rr, tmp_path):
    path = damaged_set(tmp_path / "set")
    with pytest.warns(CorruptDataWarning):
        want = sorted(int(r["id"]) for r in RecordIO(path, on_corrupt="skip")())
    assert 0 < len(want) < 60
    got = rr.read(path, on_corrupt="skip", override_num_blocks=2).take_all()
    assert sorted(int(r["id"]) for r in got) == want
    with pytest.raises(CorruptDataError):
        rr.read(path, override_num_blocks=2).take_all()


def some_rows(n: int) -> list[dict]:
    return [{"id": i, "name": f"n{i}", "score": i * 0.5,
             "emb": np.arange(4, dtype=np.float32) + i} for i in range(n)]


def test_write_round_trip(rr, ray_local, tmp_path):
    ds = ray_local.data.from_items(some_rows(1000), override_num_blocks=5).materialize()
    result = rr.write(ds, str(tmp_path / "out"), 3, "w")
    assert result.records_per_shard == [334, 333, 333]
    assert (tmp_path / "out" / ".w.chunks").exists()
    got = list(RecordIO(str(tmp_path / "out"))())
    want = ds.take_all()
    assert [int(g["id"]) for g in got] == [int(w["id"]) for w in want]  # the dataset's order
    assert all(g["name"] == w["name"] and np.array_equal(g["emb"], w["emb"])
               and g["emb"].dtype == np.float32 for g, w in zip(got, want, strict=True))
    back = rr.read(str(tmp_path / "out")).take_all()
    assert sorted(int(r["id"]) for r in back) == list(range(1000))


def test_a_write_task_that_crashes_once_is_retried_and_commits_once(
        rr, ray_local, tmp_path, monkeypatch):
    from recprep.raydata.writing import FAILPOINT_ENV

    ds = ray_local.data.from_items(some_rows(300), override_num_blocks=3).materialize()
    rr.write(ds, str(tmp_path / "clean"), 2, "w")
    marker = tmp_path / "crash-once"
    marker.write_text("")
    monkeypatch.setenv(FAILPOINT_ENV, str(marker))
    result = rr.write(ds, str(tmp_path / "crashed"), 2, "w")
    assert not marker.exists()  # a block reader took the failpoint: its worker died
    assert result.records_per_shard == [150, 150]

    def files(d: Path) -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in sorted(d.iterdir())}

    crashed, clean = files(tmp_path / "crashed"), files(tmp_path / "clean")
    assert crashed.keys() == clean.keys()
    assert {k: v for k, v in crashed.items() if "manifest" not in k} == {
        k: v for k, v in clean.items() if "manifest" not in k}
    ids = [int(r["id"]) for r in RecordIO(str(tmp_path / "crashed"))()]
    assert ids == [int(r["id"]) for r in ds.take_all()]


def test_write_refuses_what_is_not_a_dataset(rr, tmp_path):
    with pytest.raises(InvalidArgumentError, match="takes a ray.data.Dataset, got list"):
        rr.write([1, 2], str(tmp_path / "o"), 1, "o")


def test_import_needs_no_ray():
    code = ("import sys, recprep.ray as rr; "
            "assert 'ray' not in sys.modules and 'pyarrow' not in sys.modules, sorted("
            "m for m in sys.modules if m.startswith(('ray', 'pyarrow'))); print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr[-2000:]


def test_ray_cluster_reads_and_writes(tmp_path):
    with ray_head() as address:
        proc = subprocess.run(
            [sys.executable, "-m", "tests.support.raydata_job", str(tmp_path), address],
            capture_output=True, text=True, timeout=300, cwd=ROOT,
            env={**os.environ, **RAY_TEST_ENV})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"read": 2000, "written": [1000, 1000], "back": 2000, "in_order": True}




def test_a_relative_path_is_the_drivers(rr, tmp_path, monkeypatch):
    dict_set(str(tmp_path / "rel"), n=50)
    monkeypatch.chdir(tmp_path)  # the workers' working directory is another
    assert sorted(int(r["id"]) for r in rr.read("rel").take_all()) == list(range(50))


def test_an_empty_dataset_writes_an_empty_set(rr, ray_local, tmp_path):
    empty = ray_local.data.range(10).limit(0).materialize()
    with pytest.warns(RecprepWarning, match="2 of 2 shards are empty"):
        result = rr.write(empty, str(tmp_path / "e"), 2, "e")
    assert result.records_per_shard == [0, 0]
    assert list(RecordIO(str(tmp_path / "e"))()) == []
    with pytest.raises(InvalidArgumentError, match="executor="):
        rr.write(empty, str(tmp_path / "x"), 2, "x", executor="serial")
