"""``recprep cp`` to and from an S3 store: parts and ranges in flight, and the copy checked
by the store's CRC-32C check where it has one, by its receipt (an ETag that is the MD5 of
the bytes sent) where not, and by a read-back where neither vouches.

moto's server stores an ``x-amz-checksum-crc32c`` without checking it (a wrong one is
accepted: asserted below), but answers ETags as S3 does (MD5s), so on moto the receipt is
the check; :mod:`tests.tools.verifying_store` puts S3's CRC check (``400 BadDigest``) in
front of moto, or ETags that aren't MD5s (the read-back), to test the other sides.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from recprep import WriteError, convert
from recprep.tools import copy, transfer
from recprep.write import uploads

from .s3calls import S3Calls
from .verifying_store import VerifyingStore

MiB = 1 << 20


@pytest.fixture
def big_set(tmp_path: Path) -> Path:
    """A set of one 12 MB shard (random bytes: three 5 MiB parts, six 2 MiB ranges)."""
    blob = os.urandom(12_000_000)
    convert(tmp_path / "src", [blob[i:i + 100_000] for i in range(0, len(blob), 100_000)], 1,
            "p", codec="raw", compressor="none", progress=False)
    return tmp_path / "src"


@pytest.fixture
def small_parts(monkeypatch):
    monkeypatch.setattr(transfer, "SINGLE_PUT_BYTES", 5 * MiB)
    monkeypatch.setattr(transfer, "PART_BYTES", 5 * MiB)
    monkeypatch.setattr(transfer, "RANGE_BYTES", 2 * MiB)


@pytest.fixture
def verifying(s3):
    store = VerifyingStore(s3.endpoint_url)
    yield store
    store.stop()


def _open_uploads(s3, s3_url: str) -> list:
    import boto3

    client = boto3.client("s3", endpoint_url=s3.endpoint_url, region_name="us-east-1")
    return client.list_multipart_uploads(Bucket=s3_url[5:]).get("Uploads", [])


def files_of(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


SHARD = "p-00000-of-00000"


def test_moto_doesnt_check_checksums_the_verifying_store_does(s3, s3_url, verifying):
    moto = s3.filesystem()
    assert uploads.store_checks(moto, s3_url[5:] + "/d") == uploads.IGNORED
    uploads.settle_probes()  # (its delete is sent, not waited for: a copy goes on meanwhile)
    assert moto.find(s3_url[5:]) == []  # the probe that was accepted is gone
    import s3fs

    through = s3fs.S3FileSystem(skip_instance_cache=True, **verifying.storage_options)
    assert uploads.store_checks(through, s3_url[5:] + "/d") == uploads.VERIFIED
    # refused, and stored nothing (botocore sends a request refused with BadDigest again,
    # up to 4 times: a byte changed in transit may not change on the next try)
    assert verifying.refused >= 1 and moto.find(s3_url[5:]) == []


@pytest.fixture
def fetched(monkeypatch) -> list:
    """The download's fetch counts (:class:`~recprep.storage.fetch.FetchStats`), one per
    copy, taken as it ends."""
    seen: list = []
    close = transfer.CopySources.close

    def closing(self):
        seen.append(self.stats())
        close(self)

    monkeypatch.setattr(transfer.CopySources, "close", closing)
    return seen


def test_cp_both_ways_on_moto_the_etags_vouch_no_read_back(
        big_set, s3, s3_url, tmp_path, small_parts, fetched, monkeypatch):
    calls = S3Calls(monkeypatch)
    copy(str(big_set / "p"), f"{s3_url}/ds", storage_options=s3.storage_options,
         progress=False)
    assert calls.most(("upload_part",), SHARD) >= 2  # the shard's parts went out together
    # moto doesn't check the CRC-32C, but its ETags are the MD5s of the bytes it got: no
    # copy is read back (nor the manifest: the commit writes the bytes copy read)
    assert calls.of("get_object") == []
    copy(f"{s3_url}/ds/p", str(tmp_path / "back"), storage_options=s3.storage_options,
         progress=False)
    shard = (big_set / SHARD).stat().st_size
    assert fetched[-1].most_in_flight >= 2  # ranges fetched together
    assert fetched[-1].bytes >= shard and fetched[-1].requests >= shard // (2 * MiB)
    assert files_of(tmp_path / "back") == files_of(big_set)


def test_a_store_whose_etags_arent_md5s_gets_the_read_back(
        big_set, s3, s3_url, tmp_path, small_parts, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG, logger="recprep")
    store = VerifyingStore(s3.endpoint_url, check_crc=False, rewrite_etags=True)
    try:
        calls = S3Calls(monkeypatch)
        copy(str(big_set / "p"), f"{s3_url}/ds", storage_options=store.storage_options,
             progress=False)
    finally:
        store.stop()
    assert store.rewritten >= 3  # the shard's (multipart), the side file's, the manifest's
    # the set's files went straight to their names (an early commit), the shard in parts:
    # each part's ETag (an MD5 here, as on some S3-compatible stores) vouches for it; the
    # side file went in one PutObject, whose ETag doesn't: it is read back, as the
    # commit's small objects are (the journal, the manifest: their MD5 sent with them,
    # which S3 checks); the shard is not
    assert sorted(calls.of("get_object")) == ["ds/.p.chunks",
                                              "ds/.recprep-staging-p/commit.json",
                                              "ds/p.manifest.json"]
    assert calls.of("complete_multipart_upload") == [f"ds/{SHARD}"]
    fs = s3.filesystem()
    copied = {n: fs.cat_file(f"{s3_url}/ds/{n}") for n in files_of(big_set)}
    source = files_of(big_set)
    manifest = json.loads(copied.pop("p.manifest.json"))
    for shard in manifest["shards"]:  # the commit records the ETags the store gave
        assert shard.pop("etag") == fs.info(f"{s3_url}/ds/{shard['name']}")["ETag"]
    assert manifest == json.loads(source.pop("p.manifest.json"))
    assert copied == source


@pytest.mark.parametrize("method, key, says", [
    ("upload_part", SHARD, "the copy has .* bytes, CRC-32C .*: the bytes changed on the way"),
    ("put_object", "p.manifest.json", "the store holds .* bytes of MD5 .*, the .* bytes "
                                      "sent have MD5 .*: the bytes changed on the way")])
def test_a_byte_flipped_on_the_way_to_moto_is_a_write_error_nothing_committed(
        big_set, s3, s3_url, small_parts, monkeypatch, method, key, says):
    """moto checks no CRC-32C: the ETag it answers isn't the MD5 of what recprep sent (a
    shard's part's: its upload is aborted and it is copied to staging again, read back,
    differs, and fails; the manifest's, written by the commit: refused at once); no
    upload is left open."""
    def flip(called, kwargs):
        if called == method and key in kwargs["Key"] and kwargs.get("PartNumber", 2) == 2:
            body = bytearray(kwargs["Body"])
            body[100] ^= 1
            kwargs["Body"] = bytes(body)

    S3Calls(monkeypatch, fault=flip)
    with pytest.raises(WriteError, match=f"writing {s3_url}/ds/{key} failed: OSError: {says}"):
        copy(str(big_set / "p"), f"{s3_url}/ds", storage_options=s3.storage_options,
             progress=False)
    assert s3.filesystem().find(s3_url[5:]) == []
    assert _open_uploads(s3, s3_url) == []


def test_cp_to_a_store_that_checks_crc32c_is_not_read_back(
        big_set, s3, s3_url, tmp_path, small_parts, verifying, monkeypatch):
    calls = S3Calls(monkeypatch)
    copy(str(big_set / "p"), f"{s3_url}/ds", storage_options=verifying.storage_options,
         progress=False)
    assert calls.of("get_object") == []  # nothing read back (not the manifest either)
    assert calls.most(("upload_part",), SHARD) >= 2
    copy(f"{s3_url}/ds/p", str(tmp_path / "back"), storage_options=s3.storage_options,
         progress=False)
    assert files_of(tmp_path / "back") == files_of(big_set)


def test_bytes_changed_on_the_way_are_refused_by_the_store(
        big_set, s3, s3_url, small_parts, verifying, monkeypatch):
    def flip(method, kwargs):  # a byte of the shard's second part changes in transit
        if method == "upload_part" and SHARD in kwargs["Key"] and kwargs["PartNumber"] == 2:
            body = bytearray(kwargs["Body"])
            body[1000] ^= 1
            kwargs["Body"] = bytes(body)

    calls = S3Calls(monkeypatch, fault=flip)
    with pytest.raises(WriteError, match=f"{s3_url}/ds/{SHARD} failed: .*the store refused "
                       "the bytes it received.*BadDigest"):
        copy(str(big_set / "p"), f"{s3_url}/ds", storage_options=verifying.storage_options,
             progress=False)
    assert [k for k in calls.of("upload_part") if SHARD in k]  # (the refused part)
    assert s3.filesystem().find(s3_url[5:]) == []
    assert _open_uploads(s3, s3_url) == []


def test_a_failed_upload_is_aborted_and_nothing_committed(
        big_set, s3, s3_url, small_parts, monkeypatch):
    def fail(method, kwargs):
        if method == "upload_part" and SHARD in kwargs["Key"] and kwargs["PartNumber"] == 2:
            raise ConnectionResetError(104, "Connection reset by peer")

    S3Calls(monkeypatch, fault=fail)
    options = {**s3.storage_options, "default_block_size": 5 * MiB}  # (s3fs's own files too)
    with pytest.raises(WriteError, match=f"{s3_url}/ds/{SHARD} failed: ConnectionResetError"):
        copy(str(big_set / "p"), f"{s3_url}/ds", storage_options=options, progress=False)
    assert s3.filesystem().find(s3_url[5:]) == []
    assert _open_uploads(s3, s3_url) == []


def test_a_probe_left_by_a_killed_copy_is_removed_by_the_next(s3, s3_url, tmp_path, caplog):
    """A copy killed while its set-up's requests were out leaves its checksum probe (the
    delete never sent): the next copy into that directory removes it with the other
    leftovers, and its own probe is gone too when it is done."""
    convert(tmp_path / "src", [b"x" * 100] * 8, 2, "p", codec="raw", progress=False)
    moto = s3.filesystem()
    out = f"{s3_url}/d"
    left = f"{s3_url[5:]}/d/{uploads.PROBE_PREFIX}0123456789ab"
    moto.pipe(left, b"probe")
    with caplog.at_level(logging.INFO, logger="recprep"):
        copy(str(tmp_path / "src"), out, storage_options=s3.storage_options, progress=False)
    moto.invalidate_cache()
    assert sorted(p.rsplit("/", 1)[1] for p in moto.find(out)) == sorted(
        p.name for p in (tmp_path / "src").iterdir())
    assert any("0123456789ab, a checksum probe" in r.getMessage() for r in caplog.records)
