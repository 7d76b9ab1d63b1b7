"""Record numbers are proven, never assumed: forged indexes, skipped damage and lying
chunk headers never hand out an instance under another number (issue 22, items 1, 2, 4).

Every set here holds the instances ``0 .. N - 1`` written by ``convert`` round-robin, so
an instance's value *is* its number: instance ``v`` lives in shard ``v % S`` at position
``v // S``. Whatever is forged or damaged, every reading API must give each instance at
its own number or not at all (an error, or with ``on_corrupt="skip"`` a counted loss).
The fuzz targets run ``RECPREP_FUZZ_EXAMPLES`` examples (a few here by default).
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import uuid
import warnings
from collections.abc import Iterable
from typing import Any

import fsspec
import google_crc32c
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recprep import RecordIO, convert
from recprep.errors import (
    CorruptDataError,
    CorruptDataWarning,
    RecordRangeError,
    RecordsLostError,
)
from recprep.storage.chunkindex import chunks_name

pytestmark = pytest.mark.filterwarnings("ignore::recprep.errors.CorruptDataWarning")

N, SHARDS = 600, 3
EXAMPLES = max(int(os.environ.get("RECPREP_FUZZ_EXAMPLES", "1000")) // 20, 25)
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=os.environ.get("RECPREP_FUZZ_RANDOM") is None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    database=None,
)
MEM = fsspec.filesystem("memory")


def _write(fmt: str = "recordio", compressor: str = "none") -> dict[str, bytes]:
    """A set of ``0 .. N-1`` (small chunks), as ``{file name: bytes}``."""
    where = f"/trust-src-{uuid.uuid4().hex}"
    convert(f"memory://{where}", list(range(N)), SHARDS, "s", format=fmt,
            compressor=compressor, chunk_bytes=160)
    files = {p.rsplit("/", 1)[1]: MEM.cat_file(p) for p in MEM.find(where, withdirs=False)}
    MEM.rm(where, recursive=True)
    return files


SETS = {("recordio", "none"): _write(), ("recordio", "snappy"): _write(compressor="snappy"),
        ("tfrecord", "none"): _write("tfrecord")}


def _place(files: dict[str, bytes]) -> str:
    where = f"/trust-{uuid.uuid4().hex}"
    for name, data in files.items():
        MEM.pipe(f"{where}/{name}", data)
    return f"memory://{where}"


@pytest.fixture
def place():
    made: list[str] = []

    def _do(files: dict[str, bytes]) -> str:
        made.append(_place(files))
        return made[-1]

    yield _do
    for url in made:
        MEM.rm(url[len("memory://"):], recursive=True)


def shard(k: int) -> str:
    return f"s-{k:05d}-of-{SHARDS - 1:05d}"


def headers(data: bytes) -> list[tuple[int, int, int]]:
    """A Go RecordIO file's chunks: (offset, stored size, record count)."""
    out, pos = [], 0
    while pos + 20 <= len(data):
        _, _, _, size, count = struct.unpack_from("<5I", data, pos)
        out.append((pos, size, count))
        pos += 20 + size
    return out


# -- what a reading may give -------------------------------------------------------------


def in_place(values: list[int], shard_k: int | None = None, start: int = 0,
             end: int | None = None) -> None:
    """``values`` strictly increasing, each of ``shard_k`` at positions ``start:end``."""
    assert all(isinstance(v, int) and 0 <= v < N for v in values), values
    assert values == sorted(set(values)), values
    if shard_k is not None:
        for v in values:
            assert v % SHARDS == shard_k and start <= v // SHARDS < (end or N), (v, start, end)


