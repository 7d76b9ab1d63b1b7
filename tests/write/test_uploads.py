"""``convert`` to an S3 store: several parts in flight, the same bytes as on a local disk,
and a failed upload aborted (no parts left on the store, no set committed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from recprep import RecordIO, RecprepError, convert
from recprep.write import filepool, uploads

from ..tools.s3calls import S3Calls

MiB = 1 << 20
#: two shards of 12 MB each (random bytes): three 5 MiB parts each
DATA = [os.urandom(100_000) for _ in range(240)]


@pytest.fixture
def small_parts(monkeypatch):
    monkeypatch.setattr(filepool, "PART_BYTES", 5 * MiB)


def _open_uploads(s3, bucket: str) -> list:
    import boto3

    client = boto3.client("s3", endpoint_url=s3.endpoint_url, region_name="us-east-1")
    return client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])


def test_convert_to_s3_sends_parts_together_same_bytes(s3, s3_url, tmp_path: Path,
                                                       small_parts, monkeypatch):
    calls = S3Calls(monkeypatch)
    convert(f"{s3_url}/out", DATA, 2, "p", codec="raw", compressor="none",
            storage_options=s3.storage_options, progress=False)
    assert calls.most(("upload_part", "put_object"), "p-0000") >= 2
    convert(tmp_path, DATA, 2, "p", codec="raw", compressor="none", progress=False)
    fs = s3.filesystem()
    for name in ("p-00000-of-00001", "p-00001-of-00001", ".p.chunks"):
        assert fs.cat_file(f"{s3_url}/out/{name}") == (tmp_path / name).read_bytes(), name
    assert list(RecordIO(f"{s3_url}/out/p", storage_options=s3.storage_options)()) == list(
        RecordIO(tmp_path / "p")())
    assert _open_uploads(s3, s3_url[5:]) == []


def test_a_failed_upload_is_aborted_and_no_set_committed(s3, s3_url, small_parts,
                                                         monkeypatch):
    def fail(method, kwargs):
        if method == "upload_part" and "p-00001-of-00001" in kwargs["Key"] and (
                kwargs["PartNumber"] == 2):
            raise ConnectionResetError(104, "Connection reset by peer")

    S3Calls(monkeypatch, fault=fail)
    options = {**s3.storage_options, "default_block_size": 5 * MiB}  # (s3fs's own files too)
    # (the task's WriteError, as the executor hands it on)
    with pytest.raises(RecprepError, match=r"WriteError: writing \S+/out/"
                       r"\.recprep-staging-p/\S+-p-00001-of-00001 failed: ConnectionReset"):
        convert(f"{s3_url}/out", DATA, 2, "p", codec="raw", compressor="none",
                storage_options=options, progress=False)
    assert s3.filesystem().find(s3_url[5:]) == []  # no manifest, no shard, no staging
    assert _open_uploads(s3, s3_url[5:]) == []


@pytest.mark.parametrize("size", [3 * MiB, 12 * MiB])  # one PutObject; three parts
def test_the_etag_receipt_vouches_on_moto_not_where_etags_arent_md5s(s3, s3_url, size):
    """Where the object's ETag isn't the MD5 receipt (the store rewrites it), an object
    sent in parts is still vouched for by each part's ETag, which the completion lists
    back; one sent whole is not. Only a receipt is kept as the object's ETag."""
    import s3fs

    from ..tools.verifying_store import VerifyingStore

    data = os.urandom(size)
    store = VerifyingStore(s3.endpoint_url, check_crc=False, rewrite_etags=True)
    try:
        for options, rewritten in ((s3.storage_options, False), (store.storage_options, True)):
            fs = s3fs.S3FileSystem(skip_instance_cache=True, **options)
            slots = uploads.UploadSlots(fs)
            upload = uploads.PartUpload(fs, f"{s3_url[5:]}/r/{rewritten}", slots,
                                        part_bytes=5 * MiB, receipt=True)
            upload.write(data)
            upload.close()
            slots.wait()
            assert upload.vouched is (not rewritten or size > 5 * MiB), options
            assert (upload.etag is None) is rewritten
            if not rewritten:  # (moto's, as a HEAD answers)
                assert upload.etag == fs.info(f"{s3_url[5:]}/r/{rewritten}")["ETag"]
            assert fs.cat_file(f"{s3_url[5:]}/r/{rewritten}") == data
    finally:
        store.stop()
    assert store.rewritten == 1
