"""Issue 25 item 4: a RecordIO writer takes records laid out in one buffer, framed as its
chunks hold them (``write_framed``), and writes exactly what ``write`` of each record
writes: the same chunks, cut at the same records, reported the same, with the same
errors at the same record. Mixed with ``write``, ``write_many`` and cuts in any order."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recprep.containers import get_format
from recprep.containers import recordio as recordio_module
from recprep.containers.base import RecordWriter
from recprep.containers.recordio import encode_payload, frame_lengths
from recprep.errors import EncodeError

RECORDIO = [(name, compressor) for name in ("recordio", "recordio-legacy")
            for compressor in get_format(name).compressors]


def laid_out(records: list[bytes], gap: int = 0) -> tuple[np.ndarray, np.ndarray,
                                                          np.ndarray]:
    """``records`` framed back to back in one buffer (with ``gap`` stray bytes before
    them, which no writer may take): buffer, starts, lengths."""
    lengths = np.array([len(r) for r in records], np.int64)
    buffer = np.frombuffer(b"\xee" * gap + encode_payload(records), np.uint8).copy()
    starts = gap + np.cumsum(lengths + 4) - lengths
    return buffer, starts, lengths


def each_written(fmt: str, compressor: str, chunk_bytes: int, steps) -> tuple[bytes, list]:
    """``steps`` written record by record (a cut is None)."""
    buf = io.BytesIO()
    writer = get_format(fmt).writer(buf, compressor, chunk_bytes)
    for _, records in steps:
        if records is None:
            writer.cut()
        for r in records or ():
            writer.write(r)
    writer.close()
    return buf.getvalue(), list(writer.chunks), writer.num_records


def stepped(fmt: str, compressor: str, chunk_bytes: int, steps) -> tuple[bytes, list]:
    """``steps`` written the way each says: ``framed`` (from a buffer with stray bytes
    around the run), ``many`` or ``one`` by one."""
    buf = io.BytesIO()
    writer = get_format(fmt).writer(buf, compressor, chunk_bytes)
    for how, records in steps:
        if records is None:
            writer.cut()
        elif how == "framed":
            buffer, starts, lengths = laid_out(records + [b"tail"], gap=3)
            writer.write_framed(buffer, starts[:-1], lengths[:-1])
        elif how == "many":
            writer.write_many(records)
        else:
            for r in records:
                writer.write(r)
    writer.close()
    return buf.getvalue(), list(writer.chunks), writer.num_records


_records = st.lists(st.binary(max_size=40) | st.sampled_from([b"", b"x" * 300]), max_size=30)
_steps = st.lists(st.tuples(st.sampled_from(["framed", "many", "one"]),
                            _records | st.none()), max_size=8)


@settings(max_examples=300, deadline=None)
@given(form=st.sampled_from(RECORDIO), chunk_bytes=st.sampled_from([1, 5, 37, 100, 1 << 20]),
       steps=_steps)
def test_framed_runs_write_what_each_record_written_writes(form, chunk_bytes, steps):
    expected = each_written(*form, chunk_bytes, steps)
    assert stepped(*form, chunk_bytes, steps) == expected


def test_frame_lengths_makes_the_payload_of_laid_records():
    records = [b"", b"abc", bytes(range(256)) * 3, b"z"]
    lengths = np.array(list(map(len, records)))
    starts = np.cumsum(lengths + 4) - lengths
    buffer = np.zeros(int(lengths.sum()) + 4 * len(records), np.uint8)
    for start, record in zip(starts.tolist(), records, strict=True):
        buffer[start : start + len(record)] = np.frombuffer(record, np.uint8)
    get_format("recordio").frame_records(buffer, starts, lengths)
    assert buffer.tobytes() == encode_payload(records)
    frame_lengths(buffer, starts[:0], lengths[:0])  # nothing laid: nothing written
    assert buffer.tobytes() == encode_payload(records)


def test_a_too_large_record_in_a_framed_run_raises_at_its_position(monkeypatch):
    monkeypatch.setattr(recordio_module, "MAX_PAYLOAD", 64)  # records up to 60 bytes
    records = [b"a" * 10, b"b" * 60, b"c" * 61, b"d"]
    writer = get_format("recordio").writer(io.BytesIO(), "none", 16)
    with pytest.raises(EncodeError, match="a record of 61 bytes is too large") as caught:
        writer.write_framed(*laid_out(records))
    assert caught.value.position == 2
    assert writer.num_records == 2  # those before it were taken, as write_many takes them


def test_the_default_write_framed_cuts_each_record_out():
    class Listed(RecordWriter):
        def __init__(self):
            self.got = []

        def write(self, record):
            self.got.append(record)

        def close(self):
            pass

    writer = Listed()
    records = [b"ab", b"", b"cde"]
    buffer, starts, lengths = laid_out(records, gap=5)
    writer.write_framed(buffer, starts, lengths)
    assert writer.got == records and all(type(r) is bytes for r in writer.got)
