"""The commit protocol under attack (issue 13: items 1-5, 12-14; issue 12 item 8).

A reader sees the old complete set, the new complete set, or a clear ``RecprepError`` —
never a mix; a resume finishes the overwrite that was asked for, and replaying a journal
is idempotent at every step; files in the output directory are input, not trusted; faults
outside the shard writes are ``WriteError``s and never block the next run.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import fsspec
import numpy as np
import pytest
from fsspec.implementations.local import LocalFileSystem

from recprep import RecordIO, RecprepError, TaskFailedError, WriteError, convert
from recprep.errors import SetChangedError, UncommittedSetWarning, UntrustedFileError
from recprep.storage.locking import OutputLockedError
from recprep.storage.seals import KEY_ENV, seal
from recprep.storage.staging import Staging
from recprep.tools import verify

from .support import SUPPORT

ROOT = Path(__file__).parent.parent
JOB = SUPPORT / "kill_job.py"
TOTAL = 250  # instances kill_job writes


def job(out, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(JOB), str(out), "serial-parts", *args], capture_output=True,
        text=True, cwd=ROOT, timeout=120, env={**os.environ, **(env or {})},
    )


def files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.is_file()}


def visible(path: Path) -> dict[str, bytes]:
    return {n: d for n, d in files(path).items() if not n.startswith(".")}


def visible_of(found: dict[str, bytes]) -> dict[str, bytes]:
    return {n: d for n, d in found.items() if not n.startswith(".")}


def seen(pattern: str, **options) -> str:
    """What a reader of ``pattern`` gets: "A" or "B" (one whole set), "mix", or "error"."""
    try:
        tags = [x[-1][:1] for x in RecordIO(pattern, **options)()]
    except RecprepError:
        return "error"
    if len(tags) == TOTAL and len(set(tags)) == 1:
        return tags[0]
    return "mix"


@pytest.fixture(scope="module")
def sets(tmp_path_factory) -> dict[str, dict[str, bytes]]:
    """Sets A (7 shards, tag A), A5 (5 shards, tag A) and B (5 shards, tag B), each written
    uninterrupted."""
    made = {}
    for name, tag, shards in (("A", "A", "7"), ("A5", "A", "5"), ("B", "B", "5")):
        out = tmp_path_factory.mktemp(name)
        done = job(out, "--tag", tag, "--shards", shards)
        assert done.returncode == 0, done.stderr
        made[name] = files(out)
    return made


def old_set(tmp_path: Path, sets, which: str = "A", name: str = "out") -> Path:
    out = tmp_path / name
    out.mkdir()
    for file, data in sets[which].items():
        (out / file).write_bytes(data)
    return out


OVERWRITE_B = ("--tag", "B", "--shards", "5", "--overwrite")
STEPS = ["commit.journal=1", "commit.uncommit=1", "commit.move=1", "commit.move=4",
         "commit.replaced=1", "commit.replaced=2", "commit.manifest=1", "commit.cleanup=1",
         "commit.cleanup=2"]


@pytest.mark.parametrize("failpoint", STEPS)
def test_an_overwrite_killed_at_any_commit_step_is_never_read_as_a_mix(
    tmp_path, sets, failpoint
):
    out = old_set(tmp_path, sets)
    killed = job(out, *OVERWRITE_B, env={"RECPREP_FAILPOINTS": failpoint})
    assert killed.returncode == 137, killed.stderr
    got = seen(str(out / "k-*"))
    assert got in ("A", "B", "error")
    manifest = (out / "k.manifest.json").exists()
    assert (got == "error") == (not manifest)
    report = verify(str(out))
    assert report.ok == manifest
    if not manifest:
        assert "uncommitted" in [p.kind for p in report.problems]
    # resume (without repeating overwrite=True) finishes the overwrite that was asked for
    resumed = job(out, "--tag", "B", "--shards", "5", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert files(out) == sets["B"]


def test_an_uncommitted_set_is_read_as_it_is_only_on_purpose(tmp_path, sets):
    out = old_set(tmp_path, sets)
    assert job(out, *OVERWRITE_B, env={"RECPREP_FAILPOINTS": "commit.move=5"}).returncode == 137
    new = str(out / "k-*-of-00004")  # all 5 new shards are in place, the old ones not gone
    with pytest.raises(SetChangedError, match="resume=True"):
        RecordIO(new)
    with pytest.warns(UncommittedSetWarning, match="commit.json"):
        assert seen(new, on_corrupt="skip") == "B"


@pytest.mark.parametrize("again", STEPS[1:7])
def test_replaying_a_journal_is_idempotent_at_every_step(tmp_path, sets, again):
    out = old_set(tmp_path, sets)
    assert job(out, *OVERWRITE_B, env={"RECPREP_FAILPOINTS": "commit.move=2"}).returncode == 137
    replay = job(out, "--tag", "B", "--shards", "5", "--resume",
                 env={"RECPREP_FAILPOINTS": again})
    assert replay.returncode in (0, 137), replay.stderr
    assert seen(str(out / "k-*")) in ("B", "error")
    resumed = job(out, "--tag", "B", "--shards", "5", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert files(out) == sets["B"]


def test_resume_after_a_killed_overwrite_finishes_it(tmp_path, sets):
    """Killed while its tasks ran (after 3 of 8 were recorded): the old set stays readable;
    resume reuses the finished tasks and commits the new set, not the old one."""
    out = old_set(tmp_path, sets)
    killed = job(out, *OVERWRITE_B, env={"RECPREP_FAILPOINTS": "staging.record=3"})
    assert killed.returncode == 137
    assert seen(str(out / "k-*")) == "A" and visible(out) == visible_of(sets["A"])
    assert (out / ".k.chunks").read_bytes() == sets["A"][".k.chunks"]
    resumed = job(out, "--tag", "B", "--shards", "5", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert files(out) == sets["B"]


def test_resume_keeps_a_manifest_committed_before_the_kill(tmp_path, sets):
    out = old_set(tmp_path, sets)
    assert job(out, *OVERWRITE_B,
               env={"RECPREP_FAILPOINTS": "commit.manifest=1"}).returncode == 137
    before = (out / "k.manifest.json").read_bytes()
    resumed = job(out, "--tag", "B", "--shards", "5", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert (out / "k.manifest.json").read_bytes() == before and files(out) == sets["B"]


def test_a_journal_whose_files_are_gone_is_written_again_not_a_bare_error(tmp_path, sets):
    out = old_set(tmp_path, sets)
    assert job(out, *OVERWRITE_B, env={"RECPREP_FAILPOINTS": "commit.move=2"}).returncode == 137
    staging = out / ".recprep-staging-k"
    for staged in staging.glob("shard-*"):
        staged.unlink()  # lost: the commit can't be finished, only done again
    resumed = job(out, "--tag", "B", "--shards", "5", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert files(out) == sets["B"]


# -- readers across an overwrite ----------------------------------------------------------------


def tagged(tag: str, n: int = 40) -> list[tuple[int, str]]:
    return [(i, f"{tag}{i}") for i in range(n)]


@pytest.mark.parametrize("shards", [(3, 3), (3, 5), (5, 2)])
def test_a_reader_built_before_an_overwrite_says_the_set_changed(out_url, shards):
    convert(out_url, tagged("A"), shards[0], "p")
    reader = RecordIO(f"{out_url}/p-*")
    convert(out_url, tagged("B"), shards[1], "p", overwrite=True)
    with pytest.raises(SetChangedError, match="replaced"):
        list(reader())
    assert {x[1][0] for x in RecordIO(f"{out_url}/p-*")()} == {"B"}


def test_a_reader_opened_before_an_overwrite_reads_the_old_set_whole(tmp_path):
    convert(str(tmp_path), tagged("A", 400), 4, "p", chunk_bytes=64)
    stream = RecordIO(str(tmp_path / "p-*"))()
    first = next(stream)
    convert(str(tmp_path), tagged("B", 400), 4, "p", overwrite=True, chunk_bytes=64)
    try:
        rest = list(stream)
    except SetChangedError:
        return  # a shard opened after the overwrite: refused
    assert {x[1][0] for x in [first, *rest]} == {"A"} and len(rest) == 399


def test_live_overwrites_never_show_a_mix(tmp_path):
    out = str(tmp_path)
    convert(out, tagged("A", 200), 4, "p", chunk_bytes=64)
    outcomes: list[str] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                tags = {x[1][0] for x in RecordIO(f"{out}/p-*")()}
                outcomes.append("".join(sorted(tags)))
            except RecprepError:
                outcomes.append("error")

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for n in range(30):
            convert(out, tagged("AB"[n % 2], 200), 3 + n % 3, "p", chunk_bytes=64,
                    overwrite=True)
    finally:
        stop.set()
        reader.join()
    assert outcomes and set(outcomes) <= {"A", "B", "error"}, set(outcomes)


def test_a_shard_that_differs_from_its_manifest_is_an_error(tmp_path):
    convert(str(tmp_path / "a"), [b"x" * 10] * 4, 1, "s", codec="raw", compressor="none")
    convert(str(tmp_path / "b"), [b"y" * 10] * 4, 1, "s", codec="raw", compressor="none")
    shard = tmp_path / "a" / "s-00000-of-00000"
    shard.write_bytes((tmp_path / "b" / "s-00000-of-00000").read_bytes())  # same size
    with pytest.raises(RecprepError, match="CRC-32C"):
        list(RecordIO(str(tmp_path / "a" / "s-*"))())
    shard.write_bytes(shard.read_bytes()[:-3])
    with pytest.raises(RecprepError, match="cut off"):
        list(RecordIO(str(tmp_path / "a" / "s-*"))())


# -- side files are input, not trusted ------------------------------------------------------------


def planted(out: Path, doc: dict, name: str, *, key: str | None = None) -> None:
    """Plant a side file sealed with ``key`` (an attacker's) or the victim's own."""
    staging = out / ".recprep-staging-k"
    staging.mkdir(parents=True, exist_ok=True)
    previous = os.environ.get(KEY_ENV)
    if key is not None:
        os.environ[KEY_ENV] = key
    try:
        data = seal({"staging": str(staging), **doc})
    finally:
        if key is not None:
            if previous is None:
                del os.environ[KEY_ENV]
            else:
                os.environ[KEY_ENV] = previous
    (staging / name).write_bytes(data)


def journal(staged: dict, replaced: list[str], out: Path) -> dict:
    return {"kind": "journal", "area": str(out / ".recprep-staging-k"), "prefix": "k",
            "staged": staged, "replaced": replaced, "manifest_sha256": "0" * 64}


@pytest.mark.parametrize("key", ["attacker", None])
@pytest.mark.parametrize("replaced", ["/elsewhere/x", "../victim.txt", "sub/../../victim.txt"])
def test_a_planted_journal_never_touches_files_outside(tmp_path, key, replaced):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "out"
    planted(out, journal({"k-00000-of-00000": "../victim.txt"}, [replaced], out),
            "commit.json", key=key)
    with pytest.raises(UntrustedFileError, match="refused"):
        convert(str(out), [1, 2], 1, "k", resume=True)
    assert victim.read_text() == "precious"
    (out / "k-00000-of-00000").write_bytes(b"")
    with pytest.raises(SetChangedError):  # readers see a commit journal: not committed
        list(RecordIO(str(out / "k-*"))())


def test_planted_staged_work_is_refused_not_committed(tmp_path):
    out = tmp_path / "out"
    staging = out / ".recprep-staging-k"
    convert(str(tmp_path / "evil"), [666] * 3, 1, "k")
    staging.mkdir(parents=True)
    shutil.copy(tmp_path / "evil" / "k-00000-of-00000", staging / "stream-evil")
    size = (staging / "stream-evil").stat().st_size
    facts = {"path": "stream-evil", "records": 3, "bytes": size, "crc32c": 0, "offset": 0}
    fingerprint = json.dumps({"format": "recordio"})
    planted(out, {"kind": "run", "fingerprint": fingerprint, "overwrite": True},
            "options.json", key="attacker")
    planted(out, {"kind": "done", "key": "stream", "files": [facts], "notes": []},
            "done-stream.json", key="attacker")
    with pytest.raises(UntrustedFileError, match="seal"):
        convert(str(out), [1, 2, 3], 1, "k", resume=True)
    assert not (out / "k-00000-of-00000").exists()
    convert(str(out), [1, 2, 3], 1, "k")  # without resume nothing planted is read
    assert list(RecordIO(str(out / "k-*"))()) == [1, 2, 3]


def test_a_symlinked_staging_directory_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / ".recprep-staging-k").symlink_to(elsewhere)
    for resume in (False, True):
        with pytest.raises(UntrustedFileError, match="symbolic link"):
            convert(str(out), [1], 1, "k", resume=resume)
    assert (elsewhere / "keep.txt").read_text() == "precious"


def test_staged_work_of_another_key_is_refused_with_a_hint(tmp_path):
    out = tmp_path / "out"
    env = {KEY_ENV: "first"}
    assert job(out, env={**env, "RECPREP_FAILPOINTS": "staging.record=3"}).returncode == 137
    other = job(out, "--resume", env={KEY_ENV: "second"})
    assert other.returncode == 1 and "UntrustedFileError" in other.stderr
    assert KEY_ENV in other.stderr
    assert job(out, "--resume", env=env).returncode == 0


# -- faults outside the shard writes ------------------------------------------------------------


class FailingFileSystem(LocalFileSystem):
    """Local files; the ``fail_at``-th file opened for writing fails with ENOSPC."""

    protocol = "failing"
    fail_at = 0
    opened = 0

    def _open(self, path, mode="rb", **kwargs):
        if "w" in mode or "a" in mode:
            FailingFileSystem.opened += 1
            if FailingFileSystem.opened == FailingFileSystem.fail_at:
                raise OSError(errno.ENOSPC, "No space left on device (injected)", path)
        return super()._open(path, mode, **kwargs)


fsspec.register_implementation("failing", FailingFileSystem, clobber=True)


@pytest.mark.parametrize("fmt", ["recordio", "tfrecord"])
def test_disk_full_at_every_write_point_is_a_write_error(tmp_path, fmt):
    data = [(i, f"v{i}") for i in range(20)] if fmt == "recordio" else [b"r%d" % i
                                                                     for i in range(20)]
    options = {"format": fmt, "codec": "recprep" if fmt == "recordio" else "raw"}
    if fmt == "tfrecord":
        options["compressor"] = "none"
    reference = tmp_path / "reference"
    convert(str(reference), data, 3, "k", **options)
    points = 0
    for fail_at in range(1, 100):
        out = tmp_path / f"run{fail_at}"
        FailingFileSystem.fail_at, FailingFileSystem.opened = fail_at, 0
        try:
            convert(f"failing://{out}", data, 3, "k", **options)
        except (WriteError, TaskFailedError) as err:
            points += 1
            assert isinstance(err, RecprepError) and "No space left" in str(err)
            if isinstance(err, TaskFailedError):
                assert isinstance(err.original, WriteError)
        else:
            break
        finally:
            FailingFileSystem.fail_at = 0
        assert not (out / ".recprep-lock-k").exists()
        convert(str(out), data, 3, "k", resume=True, **options)  # nothing blocks the next run
        assert visible(out) == visible(reference)
    assert points >= 6  # options, shards, task record, manifest, journal...


def test_file_size_limit_at_the_lock_and_side_files(tmp_path):
    """RLIMIT_FSIZE small enough for each of: the lock, options.json, the manifest."""
    script = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
from recprep import convert, RecprepError
try:
    convert(sys.argv[1], list(range(3)), 1, "k", compressor="none")
    print("OK")
except RecprepError as err:
    print("FAILED", type(err).__name__)
"""
    for limit in (0, 8, 200, 700, 1200):
        out = tmp_path / f"limit{limit}"
        proc = subprocess.run([sys.executable, "-c", script, str(out), str(limit)],
                              capture_output=True, text=True, timeout=60)
        assert proc.stdout.startswith(("FAILED WriteError", "FAILED TaskFailedError", "OK")), (
            limit, proc.stdout + proc.stderr)
        assert not (out / ".recprep-lock-k").exists()
        convert(str(out), list(range(3)), 1, "k", compressor="none", resume=True)
        assert list(RecordIO(str(out / "k-*"))()) == [0, 1, 2]


def test_an_empty_or_unreadable_lock_of_a_dead_writer_is_taken_over(tmp_path):
    for content in (b"", b"{\"host\": ", b"\x00\x00"):
        out = tmp_path / f"out{len(content)}"
        out.mkdir()
        lock = out / ".recprep-lock-k"
        lock.write_bytes(content)
        with pytest.raises(OutputLockedError, match="unknown owner"):  # might be mid-write
            convert(str(out), [1], 1, "k")
        old = time.time() - 60
        os.utime(lock, (old, old))
        convert(str(out), [1], 1, "k")
        assert not lock.exists() and list(RecordIO(str(out / "k-*"))()) == [1]


@pytest.mark.parametrize("failpoint", ["lock.write=1"])
def test_a_kill_while_taking_the_lock_blocks_nothing(tmp_path, failpoint):
    out = tmp_path / "out"
    assert job(out, env={"RECPREP_FAILPOINTS": failpoint}).returncode == 137
    assert not (out / ".recprep-lock-k").exists()
    done = job(out)
    assert done.returncode == 0, done.stderr
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == [".k.chunks"]


def test_a_lock_without_hard_links_is_never_left_empty(tmp_path, monkeypatch):
    import recprep.storage.locking as locking

    def no_links(*args):
        raise OSError(errno.EPERM, "hard links not supported")

    monkeypatch.setattr(locking.os, "link", no_links)
    convert(str(tmp_path), [1], 1, "k")
    assert list(RecordIO(str(tmp_path / "k-*"))()) == [1]
    assert socket.gethostname()  # the lock held host and pid (checked by the other tests)


# -- read-only output ---------------------------------------------------------------------------


@pytest.fixture
def read_only_dir(tmp_path):
    """A directory on a tmpfs that can be remounted read-only (root only)."""
    mount = tmp_path / "ro"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True
    ).returncode:
        pytest.skip("needs root to mount a tmpfs")

    def freeze() -> None:
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)

    try:
        yield mount, freeze
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)


