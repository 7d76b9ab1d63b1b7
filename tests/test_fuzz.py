"""Fuzzing the readers and codecs with mutations of valid data (hypothesis).

Every container reader (RecordIO, the pyrecordio 0.0.4 variant, TFRecord, each
compression) and every codec gets valid data with bit flips, truncation, inserted and
deleted bytes, huge length fields and wrong compressor ids. Only ``RecprepError``
subclasses may escape, nothing may hang (a deadline per example) and no chunk may grow
past ``max_chunk_bytes``.

CI runs ``RECPREP_FUZZ_EXAMPLES`` (default 1000) examples per target, about a minute in
all; ``make fuzz`` runs many more. Inputs that once crashed a reader are kept in
``tests/data/crashers/`` and replayed here.
"""

from __future__ import annotations

import io
import os
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recprep import RecprepError, get_codec
from recprep.containers import detect_format, get_format

EXAMPLES = int(os.environ.get("RECPREP_FUZZ_EXAMPLES", "1000"))
LIMIT = 1 << 20
CRASHERS = Path(__file__).parent / "data" / "crashers"
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=2000,
    derandomize=os.environ.get("RECPREP_FUZZ_RANDOM") is None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)

RECORDS = [b"", b"a", b"hello world" * 20, bytes(range(256)), b"\0" * 3000]


def container_file(fmt: str, compressor: str) -> bytes:
    buf = io.BytesIO()
    writer = get_format(fmt).writer(buf, compressor, 512)
    for record in RECORDS * 3:
        writer.write(record)
    writer.close()
    return buf.getvalue()


def _formats() -> list[tuple[str, str]]:
    found = []
    for fmt in ("recordio", "recordio-legacy", "tfrecord"):
        try:
            container = get_format(fmt)
        except RecprepError:
            continue
        found += [(fmt, c) for c in container.compressors]
    return found


FORMATS = _formats()
VALID = {key: container_file(*key) for key in FORMATS}


@st.composite
def mutations(draw, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "delete", "huge", "small"]))
        at = draw(st.integers(0, max(0, len(out) - 1)))
        if kind == "flip" and out:
            out[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "cut":
            del out[at:]
        elif kind == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "delete":
            del out[at : at + draw(st.integers(1, 16))]
        elif kind in ("huge", "small") and len(out) >= at + 4:
            value = 0xFFFFFFF0 if kind == "huge" else draw(st.integers(0, 8))
            out[at : at + 4] = struct.pack("<I", value)  # a length, count or id field
    return bytes(out)


def read_everything(data: bytes, fmt: str | None, on_corrupt: str = "raise") -> int:
    container = get_format(fmt) if fmt else detect_format(data[:64])
    if container is None:
        return 0
    chunks = container.read_chunks(
        io.BytesIO(data), path="fuzzed", max_chunk_bytes=LIMIT, on_corrupt=on_corrupt
    )
    count = 0
    for chunk in chunks:
        assert sum(len(r) for r in chunk.records) <= LIMIT
        count += len(chunk.records)
    return count


@pytest.mark.parametrize("fmt,compressor", FORMATS)
@pytest.mark.parametrize("on_corrupt", ["raise", "skip"])
def test_containers_survive_mutations(fmt, compressor, on_corrupt):
    @FUZZ
    @given(mutations(VALID[(fmt, compressor)]))
    def check(data: bytes) -> None:
        try:
            read_everything(data, fmt, on_corrupt)
        except RecprepError:
            pass

    check()


@pytest.mark.parametrize("fmt,compressor", FORMATS)
def test_detection_survives_mutations(fmt, compressor):
    @FUZZ
    @given(mutations(VALID[(fmt, compressor)]))
    def check(data: bytes) -> None:
        try:
            read_everything(data, None)
        except RecprepError:
            pass

    check()


def codec_records() -> dict[str, list[bytes]]:
    values = [
        (1, 2.5, "x", b"y", None, True),
        {"a": [1, 2, {"b": (3.0, -4)}], "c": np.arange(6, dtype=">i2").reshape(2, 3)},
        np.zeros((3, 2), dtype="<M8[ms]"),
        [np.float32(1.5), np.int8(-3), 2**80, complex(1, 2)],
        {frozenset([1]): 1},  # the pickle fallback
    ]
    records = {"recprep": [get_codec("recprep").encode(v) for v in values]}
    records["pickle"] = [get_codec("pickle").encode(v) for v in values]
    records["raw"] = [b"raw bytes", b""]
    try:
        example = get_codec("example")
        records["example"] = [
            example.encode({"f": np.arange(5, dtype=np.float32), "i": np.arange(3),
                            "s": [b"ab", b"c"]}),
        ]
    except RecprepError:
        pass
    return records


CODEC_RECORDS = codec_records()


@pytest.mark.parametrize("codec", sorted(CODEC_RECORDS))
def test_codecs_survive_mutations(codec):
    decode = get_codec(codec).decode

    @FUZZ
    @given(st.sampled_from(CODEC_RECORDS[codec]).flatmap(mutations))
    def check(record: bytes) -> None:
        try:
            decode(record)  # allow_pickle stays off: nothing may run
        except RecprepError:
            pass

    check()


@pytest.mark.parametrize("codec", sorted(CODEC_RECORDS))
def test_codecs_survive_random_bytes(codec):
    decode = get_codec(codec).decode

    @FUZZ
    @given(st.binary(max_size=200))
    def check(record: bytes) -> None:
        try:
            decode(record)
        except RecprepError:
            pass

    check()


@pytest.mark.parametrize(
    "path", sorted(CRASHERS.glob("*.bin")) if CRASHERS.exists() else [], ids=lambda p: p.name
)
def test_known_crashers(path):
    """Inputs that once made a reader fail badly; each must now be a clear error or data."""
    fmt, _, _ = path.name.partition("--")
    data = path.read_bytes()
    try:
        if fmt in CODEC_RECORDS:
            get_codec(fmt).decode(data)
        else:
            read_everything(data, None if fmt == "detect" else fmt)
    except RecprepError:
        pass
