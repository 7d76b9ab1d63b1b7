"""The chunk index side file of RecordIO sets (issue 16 item 4): written at commit, read
instead of chunk headers, distrusted when it doesn't match (issue 16, ``.{prefix}.chunks``)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import google_crc32c
import pytest

import recprep.read.sources as sources_module
from recprep import RecordIO, convert
from recprep.errors import CorruptDataError, CorruptDataWarning
from recprep.storage.chunkindex import chunks_name

from ..support import SUPPORT

ROOT = Path(__file__).parents[2]
JOB = SUPPORT / "kill_job.py"


def instances(n: int, tag: str = "") -> list[tuple[int, str]]:
    return [(i, f"{tag}{i}" + "x" * (i % 37)) for i in range(n)]  # uneven chunk counts


@pytest.fixture
def header_reads(monkeypatch) -> list[str]:
    """Every chunk index built from headers (by path)."""
    built: list[str] = []
    original = sources_module.build_index

    def counting(*args, **kwargs):
        built.append(kwargs["path"])
        return original(*args, **kwargs)

    monkeypatch.setattr(sources_module, "build_index", counting)
    return built


def write(out: Path, n: int = 600, shards: int = 3, tag: str = "") -> list[tuple[int, str]]:
    data = instances(n, tag)
    convert(str(out), data, shards, "s", chunk_bytes=256, progress=False)
    return data


def resign(body: dict) -> bytes:
    text = json.dumps(body, separators=(",", ":")).encode()
    return text + b"\n" + b"%08x\n" % google_crc32c.value(text)


def body_of(out: Path) -> dict:
    text = (out / chunks_name("s")).read_bytes().rstrip(b"\n").rpartition(b"\n")[0]
    return json.loads(text)


def test_commit_writes_one_side_file_with_every_shards_chunks(tmp_path, header_reads):
    write(tmp_path)
    body = body_of(tmp_path)
    manifest = json.loads((tmp_path / "s.manifest.json").read_text())
    assert [s["name"] for s in body["shards"]] == [s["name"] for s in manifest["shards"]]
    for entry, shard in zip(body["shards"], manifest["shards"], strict=True):
        assert sum(entry["counts"]) == shard["records"] and len(entry["counts"]) > 3
    # the side file's offsets are the ones hopping the headers finds
    reader = RecordIO(str(tmp_path / "s-*"))
    side = [reader._sources.index(n) for n in range(3)]
    assert header_reads == []
    for n, index in enumerate(side):
        with open(reader._sources.files[n].path, "rb") as f:
            from recprep.containers import get_format
            from recprep.containers.fileindex import build_index

            built = build_index(f, get_format("recordio"), path="x")
        assert built.offsets.tolist() == index.offsets.tolist()
        assert built.firsts.tolist() == index.firsts.tolist()


def test_opening_2000_shards_reads_no_chunk_header(tmp_path, header_reads):
    data = instances(4000)
    convert(str(tmp_path), data, 2000, "s", progress=False)
    reader = RecordIO(str(tmp_path))
    assert len(reader) == 4000
    assert sum(t.end - t.start for t in reader.tasks(3)) == 4000
    ds = reader.dataset()
    assert len(ds) == 4000
    assert [ds[i] for i in (0, 1, 1999, 3998, 3999)] == [data[i] for i in (0, 1, 1999, 3998,
                                                                         3999)]
    (got,) = reader.read_range(reader.paths[1500], 1, 2)
    assert got == data[got[0]]
    assert header_reads == []


def test_a_set_without_side_file_still_reads_from_headers(tmp_path, header_reads):
    data = write(tmp_path)
    (tmp_path / chunks_name("s")).unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CorruptDataWarning)  # missing: silent
        assert RecordIO(str(tmp_path)).dataset()[599] == data[599]
    assert len(header_reads) == 1


@pytest.mark.parametrize("damage", ["flip", "cut", "garbage", "empty", "past-end",
                                    "count-sum", "not-increasing", "other-set"])
def test_a_bad_side_file_is_refused_or_with_skip_left_aside(tmp_path, header_reads, damage):
    """A side file that is not the one the manifest vouches for (issue 22 item 1) is an
    error; with ``on_corrupt="skip"`` a warning, and the shards indexed from headers."""
    data = write(tmp_path)
    side = tmp_path / chunks_name("s")
    raw = side.read_bytes()
    body = body_of(tmp_path)
    entry = body["shards"][1]
    if damage == "flip":  # a digit changed: the CRC catches it
        at = raw.index(b'"counts":[') + 10
        side.write_bytes(raw[:at] + bytes([raw[at] ^ 1]) + raw[at + 1:])
    elif damage == "cut":
        side.write_bytes(raw[: len(raw) // 2])
    elif damage == "garbage":
        side.write_bytes(os.urandom(300))
    elif damage == "empty":
        side.write_bytes(b"")
    elif damage == "past-end":
        entry["offsets"][-1] += 10**6
        side.write_bytes(resign(body))
    elif damage == "count-sum":
        entry["counts"][0] += 1
        side.write_bytes(resign(body))
    elif damage == "not-increasing":
        entry["offsets"][2] = 0
        side.write_bytes(resign(body))
    else:  # an earlier set of the same name: its shards' CRC-32C differ
        other = tmp_path / "other"
        write(other, tag="B")
        shutil.copy(other / chunks_name("s"), side)
    with pytest.raises(CorruptDataError, match="chunk index side file is not usable"):
        RecordIO(str(tmp_path), on_corrupt="raise").dataset()[0]
    assert not header_reads
    ds = RecordIO(str(tmp_path), on_corrupt="skip").dataset()
    with pytest.warns(CorruptDataWarning, match="chunk index side file"):
        got = [ds[i] for i in range(0, 600, 7)]
    assert got == data[::7]
    assert header_reads  # indexed from the headers instead


def test_a_side_file_that_disagrees_with_a_chunk_header_read_is_an_error(tmp_path):
    data = write(tmp_path)
    body = body_of(tmp_path)
    counts = body["shards"][0]["counts"]
    counts[0], counts[1] = counts[0] + 1, counts[1] - 1  # the sum still matches
    side = resign(body)
    (tmp_path / chunks_name("s")).write_bytes(side)
    with pytest.raises(CorruptDataError, match="manifest vouches for"):
        RecordIO(str(tmp_path)).dataset()[0]
    # a manifest rewritten to vouch for it too: each chunk read is still checked
    manifest = json.loads((tmp_path / "s.manifest.json").read_text())
    manifest["side_files"] = [{"name": chunks_name("s"), "bytes": len(side),
                               "sha256": hashlib.sha256(side).hexdigest()}]
    (tmp_path / "s.manifest.json").write_text(json.dumps(manifest))
    ds = RecordIO(str(tmp_path)).dataset()
    for p in range(counts[0] + counts[1]):  # the two chunks of shard 0 that are wrong
        with pytest.raises(CorruptDataError, match="its index says"):
            ds[3 * p]  # the global order: instance i is in shard i % 3, at i // 3
    assert [ds[i] for i in (1, 2, 598, 599)] == [data[i] for i in (1, 2, 598, 599)]


def job(out: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(JOB), str(out), "serial-parts", *args], capture_output=True,
        text=True, cwd=ROOT, timeout=120, env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize("moves", [5, 6])  # after the shards / after the side file too
def test_a_killed_commit_leaves_no_side_file_trusted_for_another_set(tmp_path, moves):
    out = tmp_path / "out"
    assert job(out, "--tag", "A", "--shards", "5").returncode == 0
    old_manifest = (out / "k.manifest.json").read_bytes()
    killed = job(out, "--tag", "B", "--shards", "5", "--overwrite",
                 env={"RECPREP_FAILPOINTS": f"commit.move={moves}"})
    assert killed.returncode == 137, killed.stderr
    assert not (out / "k.manifest.json").exists()  # uncommitted: no reader trusts it
    # even beside the old set's manifest put back, B's side file is not taken for A's
    (out / "k.manifest.json").write_bytes(old_manifest)
    if moves == 6:
        assert b'"name_prefix":"k"' in (out / chunks_name("k")).read_bytes()
    reader = RecordIO(str(out / "k-*"), on_corrupt="skip")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            got = [reader.dataset()[i] for i in range(0, 250, 11)]
        except CorruptDataError:
            got = None
    side = [w for w in caught if "chunk index side file" in str(w.message)]
    assert bool(side) == (moves == 6)
    if got is not None:  # whatever is read is B's shards, read by their own headers
        assert all(x[-1].startswith(("A", "B")) for x in got)
    (out / "k.manifest.json").unlink()
    resumed = job(out, "--tag", "B", "--shards", "5", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    ds = RecordIO(str(out)).dataset()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CorruptDataWarning)
        assert [ds[i][-1] for i in (0, 249)] == ["B0", "B249"]


@pytest.mark.parametrize("source", ["{src}", "{src}/s-*-of-*"])
def test_cp_copies_the_side_file_with_its_set(tmp_path, header_reads, source):
    from recprep.tools import copy

    src, dest = tmp_path / "src", tmp_path / "dest"
    data = write(src)
    write(dest, tag="old")  # a set of that name there before: replaced, side file too
    copy(source.format(src=src), str(dest), overwrite=True)
    assert (dest / chunks_name("s")).read_bytes() == (src / chunks_name("s")).read_bytes()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CorruptDataWarning)
        ds = RecordIO(str(dest)).dataset()
        assert [ds[i] for i in (0, 301, 599)] == [data[i] for i in (0, 301, 599)]
    assert header_reads == []
