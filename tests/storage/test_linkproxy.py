"""The link emulator (``tests/support/linkproxy.py``): bytes arrive intact through it, its
delay and rates are there, requests are counted by kind, and each fault does what it says
and is counted. Raw boto3 and s3fs against the session's moto server, through the proxy.

Timing checks are lower bounds only (a link can't be faster than its delay and rate), so
a loaded machine can't make them fail.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from ..support.linkproxy import Faults, LinkProxy, control

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
ROOT = Path(__file__).resolve().parents[2]


def client(endpoint_url: str, attempts: int = 1, read_timeout: float = 30.0):
    """A boto3 S3 client for ``endpoint_url``: ``attempts`` tries per call (1: no retry)."""
    import boto3
    from botocore.config import Config

    config = Config(retries={"total_max_attempts": attempts, "mode": "standard"},
                    read_timeout=read_timeout, connect_timeout=5)
    return boto3.client("s3", endpoint_url=endpoint_url, region_name="us-east-1",
                        config=config)


def payload(size: int, seed: int = 0) -> bytes:
    return np.random.default_rng(seed).bytes(size)


def bucket_of(url: str) -> str:
    return url.removeprefix("s3://")


def test_ranged_gets_and_multipart_puts_arrive_intact(link, s3_url) -> None:
    """12 MB up in a multipart upload (POST, 3 PUTs of parts, POST), then back down in
    ranges through boto3 and s3fs: every byte as sent."""
    from boto3.s3.transfer import TransferConfig

    bucket, data = bucket_of(s3_url), payload(12_000_000)
    s3 = client(link.endpoint_url)
    s3.upload_fileobj(__import__("io").BytesIO(data), bucket, "big", Config=TransferConfig(
        multipart_threshold=5 << 20, multipart_chunksize=5 << 20, use_threads=False))
    spans = [(0, 1), (0, 5 << 20), (5_242_000, 5_243_000), (3_000_000, 12_000_000),
             (11_999_999, 12_000_000)]
    for start, end in spans:
        got = s3.get_object(Bucket=bucket, Key="big", Range=f"bytes={start}-{end - 1}")
        assert got["Body"].read() == data[start:end]
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True, **link.storage_options)
    assert fs.cat_file(f"{bucket}/big", start=1_000_000, end=9_000_000) == data[1_000_000:
                                                                                 9_000_000]
    stats = link.stats()
    assert stats["requests"]["POST"] == 2 and stats["requests"]["PUT"] == 3
    assert stats["range_gets"] >= len(spans) + 1
    assert stats["bytes_up"] > len(data) and stats["bytes_down"] > 8_000_000 + 12_000_000


def test_requests_are_counted_by_kind_on_one_kept_alive_connection(link, s3_url) -> None:
    bucket = bucket_of(s3_url)
    s3 = client(link.endpoint_url)
    s3.put_object(Bucket=bucket, Key="a", Body=payload(200_000))
    for _ in range(2):
        s3.head_object(Bucket=bucket, Key="a")
    assert len(s3.get_object(Bucket=bucket, Key="a")["Body"].read()) == 200_000
    assert s3.get_object(Bucket=bucket, Key="a", Range="bytes=10-19")["Body"].read() == \
        payload(200_000)[10:20]
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="a")["Contents"]] == ["a"]
    s3.delete_object(Bucket=bucket, Key="a")
    stats = link.stats()
    assert stats["requests"] == {"GET": 2, "HEAD": 2, "PUT": 1, "POST": 0, "DELETE": 1,
                                 "LIST": 1}
    assert stats["range_gets"] == 1
    assert stats["connections"] == 1  # keep-alive: seven requests, one connection
    assert stats["faults"] == dict.fromkeys(stats["faults"], 0)


def test_the_delay_and_the_rates_are_there(s3, s3_url) -> None:
    """A HEAD costs a round trip (2 x delay); 1 MB on one connection takes at least
    size / conn_rate; two connections together at least their sum / link_rate."""
    bucket = bucket_of(s3_url)
    client(s3.endpoint_url).put_object(Bucket=bucket, Key="m", Body=payload(1_500_000))
    with LinkProxy(s3.endpoint_url, delay=0.05, conn_rate=4e6, link_rate=6e6) as proxy:
        s3c = client(proxy.endpoint_url)
        started = time.perf_counter()
        s3c.head_object(Bucket=bucket, Key="m")
        assert time.perf_counter() - started >= 2 * 0.05
        started = time.perf_counter()
        s3c.get_object(Bucket=bucket, Key="m", Range="bytes=0-999999")["Body"].read()
        assert time.perf_counter() - started >= 1e6 / 4e6 + 2 * 0.05
        clients, sizes = [client(proxy.endpoint_url) for _ in range(2)], []

        def fetch(c) -> None:
            sizes.append(len(c.get_object(Bucket=bucket, Key="m")["Body"].read()))

        threads = [threading.Thread(target=fetch, args=(c,)) for c in clients]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert time.perf_counter() - started >= 3e6 / 6e6  # each alone would take 0.375 s
        assert sizes == [1_500_000, 1_500_000]


def test_slowdown_answers_s3s_503_and_is_counted(link, s3_url) -> None:
    from botocore.exceptions import ClientError

    bucket = bucket_of(s3_url)
    s3 = client(link.endpoint_url)
    s3.put_object(Bucket=bucket, Key="k", Body=b"0123456789")
    link.faults.update(slowdown={"p": 1.0})
    with pytest.raises(ClientError) as caught:
        s3.get_object(Bucket=bucket, Key="k")
    error = caught.value.response
    assert error["Error"]["Code"] == "SlowDown"
    assert error["Error"]["Message"] == "Please reduce your request rate."
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 503
    assert error["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]
    with pytest.raises(ClientError, match="SlowDown"):  # a PUT's body is read and dropped
        s3.put_object(Bucket=bucket, Key="k2", Body=b"x" * 100_000)
    assert link.stats()["faults"]["slowdown"] == 2
    link.faults.update(slowdown={"p": 0.5, "seed": 3})
    refused = 0
    for _ in range(20):
        try:
            s3.head_object(Bucket=bucket, Key="k")
        except ClientError as err:
            assert err.response["ResponseMetadata"]["HTTPStatusCode"] == 503
            refused += 1
    assert 0 < refused < 20 and link.stats()["faults"]["slowdown"] == 2 + refused
    link.faults.update(slowdown={"times": 2})  # botocore's retries get through
    retrying = client(link.endpoint_url, attempts=3)
    assert retrying.get_object(Bucket=bucket, Key="k")["Body"].read() == b"0123456789"
    assert link.stats()["faults"]["slowdown"] == 4 + refused
    assert link.stats()["requests"]["GET"] == 1 + 3


def test_throttle_429_answers_too_many_requests(link, s3_url) -> None:
    from botocore.exceptions import ClientError

    bucket = bucket_of(s3_url)
    client(link.endpoint_url).put_object(Bucket=bucket, Key="k", Body=b"x")
    link.faults.update(throttle_429=True)
    with pytest.raises(ClientError) as caught:
        client(link.endpoint_url).get_object(Bucket=bucket, Key="k")
    assert caught.value.response["Error"]["Code"] == "TooManyRequests"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 429
    assert link.stats()["faults"]["throttle_429"] == 1


def test_drop_mid_body_cuts_every_nth_get_after_k_bytes(link, s3_url) -> None:
    from botocore.exceptions import IncompleteReadError, ResponseStreamingError
    from urllib3.exceptions import ProtocolError

    bucket, data = bucket_of(s3_url), payload(300_000)
    s3 = client(link.endpoint_url)
    s3.put_object(Bucket=bucket, Key="k", Body=data)
    link.faults.update(drop_mid_body={"after": 100_000, "every": 2})
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == data  # 1st: whole
    body = s3.get_object(Bucket=bucket, Key="k")["Body"]  # 2nd: cut after 100,000 bytes
    assert body.read(100_000) == data[:100_000]
    with pytest.raises((IncompleteReadError, ResponseStreamingError, ProtocolError)):
        body.read()
    assert s3.get_object(Bucket=bucket, Key="k", Range="bytes=0-199999")["Body"].read() == \
        data[:200_000]  # 3rd: whole, on a new connection
    s3.head_object(Bucket=bucket, Key="k")  # a HEAD has no body: never cut, not counted
    assert link.stats()["faults"]["drop_mid_body"] == 1
    assert link.stats()["connections"] == 2


def test_delay_one_holds_the_next_matching_request_once(link, s3_url) -> None:
    bucket = bucket_of(s3_url)
    s3 = client(link.endpoint_url)
    s3.put_object(Bucket=bucket, Key="k", Body=b"0123456789")
    link.faults.update(delay_one={"seconds": 0.6, "ranged": True})
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"0123456789"
    assert link.stats()["faults"]["delay_one"] == 0  # not a range GET: not held
    started = time.perf_counter()
    assert s3.get_object(Bucket=bucket, Key="k", Range="bytes=2-4")["Body"].read() == b"234"
    assert time.perf_counter() - started >= 0.6
    s3.get_object(Bucket=bucket, Key="k", Range="bytes=2-4")["Body"].read()
    assert link.stats()["faults"]["delay_one"] == 1  # once only


def test_blackhole_never_answers_and_a_cleared_one_does(link, s3_url) -> None:
    from botocore.exceptions import ReadTimeoutError

    bucket = bucket_of(s3_url)
    client(link.endpoint_url).put_object(Bucket=bucket, Key="k", Body=b"x")
    link.faults.update(blackhole=True)
    with pytest.raises(ReadTimeoutError):
        client(link.endpoint_url, read_timeout=0.5).get_object(Bucket=bucket, Key="k")
    assert link.stats()["faults"]["blackhole"] == 1
    link.faults.update(blackhole=None)
    assert link.faults.active() == []
    assert client(link.endpoint_url).get_object(Bucket=bucket, Key="k")["Body"].read() == b"x"


def test_an_unknown_fault_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown fault 'drop'.*drop_mid_body"):
        Faults().update(drop={"after": 1})


def test_the_process_form_prints_its_endpoint_and_answers_its_control_requests(
        s3, s3_url) -> None:
    from botocore.exceptions import ClientError

    bucket = bucket_of(s3_url)
    client(s3.endpoint_url).put_object(Bucket=bucket, Key="k", Body=b"abc")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.linkproxy", "--upstream", s3.endpoint_url,
         "--delay", "0.001", "--conn-rate", "none", "--link-rate", "none", "--port", "0"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        endpoint = proc.stdout.readline().strip()
        assert endpoint.startswith("http://127.0.0.1:")
        s3c = client(endpoint)
        assert s3c.get_object(Bucket=bucket, Key="k", Range="bytes=1-2")["Body"].read() == b"bc"
        stats = control(endpoint)
        assert stats["requests"]["GET"] == 1 and stats["range_gets"] == 1
        control(endpoint, "faults", {"slowdown": {"p": 1.0}})
        with pytest.raises(ClientError, match="SlowDown"):
            s3c.get_object(Bucket=bucket, Key="k")
        assert control(endpoint, "clear")["faults"]["slowdown"] == 1
        assert s3c.get_object(Bucket=bucket, Key="k")["Body"].read() == b"abc"
        assert control(endpoint, "reset")["requests"]["GET"] == 3  # the counts it had
        assert control(endpoint)["requests"]["GET"] == 0
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0
