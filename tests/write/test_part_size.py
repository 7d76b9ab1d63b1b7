"""How a sized input is cut into row ranges: by its length and its records' size.

Every range ends the chunks it wrote, so ranges of 32,768 small records made chunks a
quarter of the size a reader decodes fastest. ``part_rows`` makes ranges of small
records long enough that each shard's share fills most of a chunk; the cut still
depends on the input alone (every executor writes the same bytes), and a resumed run
reuses staged ranges only if they were cut the same way.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest

from recprep import RecordIO, convert
from recprep.codecs import Codec, get_codec
from recprep.containers import get_format
from recprep.errors import EncodeError, PickleFallbackWarning, TaskFailedError
from recprep.write.inputs import PART_FILL, ROWS_PER_PART, part_rows, split_sized
from recprep.write.options import DEFAULT_CHUNK_BYTES


def small(n: int) -> list[tuple[int, float, str]]:
    return [(i, i / 7, f"token-{i % 9973}") for i in range(n)]


def chunk_sizes(directory: Path) -> list[list[int]]:
    """Per shard, the uncompressed record bytes of each of its chunks."""
    fmt, sizes = get_format("recordio"), []
    for path in sorted(directory.glob("s-*-of-*")):
        with open(path, "rb") as f:
            sizes.append([sum(len(r) for r in c.records) for c in fmt.read_chunks(
                f, path=str(path))])
    return sizes


def digests(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.iterdir()) if p.is_file()}


class Refusing:
    """A codec that fails on every instance, as the sample's."""

    name = "refusing"

    def encode(self, instance):
        raise EncodeError("no", instance_index=None)


def test_small_records_get_ranges_whose_shares_nearly_fill_a_chunk():
    data = small(100_000)
    codec = get_codec("recprep")
    mean = sum(len(codec.encode(x)) for x in data[:512]) / 512
    rows = part_rows(data, codec, 10, DEFAULT_CHUNK_BYTES)
    assert rows == pytest.approx(PART_FILL * 10 * DEFAULT_CHUNK_BYTES / mean, rel=0.05)
    assert rows > 3 * ROWS_PER_PART  # what the length alone gave
    assert part_rows(data, codec, 100, DEFAULT_CHUNK_BYTES) == pytest.approx(10 * rows, 0.01)


def test_big_records_and_small_inputs_keep_the_rows_per_part():
    assert part_rows([bytes(300)] * 70_000, get_codec("raw"), 10, 64 << 10) == ROWS_PER_PART
    # an input too small for two ranges isn't sampled: the codec is never called
    assert part_rows([b"x"] * (2 * ROWS_PER_PART - 1), Refusing(), 10, 1 << 20) == (
        ROWS_PER_PART)


def test_a_sample_the_codec_fails_on_keeps_the_rows_per_part_and_the_task_says_where(
        tmp_path):
    data: list = [b"r%07d" % i for i in range(80_000)]
    assert part_rows(data[:2] + [1] * 79_998, get_codec("raw"), 3, 1 << 20) == ROWS_PER_PART
    data[50_000] = 12  # not bytes: the raw codec refuses it, in the task that meets it
    with pytest.raises(TaskFailedError) as info:
        convert(str(tmp_path / "out"), data, 3, "s", codec="raw", executor="processes",
                num_workers=2, progress=False)
    assert isinstance(info.value.original, EncodeError)
    assert info.value.original.instance_index == 50_000
    assert "instances 26666-53332 of the input failed" in str(info.value)
    assert "instance 50000: " in str(info.value.original)


def test_the_sample_leaves_the_codecs_notes_of_pickled_types_to_the_tasks(tmp_path):
    data: list = small(70_000)
    data[0] = (0, 0.0, range(3))  # pickled by the codec's fallback, and sampled
    with pytest.warns(PickleFallbackWarning, match="builtins.range") as seen:
        result = convert(str(tmp_path / "out"), data, 3, "s", progress=False)
    assert [w.message.instance_index for w in seen] == [0]
    assert result.manifest.pickled == ["builtins.range"]


