"""The storage benchmark's S3 server (``tests.support.motoranges``: moto reading only the
range a GET asks for) answers every GET as moto itself does, byte for byte."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.support.motoranges import serve
from tests.support.s3 import FAKE_ENV

boto3 = pytest.importorskip("boto3")
from botocore.exceptions import ClientError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RANGES = ["bytes=0-9", "bytes=1000000-", "bytes=-5", "bytes=5-100000000", "bytes=3000000-",
          "bytes=abc", "bytes=0-1,5-6", None]


def _answers(endpoint: str, data: bytes) -> list[object]:
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id=FAKE_ENV["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=FAKE_ENV["AWS_SECRET_ACCESS_KEY"])
    client.create_bucket(Bucket="ranges")
    client.put_object(Bucket="ranges", Key="k", Body=data)
    etag = client.head_object(Bucket="ranges", Key="k")["ETag"]
    answers: list[object] = []
    for spec, if_match in [(r, None) for r in RANGES] + [("bytes=7-70000", etag),
                                                         ("bytes=7-70000", '"other"')]:
        kwargs = {"Range": spec} if spec else {}
        if if_match:
            kwargs["IfMatch"] = if_match
        try:
            got = client.get_object(Bucket="ranges", Key="k", **kwargs)
        except ClientError as err:
            answers.append((spec, err.response["Error"]["Code"]))
            continue
        body = got["Body"].read()
        answers.append((spec, got["ResponseMetadata"]["HTTPStatusCode"], got.get("ContentRange"),
                        len(body), hashlib.sha256(body).hexdigest()))
    return answers


def test_range_gets_are_answered_as_moto_answers_them():
    data = bytes(range(256)) * 11719  # 3,000,064 bytes: past moto's in-memory spool
    answers = {}
    for module in ("moto.server", "tests.support.motoranges"):
        proc, endpoint = serve(module)
        try:
            answers[module] = _answers(endpoint, data)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    assert answers["tests.support.motoranges"] == answers["moto.server"]
    # and moto's answers are the right ones
    by_spec = {a[0]: a for a in answers["moto.server"][:len(RANGES)]}
    assert by_spec["bytes=0-9"][1:4] == (206, "bytes 0-9/3000064", 10)
    assert by_spec["bytes=0-9"][4] == hashlib.sha256(data[:10]).hexdigest()
    assert by_spec["bytes=-5"][4] == hashlib.sha256(data[-5:]).hexdigest()
    assert by_spec["bytes=3000000-"][4] == hashlib.sha256(data[3000000:]).hexdigest()
    assert by_spec["bytes=abc"][1:2] == (200,)
    assert answers["moto.server"][-1] == ("bytes=7-70000", "PreconditionFailed")
