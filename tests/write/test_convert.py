"""convert() and RecordIO(): layout, order, manifest, commit protocol, argument errors."""

from __future__ import annotations

import json
import pickle
import posixpath

import fsspec
import google_crc32c
import numpy as np
import pytest
import recordio as pyrecordio

from recprep import (
    CorruptDataError,
    DecodeError,
    EncodeError,
    InvalidArgumentError,
    MissingShardsError,
    NotFoundError,
    OutputExistsError,
    PickleRefusedError,
    RecordIO,
    RecprepError,
    TaskFailedError,
    WriteError,
    convert,
)
from recprep.errors import CorruptDataWarning, RecprepWarning
from recprep.storage import resolve
from recprep.storage.shardnames import parse_shard_name, shard_name
from recprep.write.loop import as_iterable

from ..containers.test_recordio import spec_decode_go


def mnist_like(n: int = 50, seed: int = 0):
    def reader():
        rng = np.random.default_rng(seed)
        for i in range(n):
            yield rng.uniform(-1, 1, 784), i % 10

    return reader


def listing(url: str) -> list[str]:
    fs, path = resolve(url)
    if not fs.exists(path):
        return []
    return sorted(posixpath.basename(p) for p in fs.ls(path, detail=False))


def assert_same_instances(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert type(g) is type(w)
        if isinstance(w, tuple):
            assert_same_instances(list(g), list(w))
        elif isinstance(w, np.ndarray):
            assert g.dtype == w.dtype and g.shape == w.shape and np.array_equal(g, w)
        else:
            assert g == w


# -- layout and order ---------------------------------------------------------------------


def test_round_trip_in_original_order(out_url):
    reader = mnist_like(53)
    result = convert(out_url, reader, 10, "random_images")
    assert [posixpath.basename(p) for p in result.paths] == [
        f"random_images-{i:05d}-of-00009" for i in range(10)
    ]
    assert result.records_per_shard == [6, 6, 6] + [5] * 7
    assert listing(out_url) == sorted(
        [posixpath.basename(p) for p in result.paths]
        + ["random_images.manifest.json", ".random_images.chunks"]  # + chunk side file
    )
    read = RecordIO(f"{out_url}/random_images-*-of-*")
    assert_same_instances(list(read()), list(reader()))
    assert_same_instances(list(read()), list(reader()))  # a fresh pass each call
    assert len(read) == 53


def test_instance_i_lands_in_shard_i_mod_n_at_i_div_n(mem_url):
    convert(mem_url, lambda: iter(range(23)), 4, "p")
    for s in range(4):
        got = list(RecordIO(f"{mem_url}/p-{s:05d}-of-00003")())
        assert got == list(range(s, 23, 4))


def test_more_shards_than_instances_gives_empty_files(tmp_path):
    with pytest.warns(RecprepWarning, match="3 of 5 shards are empty"):
        result = convert(str(tmp_path), [1, 2], 5, "few")
    assert result.records_per_shard == [1, 1, 0, 0, 0]
    assert (tmp_path / "few-00004-of-00004").read_bytes() == b""
    assert list(RecordIO(str(tmp_path / "few-*-of-*"))()) == [1, 2]


def test_one_shot_iterable_and_output_dir_created(tmp_path):
    out = tmp_path / "a" / "b"
    convert(str(out), (x for x in ["x", "y", "z"]), 2, "gen")
    assert list(RecordIO(str(out / "gen-*"))()) == ["x", "y", "z"]


def test_shard_names_widen_past_99999():
    assert shard_name("p", 0, 100) == "p-00000-of-00099"
    assert shard_name("p", 99999, 100000) == "p-99999-of-99999"
    assert shard_name("p", 5, 100001) == "p-000005-of-100000"
    assert parse_shard_name("p-000005-of-100000") == ("p", 5, 100000)
    assert parse_shard_name("a-b-00001-of-00002") == ("a-b", 1, 2)
    assert parse_shard_name("p-0001-of-00002") is None
    assert parse_shard_name("p.manifest.json") is None


def test_written_files_are_go_recordio_per_spec(tmp_path):
    # compressible records: a chunk snappy wouldn't shrink is stored as "none" (id 0)
    result = convert(str(tmp_path), [b"a" * 64, b"bc" * 32] * 3, 2, "raw", codec="raw")
    chunks = spec_decode_go((tmp_path / "raw-00000-of-00001").read_bytes())
    assert chunks == [(1, [b"a" * 64] * 3)]
    assert result.num_records == 6


@pytest.mark.parametrize("compressor", ["none", "snappy", "gzip"])
def test_legacy_format_is_read_by_pyrecordio(tmp_path, compressor):
    convert(
        str(tmp_path), [b"r%d" % i for i in range(9)], 3, "leg",
        format="recordio-legacy", codec="raw", compressor=compressor, chunk_bytes=8,
    )
    with pyrecordio.File(str(tmp_path / "leg-00001-of-00002"), "r") as f:
        assert list(f.get_reader()) == [b"r1", b"r4", b"r7"]
    assert list(RecordIO(str(tmp_path / "leg-*"))()) == [b"r%d" % i for i in range(9)]


def test_many_chunks_per_shard(mem_url):
    data = [np.arange(i, i + 300) for i in range(40)]
    convert(mem_url, data, 2, "c", chunk_bytes=5000)
    fs, path = resolve(mem_url)
    chunks = spec_decode_go(fs.cat_file(f"{path}/c-00000-of-00001"))
    assert len(chunks) >= 5
    assert_same_instances(list(RecordIO(f"{mem_url}/c-*")()), data)


# -- the manifest ---------------------------------------------------------------------------


def test_manifest_records_every_shard_and_is_deterministic(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    convert(str(a), mnist_like(31), 4, "m", compressor="gzip")
    convert(str(b), mnist_like(31), 4, "m", compressor="gzip")
    raw = (a / "m.manifest.json").read_bytes()
    assert raw == (b / "m.manifest.json").read_bytes()
    doc = json.loads(raw)
    assert doc["format"] == "recordio" and doc["codec"] == "recprep"
    assert doc["compressor"] == "gzip" and doc["num_shards"] == 4
    assert doc["num_records"] == 31 and "recprep_version" in doc and doc["schema"] == {}
    for shard in doc["shards"]:
        data = (a / shard["name"]).read_bytes()
        assert shard["bytes"] == len(data)
        assert shard["crc32c"] == f"{google_crc32c.value(data):08x}"
    assert [s["records"] for s in doc["shards"]] == [8, 8, 8, 7]
    for shard in doc["shards"]:
        assert (a / shard["name"]).read_bytes() == (b / shard["name"]).read_bytes()


def test_codec_comes_from_the_manifest(mem_url):
    convert(mem_url, [b"x", b"y"], 1, "r", codec="raw")
    assert list(RecordIO(f"{mem_url}/r-*")()) == [b"x", b"y"]


def test_pickle_codec_is_refused_without_allow_pickle(mem_url):
    class Thing:
        pass

    convert(mem_url, [{"a": 1}, (2, 3)], 2, "pk", codec="pickle", compressor="none")
    fs, path = resolve(mem_url)
    assert pickle.loads(fs.cat_file(f"{path}/pk-00000-of-00001")[24:]) == {"a": 1}
    with pytest.raises(PickleRefusedError) as info:
        list(RecordIO(f"{mem_url}/pk-*")())
    assert "allow_pickle=True" in str(info.value) and "pk-00000-of-00001" in str(info.value)
    assert list(RecordIO(f"{mem_url}/pk-*", allow_pickle=True)()) == [{"a": 1}, (2, 3)]
    del Thing


def test_without_manifest_a_wrong_codec_fails_loudly(mem_url):
    convert(mem_url, [b"not-recprep"], 1, "nm", codec="raw")
    fs, path = resolve(mem_url)
    fs.rm(f"{path}/nm.manifest.json")
    with pytest.raises(DecodeError) as info:
        list(RecordIO(f"{mem_url}/nm-*")())
    assert info.value.path.endswith("nm-00000-of-00000") and info.value.offset == 0
    assert list(RecordIO(f"{mem_url}/nm-*", codec="raw")()) == [b"not-recprep"]


# -- reading what exists ---------------------------------------------------------------------


def test_partial_glob_names_missing_shards(tmp_path):
    convert(str(tmp_path), range(20), 10, "p")
    (tmp_path / "p-00003-of-00009").unlink()
    (tmp_path / "p-00007-of-00009").unlink()
    with pytest.raises(MissingShardsError) as info:
        RecordIO(str(tmp_path / "p-*-of-00009"))
    assert [posixpath.basename(m) for m in info.value.missing] == [
        "p-00003-of-00009", "p-00007-of-00009"
    ]
    assert isinstance(info.value, FileNotFoundError) and "8 shard(s)" in str(info.value)


def test_single_file_and_explicit_subset_read_just_those(tmp_path):
    convert(str(tmp_path), range(20), 10, "p")
    assert list(RecordIO(str(tmp_path / "p-00003-of-00009"))()) == [3, 13]
    assert list(RecordIO(str(tmp_path / "p-0000[0-1]-of-00009"))()) == [0, 1, 10, 11]
    two = [str(tmp_path / "p-00002-of-00009"), str(tmp_path / "p-00005-of-00009")]
    assert list(RecordIO(two)()) == [2, 12, 5, 15]  # explicit files: each whole, in order


def test_directory_reads_its_sets(tmp_path):
    convert(str(tmp_path), range(6), 3, "d")
    (tmp_path / "notes.txt").write_text("not a shard")
    assert list(RecordIO(str(tmp_path))()) == list(range(6))


def test_nothing_there(tmp_path):
    with pytest.raises(NotFoundError):
        RecordIO(str(tmp_path / "nope-*"))
    with pytest.raises(FileNotFoundError):
        RecordIO(str(tmp_path / "missing-file"))


# -- the commit protocol ------------------------------------------------------------------


def test_existing_set_is_refused_and_untouched(tmp_path):
    convert(str(tmp_path), range(4), 2, "p")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(OutputExistsError) as info:
        convert(str(tmp_path), range(100), 2, "p")
    assert isinstance(info.value, FileExistsError) and "overwrite=True" in str(info.value)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_overwrite_replaces_the_set_and_drops_stale_shards(tmp_path):
    convert(str(tmp_path), range(40), 10, "p")
    (tmp_path / "other.txt").write_text("keep me")
    convert(str(tmp_path), range(3), 3, "p", overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".p.chunks", "other.txt", "p-00000-of-00002", "p-00001-of-00002", "p-00002-of-00002",
        "p.manifest.json",
    ]
    assert list(RecordIO(str(tmp_path / "p-*"))()) == [0, 1, 2]


class Boom(Exception):
    pass


def failing_reader(after: int):
    def reader():
        for i in range(after):
            yield np.zeros(1000) + i
        raise Boom("the user's reader broke")

    return reader


@pytest.mark.parametrize("overwrite", [False, True])
def test_failure_half_way_leaves_the_output_as_it_was(out_url, overwrite):
    convert(out_url, range(8), 4, "keep")
    fs, path = resolve(out_url)
    before = {p: fs.cat_file(p) for p in fs.ls(path, detail=False)}
    prefix = "keep" if overwrite else "new"
    with pytest.raises(TaskFailedError) as info:
        convert(out_url, failing_reader(5000), 4, prefix, overwrite=overwrite, chunk_bytes=4096)
    assert info.value.original_type == "tests.write.test_convert.Boom"
    assert isinstance(info.value.__cause__, Boom) and "the user's reader broke" in str(info.value)
    after = {p: fs.cat_file(p) for p in fs.ls(path, detail=False)}
    assert after == before  # no staging directory, no new file, old data intact


def test_encode_error_names_the_instance_and_commits_nothing(mem_url):
    with pytest.raises(TaskFailedError) as info:
        convert(mem_url, [b"ok", b"ok", "not bytes"], 2, "e", codec="raw")
    original = info.value.original
    assert isinstance(original, EncodeError) and original.instance_index == 2
    assert "instance 2" in str(info.value)
    assert listing(mem_url) == []


# -- bad arguments fail before anything is written ---------------------------------------------


@pytest.mark.parametrize(
    "args,kwargs,match",
    [
        ((range(3), 0, "p"), {}, "num_shards must be an int >= 1"),
        ((range(3), True, "p"), {}, "num_shards"),
        ((range(3), 2.0, "p"), {}, "num_shards"),
        ((range(3), 2, "a/b"), {}, "name_prefix"),
        ((range(3), 2, "p-*"), {}, "name_prefix"),
        ((range(3), 2, ""), {}, "name_prefix"),
        ((range(3), 2, ".hidden"), {}, "name_prefix"),
        (("a string", 2, "p"), {}, "iterable only by accident"),
        ((b"bytes", 2, "p"), {}, "iterable only by accident"),
        (({"a": 1}, 2, "p"), {}, "iterable only by accident"),
        ((42, 2, "p"), {}, "reader must be"),
        ((range(3), 2, "p"), {"codec": "json"}, r"valid codecs are \[.*'pickle'.*'recprep'"),
        ((range(3), 2, "p"), {"format": "parquet"}, r"valid formats are \["),
        ((range(3), 2, "p"), {"compressor": "lz4"}, r"valid compressors are \['none', 'snappy'"),
        ((range(3), 2, "p"), {"chunk_bytes": 0}, "chunk_bytes"),
    ],
)
def test_bad_arguments(mem_url, args, kwargs, match):
    with pytest.raises(InvalidArgumentError, match=match) as info:
        convert(mem_url, *args, **kwargs)
    assert isinstance(info.value, ValueError) and isinstance(info.value, RecprepError)
    assert listing(mem_url) == []


def test_reader_returning_a_non_iterable():
    with pytest.raises(InvalidArgumentError, match="must return an iterable"):
        as_iterable(lambda: 42)


def test_reader_arguments():
    with pytest.raises(InvalidArgumentError):
        RecordIO([])
    with pytest.raises(InvalidArgumentError):
        RecordIO("x", max_chunk_bytes=0)


def test_memory_and_local_agree(tmp_path, mem_url):
    convert(str(tmp_path), mnist_like(20), 3, "same")
    convert(mem_url, mnist_like(20), 3, "same")
    fs = fsspec.filesystem("memory")
    for p in tmp_path.iterdir():
        assert p.read_bytes() == fs.cat_file(f"{resolve(mem_url)[1]}/{p.name}")


def test_reader_skips_a_damaged_chunk_and_keeps_the_rest(tmp_path):
    convert(str(tmp_path), range(400), 2, "dmg", chunk_bytes=256)
    shard = tmp_path / "dmg-00001-of-00001"
    data = bytearray(shard.read_bytes())
    data[40] ^= 0xFF  # inside shard 1's first chunk
    shard.write_bytes(bytes(data))
    with pytest.raises(CorruptDataError) as info:
        list(RecordIO(str(tmp_path / "dmg-*"))())
    assert info.value.path.endswith("dmg-00001-of-00001") and info.value.offset == 0
    with pytest.warns(CorruptDataWarning) as caught:
        got = list(RecordIO(str(tmp_path / "dmg-*"), on_corrupt="skip")())
    lost = 200 - len([x for x in got if x % 2])
    assert lost > 0 and [x for x in got if x % 2 == 0] == list(range(0, 400, 2))
    assert [x for x in got if x % 2] == list(range(1 + 2 * lost, 400, 2))
    assert [w.message.records_lost for w in caught] == [lost]
    with pytest.raises(InvalidArgumentError):
        RecordIO(str(tmp_path / "dmg-*"), on_corrupt="ignore")


def test_output_path_that_cannot_be_a_directory(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(WriteError, match="check output_path"):
        convert(str(tmp_path / "file" / "sub"), [1], 1, "p")
