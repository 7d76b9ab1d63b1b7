"""The data-preparation job, end to end: through the CLI and the API, local and on
Spark/Ray; every way a model file or a raw file can be wrong."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from recprep import (
    InvalidArgumentError,
    NotFoundError,
    RecordIO,
    RecprepError,
    TaskFailedError,
    prepare,
)
from recprep.errors import ModelFileError, RawFileError

ROOT = Path(__file__).parents[2]
sys.path.insert(0, str(ROOT / "examples" / "mnist"))
from generate_raw import generate  # noqa: E402

MNIST_MODEL = ROOT / "examples" / "mnist" / "model.py"


def write_model(tmp_path: Path, body: str, name: str = "model.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


def expected_mnist(raw: Path) -> list[tuple[np.ndarray, int]]:
    files = sorted(
        (p for p in raw.rglob("*.npy") if not p.relative_to(raw).parts[0].startswith(".")),
        key=str,
    )
    return [
        (np.load(p).astype(np.float32) / 255.0, int(p.parent.name.split("_")[1])) for p in files
    ]


@pytest.fixture(scope="module")
def mnist_raw(tmp_path_factory) -> Path:
    raw = tmp_path_factory.mktemp("raw")
    generate(str(raw), count=40, seed=3)
    (raw / ".hidden").mkdir()
    np.save(raw / ".hidden" / "ignored.npy", np.zeros((28, 28), np.uint8))
    return raw


def check_mnist_output(out: Path, raw: Path, prefix: str = "data") -> None:
    got = list(RecordIO(str(out / f"{prefix}-*"))())
    want = expected_mnist(raw)
    assert len(got) == len(want) == 40
    for g, (image, label) in zip(got, want, strict=True):
        assert g["image"].dtype == np.float32 and g["image"].shape == (28, 28)
        assert np.array_equal(g["image"], image) and int(g["label"]) == label
    manifest = json.loads((out / f"{prefix}.manifest.json").read_text())
    assert manifest["codec"] == "example"
    assert manifest["schema"]["features"][0] == {
        "name": "image", "dtype": "float32", "shape": [28, 28]
    }


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "recprep", *args], capture_output=True, text=True, timeout=300
    )


# -- end to end ---------------------------------------------------------------------------


def test_cli_local_mode(tmp_path, mnist_raw):
    out = tmp_path / "out"
    proc = run_cli("prepare", str(MNIST_MODEL), str(mnist_raw), str(out), "local",
                   "--num-workers", "2", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert "files read:  40 of 40" in proc.stdout and "instances:   40" in proc.stdout
    assert len(list(out.glob("data-*-of-00007"))) == 8  # 4 x num-workers
    check_mnist_output(out, mnist_raw)


@pytest.mark.parametrize("engine", ["spark", "ray"])
def test_cluster_mode_on_spark_and_ray(request, tmp_path, mnist_raw, engine):
    request.getfixturevalue("spark_session" if engine == "spark" else "ray_local")
    out = tmp_path / "out"
    result = prepare(str(MNIST_MODEL), str(mnist_raw), str(out), "cluster", executor=engine,
                     num_workers=2, num_shards=3, progress=False)
    assert result.files == 40 and result.convert.num_records == 40
    check_mnist_output(out, mnist_raw)
    serial = tmp_path / "serial"
    prepare(str(MNIST_MODEL), str(mnist_raw), str(serial), executor="serial", num_shards=3,
            progress=False)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == {
        p.name: p.read_bytes() for p in serial.iterdir()
    }


def test_docker_entrypoint_command(tmp_path, mnist_raw):
    """The image runs its ENTRYPOINT with the user's arguments: run that command here."""
    text = (ROOT / "Dockerfile").read_text()
    entrypoint = json.loads(re.search(r"^ENTRYPOINT (\[.*\])$", text, re.M).group(1))
    assert entrypoint == ["recprep", "prepare"]
    recprep = str(Path(sys.executable).parent / "recprep")
    args = [str(MNIST_MODEL), str(mnist_raw), str(tmp_path / "out"), "local",
            "--num-workers", "1", "--no-progress"]
    proc = subprocess.run([recprep, *entrypoint[1:], *args], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    check_mnist_output(tmp_path / "out", mnist_raw)
    assert shlex.join(entrypoint)  # the command above is the image's entrypoint


def test_tfrecord_output(tmp_path, mnist_raw):
    out = tmp_path / "out"
    proc = run_cli("prepare", str(MNIST_MODEL), str(mnist_raw), str(out), "--format",
                   "tfrecord", "--compressor", "gzip", "--executor", "serial", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "data.manifest.json").read_text())["format"] == "tfrecord"
    assert (out / "data-00000-of-00007").read_bytes()[:2] == b"\x1f\x8b"
    check_mnist_output(out, mnist_raw)


