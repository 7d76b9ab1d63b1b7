"""Planted special files (issue 22, item 11): a manifest, chunk index, side index, staging
side file or shard that is a FIFO, a link to ``/dev/zero``, a socket or a directory is
refused with a recprep error naming it (or, for an optional side file, left aside with a
warning); side files larger than their cap are refused before they are read.

What these files used to do is hang the reader (a FIFO) or read gigabytes (``/dev/zero``),
so every case runs in a subprocess (``tests/support/planted.py``, which bounds its own
address space) with a timeout: before the fix a case fails by its alarm, its memory bound
or the timeout, never hangs the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..support import SUPPORT

ROOT = Path(__file__).parents[2]
JOB = SUPPORT / "planted.py"
EXAMPLES = int(os.environ.get("RECPREP_FUZZ_EXAMPLES", "1000"))

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX special files")


def job(*args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            [sys.executable, str(JOB), *args], capture_output=True, text=True, cwd=ROOT,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(args)} hung for {timeout} s")


def case(tmp_path: Path, op: str, *plants: str) -> dict:
    done = job("case", str(tmp_path / "set"), op, *plants)
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.splitlines()[-1])
    assert "foreign" not in outcome, outcome  # a hang (alarm), MemoryError, OSError...
    return outcome


def error(outcome: dict, kind: str, *words: str) -> str:
    assert "error" in outcome, outcome
    name, message = outcome["error"]
    assert name == kind, outcome
    for word in words:
        assert word in message, outcome
    return message


@pytest.mark.parametrize(("op", "plant", "what"), [
    ("read", "manifest=fifo", "a FIFO (named pipe)"),
    ("read", "manifest=zero", "a symbolic link to /dev/zero, a character device"),
    ("read", "manifest=socket", "a socket"),
    ("read", "shard=fifo", "a FIFO (named pipe)"),
    ("read", "shard=zero", "a symbolic link to /dev/zero, a character device"),
    ("head", "shard=null", "a symbolic link to /dev/null, a character device"),
    ("cp", "shard=fifo", "a FIFO (named pipe)"),
])
def test_a_special_manifest_or_shard_is_refused_naming_it(tmp_path, op, plant, what):
    outcome = case(tmp_path, op, plant)
    target = outcome["planted"][plant.split("=")[0]]
    message = error(outcome, "CorruptDataError", target, f"not a regular file but {what}")
    assert "on_corrupt" not in message or plant.startswith("manifest")  # skip can't help


def test_a_manifest_fifo_read_with_skip_reads_the_shards_with_a_warning(tmp_path):
    outcome = case(tmp_path, "read", "--skip", "manifest=fifo")
    assert outcome["values"] == outcome["expected"]
    assert any("FIFO" in w and w.startswith("CorruptDataWarning") for w in outcome["warnings"])


def test_verify_reports_a_special_shard_as_unreadable(tmp_path):
    outcome = case(tmp_path, "verify", "shard=socket")
    assert outcome["values"]["ok"] is False
    [(kind, path, message)] = outcome["values"]["problems"]
    assert (kind, path) == ("unreadable", outcome["planted"]["shard"])
    assert message.startswith("not a regular file but a socket")


@pytest.mark.parametrize("kind", ["fifo", "zero", "socket"])
def test_a_special_chunk_index_is_refused_or_with_skip_left_aside(tmp_path, kind):
    """The chunk index is a side file the manifest vouches for: one that is not it is a
    lie (an error), or with ``on_corrupt="skip"`` left aside with a warning."""
    refused = case(tmp_path / "raise", "range", f"chunks={kind}")
    error(refused, "CorruptDataError", refused["planted"]["chunks"], "not a regular file")
    outcome = case(tmp_path / "skip", "range", "--skip", f"chunks={kind}")
    assert outcome["values"] == outcome["expected"]
    [warning] = [w for w in outcome["warnings"] if "chunk index" in w]
    assert "not a regular file" in warning and outcome["planted"]["chunks"] in warning
    assert outcome["maxrss_mib"] < 400  # /dev/zero: not a gibibyte read


def test_a_chunk_index_over_its_cap_is_refused_before_it_is_read(tmp_path):
    outcome = case(tmp_path, "range", "--skip", "chunks=huge")  # a sparse 1 GiB + 1 file
    assert outcome["values"] == outcome["expected"]
    assert any("1073741825 bytes, more than the chunk index its manifest vouches for" in w
               for w in outcome["warnings"]), outcome
    assert outcome["maxrss_mib"] < 400  # refused by its size: before, all of it was read


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_special_record_index_is_refused_or_with_skip_left_aside(tmp_path, kind):
    refused = case(tmp_path / "raise", "range", f"tfindex={kind}")
    error(refused, "CorruptDataError", refused["planted"]["tfindex"], "not a regular file")
    outcome = case(tmp_path / "skip", "range", "--skip", f"tfindex={kind}")
    assert outcome["values"] == outcome["expected"]
    assert any("not a regular file" in line and "scanning" in line
               for line in outcome["warnings"]), outcome


@pytest.mark.parametrize("target", ["journal", "options"])
def test_a_special_staging_side_file_is_untrusted(tmp_path, target):
    outcome = case(tmp_path, "resume", f"{target}=fifo")
    error(outcome, "UntrustedFileError", outcome["planted"][target], "a FIFO (named pipe)")


def test_a_directory_under_a_shards_name_is_a_missing_shard_not_fewer_records(tmp_path):
    outcome = case(tmp_path, "read", "shard=dir")  # before: 15 of the 23 instances, silently
    message = error(outcome, "MissingShardsError", outcome["planted"]["shard"])
    assert "matched 2 shard(s) of a set that should have 3" in message


def test_fuzz_planted_special_and_oversized_files(tmp_path):
    """Hypothesis: one to three planted files, every operation, either on_corrupt (see
    ``trust_h3_planted.check`` for what each case must give)."""
    examples = max(50, EXAMPLES // 4)
    done = job("fuzz", str(tmp_path), str(examples), timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("fuzz: ok"), (
        done.stdout[-2000:] + done.stderr[-6000:])


def test_a_chunk_index_is_read_without_allocating_its_cap(tmp_path):
    """Reading a side file sizes its buffer by the file, not by the cap: before, each
    reader's load of ``.{prefix}.chunks`` asked for a 1 GiB buffer (``read(cap + 1)``)."""
    import tracemalloc

    from recprep import RecordIO, convert

    convert(tmp_path, list(range(50)), 2, "p", progress=False)
    reader = RecordIO(tmp_path / "p")
    tracemalloc.start()
    try:
        assert list(reader.read_range(f"{tmp_path}/p-00001-of-00001", 1, 4)) == [3, 5, 7]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"{peak} bytes allocated at the peak"
