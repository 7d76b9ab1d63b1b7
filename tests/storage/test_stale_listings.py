"""Stale S3 listings (issue 22, item 13), on moto's S3 server with s3fs.

s3fs keeps every directory listing for the life of its filesystem object, which all
readers of a process share. A listing taken while a commit was under way (or before it)
is not the set afterwards: the reader lists again when what it listed doesn't make one
set, or doesn't agree with the manifest; a set caught mid-commit is a
``SetChangedError``; a reader after the commit completes reads the new set.

The writers run as processes of their own (``tests/support/kill_job.py``), as another job would:
this process's s3fs never hears of their writes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from recprep import RecordIO
from recprep.errors import SetChangedError
from recprep.storage import resolve
from recprep.tools import list_datasets, verify

from ..support import SUPPORT

ROOT = Path(__file__).parents[2]
JOB = SUPPORT / "kill_job.py"
TOTAL = 250  # instances kill_job writes


def write(s3, out: str, *args: str, failpoint: str | None = None) -> int:
    env = s3.env({**os.environ})
    if failpoint:
        env["RECPREP_FAILPOINTS"] = failpoint
    done = subprocess.run([sys.executable, str(JOB), out, "serial-parts", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=180, env=env)
    assert done.returncode in (0, 137), done.stderr
    return done.returncode


def tags(pattern: str, s3) -> set[str]:
    """The tags of what a new reader of ``pattern`` reads: {"A"} or {"B"} for one set."""
    read = list(RecordIO(pattern, storage_options=s3.storage_options)())
    assert len(read) == TOTAL
    return {instance[-1][:1] for instance in read}


def test_a_reader_after_a_commit_reads_it_though_a_listing_was_taken_mid_commit(s3, s3_url):
    out = f"{s3_url}/data"
    assert write(s3, out, "--tag", "A", "--shards", "7") == 0
    assert tags(f"{out}/k", s3) == {"A"}
    # an overwrite by 5 shards, killed after its first shard moved in: a commit under way
    assert write(s3, out, "--tag", "B", "--shards", "5", "--overwrite",
                 failpoint="commit.move=2") == 137
    journal = f"{out}/.recprep-staging-k/commit.json"
    for pattern in (out, f"{out}/k", f"{out}/k-*"):
        with pytest.raises(SetChangedError) as info:  # before: AmbiguousPathError, or
            RecordIO(pattern, storage_options=s3.storage_options)  # MissingShardsError
        assert info.value.path == f"{out}/k"
        assert f"a commit into this set is in progress or was interrupted ({journal}" in str(
            info.value)
    assert write(s3, out, "--tag", "B", "--shards", "5", "--resume") == 0
    for pattern in (out, f"{out}/k", f"{out}/k-*"):  # before: the mid-commit listing, forever
        assert tags(pattern, s3) == {"B"}


def test_a_listing_cached_before_a_commit_is_taken_again(s3, s3_url):
    out = f"{s3_url}/data"
    assert write(s3, out, "--tag", "A", "--shards", "7") == 0
    fs, path = resolve(out, s3.storage_options)
    assert len(fs.ls(path)) == 9  # 7 shards, manifest, chunk index: now cached
    assert write(s3, out, "--tag", "B", "--shards", "5", "--overwrite") == 0
    assert len(fs.ls(path)) == 9  # the cache still says 7 shards
    # before: NotFoundError, "a file of the set is missing (it was there when the reader
    # listed it)" -- the listing was the old set's, the manifest the new one's
    assert tags(f"{out}/k", s3) == {"B"}
    assert len(fs.ls(path)) == 7  # listed again: 5 shards, manifest, chunk index


def test_the_tools_take_a_fresh_listing(s3, s3_url):
    out = f"{s3_url}/data"
    assert write(s3, out, "--tag", "A", "--shards", "7") == 0
    fs, path = resolve(out, s3.storage_options)
    fs.ls(path)
    assert write(s3, out, "--tag", "B", "--shards", "5", "--overwrite") == 0
    [info] = list_datasets(out, storage_options=s3.storage_options)
    assert (info.num_shards, info.shards_present, info.records) == (5, 5, TOTAL)
    report = verify(out, storage_options=s3.storage_options)
    assert report.ok, [str(p) for p in report.problems]  # before: 7 shards "unexpected"