def check_all(url: str, on_corrupt: str) -> None:
    """Every reading API of ``url``: right instances, or a recprep error (raise) / a
    counted loss (skip); never an instance under another number, never twice."""
    def attempt(fn):
        try:
            return fn()
        except RecordRangeError:  # a range past what the file's headers count
            return None
        except CorruptDataError as err:  # skipping reads around damage: raises only
            if on_corrupt == "skip" and not isinstance(err, RecordsLostError):
                raise  # when it can't count what it lost (a dataset's order)
            return None

    reader = RecordIO(url + "/s", on_corrupt=on_corrupt)
    got = attempt(lambda: list(reader()))
    if got is not None:
        in_place(got)
        if on_corrupt == "raise":
            assert got == list(range(N))
    batched = attempt(lambda: [int(v) for b in reader.batches(7) for v in b.tolist()])
    if got is not None and batched is not None:
        assert batched == got
    for k in range(SHARDS):
        for a, b in ((0, 200), (37, 121), (150, 200)):
            part = attempt(lambda k=k, a=a, b=b: list(reader.read_range(reader.paths[k], a, b)))
            if part is not None:
                in_place(part, k, a, b)
                if on_corrupt == "raise":
                    assert part == [p * SHARDS + k for p in range(a, b)]
    tasks = attempt(lambda: [v for t in reader.tasks(45) for v in reader.read_range(*t)])
    if tasks is not None:
        assert len(tasks) == len(set(tasks)) and all(0 <= v < N for v in tasks)
    ds = attempt(lambda: reader.dataset())
    if ds is not None:
        check_one_by_one(ds, (0, 1, 95, 96, 97, 250, 301, 450, N - 1), on_corrupt)
        try:
            assert ds[list(range(90, 110))] == list(range(90, 110))
        except CorruptDataError:
            pass
        check_one_by_one(ds, range(90, 110), on_corrupt)  # from the chunks the batch cached
    shuffled = attempt(lambda: list(RecordIO(url + "/s", on_corrupt=on_corrupt, shuffle=True,
                                             seed=3, shuffle_buffer=50)()))
    if shuffled is not None:
        assert len(shuffled) == len(set(shuffled)) and set(shuffled) <= set(range(N))
    check_resume(url, on_corrupt, got)


def check_one_by_one(ds: Any, indexes: Iterable[int], on_corrupt: str) -> None:
    """``ds[i]`` is ``i`` for each of ``indexes``, or a loss counted (skip) / damage
    raised (raise)."""
    for i in indexes:
        try:
            assert ds[i] == i
        except RecordsLostError:
            assert on_corrupt == "skip"
        except CorruptDataError:
            assert on_corrupt == "raise"