def test_a_serial_and_a_parallel_run_cut_small_records_into_the_same_full_chunks(tmp_path):
    data = small(200_000)
    rows = part_rows(data, get_codec("recprep"), 10, DEFAULT_CHUNK_BYTES)
    parts = split_sized(data, 256, rows)
    assert parts is not None and len(parts) == 2  # 7 ranges of 32,768, by length alone
    serial = tmp_path / "serial"
    convert(str(serial), data, 10, "s", progress=False)
    convert(str(tmp_path / "proc"), data, 10, "s", executor="processes", num_workers=2,
            progress=False)
    assert digests(tmp_path / "proc") == digests(serial)
    sizes = chunk_sizes(serial)
    assert all(len(shard) == 2 for shard in sizes)  # a chunk per shard and range
    assert min(min(shard) for shard in sizes) > 0.8 * PART_FILL * DEFAULT_CHUNK_BYTES / 2
    assert list(RecordIO(str(serial / "s-*-of-*"))()) == data


KILLED_RUN = """
import sys
from recprep import convert
from recprep.write import inputs
inputs.ROWS_PER_PART = 20_000  # the earlier version's rule
convert(sys.argv[1], [b"r%07d" % i for i in range(100_000)], 3, "s", codec="raw",
        chunk_bytes=64 << 10, executor="processes", num_workers=2, progress=False)
"""


def test_a_resume_never_reuses_ranges_cut_by_another_rule(tmp_path):
    """A run killed after staging some ranges, resumed by a version whose rule cuts the
    input elsewhere: reusing its ``part-00000-00001`` would hand out another range's
    rows. The cut is in the run's fingerprint, so the resume starts over."""
    out, data = tmp_path / "out", [b"r%07d" % i for i in range(100_000)]
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_RUN, str(out)], capture_output=True, text=True,
        timeout=120, env={**os.environ, "RECPREP_FAILPOINTS": "staging.record=3"})
    assert killed.returncode == 137, killed.stderr
    staged = [p.name for p in (out / ".recprep-staging-s").rglob("*")]
    assert any("part-00000-00001" in name for name in staged), staged
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # what the resume says of the run it drops
        convert(str(out), data, 3, "s", codec="raw", chunk_bytes=64 << 10,
                executor="processes", num_workers=2, progress=False, resume=True)
    fresh = tmp_path / "fresh"
    convert(str(fresh), data, 3, "s", codec="raw", chunk_bytes=64 << 10, progress=False)
    assert digests(out) == digests(fresh)
    assert list(RecordIO(str(out / "s-*-of-*"), codec="raw")()) == data


def test_a_dataset_of_files_is_not_sampled(tmp_path):
    """Sampling a pyarrow Dataset would read its files on the driver, before any task:
    its ranges keep the rows per part; the same rows in memory get longer ones."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    from recprep.write.inputs import as_input

    table = pa.table({"i": list(range(70_000)), "s": ["x"] * 70_000})
    pq.write_table(table, tmp_path / "t.parquet")
    dataset = ds.dataset(tmp_path / "t.parquet")
    codec = get_codec("recprep")
    assert part_rows(as_input(table), codec, 10, DEFAULT_CHUNK_BYTES) > ROWS_PER_PART
    assert part_rows(as_input(dataset), codec, 10, DEFAULT_CHUNK_BYTES) == ROWS_PER_PART


class LockedRaw(Codec):
    """A codec of bytes that holds a lock: it can't be copied for a sample."""

    name = "locked-raw"

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def encode(self, instance):
        return bytes(instance)

    def decode(self, record, *, allow_pickle=False):
        return bytes(record)


def test_a_codec_that_cant_be_copied_keeps_the_rows_per_part_and_writes(tmp_path):
    data = [b"r%05d" % (i % 99_999) for i in range(70_000)]
    codec = LockedRaw()
    assert part_rows(data, codec, 3, DEFAULT_CHUNK_BYTES) == ROWS_PER_PART
    convert(str(tmp_path), data, 3, "s", codec=codec, progress=False)
    assert list(RecordIO(str(tmp_path / "s-*-of-*"), codec=LockedRaw())()) == data
