"""Scratch buffers: a chunk's stored and decompressed bytes in memory used again.

The promise is that a buffer is never written while anything can still read it: a view,
a numpy array or an Arrow buffer over it keeps it out of reuse. These tests hold such
references while more is read, then check every byte they see — and check that reuse
does happen (else the page faults it saves come back) and stays bounded.
"""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa
import pytest

from recprep import RecordIO, convert
from recprep._core import scratch as scratch_module
from recprep._core.native import crc32c, native_off
from recprep._core.scratch import HELD_BYTES, MAX_BUFFERS, STEP, scratch
from recprep.codecs import get_codec
from recprep.containers import get_format

BIG = 3 * STEP + 5


@pytest.fixture(autouse=True)
def fresh_thread_buffers():
    """Each test starts with this thread keeping no buffer."""
    scratch_module._local.held = []
    yield
    scratch_module._local.held = []


def test_a_buffer_comes_back_once_nothing_refers_to_it():
    a = scratch(BIG)
    first = a.obj
    del a
    assert scratch(BIG).obj is first
    assert scratch(BIG - 1000).obj is first  # big enough: reused for less


@pytest.mark.parametrize("hold", ["view", "slice", "readonly", "numpy", "arrow"])
def test_anything_over_a_buffer_keeps_it_out_of_reuse_and_its_bytes_as_they_were(hold):
    a = scratch(BIG)
    a[:] = b"\x01" * BIG
    held = {
        "view": lambda: a,
        "slice": lambda: a[10:20],
        "readonly": lambda: a.toreadonly(),
        "numpy": lambda: np.frombuffer(a, np.uint8)[5:],
        "arrow": lambda: pa.py_buffer(a),
    }[hold]()
    first = a.obj
    if hold != "view":
        del a
    b = scratch(BIG)
    assert b.obj is not first
    b[:] = b"\x02" * BIG
    assert set(bytes(memoryview(held).cast("B"))) == {1}
    del held
    if hold == "view":
        del a
    assert scratch(BIG).obj in (first, b.obj)


def test_small_buffers_are_made_fresh_and_never_kept():
    a = scratch(STEP - 1)
    assert len(a) == STEP - 1
    del a
    assert scratch_module._local.held == []


def test_what_a_thread_keeps_is_bounded():
    alive = [scratch(BIG) for _ in range(MAX_BUFFERS + 10)]  # all in use at once
    held = scratch_module._local.held
    assert len(held) <= MAX_BUFFERS and sum(map(len, held)) <= HELD_BYTES
    assert all(len(v) == BIG for v in alive)
    huge = scratch(HELD_BYTES)  # more than there is room for, with the rest in use
    assert not any(huge.obj is buf for buf in held)
    assert isinstance(huge.obj, np.ndarray)  # not kept: numpy's, not zeroed first
    del alive, huge
    assert len(scratch_module._local.held) <= MAX_BUFFERS


def test_a_freed_buffer_makes_room_for_a_bigger_one():
    small = scratch(STEP)
    del small
    scratch_module.HELD_BYTES, saved = STEP * 3, scratch_module.HELD_BYTES
    try:
        big = scratch(3 * STEP)  # no room unless the free small one goes
        assert [len(b) for b in scratch_module._local.held] == [3 * STEP]
        assert big.obj is scratch_module._local.held[0]
    finally:
        scratch_module.HELD_BYTES = saved


def test_each_thread_keeps_its_own():
    mine = scratch(BIG).obj
    seen = []
    thread = threading.Thread(target=lambda: seen.append(scratch(BIG).obj))
    thread.start()
    thread.join()
    assert seen[0] is not mine


# ------------------------------------------------------------------- a set, read whole


def instances(n: int) -> list[tuple]:
    rng = np.random.default_rng(3)
    return [(i, float(i) / 3, f"w{i % 977}", rng.integers(0, 255, 400, dtype=np.uint8))
            for i in range(n)]


@pytest.mark.parametrize("compressor", ["snappy", "none"])
def test_every_value_a_pass_handed_out_stays_what_it_was(tmp_path, compressor):
    """Values, batches (numpy and Arrow) and records are all kept while the rest of the
    set is read through the same scratch buffers; then every one is checked."""
    data = instances(3000)
    convert(str(tmp_path), data, 2, "s", compressor=compressor, chunk_bytes=STEP * 2,
            progress=False)
    pattern = str(tmp_path / "s-*-of-*")
    values = list(RecordIO(pattern)())
    numpy_batches = list(RecordIO(pattern).batches(100))
    arrow_batches = list(RecordIO(pattern).batches(100, format="arrow"))
    table = RecordIO(pattern).to_arrow()
    fmt, chunks = get_format("recordio"), []
    for path in sorted(tmp_path.glob("s-*-of-*")):  # chunks kept: their payloads' views
        with open(path, "rb") as f:
            chunks += list(fmt.read_chunks(f, path=str(path)))
    assert len(scratch_module._local.held) >= 1  # buffers were used again
    codec = get_codec("recprep")
    records = [r for c in chunks for r in c.records]
    for got, want in zip(map(codec.decode, records), data[0::2] + data[1::2], strict=True):
        assert got[:3] == want[:3] and np.array_equal(got[3], want[3])
    expected = data  # two shards read round-robin: the order written
    assert len(values) == 3000
    for got, want in zip(values, expected, strict=True):
        assert got[:3] == want[:3] and np.array_equal(got[3], want[3])
    column = np.concatenate([b[3] for b in numpy_batches])
    assert np.array_equal(column, np.stack([x[3] for x in expected]))
    arrow = pa.Table.from_batches(arrow_batches)
    assert arrow.equals(table)
    assert arrow.column("f2").to_pylist() == [x[2] for x in expected]
    assert all(type(r) is bytes for r in records) and len(records) == 3000


def test_records_cut_out_of_a_scratch_payload_are_bytes():
    from recprep._core.records import Records

    payload = scratch(BIG)
    payload[:6] = b"abcdef"
    records = Records(payload.toreadonly(), [0, 3], [3, 6])
    assert records[1] == b"def" and type(records[1]) is bytes
    assert records.list() == [b"abc", b"def"]
    assert type(records.payload) is bytes  # copied out once: the buffer is let go
    del payload
    assert scratch_module._free(scratch_module._local.held[0])


@pytest.mark.parametrize("native", [True, False])
def test_crc32c_continues_over_any_buffer(native):
    data = bytes(range(256)) * 300
    want = crc32c(data)
    if native:
        assert crc32c(memoryview(data)[100:], crc32c(data[:100])) == want
    else:
        with native_off():
            assert crc32c(memoryview(data)[100:], crc32c(data[:100])) == want