def test_help_explains_every_argument():
    proc = run_cli("prepare", "--help")
    assert proc.returncode == 0
    for word in ["MODEL_FILE", "RAW_DIR", "OUTPUT_DIR", "--num-workers", "--num-shards",
                 "--name-prefix", "--executor", "--master", "--address", "--conf", "--codec",
                 "--compressor", "--format", "--include", "--on-error", "--overwrite",
                 "examples:"]:
        assert word in proc.stdout
    assert "prepare" in run_cli("--help").stdout


# -- what the user's function may return ----------------------------------------------------

MANY = """
import numpy as np
from recprep import Feature
feature_columns = [Feature("x", "int32", (None,)), Feature("name", bytes)]
def prepare_data_for_a_single_file(filename):
    n = int(open(filename).read())
    for i in range(n):
        yield {"x": np.arange(i, dtype=np.int32), "name": f"{filename[-6:]}-{i}".encode()}
"""


def raw_counts(tmp_path: Path, counts: dict[str, int]) -> Path:
    raw = tmp_path / "raw"
    for rel, n in counts.items():
        (raw / rel).parent.mkdir(parents=True, exist_ok=True)
        (raw / rel).write_text(str(n))
    return raw


def test_many_instances_per_file_as_dicts_in_file_order(tmp_path):
    raw = raw_counts(tmp_path, {"b/f2.txt": 2, "a/f1.txt": 3, "c/d/f3.txt": 0, "f4.txt": 1})
    model = write_model(tmp_path, MANY)
    result = prepare(model, str(raw), str(tmp_path / "out"), executor="serial", num_shards=2,
                     progress=False)
    got = list(RecordIO(str(tmp_path / "out" / "data-*"))())
    names = [g["name"].item() for g in got]  # sorted paths: a/f1, b/f2, c/d/f3, f4
    assert names == [b"f1.txt-0", b"f1.txt-1", b"f1.txt-2", b"f2.txt-0", b"f2.txt-1",
                     b"f4.txt-0"]
    assert [g["x"].tolist() for g in got] == [[], [0], [0, 1], [], [0], []]
    assert result.files == 4 and result.skipped == []


def test_none_skips_a_file_and_tuples_follow_feature_order(tmp_path):
    raw = raw_counts(tmp_path, {"a.txt": 5, "b.txt": -1})
    model = write_model(tmp_path, """
        from recprep import Feature
        feature_columns = [Feature("v", "int64"), Feature("w", "float32", (2,))]
        def prepare_data_for_a_single_file(filename):
            n = int(open(filename).read())
            return None if n < 0 else (n, [0.5, n])
    """)
    prepare(model, str(raw), str(tmp_path / "out"), executor="serial", progress=False)
    (got,) = RecordIO(str(tmp_path / "out" / "data-*"))()
    assert int(got["v"]) == 5 and got["w"].tolist() == [0.5, 5.0]


def test_tensorflow_style_feature_columns_by_duck_typing(tmp_path):
    raw = raw_counts(tmp_path, {"a.txt": 7})
    model = write_model(tmp_path, """
        import numpy as np
        class DType:                      # what a tf.DType offers
            as_numpy_dtype = np.float32
        class NumericColumn:              # what tf.feature_column.numeric_column returns
            def __init__(self, key, shape):
                self.key, self.shape, self.dtype = key, shape, DType()
        feature_columns = [NumericColumn("image", (2, 2))]
        def prepare_data_for_a_single_file(filename):
            return (np.full((2, 2), float(open(filename).read()), np.float32),)
    """)
    prepare(model, str(raw), str(tmp_path / "out"), executor="serial", progress=False)
    (got,) = RecordIO(str(tmp_path / "out" / "data-*"))()
    assert got["image"].dtype == np.float32 and got["image"].tolist() == [[7, 7], [7, 7]]


def test_model_file_without_feature_columns_uses_the_recprep_codec(tmp_path):
    raw = raw_counts(tmp_path, {"a.txt": 2})
    model = write_model(tmp_path, """
        def prepare_data_for_a_single_file(filename):
            return ("text", 1.5, [1, 2])
    """)
    prepare(model, str(raw), str(tmp_path / "out"), executor="serial", progress=False)
    assert list(RecordIO(str(tmp_path / "out" / "data-*"))()) == [("text", 1.5, [1, 2])]


# -- schema mismatches, each kind ------------------------------------------------------------

