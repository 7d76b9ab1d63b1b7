"""The format contract, run against every registered container format — including one
registered from outside recprep (``tests/support/outside_format.py``) — and, for that one, every
executor: ``convert``, ``RecordIO`` (``read_range``, ``tasks``, rank splits), the tools
(``recprep ls/head/verify/cp``) and ``recprep.spark`` read/write, with no edit elsewhere.

The outside format is registered for this module's tests only (other modules, and the
doctests that list the formats, see the built-ins alone); workers import its module when
they unpickle a task that holds it.
"""

from __future__ import annotations

import functools
import json
import posixpath

import pytest

import recprep.containers
from recprep import RecordIO, available_executors, convert, partitions
from recprep.cli import main as cli
from recprep.containers import available_formats, get_format
from recprep.storage import resolve
from recprep.storage.manifest import read_manifest

NAME = "outside-recordio"  # tests/support/outside_format.py's, imported by the fixture below
FORMATS = [*available_formats(), NAME]  # the built-ins, any plug-in, the outside format
N = 3
SIZES = [0, 40, 7, 153]


def _part(start: int, size: int) -> list[tuple[int, str]]:
    return [(i, f"v{i}") for i in range(start, start + size)]


def _parts():
    starts = [sum(SIZES[:p]) for p in range(len(SIZES))]
    return partitions([functools.partial(_part, s, n) for s, n in zip(starts, SIZES,
                                                                       strict=True)])


TOTAL = sum(SIZES)
EXPECTED = [(i, f"v{i}") for i in range(TOTAL)]


def _files(url: str) -> dict[str, bytes]:
    fs, path = resolve(url)
    return {posixpath.relpath(p, path): fs.cat_file(p) for p in fs.find(path)}


@pytest.fixture(scope="module", autouse=True)
def outside():
    """The outside format, registered while this module's tests run."""
    from .support import outside_format

    outside_format.register()
    yield outside_format
    recprep.containers._FORMATS.pop(NAME)


def test_the_outside_format_is_registered(outside):
    assert outside.NAME == NAME and NAME in available_formats()
    assert isinstance(get_format(NAME), outside.OutsideFormat)
    assert get_format(NAME).default_compressor == "gzip"


@pytest.mark.parametrize("fmt", FORMATS)
def test_convert_read_ranges_tasks_and_ranks(tmp_path, fmt):
    out = str(tmp_path / "out")
    result = convert(out, _parts(), N, "c", format=fmt, chunk_bytes=64, progress=False)
    manifest = read_manifest(*resolve(f"{out}/c.manifest.json"))
    assert manifest.format == fmt == result.manifest.format
    assert manifest.compressor == get_format(fmt).default_compressor
    pattern = f"{out}/c-*"
    reader = RecordIO(pattern)
    assert len(reader) == TOTAL and sorted(reader()) == EXPECTED
    got = [x for task in reader.tasks(7) for x in reader.read_range(*task)]
    assert sorted(got) == EXPECTED
    assert list(reader.read_range(reader.paths[1], 3, 6)) == [EXPECTED[k * N + 1]
                                                             for k in range(3, 6)]
    for world_size in (2, 3):
        shares = [list(RecordIO(pattern, rank=r, world_size=world_size)())
                  for r in range(world_size)]
        assert sorted(x for share in shares for x in share) == EXPECTED
    forced = RecordIO(pattern, format=fmt)  # format= takes any registered name
    assert len(forced) == TOTAL


@pytest.mark.parametrize("fmt", FORMATS)
def test_tools_ls_head_verify_cp(tmp_path, capsys, fmt):
    out, copy = str(tmp_path / "out"), str(tmp_path / "copy")
    convert(out, _parts(), N, "t", format=fmt, progress=False)
    capsys.readouterr()
    assert cli(["ls", "--json", out]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert (listed["format"], listed["records"], listed["num_shards"]) == (fmt, TOTAL, N)
    assert cli(["head", "-n", "2", f"{out}/t-*"]) == 0
    assert "v0" in capsys.readouterr().out
    assert cli(["verify", out]) == 0
    capsys.readouterr()
    assert cli(["cp", out, copy]) == 0
    capsys.readouterr()
    visible = {k: v for k, v in _files(out).items() if not k.startswith(".")}
    assert {k: v for k, v in _files(copy).items() if k in visible} == visible
    assert sorted(RecordIO(f"{copy}/t-*")()) == EXPECTED


EXECUTORS = [*available_executors(), "processes-spawn"]


@pytest.fixture(scope="module")
def serial_output(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("serial"))
    convert(out, _parts(), N, "e", format=NAME, chunk_bytes=64, executor="serial",
            progress=False)
    return _files(out)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_every_executor_writes_the_outside_format(request, tmp_path, serial_output, executor):
    """The format travels to the workers (by class reference) and writes the same bytes."""
    kwargs: dict = {"executor": executor}
    if executor in ("spark", "ray"):
        request.getfixturevalue("spark_session" if executor == "spark" else "ray_local")
    elif executor.startswith("processes"):
        method = executor.partition("-")[2] or None
        kwargs = {"executor": "processes", "num_workers": 2,
                  "executor_options": {"start_method": method} if method else {}}
    out = str(tmp_path)
    convert(out, _parts(), N, "e", format=NAME, chunk_bytes=64, progress=False, **kwargs)
    assert _files(out) == serial_output
    assert sorted(RecordIO(f"{out}/e-*")()) == EXPECTED


@pytest.mark.parametrize("fmt", FORMATS)
def test_spark_writes_and_reads_every_format(spark_session, tmp_path, fmt):
    pytest.importorskip("pyarrow")
    from recprep import spark as rs

    rows = [(i, f"w{i}") for i in range(23)]
    df = spark_session.createDataFrame(rows, "number int, word string").repartition(3)
    out = str(tmp_path)
    rs.write(df, out, format=fmt, num_shards=2, codec="recprep")
    (manifest_path,) = [p for p in _files(out) if p.endswith(".manifest.json")]
    assert read_manifest(*resolve(f"{out}/{manifest_path}")).format == fmt
    back = rs.read(spark_session, out)
    assert sorted((r.number, r.word) for r in back.collect()) == rows
    assert len(RecordIO(f"{out}/*-of-*")) == len(rows)