def check_resume(url: str, on_corrupt: str, whole: list[int] | None) -> None:
    """A pass stopped anywhere and resumed gives the uninterrupted pass's instances (or,
    with ``on_corrupt="raise"``, an error)."""
    if whole is None:
        return
    for shuffle in (False, True):
        options = {"on_corrupt": on_corrupt, "shuffle": shuffle, "seed": 5, "shuffle_buffer": 40}
        try:
            full = list(RecordIO(url + "/s", **options)())
            for stop in (1, len(full) // 3, len(full) - 1):
                first = RecordIO(url + "/s", **options)
                stream = first()
                head = [next(stream) for _ in range(min(stop, len(full)))]
                again = RecordIO(url + "/s", **options)
                again.load_state_dict(first.state_dict())
                assert head + list(again()) == full, (shuffle, stop)
        except CorruptDataError:
            assert on_corrupt == "raise"


# -- 1: a forged chunk index ---------------------------------------------------------------


def forge_chunks(files: dict[str, bytes], edit) -> dict[str, bytes]:
    """The set with its ``.s.chunks`` side file edited and re-sealed (a CRC of its own)."""
    name = chunks_name("s")
    text = files[name].rstrip(b"\n").rpartition(b"\n")[0]
    doc = json.loads(text)
    edit(doc)
    data = json.dumps(doc, separators=(",", ":")).encode()
    return {**files, name: data + b"\n" + b"%08x\n" % google_crc32c.value(data)}


def shift_one_chunk(doc) -> None:
    entry = doc["shards"][0]
    offsets = np.cumsum(entry["offsets"]).tolist()
    offsets = offsets[1:] + [offsets[-1] + 21]
    entry["offsets"] = np.diff(offsets, prepend=0).tolist()


def test_a_side_file_shifted_by_one_chunk_is_refused(place):
    url = place(forge_chunks(SETS["recordio", "none"], shift_one_chunk))
    reader = RecordIO(url + "/s")
    with pytest.raises(CorruptDataError, match="not the file the manifest vouches for"):
        list(reader.read_range(reader.paths[0], 0, 5))
    with pytest.raises(CorruptDataError, match="vouches for"):
        RecordIO(url + "/s").dataset()[0]
    with pytest.warns(CorruptDataWarning, match="indexing the shards from their chunk headers"):
        skipping = RecordIO(url + "/s", on_corrupt="skip")
        assert list(skipping.read_range(skipping.paths[0], 0, 5)) == [0, 3, 6, 9, 12]
        assert skipping.dataset()[0] == 0


def test_verify_reports_a_side_file_that_is_not_the_one_vouched_for(place):
    from recprep.tools import verify

    url = place(forge_chunks(SETS["recordio", "none"], shift_one_chunk))
    report = verify(url + "/s")
    assert not report.ok
    assert [(p.kind, p.path.rsplit("/", 1)[1]) for p in report.problems] == [
        ("side", ".s.chunks")]
    assert "not the file the manifest vouches for" in str(report.problems[0])
    assert verify(place(SETS["recordio", "none"]) + "/s").ok


def test_a_side_file_the_manifest_does_not_vouch_for_is_not_used(place):
    """A set written before side files were vouched for (or a side file planted beside
    one): indexed from its chunk headers, right."""
    files = forge_chunks(SETS["recordio", "none"], shift_one_chunk)
    manifest = json.loads(files["s.manifest.json"])
    del manifest["side_files"]
    url = place({**files, "s.manifest.json": json.dumps(manifest).encode()})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reader = RecordIO(url + "/s")
        assert list(reader.read_range(reader.paths[0], 0, 5)) == [0, 3, 6, 9, 12]
        assert reader.dataset()[[0, 1, 2, 599]] == [0, 1, 2, 599]


def test_the_manifest_vouches_for_each_side_file():
    manifest = json.loads(SETS["recordio", "none"]["s.manifest.json"])
    assert [f["name"] for f in manifest["side_files"]] == [".s.chunks"]
    side = SETS["recordio", "none"][".s.chunks"]
    assert manifest["side_files"][0] == {
        "name": ".s.chunks", "bytes": len(side), "sha256": hashlib.sha256(side).hexdigest()}
    tf = json.loads(SETS["tfrecord", "none"]["s.manifest.json"])
    assert sorted(f["name"] for f in tf["side_files"]) == [
        f".{shard(k)}.tfindex" for k in range(SHARDS)]


@given(st.data())
@FUZZ
def test_fuzz_forged_chunk_indexes(place, data):
    """Any rewrite of the side file, re-sealed: right instances or an error."""
    def edit(doc):
        entry = doc["shards"][data.draw(st.integers(0, SHARDS - 1))]
        key = data.draw(st.sampled_from(["offsets", "counts"]))
        values = entry[key]
        i = data.draw(st.integers(0, len(values) - 1))
        values[i] = data.draw(st.integers(-3, 400))
        if data.draw(st.booleans()):
            j = data.draw(st.integers(0, len(values) - 1))
            values[j] -= values[i] - entry[key][i] if j != i else 0
    files = forge_chunks(SETS["recordio", "none"], edit)
    if data.draw(st.booleans()):  # the manifest rewritten to vouch for the forgery
        manifest = json.loads(files["s.manifest.json"])
        side = files[chunks_name("s")]
        manifest["side_files"] = [{"name": ".s.chunks", "bytes": len(side),
                                   "sha256": hashlib.sha256(side).hexdigest()}]
        files["s.manifest.json"] = json.dumps(manifest).encode()
    url = place(files)
    check_all(url, data.draw(st.sampled_from(["raise", "skip"])))


# -- 2: skipped damage never shifts, duplicates or relabels ---------------------------------


def damaged(files: dict[str, bytes], k: int, how: str, at: float, size: int) -> dict[str, bytes]:
    data = bytearray(files[shard(k)])
    if not data:
        return files
    pos = min(int(at * len(data)), len(data) - 1)
    if how == "insert":
        data[pos:pos] = b"\xa5" * size
    elif how == "delete":
        del data[pos:pos + size]
    elif how == "flip":
        for j in range(pos, min(pos + size, len(data))):
            data[j] ^= 0x5A
    elif how == "truncate":
        del data[pos:]
    return {**files, shard(k): bytes(data)}


@pytest.mark.parametrize("how", ["insert", "delete", "flip", "truncate"])
def test_skip_keeps_every_instance_at_its_number(place, how):
    url = place(damaged(SETS["recordio", "none"], 0, how, 0.4, 3))
    reader = RecordIO(url + "/s", on_corrupt="skip")
    got = list(reader())
    in_place(got)
    assert 0 < N - len(got) <= 200, len(got)
    assert reader.skipped.events >= 1
    part = list(reader.read_range(reader.paths[0], 100, 120))
    in_place(part, 0, 100, 120)
    ds = reader.dataset()
    for i in range(280, 320):
        try:
            assert ds[i] == i
        except RecordsLostError as err:
            assert i not in got and "lost to damage" in str(err)
    shuffled = list(RecordIO(url + "/s", on_corrupt="skip", shuffle=True, seed=1,
                             shuffle_buffer=50)())
    assert sorted(shuffled) == got  # the same instances lost, none twice
    check_all(url, "skip")


def test_an_inserted_byte_loses_only_the_chunk_it_is_in(place):
    files = SETS["recordio", "none"]
    chunks = headers(files[shard(1)])
    offset, size, count = chunks[3]
    data = files[shard(1)]
    data = data[:offset + 30] + b"X" + data[offset + 30:]
    url = place({**files, shard(1): data})
    got = list(RecordIO(url + "/s", on_corrupt="skip")())
    lost = sorted(set(range(N)) - set(got))
    first = sum(c for _, _, c in chunks[:3])
    assert lost == [(first + j) * SHARDS + 1 for j in range(count)]


@given(st.data())
@FUZZ
def test_fuzz_skipped_damage_keeps_numbers(place, data):
    key = data.draw(st.sampled_from(sorted(SETS)))
    files = SETS[key]
    for _ in range(data.draw(st.integers(1, 3))):
        files = damaged(files, data.draw(st.integers(0, SHARDS - 1)),
                        data.draw(st.sampled_from(["insert", "delete", "flip", "truncate"])),
                        data.draw(st.floats(0, 1)), data.draw(st.integers(1, 60)))
    if data.draw(st.booleans()):
        files = {n: b for n, b in files.items() if not n.startswith(".")}
    check_all(place(files), data.draw(st.sampled_from(["raise", "skip"])))


# -- 4: chunk header counts nothing vouches for -----------------------------------------------


def no_manifest(files: dict[str, bytes]) -> dict[str, bytes]:
    return {n: b for n, b in files.items() if n.startswith("s-")}


def with_count(files: dict[str, bytes], k: int, chunk: int, count: int) -> dict[str, bytes]:
    data = bytearray(files[shard(k)])
    offset, _, _ = headers(bytes(data))[chunk]
    struct.pack_into("<I", data, offset + 16, count)
    return {**files, shard(k): bytes(data)}


def test_a_zeroed_chunk_count_without_a_manifest_raises(place):
    url = place(with_count(no_manifest(SETS["recordio", "none"]), 0, 1, 0))
    reader = RecordIO(url + "/s-*")
    with pytest.raises(CorruptDataError, match="records"):
        reader.dataset()
    with pytest.raises(CorruptDataError):
        list(reader())
    single = RecordIO(url + "/" + shard(0))
    ds = single.dataset()
    assert ds[3] == 9
    with pytest.raises(CorruptDataError, match="record count is wrong|records"):
        ds[len(ds) - 1]
    check_all(url, "skip")


@given(st.data())
@FUZZ
def test_fuzz_lying_chunk_counts(place, data):
    files = no_manifest(SETS["recordio", "none"]) if data.draw(st.booleans()) else (
        SETS["recordio", "none"])
    k = data.draw(st.integers(0, SHARDS - 1))
    chunk = data.draw(st.integers(0, len(headers(files[shard(k)])) - 1))
    url = place(with_count(files, k, chunk, data.draw(st.integers(0, 40))))
    check_all(url, data.draw(st.sampled_from(["raise", "skip"])))
