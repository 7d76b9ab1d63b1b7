"""The ``recprep`` command and the tools behind it, on local and S3 (moto) data.

Every tool runs through the CLI as a subprocess (``python -m recprep``), as a user runs
it; the corner cases that need a failure injected run the library functions directly.
"""

from __future__ import annotations

import json
import os
import posixpath
import subprocess
import sys
from pathlib import Path

import fsspec
import numpy as np
import pytest

import recprep
from recprep import NotFoundError, RecordIO, WriteError, convert
from recprep.cli import available_commands, main
from recprep.containers.recordio import HEADER_SIZE, scan_index
from recprep.errors import CorruptDataWarning
from recprep.tools import copy, describe, list_datasets, verify
from recprep.tools.copy import TEMP_PREFIX

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

PREFIX = "train"
NUM_SHARDS = 3


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "recprep", *args],
        capture_output=True, text=True, env=env, timeout=120,
    )


def instances(n: int = 24) -> list[tuple[np.ndarray, int, str]]:
    rng = np.random.default_rng(7)
    return [(rng.standard_normal((2, i % 5)).astype(np.float32), i, f"t{i}") for i in range(n)]


def make_set(directory: Path, prefix: str = PREFIX, **kwargs) -> Path:
    """A small set with several chunks per shard (uncompressed, so bytes are easy to hit)."""
    kwargs = {"compressor": "none", "chunk_bytes": 120, **kwargs}
    convert(str(directory), instances(), NUM_SHARDS, prefix, **kwargs)
    return directory


def shard(directory: Path, index: int, prefix: str = PREFIX) -> Path:
    return directory / f"{prefix}-{index:05d}-of-{NUM_SHARDS - 1:05d}"


def chunk_offsets(path: Path) -> list[int]:
    with open(path, "rb") as f:
        return [c.offset for c in scan_index(f, path=str(path))]


