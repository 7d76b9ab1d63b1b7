"""Which set a path names (issue 22, items 7, 19 and 21): a glob names one set, shards
named by path are shown as what they are, a partial copy says what it is, and a set that
is still being written (or committed) says so.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest

from recprep import RecordIO, convert, errors
from recprep.errors import AmbiguousPathError, MissingShardsError, NotFoundError, SetChangedError
from recprep.tools import copy, head, list_datasets, verify

from ..support import SUPPORT

ROOT = Path(__file__).parents[2]
KILL_JOB = SUPPORT / "kill_job.py"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "recprep", *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)


@pytest.fixture
def two_sets(tmp_path: Path) -> Path:
    """``train`` (10 instances, 2 shards) and ``train_list`` (5, 2 shards) side by side."""
    convert(tmp_path, list(range(10)), 2, "train", progress=False)
    convert(tmp_path, list(range(100, 105)), 2, "train_list", progress=False)
    return tmp_path


# -- item 7: a glob that spans two sets -------------------------------------------------------


@pytest.mark.parametrize("glob", ["train*", "*", "*-of-*", "train?*"])
def test_a_glob_over_two_sets_is_ambiguous_and_names_what_to_pass(two_sets, glob):
    with pytest.raises(AmbiguousPathError) as info:
        RecordIO(two_sets / glob)  # before: both sets' 15 instances, silently
    err = info.value
    assert err.sets == {"train": 2, "train_list": 2}
    assert err.paths == {"train": f"{two_sets}/train", "train_list": f"{two_sets}/train_list"}
    message = str(err)
    assert message.startswith(f"{two_sets}/{glob}: the pattern matches files of several "
                               "shard sets: train (2 shards), train_list (2 shards)")
    assert f"pass a list of them: ['{two_sets}/train', '{two_sets}/train_list']" in message
    # what it says to pass reads both, on purpose
    assert list(RecordIO(list(err.paths.values()))()) == [*range(10), *range(100, 105)]


@pytest.mark.parametrize("named", [
    "train", "train-*-of-*", "train-*", "train.manifest.json", "train_*", "train_list",
])
def test_the_documented_ways_to_name_one_set_still_read_it(two_sets, named):
    expected = list(range(100, 105)) if "_" in named else list(range(10))
    assert list(RecordIO(two_sets / named)()) == expected


def test_a_glob_of_some_shards_or_one_shard_of_a_set_reads_them(two_sets):
    assert list(RecordIO(two_sets / "train-0000[1]-of-*")()) == [1, 3, 5, 7, 9]
    assert list(RecordIO(two_sets / "train-0000[01]-of-00001")()) == list(range(10))


def test_a_glob_over_a_set_and_other_data_files_is_ambiguous(two_sets):
    (two_sets / "trainextra.tfrecord").write_bytes(b"")
    assert list(RecordIO(two_sets / "train-*")()) == list(range(10))  # the set alone
    with pytest.raises(AmbiguousPathError) as info:
        RecordIO(two_sets / "train[-e]*")  # before: the set, then the other file
    assert "the pattern matches files of a shard set and other data files" in str(
        info.value)
    assert info.value.sets == {"train": 2, "trainextra.tfrecord": 1}
    assert "trainextra.tfrecord (a file)" in str(info.value)


def test_data_files_of_no_set_still_read_by_glob(tmp_path):
    """A Spark output directory: part files and _SUCCESS, no shard set."""
    for k in range(3):
        convert(tmp_path / f"tmp{k}", [k * 10, k * 10 + 1], 1, "p", progress=False)
        (tmp_path / f"tmp{k}" / "p-00000-of-00000").rename(tmp_path / f"part-0000{k}")
    (tmp_path / "_SUCCESS").write_bytes(b"")
    assert list(RecordIO(tmp_path / "part-*")()) == [0, 1, 10, 11, 20, 21]
    assert list(RecordIO(tmp_path / "*")()) == [0, 1, 10, 11, 20, 21]


def test_a_glob_over_two_shard_counts_of_one_prefix_is_ambiguous(tmp_path):
    convert(tmp_path / "a", list(range(6)), 2, "p", progress=False)
    convert(tmp_path / "b", list(range(100, 103)), 3, "p", progress=False)
    for name in os.listdir(tmp_path / "b"):
        if name.startswith("p-"):
            os.rename(tmp_path / "b" / name, tmp_path / "a" / name)
    with pytest.raises(AmbiguousPathError) as info:
        RecordIO(tmp_path / "a" / "p-*")  # before: both (9 instances), silently
    assert info.value.sets == {"p-*-of-00001": 2, "p-*-of-00002": 3}
    assert f"Name one: '{tmp_path}/a/p-*-of-00001'" in str(info.value)
    assert "different shard counts" in str(info.value)


@pytest.mark.parametrize("command", ["ls", "verify", "head", "cp"])
def test_the_tools_refuse_a_glob_over_two_sets_alike(two_sets, tmp_path, command):
    glob = str(two_sets / "train*")
    args = [glob, str(tmp_path / "copy")] if command == "cp" else [glob]
    done = cli(command, *args)
    assert done.returncode == 2, done.stdout  # before: ls, verify and cp took both sets
    assert done.stderr.startswith(f"recprep: error: {glob}: the pattern matches files of "
                                  "several shard sets: train (2 shards), train_list")
    assert not (tmp_path / "copy").exists()
    for tool in (list_datasets, verify, head):
        with pytest.raises(AmbiguousPathError):
            tool(glob)


# -- item 19: ls of one shard, of a set's files, and a partial cp ------------------------------


@pytest.fixture
def eight(tmp_path: Path) -> Path:
    """The set ``train`` of 100 instances in 8 shards."""
    out = tmp_path / "out"
    convert(out, list(range(100)), 8, "train", progress=False)
    return out


def shards(out: Path, prefix: str = "train") -> list[str]:
    return sorted(str(p) for p in out.iterdir() if p.name.startswith(prefix + "-"))


def test_ls_of_one_shard_gives_that_shards_facts(eight):
    manifest = json.loads((eight / "train.manifest.json").read_text())
    entry = manifest["shards"][3]
    [info] = list_datasets(str(eight / entry["name"]))
    assert (info.num_shards, info.shards_present, info.set_shards, info.complete) == (
        1, 1, 8, True)
    assert (info.records, info.bytes) == (entry["records"], entry["bytes"]) == (13, info.bytes)
    assert info.notes == [f"the path names one shard ({entry['name']}) of the set's 8 shards: "
                          "the facts are that shard's; `recprep ls "
                          f"{eight}/train` shows the whole set"]
    done = cli("ls", str(eight / entry["name"]))
    row = done.stdout.splitlines()[1].split()
    assert row[:5] == [f"{eight}/train", "1", "of", "8", "13"]  # before: "1/8" and 100
    assert "1/8" not in done.stdout


def test_ls_verify_of_a_sets_files_show_the_set_once(eight):
    files = shards(eight)  # what an unquoted `recprep ls out/train-*` hands over
    [info] = list_datasets(files)  # before: 8 rows of "1/8"
    assert (info.num_shards, info.records, info.set_shards, info.notes) == (8, 100, None, [])
    table = cli("ls", *files).stdout.splitlines()
    assert len(table) == 2 and table[1].split()[1:3] == ["8", "100"]
    report = verify(files)
    assert report.ok and len(report.sets) == 1 and len(report.sets[0].shards) == 8
    some = list_datasets(files[:3])
    assert [(i.num_shards, i.set_shards, i.records) for i in some] == [(3, 8, 39)]


def test_a_partial_copy_warns_and_its_errors_say_what_it_is(eight, tmp_path):
    sample = tmp_path / "sample"
    with pytest.warns(errors.PartialCopyWarning, match="copying 5 of the set's 8 shards, without "
                      "its manifest: the copy is some shards of a set"):
        copy(str(eight / "train-0000[0-4]-of-*"), str(sample), progress=False)
    assert sorted(os.listdir(sample)) == [os.path.basename(p) for p in shards(eight)[:5]]
    for named in (sample, sample / "train-*", sample / "train"):
        with pytest.raises(MissingShardsError) as info:
            RecordIO(named)
        message = str(info.value)
        assert "The set's manifest isn't there either: these are some shards of a set" in (
            message) and "pass the files you want as a list of paths" in message
    files = shards(sample)
    expected = [i for i in range(100) if i % 8 < 5]
    assert sorted(RecordIO(files)()) == expected
    shown = cli("head", *files, "-n", "3")
    assert shown.returncode == 0 and shown.stdout.split() == [  # each file in turn
        "#0", "int", "0", "#1", "int", "8", "#2", "int", "16"]
    [info] = list_datasets(str(sample))
    assert info.notes == ["3 of its 8 shards missing and no manifest: some shards of a set "
                          "(a partial copy?), not a committed set; readers refuse it by "
                          "directory or glob and read its files named one by one"]
    said = cli("cp", str(eight / "train-0000[0-1]-of-*"), str(tmp_path / "two"))
    assert said.returncode == 0 and said.stderr.startswith(
        f"recprep: warning: {eight}/train: copying 2 of the set's 8 shards")


def test_cp_of_all_of_a_sets_files_copies_the_set(eight, tmp_path):
    dest = tmp_path / "dest"
    with warnings.catch_warnings():
        warnings.simplefilter("error", errors.PartialCopyWarning)
        result = copy(shards(eight), str(dest), progress=False)
    assert sorted(os.listdir(dest)) == sorted(os.listdir(eight))  # manifest and side file too
    assert list(RecordIO(dest)()) == list(range(100))
    assert str(result).startswith("9 file(s) and 1 hidden side file(s), ")  # before: 10


def test_cp_of_a_set_missing_a_shard_refuses_to_copy_part_of_it(eight, tmp_path):
    os.remove(shards(eight)[5])
    with pytest.raises(MissingShardsError, match="matched 7 shard"):
        copy(str(eight / "train"), str(tmp_path / "dest"), progress=False)
    assert not (tmp_path / "dest").exists() or not os.listdir(tmp_path / "dest")


# -- item 21: a set still being written --------------------------------------------------------


def test_a_set_being_written_says_who_writes_it_and_since_when(tmp_path):
    started, release = threading.Event(), threading.Event()

    def slow():
        yield 0
        started.set()
        release.wait(60)
        yield from range(1, 10)

    writer = threading.Thread(target=convert, args=(tmp_path, slow, 2, "train"),
                              kwargs={"progress": False})
    writer.start()
    try:
        assert started.wait(60)
        owner = f"pid {os.getpid()} on {socket.gethostname()}"
        for named in (tmp_path, tmp_path / "train", tmp_path / "train-*-of-*"):
            with pytest.raises(NotFoundError) as info:
                RecordIO(named)  # before: "the directory holds no shard set..."
            message = str(info.value)
            assert f"a conversion is writing the set 'train' there (lock {tmp_path}/" \
                   f".recprep-lock-train held by {owner} since 20" in message
            assert f"staging directory {tmp_path}/.recprep-staging-train" in message
            assert "read it once the writer is done" in message
            assert "convert(..., resume=True)" in message
        done = cli("ls", str(tmp_path))
        assert done.returncode == 2 and "a conversion is writing the set 'train'" in (
            done.stderr)
    finally:
        release.set()
        writer.join(60)
    assert list(RecordIO(tmp_path / "train")()) == list(range(10))


def test_a_killed_conversion_says_how_to_finish_it(tmp_path):
    killed = subprocess.run(
        [sys.executable, str(KILL_JOB), str(tmp_path), "serial-parts"], capture_output=True,
        text=True, cwd=ROOT, timeout=120,
        env={**os.environ, "RECPREP_FAILPOINTS": "staging.record=3"})
    assert killed.returncode == 137, killed.stderr
    with pytest.raises(NotFoundError) as info:
        RecordIO(tmp_path / "k")
    message = str(info.value)
    assert "a conversion is writing the set 'k' there" in message
    assert "if no such process runs, it was killed: run it again with " \
           "convert(..., resume=True) to finish it" in message


def test_a_commit_caught_mid_way_is_a_set_changed_error_not_an_ambiguous_path(tmp_path):
    first = subprocess.run([sys.executable, str(KILL_JOB), str(tmp_path), "serial-parts",
                            "--shards", "7"], capture_output=True, text=True, cwd=ROOT,
                           timeout=120)
    assert first.returncode == 0, first.stderr
    killed = subprocess.run(
        [sys.executable, str(KILL_JOB), str(tmp_path), "serial-parts", "--shards", "5",
         "--overwrite"], capture_output=True, text=True, cwd=ROOT, timeout=120,
        env={**os.environ, "RECPREP_FAILPOINTS": "commit.move=2"})
    assert killed.returncode == 137, killed.stderr
    journal = f"{tmp_path}/.recprep-staging-k/commit.json"
    for named in (tmp_path, tmp_path / "k", tmp_path / "k-*"):
        with pytest.raises(SetChangedError) as info:  # before: AmbiguousPathError, or
            RecordIO(named)                            # MissingShardsError for the glob
        assert info.value.path == f"{tmp_path}/k"
        assert f"a commit into this set is in progress or was interrupted ({journal} is " \
               "there, its manifest isn't)" in str(info.value)
