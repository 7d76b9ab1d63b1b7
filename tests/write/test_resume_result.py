"""A resume never returns the old set as the new conversion's result (issue 22, item 3).

An overwrite killed before it recorded its run — while it took the set's lock, or at its
first rename (``options.json`` moved into place) — leaves nothing of itself in the output.
``convert(resume=True, overwrite=True)`` used to find the old complete set, verify it and
return it as a success. Now a resume with ``overwrite=True`` that finds nothing of its
own conversion staged runs it (it has the input: a resume is the same call), replacing
the old set; without ``overwrite=True`` it can't tell the old set from the new one, and
says so with a ``KilledRunWarning`` where the killed run left a trace.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from recprep import RecordIO, RecprepError, WriteError, convert

from ..support import SUPPORT
from ..support.kill_job import reader_for

ROOT = Path(__file__).parents[2]
JOB = SUPPORT / "kill_job.py"
TOTAL = 250  # instances kill_job writes


def job(out, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(JOB), str(out), "serial-parts", *args], capture_output=True,
        text=True, cwd=ROOT, timeout=120, env={**os.environ, **(env or {})},
    )


def files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.is_file()}


def seen(pattern: str) -> str:
    """"A" or "B" (one whole set of that tag), "mix", or "error"."""
    try:
        tags = [x[-1][:1] for x in RecordIO(pattern)()]
    except RecprepError:
        return "error"
    if len(tags) == TOTAL and len(set(tags)) == 1:
        return tags[0]
    return "mix"


@pytest.fixture(scope="module")
def sets(tmp_path_factory) -> dict[str, dict[str, bytes]]:
    """Sets A (7 shards), A5 (5 shards, tag A) and B (5 shards, tag B), uninterrupted."""
    made = {}
    for name, tag, shards in (("A", "A", "7"), ("A5", "A", "5"), ("B", "B", "5")):
        out = tmp_path_factory.mktemp(name)
        done = job(out, "--tag", tag, "--shards", shards)
        assert done.returncode == 0, done.stderr
        made[name] = files(out)
    return made


def old_set(tmp_path: Path, sets, which: str) -> Path:
    out = tmp_path / "out"
    out.mkdir()
    for file, data in sets[which].items():
        (out / file).write_bytes(data)
    return out


OVERWRITE_B = ("--tag", "B", "--shards", "5", "--overwrite")
#: the kills before an overwrite records its run: between writing and linking the lock,
#: and at the first rename (its options.json, written then moved into place)
EARLY = ["lock.write=1", "staging.rename=1"]


@pytest.mark.parametrize("old", ["A", "A5"])
@pytest.mark.parametrize("failpoint", EARLY)
def test_a_resumed_overwrite_killed_before_it_recorded_its_run_writes_the_new_set(
    tmp_path, sets, failpoint, old
):
    out = old_set(tmp_path, sets, old)
    killed = job(out, *OVERWRITE_B, env={"RECPREP_FAILPOINTS": failpoint})
    assert killed.returncode == 137, killed.stderr
    assert seen(str(out / "k-*")) == "A"  # the old set is still whole and readable
    resumed = job(out, *OVERWRITE_B, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert files(out) == sets["B"]  # the new set, byte for byte; nothing else left


def test_what_a_kill_at_the_first_rename_leaves_is_resumed_into_the_new_set(tmp_path, sets):
    """The state that kill leaves, made by hand (the same on a recprep without the
    failpoint): a staging directory holding only the temporary of options.json."""
    out = old_set(tmp_path, sets, "A5")
    staging = out / ".recprep-staging-k"
    staging.mkdir()
    (staging / ".options.json.tmp").write_bytes(b'{"kind": "run"')  # cut short
    resumed = job(out, *OVERWRITE_B, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert files(out) == sets["B"] and not staging.exists()


@pytest.mark.parametrize("failpoint", EARLY)
def test_a_resume_without_overwrite_after_such_a_kill_warns_that_it_returns_the_set_there(
    tmp_path, sets, failpoint
):
    """Nothing tells the old set from the new without overwrite=True: the set there is
    returned, and the user is told that a run was killed before it recorded itself."""
    from recprep.errors import KilledRunWarning

    out = old_set(tmp_path, sets, "A5")
    assert job(out, *OVERWRITE_B, env={"RECPREP_FAILPOINTS": failpoint}).returncode == 137
    with pytest.warns(KilledRunWarning, match="overwrite=True") as caught:
        result = convert(str(out), reader_for("serial-parts", "B"), 5, "k", resume=True,
                         progress=False, chunk_bytes=2048)
    assert str(out) in str(caught[0].message)
    assert result.num_records == TOTAL and files(out) == sets["A5"]
    # saying overwrite=True again then writes the new set
    convert(str(out), reader_for("serial-parts", "B"), 5, "k", resume=True, overwrite=True,
            progress=False, chunk_bytes=2048)
    assert files(out) == sets["B"]


def test_resume_with_overwrite_over_a_complete_set_writes_this_conversion(tmp_path, sets):
    """No trace at all (the killed overwrite may not even have started): the complete set
    there is not this conversion's result."""
    out = old_set(tmp_path, sets, "A5")
    result = convert(str(out), reader_for("serial-parts", "B"), 5, "k", resume=True,
                     overwrite=True, progress=False, chunk_bytes=2048)
    assert files(out) == sets["B"] and result.num_records == TOTAL
    assert {x[-1][:1] for x in RecordIO(str(out / "k-*"))()} == {"B"}
    # again, over the new set: the same bytes (the conversion is deterministic)
    convert(str(out), reader_for("serial-parts", "B"), 5, "k", resume=True, overwrite=True,
            progress=False, chunk_bytes=2048)
    assert files(out) == sets["B"]


def test_resume_with_overwrite_replaces_a_pending_commit_of_other_options(tmp_path, sets):
    """A commit killed midway, of a 5-shard set; the resume asks for 7 shards with
    overwrite=True: it is another conversion, which replaces what the killed one left
    (it used to fail, telling the user to pass the overwrite=True they had passed)."""
    out = old_set(tmp_path, sets, "A")
    assert job(out, *OVERWRITE_B, env={"RECPREP_FAILPOINTS": "commit.move=2"}).returncode == 137
    assert seen(str(out / "k-*")) == "error"  # not committed: refused, never a mix
    resumed = job(out, "--tag", "A", "--shards", "7", "--overwrite", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert files(out) == sets["A"]


def test_resume_with_overwrite_on_a_read_only_lock_is_a_write_error(tmp_path, monkeypatch):
    """Without overwrite, a resume verifies a complete set it can't lock (read-only);
    with overwrite it must write, and says it can't."""
    import recprep.storage.locking as locking

    convert(str(tmp_path), list(range(10)), 2, "k", progress=False)
    real_open = os.open

    def read_only(path, flags, *args):
        if flags & os.O_CREAT:
            raise OSError(errno.EROFS, "Read-only file system", path)
        return real_open(path, flags, *args)

    monkeypatch.setattr(locking.os, "open", read_only)
    assert convert(str(tmp_path), list(range(10)), 2, "k", resume=True).num_records == 10
    with pytest.raises(WriteError, match="Read-only"):
        convert(str(tmp_path), list(range(20)), 2, "k", resume=True, overwrite=True)