def files_of(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


@pytest.fixture
def data(tmp_path) -> Path:
    return make_set(tmp_path / "data")


# -- the command itself ---------------------------------------------------------------


def test_version():
    done = run_cli("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"recprep {recprep.__version__}"


def test_top_level_help_lists_every_command():
    done = run_cli("--help")
    assert done.returncode == 0
    for name in available_commands():
        assert f"    {name} " in done.stdout
    assert "examples:" in done.stdout and "exit status" in done.stdout


@pytest.mark.parametrize("command", available_commands())
def test_command_help(command):
    done = run_cli(command, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: recprep {command} ")
    assert "examples:\n  recprep " + command in done.stdout
    assert "--storage-options JSON" in done.stdout


def test_usage_errors_exit_2(tmp_path):
    assert run_cli().returncode == 2
    done = run_cli("ls", str(tmp_path), "--storage-options", "{not json")
    assert done.returncode == 2 and "not valid JSON" in done.stderr
    assert main(["ls", str(tmp_path), "--storage-options", "[1]"]) == 2


def test_errors_are_one_line_unless_debug(tmp_path):
    missing = str(tmp_path / "nowhere")
    done = run_cli("ls", missing)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"recprep: error: {missing}: no such file, directory, glob match or shard set prefix; "
        "check the path; pass --storage-options JSON if the storage needs credentials or an "
        "endpoint"
    ]
    debug = run_cli("ls", missing, "--debug")
    assert debug.returncode == 2 and "Traceback (most recent call last)" in debug.stderr


# -- ls -----------------------------------------------------------------------------------


def test_ls_table_and_json(data):
    make_set(data, "other", compressor="gzip")
    done = run_cli("ls", str(data))
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.split() == [
        "SET", "SHARDS", "RECORDS", "SIZE", "FORMAT", "CODEC", "COMPRESSOR", "FROM",
    ]
    assert [r.split()[0] for r in rows] == [str(data / "other"), str(data / PREFIX)]
    assert rows[1].split()[1:3] == ["3", "24"]
    assert rows[1].split()[-4:] == ["recordio", "recprep", "none", "manifest"]
    listed = json.loads(run_cli("ls", str(data), "--json").stdout)
    manifest = json.loads((data / f"{PREFIX}.manifest.json").read_text())
    assert listed[1] == {
        "path": str(data / PREFIX), "prefix": PREFIX, "num_shards": 3, "shards_present": 3,
        "records": 24, "bytes": manifest["total_bytes"], "format": "recordio",
        "codec": "recprep", "compressor": "none", "source": "manifest", "notes": [],
        "set_shards": None, "complete": True,
    }
    assert listed[0]["compressor"] == "gzip"


def test_ls_without_manifest_reads_chunk_headers(data):
    (data / f"{PREFIX}.manifest.json").unlink()
    shard(data, 2).unlink()
    (listed,) = json.loads(run_cli("ls", str(data), "--json").stdout)
    want = sum(1 for i, _ in enumerate(instances()) if i % NUM_SHARDS != 2)
    assert (listed["records"], listed["codec"], listed["source"]) == (
        want, "unknown", "chunk headers",
    )
    assert (listed["format"], listed["compressor"]) == ("recordio", "none")
    assert (listed["shards_present"], listed["num_shards"], listed["complete"]) == (2, 3, False)
    table = run_cli("ls", str(data)).stdout
    assert table.splitlines()[1].split()[1:3] == ["2/3", str(want)]


def test_ls_of_a_set_whose_commit_was_interrupted_says_so(data):
    """Shards without their manifest beside a commit's journal (a copy or commit killed
    midway) are not a set: ``ls`` says so, as ``verify`` and readers do."""
    (data / f"{PREFIX}.manifest.json").unlink()
    (data / f".recprep-staging-{PREFIX}").mkdir()
    (data / f".recprep-staging-{PREFIX}" / "commit.json").write_text("{}")
    (listed,) = list_datasets(str(data))
    assert listed.notes[0].startswith("a commit into this set is in progress or was "
                                      f"interrupted ({data}/.recprep-staging-{PREFIX}/")
    table = run_cli("ls", str(data)).stdout
    assert "note: " in table and "commit.json is there, its manifest isn't" in table
    with pytest.raises(recprep.RecprepError, match="a commit into this set is in progress"):
        list(RecordIO(str(data / PREFIX))())


def test_ls_legacy_gzip_from_headers(tmp_path):
    convert(str(tmp_path), [b"a", b"bc"] * 5, 2, "leg", format="recordio-legacy",
            compressor="gzip", codec="raw")
    (tmp_path / "leg.manifest.json").unlink()
    (info,) = list_datasets(str(tmp_path))
    assert (info.format, info.compressor, info.records, info.codec) == (
        "recordio-legacy", "gzip", 10, "unknown",
    )


# -- head ---------------------------------------------------------------------------------


def test_head(data):
    done = run_cli("head", str(data / PREFIX), "-n", "3")
    assert done.returncode == 0, done.stderr
    want = instances()[:3]
    lines = done.stdout.splitlines()
    assert lines[0::4] == ["#0", "#1", "#2"]
    assert lines[1] == "  [0] ndarray float32 (2, 0) []"
    array = want[1][0]
    preview = ", ".join(f"{v:.4f}".rstrip("0") for v in array.reshape(-1)[:2])
    assert lines[5].startswith(f"  [0] ndarray float32 (2, 1) [{preview}")
    assert lines[6:8] == ["  [1] int 1", "  [2] str 't1'"]
    glob = run_cli("head", str(data / f"{PREFIX}-*-of-*"), "-n", "1")
    assert glob.stdout == "\n".join(lines[:4]) + "\n"


def test_head_refuses_pickle_unless_allowed(tmp_path):
    convert(str(tmp_path), [{"k": i} for i in range(4)], 2, "pk", codec="pickle")
    refused = run_cli("head", str(tmp_path / "pk"))
    assert refused.returncode == 2
    assert "pickled value" in refused.stderr and "--allow-pickle" in refused.stderr
    assert "Traceback" not in refused.stderr and refused.stdout == ""
    allowed = run_cli("head", str(tmp_path / "pk"), "--allow-pickle", "-n", "2")
    assert allowed.returncode == 0
    assert allowed.stdout.splitlines() == ["#0  {'k': int 0}", "#1  {'k': int 1}"]


def test_head_of_an_int_too_long_for_str(tmp_path):
    big = -(7 ** 6000)  # 5071 digits: str() refuses more than 4300
    convert(str(tmp_path), [(big, 1)], 1, "big")
    done = run_cli("head", str(tmp_path / "big"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "#0", f"  [0] int of about 5071 digits {hex(big)[:18]}...", "  [1] int 1"
    ]


def test_describe():
    assert describe(np.arange(10, dtype=np.int16).reshape(2, 5)) == (
        "ndarray int16 (2, 5) [0, 1, 2, 3, 4, 5, ...]"
    )
    assert describe(list(range(8))) == "[int 0, int 1, int 2, int 3, int 4, int 5, ... (2 more)]"
    assert describe("x" * 100).startswith("str 'xxxx") and len(describe("x" * 100)) < 80
    assert describe((None, True, np.int8(3))) == "(None, True, int8 3)"


# -- verify -------------------------------------------------------------------------------


def test_verify_intact(data):
    done = run_cli("verify", str(data))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == (
        "verify: 3 shard(s) in 1 set(s): 3 ok, 0 damaged, 0 missing: OK"
    )
    report = json.loads(run_cli("verify", str(data / PREFIX), "--json").stdout)
    manifest = json.loads((data / f"{PREFIX}.manifest.json").read_text())
    assert report["ok"] is True and report["problems"] == []
    got = [(s["name"], s["records"], s["bytes"], s["crc32c"]) for s in report["sets"][0]["shards"]]
    assert got == [(s["name"], s["records"], s["bytes"], s["crc32c"]) for s in manifest["shards"]]


def flip_payload_byte(data: Path) -> list[tuple[Path, int | None, str]]:
    path = shard(data, 1)
    offset = chunk_offsets(path)[1]
    raw = bytearray(path.read_bytes())
    raw[offset + HEADER_SIZE + 3] ^= 0x40
    path.write_bytes(bytes(raw))
    return [(path, offset, "corrupt")]


def bad_header(data: Path) -> list[tuple[Path, int | None, str]]:
    path = shard(data, 0)
    offset = chunk_offsets(path)[2]
    raw = bytearray(path.read_bytes())
    raw[offset : offset + 4] = b"\x00\x00\x00\x00"
    path.write_bytes(bytes(raw))
    return [(path, offset, "corrupt")]


def truncated_tail(data: Path) -> list[tuple[Path, int | None, str]]:
    path = shard(data, 2)
    offset = chunk_offsets(path)[-1]
    raw = path.read_bytes()
    path.write_bytes(raw[:-5])
    return [(path, offset, "corrupt"), (path, len(raw) - 5, "bytes")]


def missing_shard(data: Path) -> list[tuple[Path, int | None, str]]:
    path = shard(data, 1)
    path.unlink()
    return [(path, None, "missing")]


DAMAGE = {
    "flipped payload byte": (flip_payload_byte, "CRC-32 checksum mismatch"),
    "bad header": (bad_header, "expected the RecordIO chunk magic"),
    "truncated tail": (truncated_tail, "torn last chunk"),
    "missing shard": (missing_shard, "this shard of the set is missing"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_verify_reports_damage(data, damage):
    spoil, words = DAMAGE[damage]
    expected = spoil(data)
    done = run_cli("verify", str(data))
    assert done.returncode == 1, done.stdout + done.stderr
    problems = done.stdout.split("problems:\n")[1].splitlines()[:-1]
    assert len(problems) == len(expected)
    for line, (path, offset, _) in zip(problems, expected, strict=True):
        where = f"{path} at byte {offset}: " if offset is not None else f"{path}: "
        assert line.startswith("  " + where), line
    assert words in problems[0]
    assert done.stdout.splitlines()[-1].endswith(f"FAILED ({len(expected)} problem(s))")
    report = json.loads(run_cli("verify", str(data), "--json").stdout)
    assert report["ok"] is False
    assert [(p["path"], p["offset"], p["kind"]) for p in report["problems"]] == [
        (str(path), offset, kind) for path, offset, kind in expected
    ]
    statuses = [s["status"] for s in report["sets"][0]["shards"]]
    assert statuses.count("ok") == NUM_SHARDS - 1


def test_verify_manifest_mismatches(data):
    """Whole-file facts: a shard replaced by another valid file, an unlisted shard, a
    damaged manifest."""
    other = make_set(data.parent / "other")
    shard(data, 0).write_bytes(shard(other, 0).read_bytes()[: chunk_offsets(shard(other, 0))[1]])
    (data / f"{PREFIX}-00003-of-00003").write_bytes(b"")
    report = verify(str(data))
    kinds = [(posixpath.basename(p.path), p.kind) for p in report.problems]
    assert kinds == [(f"{PREFIX}-00003-of-00003", "unexpected"), (shard(data, 0).name, "bytes")]
    (data / f"{PREFIX}-00003-of-00003").unlink()
    (data / f"{PREFIX}.manifest.json").write_text("{")
    report = verify(str(data / PREFIX))
    assert [p.kind for p in report.problems] == ["manifest"]
    assert report.problems[0].path == str(data / f"{PREFIX}.manifest.json")


def test_verify_crc_and_records_against_manifest(tmp_path):
    # same size, same framing, other bytes: only the whole-file CRC-32C can tell
    convert(str(tmp_path / "a"), [b"x" * 10] * 4, 1, "s", codec="raw", compressor="none")
    convert(str(tmp_path / "b"), [b"y" * 10] * 4, 1, "s", codec="raw", compressor="none")
    (tmp_path / "a" / "s-00000-of-00000").write_bytes((tmp_path / "b" / "s-00000-of-00000")
                                                     .read_bytes())
    (problem,) = verify(str(tmp_path / "a")).problems
    assert (problem.kind, problem.offset) == ("crc32c", 0)
    manifest = json.loads((tmp_path / "a" / "s.manifest.json").read_text())
    manifest["shards"][0]["records"] = 5
    (tmp_path / "a" / "s.manifest.json").write_text(json.dumps(manifest))
    (tmp_path / "a" / "s-00000-of-00000").write_bytes((tmp_path / "b" / "s-00000-of-00000")
                                                     .read_bytes())
    assert [p.kind for p in verify(str(tmp_path / "a")).problems] == ["records"]


def test_verify_single_file_and_partial_glob(data):
    truncated_tail(data)
    assert verify(str(shard(data, 0))).ok
    assert not verify(str(shard(data, 2))).ok
    assert verify(str(data / f"{PREFIX}-0000[01]-of-*")).ok


# -- cp -----------------------------------------------------------------------------------


def test_cp_local_to_s3_and_back(data, s3, s3_url, tmp_path):
    make_set(data, "more", compressor="snappy")
    remote = f"{s3_url}/copied"
    options = json.dumps(s3.storage_options)
    up = run_cli("cp", str(data / PREFIX), str(data / "more"), remote, "--storage-options",
                 options)
    assert up.returncode == 0, up.stderr
    assert up.stdout.startswith(  # 6 shards, 2 manifests; 2 chunk side files, counted apart
        f"copied 8 file(s) and 2 hidden side file(s), {sum(map(len, files_of(data).values()))}")
    fs = s3.filesystem()
    assert sorted(map(posixpath.basename, fs.ls(remote))) == sorted(files_of(data))
    # tools on S3, endpoint from the environment this time
    env = s3.env()
    (listed, _) = json.loads(run_cli("ls", remote, "--json", env=env).stdout)[::-1]
    assert (listed["path"], listed["records"]) == (f"{remote}/{PREFIX}", 24)
    table = run_cli("ls", remote, env=env)
    assert table.returncode == 0 and f"{remote}/{PREFIX} " in table.stdout
    assert run_cli("verify", remote, env=env).returncode == 0
    head = run_cli("head", f"{remote}/{PREFIX}", "-n", "2", env=env)
    assert head.returncode == 0 and head.stdout.splitlines()[0] == "#0"
    back = tmp_path / "back"
    down = run_cli("cp", remote, str(back), env=env)  # the directory: a glob names one set
    assert down.returncode == 0, down.stderr
    assert files_of(back) == files_of(data)
    assert [i for _, i, _ in RecordIO(str(back / PREFIX) + "-*-of-*")()] == list(range(24))


def test_cp_damaged_s3_object_is_verified_and_refused(data, s3, s3_url, tmp_path):
    remote = f"{s3_url}/damaged"
    copy(str(data), remote, storage_options=s3.storage_options, progress=False)
    fs = s3.filesystem()
    target = f"{remote}/{shard(data, 1).name}"
    raw = bytearray(fs.cat_file(target))
    raw[HEADER_SIZE + 2] ^= 1
    fs.pipe_file(target, bytes(raw))
    verified = run_cli("verify", remote, env=s3.env())
    assert verified.returncode == 1
    assert f"{target} at byte 0: CRC-32 checksum mismatch" in verified.stdout
    down = run_cli("cp", f"{remote}/{PREFIX}", str(tmp_path / "back"), env=s3.env())
    assert down.returncode == 2
    assert f"recprep: error: {target}: its CRC-32C is" in down.stderr
    assert list((tmp_path / "back").iterdir()) == []


def test_cp_commits_manifest_last_on_s3(data, s3, s3_url, monkeypatch):
    """On S3 a new set's files go to their final names after its journal, the manifest
    last; over a set there, they are completed (multipart uploads to their final names,
    left incomplete until the commit), then the manifest."""
    from .s3calls import S3Calls

    for overwrite, written in ((False, "put_object"), (True, "complete_multipart_upload")):
        calls = S3Calls(monkeypatch)
        result = copy(str(data / PREFIX), s3_url, storage_options=s3.storage_options,
                      num_workers=3, progress=False, overwrite=overwrite)
        final = [(m, posixpath.basename(k)) for m, k in calls.calls
                 if m in ("complete_multipart_upload", "put_object", "copy_object")
                 and ".recprep-" not in k]
        journal = next(i for i, (_, k) in enumerate(calls.calls) if k.endswith("/commit.json"))
        first = next(i for i, (m, k) in enumerate(calls.calls)
                     if m == written and ".recprep-" not in k)
        assert journal < first  # no file under its name before the journal
        assert final[-1] == ("put_object", f"{PREFIX}.manifest.json")
        assert sorted(final[:-1]) == [(written, n) for n in sorted(
            [f".{PREFIX}.chunks", *[shard(data, i).name for i in range(NUM_SHARDS)]])]
        names = [f.dest.rsplit("/", 1)[1] for f in result.files]
        assert names[-1] == f"{PREFIX}.manifest.json"


def test_cp_refuses_to_overwrite_unless_asked(data, tmp_path):
    dest = tmp_path / "dest"
    assert run_cli("cp", str(data), str(dest)).returncode == 0
    again = run_cli("cp", str(data / PREFIX), str(dest))
    assert again.returncode == 2
    assert "--overwrite" in again.stderr and "overwrite=True" not in again.stderr
    make_set(tmp_path / "new", compressor="gzip")
    replaced = run_cli("cp", str(tmp_path / "new" / PREFIX), str(dest), "--overwrite")
    assert replaced.returncode == 0, replaced.stderr
    assert files_of(dest) == files_of(tmp_path / "new")


def test_cp_of_some_shards_does_not_copy_the_manifest(data, tmp_path):
    done = run_cli("cp", str(data / f"{PREFIX}-0000[01]-of-*"), str(tmp_path / "part"))
    assert done.returncode == 0, done.stderr
    assert sorted(files_of(tmp_path / "part")) == [shard(data, 0).name, shard(data, 1).name]


def no_partial_files(directory: str, protocol: str = "file") -> None:
    fs = fsspec.filesystem(protocol)
    assert not fs.exists(directory) or fs.ls(directory, detail=False) == []


def test_cp_source_disappearing_leaves_nothing(data, tmp_path):
    dest = str(tmp_path / "dest")

    def vanish(done_bytes: int, done_files: int) -> None:
        if done_files == 1 and shard(data, 2).exists():
            shard(data, 2).unlink()

    with pytest.raises(NotFoundError, match=f"{shard(data, 2)}: disappeared"):
        copy(str(data), dest, num_workers=1, progress=vanish)
    no_partial_files(dest)


def test_cp_destination_failing_leaves_nothing(data, mem_url, monkeypatch):
    from fsspec.implementations.memory import MemoryFile

    written = {"bytes": 0}
    original = MemoryFile.write

    def failing_write(self, block):
        written["bytes"] += len(block)
        if written["bytes"] > 2000:
            raise OSError(28, "No space left on device")
        return original(self, block)

    monkeypatch.setattr(MemoryFile, "write", failing_write)
    with pytest.raises(WriteError, match="No space left on device"):
        copy(str(data), mem_url, num_workers=2, progress=False)
    monkeypatch.undo()
    no_partial_files(mem_url.removeprefix("memory://"), "memory")


def test_cp_progress_counts_every_byte(data, tmp_path):
    seen = []
    result = copy(str(data), str(tmp_path / "d"), progress=lambda b, f: seen.append((b, f)))
    assert seen[-1] == (result.total_bytes, len(result.files)) == (
        sum(map(len, files_of(data).values())), NUM_SHARDS + 2,  # + manifest, side file
    )
    assert not [n for n in os.listdir(tmp_path / "d") if n.startswith(TEMP_PREFIX)]


def test_cp_failing_s3_upload_leaves_nothing(data, s3, s3_url, monkeypatch):
    import s3fs

    original = s3fs.S3FileSystem._call_s3
    failing = shard(data, 1).name

    async def call(self, method, *args, **kwargs):  # the upload of one shard fails
        if method in ("put_object", "upload_part") and failing in kwargs.get("Key", ""):
            raise ConnectionResetError(104, "Connection reset by peer")
        return await original(self, method, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", call)
    monkeypatch.setattr(s3fs.S3FileSystem, "call_s3", fsspec.asyn.sync_wrapper(call))
    with pytest.raises(WriteError, match=f"{s3_url}/ds/{failing} failed: ConnectionResetError"):
        copy(str(data / PREFIX), f"{s3_url}/ds", storage_options=s3.storage_options,
             num_workers=2, progress=False)
    assert s3.filesystem().find(s3_url.removeprefix("s3://")) == []


@pytest.mark.parametrize("compressor", ["none", "gzip", "zlib"])
def test_tools_on_tfrecord_sets(tmp_path, compressor):
    """ls and verify work on TFRecord shard sets too, with and without a manifest."""
    convert(str(tmp_path), [b"r%d" % i for i in range(12)], 3, "tf", format="tfrecord",
            compressor=compressor, codec="raw")
    proc = run_cli("verify", str(tmp_path / "tf"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (tmp_path / "tf.manifest.json").unlink()
    listed = json.loads(run_cli("ls", str(tmp_path), "--json").stdout)
    (info,) = [d for d in listed if d["prefix"] == "tf"]
    assert (info["records"], info["format"], info["compressor"]) == (12, "tfrecord", compressor)
    shard = tmp_path / "tf-00001-of-00002"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    proc = run_cli("verify", str(tmp_path / "tf"))
    assert proc.returncode == 1 and "tf-00001-of-00002" in proc.stdout


# -- errors say what to type here: flags, not Python keywords -------------------------------


def damage(path: Path, offset: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 1
    path.write_bytes(bytes(raw))


def _unknown_format(tmp_path: Path) -> list[str]:
    (tmp_path / "junk.bin").write_bytes(b"not a shard at all" * 4)
    return ["head", str(tmp_path / "junk.bin")]


def _corrupt(tmp_path: Path) -> list[str]:
    make_set(tmp_path)
    damage(shard(tmp_path, 0), HEADER_SIZE + 2)
    return ["head", str(tmp_path / PREFIX)]


def _chunk_too_large(tmp_path: Path) -> list[str]:
    make_set(tmp_path)
    return ["head", str(tmp_path / PREFIX), "--max-chunk-bytes", "16"]


def _pickle(tmp_path: Path) -> list[str]:
    convert(str(tmp_path), [{"k": 1}], 1, "pk", codec="pickle")
    return ["head", str(tmp_path / "pk")]


def _wrong_codec(tmp_path: Path) -> list[str]:
    convert(str(tmp_path), [{"k": 1}], 1, "pk", codec="pickle")
    return ["head", str(tmp_path / "pk"), "--codec", "recprep", "--allow-pickle"]


def _missing(tmp_path: Path) -> list[str]:
    return ["verify", str(tmp_path / "nowhere")]


def _exists(tmp_path: Path) -> list[str]:
    make_set(tmp_path / "a")
    (tmp_path / "b").mkdir()
    assert main(["cp", str(tmp_path / "a"), str(tmp_path / "b"), "--no-progress"]) == 0
    return ["cp", str(tmp_path / "a" / PREFIX), str(tmp_path / "b"), "--no-progress"]


@pytest.mark.parametrize(("make", "said", "python"), [
    (_unknown_format, "pass --format {recordio,recordio-legacy,tfrecord} to say what it is",
     "format="),
    (_corrupt, "pass --on-corrupt skip to read around it", "on_corrupt"),
    (_chunk_too_large, "pass --max-chunk-bytes BYTES with a larger limit", "max_chunk_bytes"),
    (_pickle, "pass --allow-pickle if you trust", "allow_pickle"),
    (_wrong_codec, "pass --codec pickle or --codec raw if it was written with another codec",
     "codec="),
    (_missing, "pass --storage-options JSON if the storage needs", "storage_options"),
    (_exists, "pass --overwrite to replace them", "overwrite="),
], ids=lambda v: getattr(v, "__name__", "")[1:] or None)
def test_error_hints_name_the_commands_flags(tmp_path, make, said, python):
    done = run_cli(*make(tmp_path))
    assert done.returncode == 2 and done.stdout == ""
    assert said in done.stderr and python not in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1


def test_python_messages_keep_the_keywords(tmp_path):
    from recprep.errors import CorruptDataError, PickleRefusedError

    _unknown_format(tmp_path)
    with pytest.raises(CorruptDataError, match="; pass format= to say what it is") as err:
        list(RecordIO(str(tmp_path / "junk.bin"))())
    assert err.value.remedy.option == "format" and err.value.remedy.value is None
    _pickle(tmp_path)
    with pytest.raises(PickleRefusedError, match="pass allow_pickle=True if you trust") as err:
        list(RecordIO(str(tmp_path / "pk"))())
    assert (err.value.remedy.option, err.value.remedy.value) == ("allow_pickle", True)


def test_a_hint_the_command_cannot_act_on_is_left_out(tmp_path):
    make_set(tmp_path / "a")
    damage(shard(tmp_path / "a", 1), HEADER_SIZE + 2)  # same size: the manifest's CRC fails
    (tmp_path / "b").mkdir()
    done = run_cli("cp", str(tmp_path / "a" / PREFIX), str(tmp_path / "b"), "--no-progress")
    assert done.returncode == 2
    assert "its CRC-32C is" in done.stderr and "lists all damage)" in done.stderr
    assert "on_corrupt" not in done.stderr and "--on-corrupt" not in done.stderr


def test_head_reads_around_damage_with_on_corrupt_skip(tmp_path):
    make_set(tmp_path)
    damage(shard(tmp_path, 0), HEADER_SIZE + 2)
    done = run_cli("head", str(tmp_path / PREFIX), "--on-corrupt", "skip", "-n", "100")
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("recprep: warning: ") and "record(s) lost" in done.stderr
    with pytest.warns(CorruptDataWarning):
        intact = list(RecordIO(str(tmp_path / PREFIX) + "-*", on_corrupt="skip")())
    assert 0 < len(intact) < 24
    assert [line for line in done.stdout.splitlines() if line.startswith("#")] == [
        f"#{k}" for k in range(len(intact))
    ]


def test_main_called_repeatedly_leaves_logging_as_it_was(tmp_path, capsys):
    import logging

    logger = logging.getLogger("recprep")
    before, level = list(logger.handlers), logger.level
    make_set(tmp_path)
    for _ in range(3):
        assert main(["ls", str(tmp_path), "-v"]) == 0
    assert logger.handlers == before and logger.level == level
