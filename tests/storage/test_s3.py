"""convert() and RecordIO on s3://, through a real S3-protocol server (moto) on loopback.

Reached with s3fs as a user reaches S3: an ``s3://`` URL and ``storage_options`` naming
the endpoint, or the ``AWS_ENDPOINT_URL`` environment variable.
"""

from __future__ import annotations

import json
import posixpath

import numpy as np
import pytest

from recprep import OutputExistsError, RecordIO, TaskFailedError, convert
from recprep.storage.staging import STAGING_PREFIX

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def instances(n: int = 30, seed: int = 0) -> list[tuple[np.ndarray, int, str]]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(i % 7).astype(np.float32), i, f"s{i}") for i in range(n)]


def assert_same(got: list, want: list) -> None:
    assert len(got) == len(want)
    for (ga, gi, gs), (wa, wi, ws) in zip(got, want, strict=True):
        assert ga.dtype == wa.dtype and ga.shape == wa.shape and np.array_equal(ga, wa)
        assert (gi, gs) == (wi, ws)


def keys(s3, url: str) -> list[str]:
    """Every object under ``url`` (recursively), relative to it, as S3 lists them."""
    fs = s3.filesystem()
    root = url.removeprefix("s3://").rstrip("/")
    return sorted(posixpath.relpath(p, root) for p in fs.find(root))


@pytest.mark.parametrize("compressor", ["snappy", "gzip", "none"])
def test_convert_and_read_back(s3, s3_url, tmp_path, compressor):
    data = instances()
    out = f"{s3_url}/sets/train"
    result = convert(
        out, data, 4, "p", compressor=compressor, chunk_bytes=200,
        storage_options=s3.storage_options,
    )
    assert result.paths[0] == f"{out}/p-00000-of-00003"
    assert keys(s3, out) == [".p.chunks",  # the chunk side file
                             *(f"p-0000{i}-of-00003" for i in range(4)), "p.manifest.json"]
    read = RecordIO(f"{out}/p-*-of-*", storage_options=s3.storage_options)
    assert_same(list(read()), data)
    assert len(read) == len(data)
    assert_same(list(RecordIO(out, storage_options=s3.storage_options)()), data)
    # the same bytes as a local conversion; the manifest too, but for each shard's ETag
    # (recorded where the store gives one: S3's, under the shard's final name)
    local = convert(str(tmp_path / "local"), data, 4, "p", compressor=compressor, chunk_bytes=200)
    fs = s3.filesystem()
    for remote_path, local_path in zip(result.paths, local.paths, strict=True):
        with open(local_path, "rb") as f:
            assert fs.cat_file(remote_path) == f.read()
    remote = json.loads(fs.cat_file(result.manifest_path))
    assert [s.pop("etag") for s in remote["shards"]] == [fs.info(p)["ETag"] for p in result.paths]
    with open(local.manifest_path, "rb") as f:
        assert remote == json.loads(f.read())


def test_endpoint_from_environment(s3, s3_url, monkeypatch):
    """AWS_ENDPOINT_URL works as it does for s3fs: no storage_options needed."""
    from ..support.s3 import clear_s3fs_cache

    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint_url)
    clear_s3fs_cache()
    data = instances(5)
    convert(f"{s3_url}/env", data, 2, "e")
    assert_same(list(RecordIO(f"{s3_url}/env/e-*-of-*")()), data)
    clear_s3fs_cache()


def failing_reader(n_ok: int):
    def reader():
        yield from instances(n_ok)
        raise RuntimeError("the reader broke")

    return reader


def test_failure_leaves_nothing(s3, s3_url):
    out = f"{s3_url}/fail"
    with pytest.raises(TaskFailedError, match="the reader broke"):
        convert(out, failing_reader(20), 3, "f", storage_options=s3.storage_options)
    assert keys(s3, s3_url) == []


def test_failed_overwrite_keeps_old_set(s3, s3_url):
    out = f"{s3_url}/keep"
    old = instances(12, seed=1)
    convert(out, old, 3, "k", storage_options=s3.storage_options)
    before = {k: s3.filesystem().cat_file(f"{out}/{k}") for k in keys(s3, out)}
    with pytest.raises(TaskFailedError, match="the reader broke"):
        convert(out, failing_reader(40), 3, "k", overwrite=True,
                storage_options=s3.storage_options)
    after = {k: s3.filesystem().cat_file(f"{out}/{k}") for k in keys(s3, out)}
    assert after == before
    assert_same(list(RecordIO(out, storage_options=s3.storage_options)()), old)


