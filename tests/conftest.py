"""Shared fixtures: golden vectors and per-test output locations."""

from __future__ import annotations

import uuid

import fsspec
import pytest

from .support import vector_records


@pytest.fixture
def records() -> list[bytes]:
    return vector_records()


@pytest.fixture
def mem_url():
    """A fresh memory:// directory, removed afterwards."""
    path = f"/recprep-test-{uuid.uuid4().hex}"
    yield f"memory://{path}"
    fs = fsspec.filesystem("memory")
    if fs.exists(path):
        fs.rm(path, recursive=True)


@pytest.fixture(params=["local", "memory"])
def out_url(request, tmp_path, mem_url):
    """An output location, on local disk and in memory://."""
    return str(tmp_path / "out") if request.param == "local" else mem_url


# -- real engines, shared by every test that needs them -------------------------------------


@pytest.fixture(scope="session")
def spark_session():
    """A real local SparkSession (2 threads, one retry per task, as a cluster would) for the
    whole run, stopped at the end."""
    import os
    import sys

    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2,2]")  # 2 threads; a failed task is retried once
        .appName("recprep-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def ray_local():
    """A real local Ray instance (2 CPUs) for the whole run, shut down at the end."""
    import os

    from .support.clusters import RAY_TEST_ENV

    os.environ.update(RAY_TEST_ENV)
    ray = pytest.importorskip("ray")
    ray.init(
        address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
        configure_logging=False,
    )
    yield ray
    ray.shutdown()


# -- a real S3-protocol server (moto) on loopback, shared by the storage tests -------------


@pytest.fixture(scope="session")
def s3(tmp_path_factory):
    """moto's S3 server on 127.0.0.1 for the whole run (see ``tests/support/s3.py``).

    Yields an :class:`tests.support.s3.S3Server`: ``endpoint_url``, ``storage_options`` (for s3fs),
    ``bucket()`` (a fresh bucket's URL), ``env()`` (a subprocess environment with
    ``AWS_ENDPOINT_URL``) and ``filesystem()``. Fake credentials are set in the environment
    for the session, and the AWS config files pointed away from any real ones.
    """
    pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    from .support.s3 import FAKE_ENV, S3Server, clear_s3fs_cache

    patch = pytest.MonkeyPatch()
    home = tmp_path_factory.mktemp("aws")
    for name, value in FAKE_ENV.items():
        patch.setenv(name, value)
    patch.setenv("AWS_CONFIG_FILE", str(home / "config"))
    patch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(home / "credentials"))
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        patch.delenv(name, raising=False)
    server = S3Server().start()
    try:
        yield server
    finally:
        server.stop()
        clear_s3fs_cache()
        patch.undo()


@pytest.fixture
def s3_url(s3):
    """A fresh, empty bucket on the shared server (``s3://recprep-test-...``); s3fs's
    cached instances (and their listings) are dropped before and after the test."""
    from .support.s3 import clear_s3fs_cache

    clear_s3fs_cache()
    yield s3.bucket()
    clear_s3fs_cache()


# -- an emulated network link in front of that server (tests/support/linkproxy.py) ---------


@pytest.fixture(scope="session")
def link_session(s3):
    """One :class:`tests.support.linkproxy.LinkProxy` in front of the session's S3 server
    for the whole run: 5 ms each way, fast enough (500 MB/s per connection, 2 GB/s
    shared) that functional tests through it cost little."""
    from .support.linkproxy import LinkProxy

    proxy = LinkProxy(s3.endpoint_url, delay=0.005, conn_rate=500e6, link_rate=2e9).start()
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture
def link(link_session):
    """The session's link proxy, its faults off and counters zeroed before the test and
    its faults off after it. Reach the server through it with ``link.storage_options``
    (s3fs) or ``link.endpoint_url``; set faults with ``link.faults.update(...)``; read
    ``link.stats()``. Buckets come from ``s3_url`` (the same server behind the proxy);
    s3fs's cached instances are dropped before and after."""
    from .support.s3 import clear_s3fs_cache

    link_session.faults.clear()
    link_session.reset_stats()
    clear_s3fs_cache()
    yield link_session
    link_session.faults.clear()
    clear_s3fs_cache()


@pytest.fixture
def remote_set(s3, s3_url):
    """A set of 4 shards of 2 kB random records on S3 (about 1.2 MB, chunks of 16 KiB);
    ``(url, records, storage_options)``."""
    from recprep import convert

    from .support import random_records

    records = random_records(600, 2000)
    convert(f"{s3_url}/d", records, 4, "p", codec="raw", chunk_bytes=16 << 10,
            storage_options=s3.storage_options)
    return f"{s3_url}/d/p", records, s3.storage_options
