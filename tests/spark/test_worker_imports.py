"""Spark workers whose Python can't import recprep: one clear error (issue 22 item 15).

A SparkSession of the user's own, started outside the activated venv, runs its Python
workers with another interpreter (``PYSPARK_PYTHON``, else ``python3`` on the PATH). The
jobs of ``convert(executor="spark")``, ``recprep.spark.write`` and ``recprep.spark.read``
then failed with ``ModuleNotFoundError: No module named 'recprep'`` deep in a 77-line
trace (for ``read``, in the user's own ``collect()``); now each raises
:class:`~recprep.errors.WorkerImportError` saying to set ``PYSPARK_PYTHON``.

Each scenario runs in a subprocess with a SparkSession of its own (the suite's shared
session must keep its good workers), which it stops.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import recprep

pytest.importorskip("pyspark")

SRC = str(Path(recprep.__file__).resolve().parents[1])  # the recprep under test


def _python_without_recprep() -> str | None:
    """A Python of the driver's version (Spark refuses workers of another) that can't
    import recprep nor numpy: the system's, outside any venv."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3", shutil.which("python3")):
        if not candidate or not os.path.exists(candidate) or os.path.realpath(
                candidate) == os.path.realpath(sys.executable):
            continue
        probe = subprocess.run(
            [candidate, "-c", "import sys; print(sys.version_info[:2]); import numpy"],
            capture_output=True, text=True, env={"PATH": os.environ.get("PATH", "")},
            timeout=60,
        )
        if probe.stdout.strip() == str(sys.version_info[:2]) and probe.returncode != 0:
            return candidate
    return None


WORKER_PYTHON = _python_without_recprep()
pytestmark = pytest.mark.skipif(
    WORKER_PYTHON is None, reason="no Python of the driver's version without recprep")

SCRIPT = textwrap.dedent("""
    import json, os, sys
    sys.path.insert(0, {src!r})  # the driver imports this recprep; the workers don't see it
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[1]").appName("recprep-bad-workers")
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("OFF")
    import recprep
    from recprep import spark as rs

    out = {out!r}
    recprep.convert(os.path.join(out, "in"), [{{"x": i}} for i in range(6)], 1, "d",
                    format="tfrecord", codec="example")  # on the driver: no Spark

    def convert():
        recprep.convert(os.path.join(out, "c"),
                        recprep.partitions([list(range(3)), list(range(3, 6))]), 2, "d",
                        executor="spark")

    def write():
        df = spark.createDataFrame([(i,) for i in range(6)], "x bigint")
        rs.write(df, os.path.join(out, "w"))

    def read():
        rs.read(spark, os.path.join(out, "in")).collect()

    results = {{}}
    for name in {ops!r}:
        try:
            globals()[name]()
            results[name] = None
        except Exception as err:
            results[name] = [type(err).__module__ + "." + type(err).__name__, str(err),
                             getattr(err, "module", None), getattr(err, "python", None),
                             len(getattr(err, "original_traceback", "") or "")]
    spark.stop()
    print("RESULTS " + json.dumps(results))
""")


def _run(tmp_path: Path, ops: list[str], worker_env: dict[str, str]) -> dict:
    script = tmp_path / "bad_workers.py"
    script.write_text(SCRIPT.format(src=SRC, out=str(tmp_path / "out"), ops=ops))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON")}
    env.update(worker_env)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULTS ")]
    assert lines, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(lines[-1][len("RESULTS "):])


def test_workers_without_recprep_fail_with_one_clear_error(tmp_path):
    results = _run(tmp_path, ["read", "write", "convert"], {"PYSPARK_PYTHON": WORKER_PYTHON})
    for op in ("read", "write", "convert"):
        assert results[op] is not None, f"{op} succeeded on workers without recprep"
        kind, message, module, python, traceback = results[op]
        assert kind == "recprep.errors.WorkerImportError", (op, kind, message[:500])
        assert message.startswith(
            "the Spark workers' Python can't import recprep; set PYSPARK_PYTHON"), op
        assert f"they run {WORKER_PYTHON}" in message and sys.executable in message
        assert "Traceback" not in message and len(message.splitlines()) == 1
        assert (module, python) == ("recprep", WORKER_PYTHON)
        assert traceback > 0  # the worker's trace is kept, for --debug


def test_workers_missing_a_module_recprep_imports(tmp_path):
    """The workers see recprep's source (PYTHONPATH) but not numpy: said as such."""
    results = _run(tmp_path, ["convert"],
                   {"PYSPARK_PYTHON": WORKER_PYTHON, "PYTHONPATH": SRC})
    kind, message, module, _, _ = results["convert"]
    assert kind == "recprep.errors.WorkerImportError", message[:500]
    assert message.startswith("the Spark workers' Python can't import recprep (it lacks "
                              "'numpy', which recprep imports); set PYSPARK_PYTHON")
    assert module == "numpy"
