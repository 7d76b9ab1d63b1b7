"""The fast paths of decoding a ``"recprep"`` chunk to columns and Arrow give what the
careful ones give: shared bytes compared a word at a time (chunks of many records), the
take index of string columns kept from one chunk to the next (and threads that decode
chunks of other sizes meanwhile)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.lib.stride_tricks import as_strided

from recprep._core.arrowcols import record_batch
from recprep.codecs.recprep import RecprepCodec, columns
from recprep.codecs.recprep import arrow as arrow_decode

pa = pytest.importorskip("pyarrow")


def _bytewise(got: np.ndarray, consts: list) -> bool:
    return all(bool((got[:, at : at + len(want)] == want).all()) for at, want in consts)


@st.composite
def rows_and_runs(draw):
    """Rows of bytes (a strided view, as a chunk's evenly spaced records give) and runs
    of shared bytes, some broken in one row at one byte."""
    n = draw(st.sampled_from([1, 5, 511, 512, 700]))
    width = draw(st.integers(1, 40))
    stride = width + draw(st.integers(0, 5))
    start = draw(st.integers(0, 3))  # unaligned rows too
    line = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).integers(
        0, 256, width, dtype=np.uint8)
    # rows enough that the strided view, from ``start`` on, stays inside the buffer
    buf = np.tile(np.concatenate([line, np.zeros(stride - width, np.uint8)]), n + 5)
    runs = []
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, width - 1))
        runs.append((at, line[at : at + draw(st.integers(1, width - at))].copy()))
    if draw(st.booleans()):  # one byte of one row differs from the shared bytes
        row, col = draw(st.integers(0, n - 1)), draw(st.integers(0, width - 1))
        buf[start + row * stride + col] ^= draw(st.integers(1, 255))
    got = as_strided(buf[start:], (n, width), (stride, 1), writeable=False)
    return (np.array(got) if draw(st.booleans()) else got), runs


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows_and_runs())
def test_shared_bytes_a_word_at_a_time_equal_byte_by_byte(case):
    got, runs = case
    want = _bytewise(got, runs)
    saved = columns._WORDS_MIN_ROWS
    try:
        for threshold in (0, 1 << 30):  # the word path forced, then the byte path
            columns._WORDS_MIN_ROWS = threshold
            assert columns._shared_bytes_hold(got, runs) is want
    finally:
        columns._WORDS_MIN_ROWS = saved


def test_a_chunk_of_many_records_with_one_shared_byte_changed_is_not_decoded_whole():
    codec = RecprepCodec()
    n = 700  # past _WORDS_MIN_ROWS: the word path checks the shared bytes
    assert n >= columns._WORDS_MIN_ROWS
    values = [(i, i / 2, f"w{i}") for i in range(n)]
    good = [codec.encode(v) for v in values]
    assert codec.decode_arrow_columns(good).tree.column(2).to_pylist() == [
        v[2] for v in values]
    head = good[0][:9]  # format byte, packed tuple tag, count, the fields' codes
    assert all(r[:9] == head for r in good)
    for at in range(9):  # every byte of the shared run, in every word it is compared in
        for row in (0, 333, n - 1):
            bad = list(good)
            bad[row] = bad[row][:at] + bytes([bad[row][at] ^ 0x40]) + bad[row][at + 1 :]
            assert codec.decode_columns(bad) is None, (at, row)
            assert codec.decode_arrow_columns(bad) is None, (at, row)


def test_string_columns_of_chunks_of_other_sizes_take_their_own_rows():
    codec = RecprepCodec()
    chunks = [[codec.encode((i, f"s{k}-{i}")) for i in range(n)]
              for k, n in enumerate([5, 7, 5, 5, 300, 6])]
    for records in chunks:  # the kept take index is for the chunk before: other sizes
        batch = codec.decode_arrow_columns(records).tree
        assert batch.equals(record_batch(codec.decode_columns(records).tree))

    def decoded(records):
        return codec.decode_arrow_columns(records).tree.column(1).to_pylist()

    want = [decoded(r) for r in chunks]
    with ThreadPoolExecutor(4) as pool:  # threads decoding chunks of other sizes at once
        for _ in range(30):
            assert list(pool.map(decoded, chunks * 3)) == want * 3


def test_the_take_index_is_a_slice_of_one_kept_for_every_chunk():
    first = arrow_decode._every_other(41, False)
    memory = first.buffers()[1].address
    for n in (41, 40, 3, 1000):  # chunks of other sizes: slices of the same memory
        index = arrow_decode._every_other(n, False)
        assert index.buffers()[1].address == memory and index.offset == 0
        assert index.to_pylist() == list(range(0, 2 * n, 2))
    longer = arrow_decode._every_other(5000, False)  # longer than kept: made anew
    assert longer.to_pylist() == list(range(0, 10000, 2))
    assert arrow_decode._every_other(41, True).type == pa.int64()