def test_a_read_only_output_verifies_a_complete_set_and_names_the_directory(read_only_dir):
    mount, freeze = read_only_dir
    out = mount / "data"
    convert(str(out), list(range(10)), 2, "k")
    (mount / "partial").mkdir()
    freeze()
    result = convert(str(out), list(range(10)), 2, "k", resume=True)
    assert result.num_records == 10
    for kwargs in ({}, {"overwrite": True}):
        with pytest.raises(WriteError, match=str(out)) as info:
            convert(str(out), list(range(10)), 2, "k", **kwargs)
        assert info.value.original.errno == errno.EROFS
    with pytest.raises(WriteError, match=str(mount / "partial")):
        convert(str(mount / "partial"), [1], 1, "k", resume=True)


def test_a_read_only_lock_is_a_write_error_but_resume_verifies(tmp_path, monkeypatch):
    import recprep.storage.locking as locking

    convert(str(tmp_path), list(range(10)), 2, "k")
    real_open = os.open

    def read_only(path, flags, *args):
        if flags & os.O_CREAT:
            raise OSError(errno.EROFS, "Read-only file system", path)
        return real_open(path, flags, *args)

    monkeypatch.setattr(locking.os, "open", read_only)
    assert convert(str(tmp_path), list(range(10)), 2, "k", resume=True).num_records == 10
    with pytest.raises(WriteError, match="Read-only"):
        convert(str(tmp_path), list(range(10)), 2, "k", overwrite=True)