def test_manifest_is_committed_last(s3, s3_url, monkeypatch):
    # the commit's moves into place (a CopyObject and a DeleteObject each, several at
    # once) and its PUT of the manifest, spied on where the commit makes them
    from recprep.storage import commitmoves

    moves: list[tuple[str, list[str]]] = []
    move, put = commitmoves.move_object, commitmoves.put_checked

    def move_spy(fs, source, target):
        result = move(fs, source, target)
        root = s3_url.removeprefix("s3://") + "/last"
        fs.invalidate_cache()
        final = [k for k in fs.find(root, detail=False) if STAGING_PREFIX not in k]
        moves.append((posixpath.basename(target), sorted(map(posixpath.basename, final))))
        return result

    def put_spy(fs, path, data):  # the manifest: a PUT in place (atomic)
        result = put(fs, path, data)
        moves.append((posixpath.basename(path), []))
        return result

    monkeypatch.setattr(commitmoves, "move_object", move_spy)
    monkeypatch.setattr(commitmoves, "put_checked", put_spy)
    convert(f"{s3_url}/last", instances(9), 3, "m", storage_options=s3.storage_options)
    names = [name for name, _ in moves]  # data files move several at once, in any order
    assert sorted(names[:-1]) == [".m.chunks"] + [f"m-0000{i}-of-00002" for i in range(3)]
    assert names[-1] == "m.manifest.json"
    # while shards were being moved, no manifest was visible under its final name
    for _, visible in moves[:-1]:
        assert "m.manifest.json" not in visible
    assert keys(s3, f"{s3_url}/last")[-1] == "m.manifest.json"


def test_output_exists(s3, s3_url):
    out = f"{s3_url}/exists"
    convert(out, instances(6), 2, "x", storage_options=s3.storage_options)
    with pytest.raises(OutputExistsError) as caught:
        convert(out, instances(8), 2, "x", storage_options=s3.storage_options)
    assert caught.value.path == out
    assert f"{out}/x.manifest.json" in caught.value.existing
    assert len(RecordIO(out, storage_options=s3.storage_options)) == 6
    # another prefix in the same directory is fine; overwrite replaces
    convert(out, instances(3), 1, "y", storage_options=s3.storage_options)
    new = instances(8, seed=5)
    convert(out, new, 4, "x", overwrite=True, storage_options=s3.storage_options)
    assert keys(s3, out) == [
        ".x.chunks", ".y.chunks", *(f"x-0000{i}-of-00003" for i in range(4)),
        "x.manifest.json", "y-00000-of-00000", "y.manifest.json",
    ]
    assert_same(list(RecordIO(f"{out}/x-*-of-*", storage_options=s3.storage_options)()), new)
    manifest = json.loads(s3.filesystem().cat_file(f"{out}/x.manifest.json"))
    assert manifest["num_records"] == 8 and manifest["num_shards"] == 4


def test_prepare_with_an_s3_raw_directory(s3, s3_url, tmp_path):
    """The data-preparation job reads raw files from S3 (each handed to the user's function
    as a local temporary copy) and writes its shards to S3."""
    from recprep import prepare

    fs = s3.filesystem()
    root = s3_url.removeprefix("s3://")
    for name, value in [("raw/a/1.txt", b"1"), ("raw/a/2.txt", b"2"), ("raw/b/3.txt", b"3"),
                        ("raw/.hidden", b"x")]:
        fs.pipe_file(f"{root}/{name}", value)
    model = tmp_path / "model.py"
    model.write_text(
        "import os\n"
        "from recprep import Feature\n"
        "feature_columns = [Feature('n', 'int64'), Feature('local', bytes)]\n"
        "def prepare_data_for_a_single_file(filename):\n"
        "    assert os.path.isfile(filename)\n"
        "    return int(open(filename).read()), b'local'\n"
    )
    result = prepare(str(model), f"{s3_url}/raw", f"{s3_url}/out", executor="serial",
                     num_shards=2, storage_options=s3.storage_options, progress=False)
    assert result.files == 3 and result.convert.paths[0].startswith("s3://")
    got = RecordIO(f"{s3_url}/out/data-*", storage_options=s3.storage_options)()
    assert [int(x["n"]) for x in got] == [1, 2, 3]