MISMATCH = """
import numpy as np
from recprep import Feature
feature_columns = [Feature("image", "float32", (2, 2)), Feature("label", "int64")]
def prepare_data_for_a_single_file(filename):
    kind = open(filename).read()
    good = np.zeros((2, 2), np.float32)
    if kind == "ok":
        return good, 1
    if kind == "arity":
        return (good,)
    if kind == "missing":
        return {"image": good}
    if kind == "extra":
        return {"image": good, "label": 1, "colour": 2}
    if kind == "dtype":
        return np.zeros((2, 2), np.complex64), 1
    if kind == "shape":
        return np.zeros((3, 2), np.float32), 1
    if kind == "later":
        return iter([(good, 1), (good, 2), (good, "three")])
    raise ValueError("this file is unreadable")
"""


@pytest.mark.parametrize(
    "kind,feature,index,words",
    [
        ("arity", None, 0, "a tuple of 2 values"),
        ("missing", "label", 0, "label"),
        ("extra", "colour", 0, "no such feature"),
        ("dtype", "image", 0, "complex64"),
        ("shape", "image", 0, "float32[3, 2]"),
        ("later", "label", 2, "label"),
        ("unreadable", None, None, "this file is unreadable"),
    ],
)
def test_a_bad_file_fails_the_job_naming_file_instance_and_feature(
    tmp_path, kind, feature, index, words
):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "good.txt").write_text("ok")
    (raw / "bad.txt").write_text(kind)
    model = write_model(tmp_path, MISMATCH)
    with pytest.raises(TaskFailedError) as info:
        prepare(model, str(raw), str(tmp_path / "out"), executor="serial", progress=False)
    original = info.value.original
    assert isinstance(original, RawFileError)
    assert original.file.endswith("bad.txt") and original.instance_index == index
    assert words in str(info.value) and "bad.txt" in str(info.value)
    if feature:
        assert f"'{feature}'" in str(info.value)
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_on_error_skip_reports_every_skipped_file(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    for name, kind in [("a.txt", "ok"), ("b.txt", "dtype"), ("c.txt", "ok"),
                       ("d.txt", "unreadable"), ("e.txt", "later")]:
        (raw / name).write_text(kind)
    model = write_model(tmp_path, MISMATCH)
    out = tmp_path / "out"
    proc = run_cli("prepare", model, str(raw), str(out), "--on-error", "skip",
                   "--executor", "processes", "--num-workers", "2", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert "files read:  2 of 5" in proc.stdout and "skipped:     3 file(s)" in proc.stdout
    report = json.loads((out / "data.skipped.json").read_text())
    assert [Path(r["file"]).name for r in report] == ["b.txt", "d.txt", "e.txt"]
    assert "complex64" in report[0]["reason"] and "unreadable" in report[1]["reason"]
    assert report[2]["instance"] == 2
    assert len(list(RecordIO(str(out / "data-*"))())) == 2  # nothing of a skipped file
    # a clean rerun removes the stale report
    (raw / "b.txt").unlink()
    (raw / "d.txt").unlink()
    (raw / "e.txt").unlink()
    prepare(model, str(raw), str(out), executor="serial", overwrite=True, progress=False)
    assert not (out / "data.skipped.json").exists()


def test_float64_with_the_example_codec_says_what_to_do(tmp_path):
    raw = raw_counts(tmp_path, {"a.txt": 1})
    model = write_model(tmp_path, """
        from recprep import Feature
        feature_columns = [Feature("x", "float64")]
        def prepare_data_for_a_single_file(filename):
            return (1.0,)
    """)
    with pytest.raises(RecprepError, match="declare the feature float32, or use codec='recprep'"):
        prepare(model, str(raw), str(tmp_path / "out"), executor="serial", progress=False)
    prepare(model, str(raw), str(tmp_path / "out"), executor="serial", codec="recprep",
            progress=False)
    assert list(RecordIO(str(tmp_path / "out" / "data-*"))()) == [(1.0,)]


# -- the job's own arguments ------------------------------------------------------------------


def test_model_file_lacking_the_function(tmp_path):
    raw = raw_counts(tmp_path, {"a.txt": 1})
    model = write_model(tmp_path, "feature_columns = []\n")
    with pytest.raises(ModelFileError, match="prepare_data_for_a_single_file") as info:
        prepare(model, str(raw), str(tmp_path / "out"), progress=False)
    assert info.value.path == model
    proc = run_cli("prepare", model, str(raw), str(tmp_path / "out"))
    assert proc.returncode == 2
    assert "prepare_data_for_a_single_file" in proc.stderr and "Traceback" not in proc.stderr


def test_model_file_that_does_not_load(tmp_path):
    raw = raw_counts(tmp_path, {"a.txt": 1})
    model = write_model(tmp_path, "import not_a_module_anywhere\n")
    with pytest.raises(ModelFileError, match="ModuleNotFoundError"):
        prepare(model, str(raw), str(tmp_path / "out"), progress=False)
    with pytest.raises(NotFoundError, match="no such model file"):
        prepare(str(tmp_path / "nope.py"), str(raw), str(tmp_path / "out"), progress=False)


def test_empty_and_missing_raw_directories(tmp_path):
    model = write_model(tmp_path, MANY)
    (tmp_path / "empty" / ".git").mkdir(parents=True)
    (tmp_path / "empty" / ".git" / "x").write_text("hidden")
    with pytest.raises(NotFoundError, match="has no files"):
        prepare(model, str(tmp_path / "empty"), str(tmp_path / "out"), progress=False)
    with pytest.raises(NotFoundError, match="does not exist"):
        prepare(model, str(tmp_path / "missing"), str(tmp_path / "out"), progress=False)
    proc = run_cli("prepare", model, str(tmp_path / "empty"), str(tmp_path / "out"))
    assert proc.returncode == 2 and "has no files" in proc.stderr


def test_include_filters_files(tmp_path):
    raw = raw_counts(tmp_path, {"a/keep.txt": 1, "a/skip.csv": 1, "keep2.txt": 2})
    model = write_model(tmp_path, MANY)
    result = prepare(model, str(raw), str(tmp_path / "out"), include="*.txt",
                     executor="serial", progress=False)
    assert result.files == 2 and result.convert.num_records == 3


def test_bad_job_arguments(tmp_path):
    raw = raw_counts(tmp_path, {"a.txt": 1})
    model = write_model(tmp_path, MANY)
    with pytest.raises(InvalidArgumentError, match="mode"):
        prepare(model, str(raw), str(tmp_path / "out"), "everywhere")
    with pytest.raises(InvalidArgumentError, match="on_error"):
        prepare(model, str(raw), str(tmp_path / "out"), on_error="ignore")
    with pytest.raises(InvalidArgumentError, match="--master"):
        prepare(model, str(raw), str(tmp_path / "out"), master="spark://x:7077")


# -- a cluster address where nothing listens -------------------------------------------------


def closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def engine_processes() -> set[str]:
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return {line for line in ps.splitlines() if re.search(r"gcs_server|raylet|SparkSubmit", line)}


@pytest.mark.parametrize("engine", ["ray", "spark"])
def test_cli_cluster_address_where_nothing_listens_fails_in_time(tmp_path, engine):
    import time

    raw = raw_counts(tmp_path, {"a.txt": 1})
    model = write_model(tmp_path, MANY)
    address = f"127.0.0.1:{closed_port()}"
    flags = (["--executor", "ray", "--address", address] if engine == "ray"
             else ["--master", f"spark://{address}"])
    before = engine_processes()
    start = time.monotonic()
    proc = run_cli("prepare", model, str(raw), str(tmp_path / "out"), "cluster", *flags,
                   "--connect-timeout", "3", "--no-progress")
    elapsed = time.monotonic() - start
    assert proc.returncode == 2, proc.stderr
    what = "Ray cluster" if engine == "ray" else "Spark master"
    shown = address if engine == "ray" else f"spark://{address}"
    assert proc.stderr.startswith(
        f"recprep: error: can't reach the {what} at {shown} within 3 s ({address}: "
        "Connection refused); check that it is running and the address is right; pass "
        "--connect-timeout SECONDS to wait longer"
    ), proc.stderr
    assert 3 <= elapsed < 3 + 20  # the timeout, plus starting Python and importing the engine
    assert engine_processes() == before


def test_convert_on_ray_with_connect_timeout(tmp_path):
    import time

    from recprep import convert, partitions
    from recprep.errors import ClusterUnreachableError

    address = f"127.0.0.1:{closed_port()}"
    parts = partitions([lambda: iter(range(2)), lambda: iter(range(2, 4))])
    start = time.monotonic()
    with pytest.raises(ClusterUnreachableError, match=f"at {address} within 2 s") as err:
        convert(str(tmp_path), parts, 2, "p", executor="ray",
                executor_options={"address": address, "connect_timeout": 2}, progress=False)
    assert 2 <= time.monotonic() - start < 2 + 3
    assert (err.value.address, err.value.timeout) == (address, 2)
    assert "pass connect_timeout= to wait longer" in str(err.value)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(InvalidArgumentError, match="connect_timeout must be a positive"):
        convert(str(tmp_path), parts, 1, "p", executor="ray",
                executor_options={"address": address, "connect_timeout": 0}, progress=False)
