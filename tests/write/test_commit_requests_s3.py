"""``convert``'s commit on S3 asks nothing it knows (issue 24, item 2): no DeleteObject of
an old manifest the commit's own listing shows isn't there; over a set (``overwrite``),
the old manifest removed before any shard of the new one takes its name."""

from __future__ import annotations

import pytest

from recprep import RecordIO, convert

from ..support.requests import s3_requests

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _convert(s3, url: str, rows: list, **kwargs) -> None:
    convert(url, rows, 3, "p", storage_options=s3.storage_options, progress=False, **kwargs)


def test_a_fresh_set_deletes_no_manifest(s3, s3_url):
    with s3_requests(s3_url) as sent:
        _convert(s3, f"{s3_url}/out", list(range(30)))
    assert f"{s3_url[5:]}/out/p.manifest.json" not in sent.keys_of("DeleteObject"), sent.log
    reader = RecordIO(f"{s3_url}/out/p", storage_options=s3.storage_options)
    assert sorted(reader()) == list(range(30))


def test_an_overwrite_uncommits_the_old_set_before_its_shards_are_replaced(s3, s3_url):
    _convert(s3, f"{s3_url}/out", list(range(30)))
    with s3_requests(s3_url) as sent:
        _convert(s3, f"{s3_url}/out", list(range(100, 130)), overwrite=True)
    ordered = [(op, k.rsplit("/", 1)[-1]) for op, k in sent.log]
    uncommit = ordered.index(("DeleteObject", "p.manifest.json"))
    moved = [i for i, (op, k) in enumerate(ordered) if op == "CopyObject" and "-of-" in k]
    assert moved and uncommit < min(moved), sent.log
    reader = RecordIO(f"{s3_url}/out/p", storage_options=s3.storage_options)
    assert sorted(reader()) == list(range(100, 130))
