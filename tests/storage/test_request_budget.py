"""The request budget (issue 24 item 2): what opening and reading a committed set costs on
S3, counted per operation at s3fs (``tests/support/requests.py``) against moto's server.

Opening a set a path names (``dir/prefix``, its manifest) costs the manifest's GET and
nothing per shard: no HEAD, no LIST. A glob or a directory is listed once. The chunk
index is read only by a pass that needs positions, once per set. ``recprep ls`` and
``verify`` of a set path list nothing either. The shards' ETags, recorded in the manifest
at commit, let a reader pin its reads instead of asking about the set before each shard.
"""

from __future__ import annotations

import json

import pytest

from recprep import RecordIO, SetChangedError, convert
from recprep.errors import MissingShardsError
from recprep.tools import list_datasets, verify

from ..support.requests import s3_requests

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SHARDS = 8


@pytest.fixture
def eight(s3, s3_url):
    """A set ``p`` of 8 shards (800 instances) at ``{bucket}/set``, and the bucket's URL;
    s3fs's cached instances (and listings) dropped, as in a new process."""
    from ..support.s3 import clear_s3fs_cache

    convert(f"{s3_url}/set", [(i, f"s{i}") for i in range(800)], SHARDS, "p",
            storage_options=s3.storage_options, progress=False)
    clear_s3fs_cache()
    return s3_url


def key(url: str, path: str) -> str:
    return f"{url.removeprefix('s3://')}/{path}"


def shard_keys(url: str) -> list[str]:
    return [key(url, f"set/p-{i:05d}-of-{SHARDS - 1:05d}") for i in range(SHARDS)]


@pytest.mark.parametrize("named", ["set/p", "set/p.manifest.json"])
def test_opening_a_set_by_its_name_costs_the_manifest_alone(s3, eight, named):
    with s3_requests(eight) as sent:
        reader = RecordIO(f"{eight}/{named}", storage_options=s3.storage_options)
    # before: 1 GetObject, 2 HeadObject, 3 ListObjectsV2 (2 for the manifest's path)
    assert sent == {"GetObject": 1}, sent.log
    assert sent.keys_of("GetObject") == [key(eight, "set/p.manifest.json")]
    assert len(reader) == 800 and len(reader.paths) == SHARDS


def test_a_glob_is_listed_once_and_its_manifest_read_once(s3, eight):
    with s3_requests(eight) as sent:
        RecordIO(f"{eight}/set/p-*-of-*", storage_options=s3.storage_options)
    assert sent == {"ListObjectsV2": 1, "GetObject": 1}, sent.log  # before: and a HeadObject


def test_a_directory_is_listed_once_and_its_manifest_read_once(s3, eight):
    with s3_requests(eight) as sent:
        RecordIO(f"{eight}/set", storage_options=s3.storage_options)
    # the path is first taken for a set's name (set.manifest.json: not there), then listed
    assert sent == {"GetObject": 2, "ListObjectsV2": 1}, sent.log  # before: and a HeadObject
    assert sent.keys_of("GetObject") == [key(eight, "set.manifest.json"),
                                         key(eight, "set/p.manifest.json")]


def test_commit_records_each_shards_etag_in_the_manifest(s3, eight):
    fs = s3.filesystem()
    manifest = json.loads(fs.cat_file(f"{eight}/set/p.manifest.json"))
    assert [s["etag"] for s in manifest["shards"]] == [
        fs.info(k)["ETag"] for k in shard_keys(eight)]


def test_a_whole_pass_reads_no_chunk_index_and_lists_nothing(s3, eight):
    reader = RecordIO(f"{eight}/set/p", storage_options=s3.storage_options)
    with s3_requests(eight) as sent:
        assert sorted(i for i, _ in reader()) == list(range(800))
    assert sent["ListObjectsV2"] == 0, sent.log
    assert sorted(set(sent.keys_of("GetObject"))) == shard_keys(eight), sent.log


def test_a_whole_pass_asks_nothing_per_shard_but_its_ranges(s3, eight):
    """Reads pinned to the ETags the manifest records (the fetcher's If-Match): no HEAD
    of the manifest before each shard (before: one per shard opened) nor of the shard."""
    reader = RecordIO(f"{eight}/set/p", storage_options=s3.storage_options)
    with s3_requests(eight) as sent:
        assert sorted(i for i, _ in reader()) == list(range(800))
    assert set(sent) == {"GetObject"}, sent.log
    assert sorted(set(sent.keys_of("GetObject"))) == shard_keys(eight), sent.log


