"""Start and stop real engine clusters on 127.0.0.1, for tests and benchmarks.

Only processes started here are stopped here: each is started in its own session and
its process group is terminated at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

#: for Ray clusters the tests start: stay on 127.0.0.1 (without the first setting Ray swaps
#: loopback for the machine's outward address), no usage stats, and no token auth (a
#: loopback-only test cluster; with a token left in ~/.ray, head and driver would disagree)
RAY_TEST_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "disabled",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(check, what: str, timeout: float, procs: list[subprocess.Popen], log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{what}: a process exited early; log:\n{log.read_text()}")
        with contextlib.suppress(Exception):
            if check():
                return
        time.sleep(0.3)
    raise TimeoutError(f"{what} not ready after {timeout} s; log:\n{log.read_text()}")


def _stop(procs: list[subprocess.Popen]) -> None:
    for proc in reversed(procs):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in reversed(procs):
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@contextlib.contextmanager
def spark_standalone(cores: int = 2, memory: str = "2g") -> Iterator[str]:
    """A Spark standalone master and one worker; yields the ``spark://`` URL."""
    import pyspark

    home = Path(pyspark.__file__).parent
    spark_class = str(home / "bin" / "spark-class")
    work = Path(tempfile.mkdtemp(prefix="rp-spark-"))
    log = work / "cluster.log"
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(work),
        "SPARK_WORKER_DIR": str(work / "work"),
    }
    port, ui, worker_ui = free_port(), free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []
    with open(log, "ab") as out:
        try:
            procs.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                 "--port", str(port), "--webui-port", str(ui)],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            ))
            procs.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host",
                 "127.0.0.1", "--cores", str(cores), "--memory", memory, "--webui-port",
                 str(worker_ui), "--work-dir", str(work / "work")],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            ))

            def worker_alive() -> bool:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as r:
                    return int(json.load(r).get("aliveworkers", 0)) >= 1

            _wait(worker_alive, "Spark standalone cluster", 90, procs, log)
            yield url
        finally:
            _stop(procs)
            shutil.rmtree(work, ignore_errors=True)


@contextlib.contextmanager
def ray_head(num_cpus: int = 2) -> Iterator[str]:
    """A Ray head node started with ``ray start --head --block``; yields its address."""
    ray_bin = str(Path(sys.executable).parent / "ray")
    work = Path(tempfile.mkdtemp(prefix="rp-ray-"))
    log = work / "head.log"
    port = free_port()
    address = f"127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []
    with open(log, "ab") as out:
        try:
            procs.append(subprocess.Popen(
                [ray_bin, "start", "--head", "--block", "--port", str(port),
                 "--node-ip-address", "127.0.0.1", "--num-cpus", str(num_cpus),
                 "--include-dashboard=false", "--disable-usage-stats",
                 "--temp-dir", str(work / "t")],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                env={**os.environ, **RAY_TEST_ENV},
            ))

            def head_up() -> bool:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return "Ray runtime started" in log.read_text()

            _wait(head_up, "Ray head", 90, procs, log)
            yield address
        finally:
            _stop(procs)
            shutil.rmtree(work, ignore_errors=True)
