"""``recprep cp`` to and from S3: the requests it sends, and how many round trips it
waits for one after another (issue 24, items 2 and 6).

Each S3 request of the process is held for :data:`HELD` seconds before it goes (a
stand-in for a network's round trip), and its start and end are recorded: the *rounds*
of a stretch of the copy are the longest chain of its requests each starting after the
one before it ended — what a copy waits for in sequence, whatever the link's rate.
Requests that don't depend on each other go together; requests nothing needs don't go:
a set named by its manifest costs the manifest (read once), nothing per shard.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from recprep import RecordIO, convert
from recprep.tools import copy

from ..support.s3 import clear_s3fs_cache

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SHARDS = 8
HELD = 0.15  #: seconds each request is held before it goes
DATA = ("UploadPart", "PutObject", "GetObject")


class Timeline:
    """Every S3 request while installed: ``(start, end, operation, key)``."""

    def __init__(self, monkeypatch: Any) -> None:
        from aiobotocore.client import AioBaseClient

        self.calls: list[tuple[float, float, str, str]] = []
        self._lock = threading.Lock()
        original = AioBaseClient._make_api_call
        calls, lock = self.calls, self._lock

        async def held(client: Any, operation: str, params: dict[str, Any]) -> Any:
            start = time.perf_counter()
            await asyncio.sleep(HELD)
            try:
                return await original(client, operation, params)
            finally:
                with lock:
                    calls.append((start, time.perf_counter(), operation,
                                  str(params.get("Key", params.get("Prefix", "")))))

        monkeypatch.setattr(AioBaseClient, "_make_api_call", held)

    def ops(self, key_part: str = "") -> list[str]:
        return [op for _, _, op, key in sorted(self.calls) if key_part in key]

    def of(self, operation: str) -> list[str]:
        return [key for _, _, op, key in sorted(self.calls) if op == operation]

    def _data(self) -> list[tuple[float, float, str, str]]:
        """The requests that carry a shard's bytes."""
        return [c for c in self.calls if c[2] in DATA and "-of-" in c[3]]

    def before_data(self) -> list[tuple[float, float, str, str]]:
        first = min(c[0] for c in self._data())
        return [c for c in self.calls if c[1] <= first]

    def after_data(self) -> list[tuple[float, float, str, str]]:
        last = max(c[1] for c in self._data())
        return [c for c in self.calls if c[0] >= last]

    def show(self) -> str:
        t0 = min(c[0] for c in self.calls)
        return "\n".join(f"{s - t0:6.2f} {e - t0:6.2f} {op} {key}"
                         for s, e, op, key in sorted(self.calls))


def rounds(calls: list[tuple[float, float, str, str]]) -> int:
    """The longest chain of ``calls``, each starting after the one before it ended."""
    ordered = sorted(calls)
    depth: list[int] = []
    for i, (start, *_) in enumerate(ordered):
        depth.append(1 + max((depth[j] for j in range(i) if ordered[j][1] <= start),
                             default=0))
    return max(depth, default=0)


@pytest.fixture
def local_set(tmp_path: Path) -> Path:
    """A set ``p`` of 8 shards on local disk."""
    convert(str(tmp_path / "src"), [(i, f"s{i}") for i in range(400)], SHARDS, "p",
            progress=False)
    return tmp_path / "src"


def test_cp_up_asks_its_questions_at_once_and_commits_in_two_rounds(
        s3, s3_url, local_set, monkeypatch):
    timeline = Timeline(monkeypatch)
    copy(str(local_set / "p"), f"{s3_url}/ds", storage_options=s3.storage_options,
         progress=False)
    shown = timeline.show()
    # before the first shard's bytes: is the destination a file, its listing, the bucket,
    # the checksum probe, the staging's listing and open uploads, all at once; then the
    # probe's delete and the early commit's journal, at once (before: 11 rounds, one after
    # another; then 3, the uploads created in a third)
    assert rounds(timeline.before_data()) <= 2, shown
    journal = [c for c in timeline.calls if c[3] == "ds/.recprep-staging-p/commit.json"]
    assert [c[2] for c in journal] == ["PutObject", "DeleteObject"], shown
    placed = [c for c in timeline.calls if c[2] == "PutObject" and "ds/p-" in c[3]]
    assert journal[0][1] <= min(c[0] for c in placed), shown  # the journal first
    # after the last: the manifest; the journal removed (before: 12 rounds — the manifest
    # uploaded to a temporary, read back, removed, staged, then the journal, each shard's
    # HEAD...; then 4, the uploads completed after the data)
    assert rounds(timeline.after_data()) <= 2, shown
    assert timeline.of("HeadObject") == ["ds"], shown  # the destination, once; no shard's
    assert timeline.of("GetObject") == [], shown  # nothing read back, not the manifest
    assert "CopyObject" not in timeline.ops(), shown
    assert "CreateMultipartUpload" not in timeline.ops(), shown  # each file one PutObject
    assert sorted(k for k in timeline.of("PutObject") if ".recprep-" not in k) == sorted(
        f"ds/{n}" for n in [".p.chunks", "p.manifest.json",
                            *(f"p-{i:05d}-of-00007" for i in range(SHARDS))]), shown
    clear_s3fs_cache()
    fs = s3.filesystem()
    manifest = json.loads(fs.cat_file(f"{s3_url}/ds/p.manifest.json"))
    for shard in manifest["shards"]:  # the ETags the uploads answered: the objects'
        assert shard["etag"] == fs.info(f"{s3_url}/ds/{shard['name']}")["ETag"]
    assert fs.find(f"{s3_url}/ds/.recprep-staging-p") == []
    assert sorted(i for i, _ in RecordIO(f"{s3_url}/ds/p",
                                         storage_options=s3.storage_options)()) == list(
        range(400))


