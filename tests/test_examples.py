"""The scripts in examples/ run and do what they say.

The Spark and Ray examples run in this process on the session's local SparkSession and
Ray instance (tests/conftest.py), which the examples join instead of starting their own.
The examples are loaded as modules that are *not* in ``sys.modules``, so cloudpickle ships
their readers to the workers by value, as it does for a script run as ``__main__``.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np

from recprep import RecordIO

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name: str):
    path = EXAMPLES / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"recprep_example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_notebook_converts_reads_and_the_loss_goes_down(tmp_path, capsys):
    losses = load("notebook").main(str(tmp_path))
    assert len(losses) == 5
    assert all(later < earlier for earlier, later in zip(losses, losses[1:], strict=False))
    assert losses[-1] < 0.8 * losses[0]
    out = capsys.readouterr().out
    assert "epoch 4: loss" in out and "test accuracy" in out
    accuracy = float(out.rsplit("test accuracy: ", 1)[1].split()[0])
    assert accuracy > 0.9
    assert len(RecordIO(str(tmp_path / "train-*-of-*"))) == 4000


def test_notebook_runs_as_a_script():
    done = subprocess.run([sys.executable, str(EXAMPLES / "notebook.py")], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "epoch 0: loss" in done.stdout


def test_demo(tmp_path, capsys):
    load("demo").main(str(tmp_path / "demo"))
    out = capsys.readouterr().out
    assert "read back 1000 instances in the original order" in out
    assert len(list((tmp_path / "demo").glob("random_images-*-of-00009"))) == 10


def test_spark_example(spark_session, tmp_path, capsys):
    example = load("spark_example")
    example.main(str(tmp_path), spark=spark_session)
    assert "serial: the same bytes" in capsys.readouterr().out
    read = RecordIO(str(tmp_path / "clicks-*-of-*"))
    days = [list(example.read_day(day)) for day in example.DAYS]
    expected = [x for day in days for x in day]
    got = list(read())
    assert len(got) == len(expected) == 3000
    for (user, items, clicked), (want_user, want_items, want_clicked) in zip(
        got, expected, strict=True
    ):
        assert user == want_user and clicked is want_clicked
        assert np.array_equal(items, want_items)


def test_ray_example(ray_local, tmp_path, capsys):
    load("ray_example").main(str(tmp_path))
    assert ray_local.is_initialized()  # joined, not shut down
    assert "read back 1000 instances, in file order" in capsys.readouterr().out
    assert len(RecordIO(str(tmp_path / "shards" / "sentences-*-of-*"))) == 1000
