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

import collections
import datetime
import decimal
import fractions
import io
import os
import struct
import uuid
import zoneinfo
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recprep import RecprepError, get_codec
from recprep.containers import detect_format, get_format

# skip mode warns for each skip: thousands of them here, all expected
pytestmark = pytest.mark.filterwarnings("ignore::recprep.errors.CorruptDataWarning")

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
        {range(1): 1},  # the pickle fallback
        [datetime.datetime(2020, 1, 2, 3, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")),
         datetime.time(1, tzinfo=datetime.timezone(datetime.timedelta(hours=2), "X")),
         datetime.date(2020, 1, 2), datetime.timedelta(-1, 5, 7)],
        (decimal.Decimal("-1.50E+3"), uuid.UUID(int=7), fractions.Fraction(-3, 7)),
        {frozenset({1, "a"}): {b"x", (2.5, None)}},
        collections.namedtuple("Fuzzed", "x y")(1, [np.array(["ab"], "<U2"), np.longdouble(1)]),
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
@pytest.mark.filterwarnings("ignore::recprep.errors.RecprepWarning")  # named tuples, mutated
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


# -- files recprep trusts less than it used to: manifests and TFRecord side indexes -----------


def _manifest_bytes() -> bytes:
    from recprep.storage.manifest import Manifest, ShardInfo

    shards = [ShardInfo(f"p-{i:05d}-of-00002", 5, 100 + i, 0x1234ABCD) for i in range(3)]
    schema = {"features": [{"name": "x", "dtype": "int64", "shape": [2, None]}]}
    return Manifest("p", "recordio", "example", "snappy", shards, schema).to_json()


MANIFEST = _manifest_bytes()
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=20,
)


@st.composite
def manifest_mutations(draw) -> bytes:
    """Byte mutations of a valid manifest, or one of its fields (at any depth) replaced by
    any JSON value."""
    import json

    if draw(st.booleans()):
        return draw(mutations(MANIFEST))
    doc = json.loads(MANIFEST)
    target = doc
    while True:
        keys = list(target) if isinstance(target, dict) else list(range(len(target)))
        if not keys:
            break
        key = draw(st.sampled_from(keys))
        child = target[key]
        if isinstance(child, (dict, list)) and child and draw(st.booleans()):
            target = child
            continue
        target[key] = draw(JSON_VALUES)
        break
    return json.dumps(doc).encode()


def test_manifests_survive_mutations():
    from recprep.codecs import get_codec
    from recprep.codecs.schema import codec_with_schema
    from recprep.storage.manifest import Manifest

    @FUZZ
    @given(manifest_mutations())
    def check(data: bytes) -> None:
        try:
            manifest = Manifest.from_json(data, path="fuzzed.manifest.json")
        except RecprepError:
            return
        assert Manifest.from_json(manifest.to_json()) == manifest  # what passes is sound
        try:
            codec_with_schema(get_codec("example"), manifest.schema, "fuzzed.manifest.json")
        except RecprepError:
            pass

    check()


TF_RECORDS = [b"", b"a", b"hello world" * 20, bytes(range(256)), b"\0" * 300] * 2


def test_side_indexes_survive_mutations():
    """A mutated ``.tfindex`` (its CRC recomputed, so that the mutation gets past it) gives
    the right records or a recprep error, never other records."""
    import fsspec
    import google_crc32c

    from recprep.containers.tfrecord_index import index_path
    from recprep.storage.sideindex import build_side_index, read_records

    fs = fsspec.filesystem("memory")
    path = "/fuzz-tfindex/p.tfrecord"
    buf = io.BytesIO()
    writer = get_format("tfrecord").writer(buf, "none", 512)
    for record in TF_RECORDS:
        writer.write(record)
    writer.close()
    fs.pipe(path, buf.getvalue())
    build_side_index(fs, path)
    valid = fs.cat_file(index_path(path))

    @FUZZ
    @given(mutations(valid), st.booleans(), st.integers(0, len(TF_RECORDS)),
           st.integers(0, len(TF_RECORDS)))
    def check(data: bytes, fix_crc: bool, start: int, end: int) -> None:
        if fix_crc and len(data) >= 4:
            data = data[:-4] + struct.pack("<I", google_crc32c.value(data[:-4]))
        fs.pipe(index_path(path), data)
        start, end = min(start, end), max(start, end)
        try:
            got = read_records(fs, path, start, end)
        except RecprepError:
            return
        assert got == TF_RECORDS[start:end]

    check()


def test_staging_side_files_survive_mutations():
    """A mutated task record (``done-*.json``) or options file of a staging directory —
    what an attacker with write access to the output directory could plant — is refused
    with a recprep error or, if the mutation left its content as it was, read as it was:
    never a path outside the staging area, never other facts."""
    import fsspec
    import google_crc32c

    from recprep.storage.staging import FileFacts, Staging

    fs = fsspec.filesystem("memory")
    staging = Staging(fs, "/fuzz-staging/out", "p")
    staging.create(keep=False)
    fs.pipe(staging.file("stream-1"), b"abc")
    facts = FileFacts(staging.file("stream-1"), 1, 3, google_crc32c.value(b"abc"))
    staging.record("stream", [facts], ["note"], {"mod.T": 2})
    record = staging.file("done-stream.json")
    valid = fs.cat_file(record)
    expected = ([facts], ["note"], {"mod.T": 2})
    assert staging.recorded("stream") == expected

    @FUZZ
    @given(mutations(valid))
    def check(data: bytes) -> None:
        fs.pipe(record, data)
        try:
            got = staging.recorded("stream")
        except RecprepError:
            return
        assert got is None or got == expected

    check()
