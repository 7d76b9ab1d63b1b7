"""Shared fixtures: golden vectors and per-test output locations."""

from __future__ import annotations

import uuid
from pathlib import Path

import fsspec
import pytest

DATA = Path(__file__).parent / "data"


def vector_records() -> list[bytes]:
    """The 44 records every file in tests/data/{go-recordio,pyrecordio-0.0.4,tfrecord} holds."""
    lines = (DATA / "go-recordio" / "records.hex").read_text().splitlines()
    return [bytes.fromhex(line.strip()) for line in lines]


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
    """A real local[2] SparkSession for the whole run, stopped at the end."""
    import os
    import sys

    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
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
    ray = pytest.importorskip("ray")
    ray.init(
        address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
        configure_logging=False,
    )
    yield ray
    ray.shutdown()
