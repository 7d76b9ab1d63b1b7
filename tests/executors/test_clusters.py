"""Cluster mode: a job submitted to a Spark standalone cluster and to a Ray cluster,
both started on 127.0.0.1 by the test and stopped afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..support import SUPPORT
from ..support.clusters import RAY_TEST_ENV, ray_head, spark_standalone

JOB = SUPPORT / "cluster_job.py"
ROOT = Path(__file__).parents[2]


def run_job(out: Path, executor: str, options: dict) -> dict:
    proc = subprocess.run(
        [sys.executable, str(JOB), str(out), executor, json.dumps(options)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, **RAY_TEST_ENV},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())}


@pytest.fixture(scope="module")
def serial_output(tmp_path_factory):
    out = tmp_path_factory.mktemp("serial")
    run_job(out, "serial", {})
    return files(out)


def test_spark_standalone_cluster(tmp_path, serial_output):
    pytest.importorskip("pyspark")
    with spark_standalone() as master:
        result = run_job(tmp_path, "spark", {"master": master, "conf": {
            "spark.ui.enabled": "false", "spark.executor.memory": "1g"}})
    assert result["records"] == [16, 16, 15, 15]
    assert files(tmp_path) == serial_output


def test_ray_cluster(tmp_path, serial_output):
    pytest.importorskip("ray")
    with ray_head() as address:
        result = run_job(tmp_path, "ray", {"address": address})
    assert result["records"] == [16, 16, 15, 15]
    assert files(tmp_path) == serial_output