def test_cp_up_over_a_set_uncommits_it_before_any_upload_completes(
        s3, s3_url, local_set, monkeypatch):
    copy(str(local_set / "p"), f"{s3_url}/ds", storage_options=s3.storage_options,
         progress=False)
    clear_s3fs_cache()
    timeline = Timeline(monkeypatch)
    copy(str(local_set / "p"), f"{s3_url}/ds", storage_options=s3.storage_options,
         progress=False, overwrite=True)
    ordered = [(op, key) for _, _, op, key in sorted(timeline.calls)]
    journal = ordered.index(("PutObject", "ds/.recprep-staging-p/commit.json"))
    uncommit = ordered.index(("DeleteObject", "ds/p.manifest.json"))
    completes = [i for i, (op, _) in enumerate(ordered) if op == "CompleteMultipartUpload"]
    manifest = ordered.index(("PutObject", "ds/p.manifest.json"))
    assert journal < uncommit < min(completes) and max(completes) < manifest, timeline.show()
    ended = {(op, key): end for _, end, op, key in timeline.calls}
    starts = [s for s, _, op, _ in timeline.calls if op == "CompleteMultipartUpload"]
    assert ended[("DeleteObject", "ds/p.manifest.json")] <= min(starts)  # done, not just sent


def _down(s3: Any, s3_url: str, local_set: Path, back: Path, monkeypatch: Any,
          where: str, source: str) -> tuple[Timeline, str]:
    """The set ``local_set/p`` put up into ``where``, then copied down from ``source``
    into ``back`` with every request timed; the copy checked whole."""
    copy(str(local_set / "p"), f"{s3_url}/{where}", storage_options=s3.storage_options,
         progress=False)
    clear_s3fs_cache()
    timeline = Timeline(monkeypatch)
    copy(f"{s3_url}/{source}", str(back), storage_options=s3.storage_options,
         progress=False)
    assert sorted(p.name for p in back.iterdir()) == sorted(p.name for p in local_set.iterdir())
    for path in local_set.iterdir():
        assert (back / path.name).read_bytes() == path.read_bytes() or (
            path.name == "p.manifest.json")
    return timeline, timeline.show()


def test_cp_down_of_a_set_named_costs_its_manifest_once_and_its_ranges(
        s3, s3_url, local_set, tmp_path, monkeypatch):
    timeline, shown = _down(s3, s3_url, local_set, tmp_path / "back", monkeypatch, "ds",
                            "ds/p")
    # the manifest (and, at the same time, whether the path is a directory); then ranges
    # of the shards and the chunk index: no HEAD, the manifest not fetched again (before:
    # a LIST, the manifest's GET, its HEAD; then, after the shards, its GET again)
    assert rounds(timeline.before_data()) == 1, shown
    assert timeline.of("HeadObject") == [], shown
    assert timeline.of("GetObject").count("ds/p.manifest.json") == 1, shown
    assert set(timeline.ops()) == {"GetObject", "ListObjectsV2"}, shown
    assert len(timeline.of("ListObjectsV2")) == 1, shown
    assert timeline.after_data() == [], shown


def test_cp_down_of_a_directory_lists_it_once_and_reads_its_manifest_once(
        s3, s3_url, local_set, tmp_path, monkeypatch):
    timeline, shown = _down(s3, s3_url, local_set, tmp_path / "back", monkeypatch, "dd",
                            "dd")
    # is it a set prefix (its manifest) and is it a directory, at once; the set's
    # manifest from that listing; then ranges (before: the two questions asked twice and
    # the manifest fetched again to be copied: 4 rounds)
    assert rounds(timeline.before_data()) == 2, shown
    assert len(timeline.of("ListObjectsV2")) == 1, shown
    assert timeline.of("GetObject").count("dd/p.manifest.json") == 1, shown
    assert timeline.of("HeadObject") == [], shown
