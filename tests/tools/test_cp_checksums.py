"""``recprep cp`` to and from an S3 store: parts and ranges in flight, and the copy checked
by the store's CRC-32C check where it has one (no read-back), by a read-back where not.

moto's server stores an ``x-amz-checksum-crc32c`` without checking it (a wrong one is
accepted: asserted below), so on moto recprep can't claim the store's check and reads each
copy back; :mod:`tests.tools.verifying_store` puts S3's check (``400 BadDigest``) in front
of moto to test the other side.
"""

from __future__ import annotations

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


def files_of(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


SHARD = "p-00000-of-00000"


def test_moto_doesnt_check_checksums_the_verifying_store_does(s3, s3_url, verifying):
    moto = s3.filesystem()
    assert uploads.store_checks(moto, s3_url[5:] + "/d") == uploads.IGNORED
    assert moto.find(s3_url[5:]) == []  # the probe that was accepted is gone
    import s3fs

    through = s3fs.S3FileSystem(skip_instance_cache=True, **verifying.storage_options)
    assert uploads.store_checks(through, s3_url[5:] + "/d") == uploads.VERIFIED
    # refused, and stored nothing (botocore sends a request refused with BadDigest again,
    # up to 4 times: a byte changed in transit may not change on the next try)
    assert verifying.refused >= 1 and moto.find(s3_url[5:]) == []


def test_cp_both_ways_on_moto_bytes_identical_parts_in_flight_read_back(
        big_set, s3, s3_url, tmp_path, small_parts, monkeypatch):
    calls = S3Calls(monkeypatch)
    copy(str(big_set / "p"), f"{s3_url}/ds", storage_options=s3.storage_options,
         progress=False)
    assert calls.most(("upload_part",), SHARD) >= 2  # the shard's parts went out together
    # moto doesn't check the CRC-32C: each copy was read back from the store
    assert calls.of("get_object", f".recprep-staging-p/cp-{SHARD}")
    copy(f"{s3_url}/ds/p", str(tmp_path / "back"), storage_options=s3.storage_options,
         progress=False)
    assert calls.most(("get_object",), f"ds/{SHARD}") >= 2  # ranges fetched together
    assert files_of(tmp_path / "back") == files_of(big_set)


def test_cp_to_a_store_that_checks_crc32c_is_not_read_back(
        big_set, s3, s3_url, tmp_path, small_parts, verifying, monkeypatch):
    calls = S3Calls(monkeypatch)
    copy(str(big_set / "p"), f"{s3_url}/ds", storage_options=verifying.storage_options,
         progress=False)
    staged = [k for k in calls.of("get_object") if ".recprep-" in k]
    assert staged == ["ds/.recprep-staging-p/cp-p.manifest.json"]  # read to commit it, only
    assert calls.most(("upload_part",), SHARD) >= 2
    copy(f"{s3_url}/ds/p", str(tmp_path / "back"), storage_options=s3.storage_options,
         progress=False)
    assert files_of(tmp_path / "back") == files_of(big_set)


def _open_uploads(s3, s3_url: str) -> list:
    import boto3

    client = boto3.client("s3", endpoint_url=s3.endpoint_url, region_name="us-east-1")
    return client.list_multipart_uploads(Bucket=s3_url[5:]).get("Uploads", [])


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
