"""``convert``'s side files on S3 (issue 24, item 6): vouched for in the manifest by the
bytes written, never read back; a TFRecord set's staged shards scanned for their record
indexes all at once, each read once (before: one after another, each side file then
fetched again to be vouched for)."""

from __future__ import annotations

import json
import threading

import pytest

from recprep import RecordIO, convert
from recprep.storage import sideindex

from ..support.requests import s3_requests
from ..support.s3 import clear_s3fs_cache

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SHARDS = 4


def _side_reads(sent) -> list[str]:
    return [k for k in sent.keys_of("GetObject") + sent.keys_of("HeadObject")
            if k.endswith((".tfindex", ".chunks", ".json"))]


def test_a_recordio_sets_chunk_index_is_not_read_back(s3, s3_url):
    with s3_requests(s3_url) as sent:
        convert(f"{s3_url}/rio", [(i, f"s{i}") for i in range(400)], SHARDS, "p",
                storage_options=s3.storage_options, progress=False)
    assert _side_reads(sent) == [], sent.log
    assert sent["GetObject"] == 0, sent.log  # nothing of the output read back at all
    clear_s3fs_cache()
    manifest = json.loads(s3.filesystem().cat_file(f"{s3_url}/rio/p.manifest.json"))
    chunks = s3.filesystem().cat_file(f"{s3_url}/rio/.p.chunks")
    import hashlib

    assert [(e["name"], e["bytes"], e["sha256"]) for e in manifest["side_files"]] == [
        (".p.chunks", len(chunks), hashlib.sha256(chunks).hexdigest())]
    reader = RecordIO(f"{s3_url}/rio/p", storage_options=s3.storage_options)
    assert sorted(i for i, _ in reader()) == list(range(400))


def test_a_tfrecord_sets_shards_are_scanned_at_once_and_indexes_not_read_back(
        s3, s3_url, monkeypatch):
    scanning, most = [0], [0]
    lock = threading.Lock()
    original = sideindex.build_side_index

    def counted(*args, **kwargs):
        with lock:
            scanning[0] += 1
            most[0] = max(most[0], scanning[0])
        try:
            barrier.wait(timeout=10)  # every shard's scan under way at once
            return original(*args, **kwargs)
        finally:
            with lock:
                scanning[0] -= 1

    barrier = threading.Barrier(SHARDS)
    monkeypatch.setattr("recprep.write.sidefiles.build_side_index", counted)
    rows = [{"i": [i]} for i in range(300)]
    with s3_requests(s3_url) as sent:
        convert(f"{s3_url}/tf", rows, SHARDS, "t", format="tfrecord", codec="example",
                storage_options=s3.storage_options, progress=False)
    assert most[0] == SHARDS
    assert _side_reads(sent) == [], sent.log
    staged = sent.keys_of("GetObject")
    assert len(staged) == SHARDS and len(set(staged)) == SHARDS, sent.log  # each once
    clear_s3fs_cache()
    got = []
    for rank in (0, 1):  # by record ranges: through the .tfindex files the manifest vouches
        reader = RecordIO(f"{s3_url}/tf/t", storage_options=s3.storage_options,
                          world_size=2, rank=rank, split="range")
        got += [int(row["i"][0]) for row in reader()]
    assert sorted(got) == list(range(300))