# -- recprep cp ---------------------------------------------------------------------------------


def cp(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "recprep", "cp", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("failpoint", ["cp.copied=3", "commit.move=2", "commit.manifest=1"])
def test_a_killed_cp_overwrite_is_never_read_as_a_mix_and_leaves_nothing(
    tmp_path, sets, failpoint
):
    source = old_set(tmp_path, sets, "B", "source")
    dest = old_set(tmp_path, sets, "A5", "dest")
    (dest / "notes.txt").write_text("a file of no set")
    (source / "notes.txt").write_text("new notes")
    killed = cp(str(source), str(dest), "--overwrite", env={"RECPREP_FAILPOINTS": failpoint})
    assert killed.returncode == 137, killed.stderr
    got = seen(str(dest / "k-*"))
    assert got in ("A", "B", "error")
    assert (got == "error") == (not (dest / "k.manifest.json").exists())
    again = cp(str(source), str(dest), "--overwrite")
    assert again.returncode == 0, again.stderr
    assert files(dest) == {**sets["B"], "notes.txt": b"new notes"}  # hidden: B's .k.chunks


# -- S3 -----------------------------------------------------------------------------------------


def test_an_overwrite_killed_mid_commit_on_s3_is_never_read_as_a_mix(s3, s3_url, sets):
    out = f"{s3_url}/data"
    fs = s3.filesystem()
    for name, data in sets["A"].items():
        fs.pipe(f"{out}/{name}", data)
    env = s3.env({**os.environ, "RECPREP_FAILPOINTS": "commit.move=2"})
    killed = subprocess.run([sys.executable, str(JOB), out, "serial-parts", *OVERWRITE_B],
                            capture_output=True, text=True, cwd=ROOT, timeout=120, env=env)
    assert killed.returncode == 137, killed.stderr
    options = {"storage_options": s3.storage_options}
    assert seen(f"{out}/k-*", **options) == "error"
    assert "uncommitted" in [p.kind for p in verify(out, **options).problems]
    env.pop("RECPREP_FAILPOINTS")
    resumed = subprocess.run([sys.executable, str(JOB), out, "serial-parts", "--tag", "B",
                              "--shards", "5", "--resume"], capture_output=True, text=True,
                             cwd=ROOT, timeout=120, env=env)
    assert resumed.returncode == 0, resumed.stderr
    fs = s3.filesystem()
    got = {n: fs.cat_file(f"{out}/{n}") for n in sets["B"]}
    manifest = json.loads(got.pop("k.manifest.json"))  # S3's: each shard's ETag recorded
    etags = [s.pop("etag") for s in manifest["shards"]]
    assert etags == [fs.info(f"{out}/{s['name']}")["ETag"] for s in manifest["shards"]]
    assert manifest == json.loads(sets["B"]["k.manifest.json"])
    assert got == {n: d for n, d in sets["B"].items() if n != "k.manifest.json"}
    assert sorted(p.rsplit("/", 1)[1] for p in fs.find(out)) == sorted(sets["B"])


def test_a_reader_built_before_an_overwrite_on_s3_says_the_set_changed(s3, s3_url):
    options = {"storage_options": s3.storage_options}
    convert(s3_url, tagged("A"), 3, "p", **options)
    reader = RecordIO(f"{s3_url}/p-*", **options)
    convert(s3_url, tagged("B"), 3, "p", overwrite=True, **options)
    with pytest.raises(SetChangedError):
        list(reader())


def test_s3_lost_mid_convert_the_write_error_wins(tmp_path):
    pytest.importorskip("moto.server")
    from .support.s3 import FAKE_ENV, S3Server, clear_s3fs_cache

    saved = {k: os.environ.get(k) for k in FAKE_ENV}
    os.environ.update(FAKE_ENV)
    server = S3Server().start()  # our own: the shared one must survive this test
    try:
        url = server.bucket()
        options = {**server.storage_options,
                   "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 1}}

        def reader():
            for i in range(60):
                if i == 30:
                    server.stop()
                yield np.full(5000, i, np.float32)

        clear_s3fs_cache()
        started = time.monotonic()
        with pytest.raises(RecprepError) as info:
            convert(f"{url}/out", reader, 3, "p", storage_options=options, chunk_bytes=4096)
        assert time.monotonic() - started < 60
        err = info.value
        text = str(err) + "".join(getattr(err, "__notes__", []))
        first = str(err).split("\n\n", 1)[0]  # not the traceback, which names files
        assert "writing" in first and "p-0000" in first, text
        assert any("failed too" in note for note in getattr(err, "__notes__", [])), text
    finally:
        server.stop()
        clear_s3fs_cache()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# -- staging records -----------------------------------------------------------------------------


def test_staging_records_carry_names_not_paths(tmp_path):
    fs = fsspec.filesystem("file")
    staging = Staging(fs, str(tmp_path), "k")
    staging.create(keep=False)
    (tmp_path / ".recprep-staging-k" / "stream-1").write_bytes(b"abc")
    import google_crc32c

    from recprep.storage.staging import FileFacts

    facts = FileFacts(staging.file("stream-1"), 1, 3, google_crc32c.value(b"abc"))
    staging.record("stream", [facts], ["note"])
    doc = json.loads((tmp_path / ".recprep-staging-k" / "done-stream.json").read_bytes())
    assert doc["files"][0]["path"] == "stream-1"
    assert staging.recorded("stream") == ([facts], ["note"], {})
    doc["files"][0]["path"] = "../../etc/passwd"
    (tmp_path / ".recprep-staging-k" / "done-stream.json").write_text(json.dumps(doc))
    with pytest.raises(UntrustedFileError):
        staging.recorded("stream")


def test_a_seal_of_any_text_is_refused_as_untrusted(tmp_path):
    """A planted side file whose ``mac`` is not ASCII is an untrusted file, not a
    ``TypeError`` out of ``hmac`` (found by ``test_fuzz``)."""
    from recprep.storage.seals import unseal

    for mac in ("é" * 64, "\u2603", ""):
        data = json.dumps({"kind": "run", "staging": "s", "mac": mac}).encode()
        with pytest.raises(UntrustedFileError, match="seal doesn't match"):
            unseal(data, kind="run", staging="s", shown="options.json")