def test_positions_read_the_chunk_index_once_per_set(s3, eight):
    reader = RecordIO(f"{eight}/set/p", storage_options=s3.storage_options)
    with s3_requests(eight) as sent:
        dataset = reader.dataset()
        assert [dataset[n] for n in (5, 6, 405)] == [(5, "s5"), (6, "s6"), (405, "s405")]
    chunks = key(eight, "set/.p.chunks")
    assert sent.keys_of("GetObject").count(chunks) == 1, sent.log
    assert sent["ListObjectsV2"] == 0, sent.log


def test_a_shard_missing_from_a_set_found_by_its_manifest_is_named(s3, eight):
    fs = s3.filesystem()
    fs.rm(shard_keys(eight)[5])
    reader = RecordIO(f"{eight}/set/p", storage_options=s3.storage_options)  # nothing listed
    with pytest.raises(MissingShardsError) as info:
        list(reader())
    assert info.value.missing == [f"s3://{shard_keys(eight)[5]}"]
    assert "matched 7 shard(s) of a set that should have 8" in str(info.value)


def test_a_shard_replaced_after_the_reader_was_built_is_a_set_changed_error(s3, eight):
    """The manifest is untouched: only the shard's ETag, pinned by every range read
    (If-Match), tells the reader the object is another (before: a CRC mismatch)."""
    fs = s3.filesystem()
    reader = RecordIO(f"{eight}/set/p", storage_options=s3.storage_options)
    convert(f"{eight}/other", [(i, f"x{i}") for i in range(800)], SHARDS, "p",
            storage_options=s3.storage_options, progress=False)
    fs.copy(f"{eight}/other/p-00003-of-00007", shard_keys(eight)[3])
    with s3_requests(eight) as sent, pytest.raises(SetChangedError) as info:
        list(reader())
    assert "p-00003-of-00007 was replaced" in str(info.value)
    assert key(eight, "set/p.manifest.json") not in sent.keys_of("HeadObject")


def test_ls_of_a_set_costs_its_manifest_alone(s3, eight):
    with s3_requests(eight) as sent:
        [info] = list_datasets(f"{eight}/set/p", storage_options=s3.storage_options)
    assert (info.num_shards, info.records) == (SHARDS, 800)
    assert sent == {"GetObject": 1}, sent.log  # before: and 1 HeadObject, 3 ListObjectsV2


def test_verify_of_a_set_lists_nothing_and_reads_each_file_once(s3, eight):
    with s3_requests(eight) as sent:
        report = verify(f"{eight}/set/p", storage_options=s3.storage_options)
    assert report.ok and len(report.sets[0].shards) == SHARDS
    assert sent["ListObjectsV2"] == 0, sent.log  # before: 3
    assert sorted(sent.keys_of("GetObject")) == sorted(
        [key(eight, "set/p.manifest.json"), key(eight, "set/.p.chunks"), *shard_keys(eight)])
    assert set(sent.keys_of("HeadObject")) <= set(shard_keys(eight)), sent.log


def test_verify_names_a_shard_its_manifest_lists_that_storage_lacks(s3, eight):
    s3.filesystem().rm(shard_keys(eight)[2])
    report = verify(f"{eight}/set/p", storage_options=s3.storage_options)
    assert [(p.kind, p.path, p.message) for p in report.problems] == [
        ("missing", f"s3://{shard_keys(eight)[2]}", "this shard of the set is missing")]


def test_a_tfrecord_sets_record_indexes_cost_a_get_each_and_no_head(s3, s3_url):
    """Ranks reading a TFRecord set by record ranges read the ``.tfindex`` of each shard
    they split (the manifest vouches for its size and SHA-256; the shard's size is the
    manifest's): one GET each, no HEAD of the side file or the shard (before: two)."""
    from ..support.s3 import clear_s3fs_cache

    rows = [{"i": [i]} for i in range(300)]
    convert(f"{s3_url}/tf", rows, 3, "t", format="tfrecord", codec="example",
            storage_options=s3.storage_options, progress=False)
    clear_s3fs_cache()
    got = []
    with s3_requests(s3_url) as sent:
        for rank in (0, 1):
            reader = RecordIO(f"{s3_url}/tf/t", storage_options=s3.storage_options,
                              world_size=2, rank=rank, split="range")
            got += [int(row["i"][0]) for row in reader()]
    assert sorted(got) == list(range(300))
    assert sent["HeadObject"] == 0, sent.log
    indexes = [k for k in sent.keys_of("GetObject") if k.endswith(".tfindex")]
    assert indexes and all(indexes.count(k) <= 2 for k in indexes), sent.log  # once a rank
