"""A set committed on S3 by completing multipart uploads, not by server-side copies; a
new set committed by its manifest alone.

``recprep cp`` over a set in an S3 store uploads each file of a whole set to its final
name as a multipart upload left incomplete (invisible until completed), and the commit
completes them (``storage/multipart.py``). Where nothing of the set is yet, each file
goes straight to its name under a journal written first (``storage/earlycommit.py``):
killed at any step, it is never read in part, and the next copy rolls it back.

Against moto's server: no ``CopyObject`` is sent; a ``cp --overwrite`` killed
(failpoints, ``os._exit``) at every step of its commit is never read as a mix, is
finished by ``convert(..., resume=True)`` or by copying again with the exact bytes, and
leaves no multipart upload open; a journal whose upload id was changed is refused (its
seal).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from recprep import RecordIO, RecprepError, convert
from recprep.errors import UntrustedFileError
from recprep.tools import copy

from ..support import SUPPORT
from ..support.requests import s3_requests

ROOT = Path(__file__).parent.parent.parent
JOB = SUPPORT / "kill_job.py"
TOTAL = 250  # instances kill_job writes


def job(out: str, *args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(JOB), out, "serial-parts", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=180, env=env)


def cp(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "recprep", "cp", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=180, env=env)


@pytest.fixture(scope="module")
def sets(tmp_path_factory) -> dict[str, Path]:
    """Sets A and B (5 shards each: ``cp --overwrite`` replaces files of the same names;
    tags A and B) on a local disk."""
    made = {}
    for tag, shards in (("A", "5"), ("B", "5")):
        out = tmp_path_factory.mktemp(tag)
        done = job(str(out), "--tag", tag, "--shards", shards, env=dict(os.environ))
        assert done.returncode == 0, done.stderr
        made[tag] = out
    return made


def local_files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())}


def seen(pattern: str, options: dict) -> str:
    """What a reader of ``pattern`` gets: "A" or "B" (one whole set), "mix", or "error"."""
    try:
        tags = [x[-1][:1] for x in RecordIO(pattern, storage_options=options)()]
    except RecprepError:
        return "error"
    if len(tags) == TOTAL and len(set(tags)) == 1:
        return tags[0]
    return "mix"


def open_uploads(s3, bucket_url: str) -> list[str]:
    import boto3

    client = boto3.client("s3", endpoint_url=s3.endpoint_url, region_name="us-east-1")
    found = client.list_multipart_uploads(Bucket=bucket_url[5:]).get("Uploads", [])
    return [u["Key"] for u in found]


def assert_is_set(s3, out: str, expected: dict[str, bytes]) -> None:
    """``out`` holds exactly ``expected`` (the manifest but for the ETags S3's commit
    records, which are those of the objects there), nothing else, nothing staged."""
    fs = s3.filesystem()
    names = sorted(p.rsplit("/", 1)[1] for p in fs.find(out))
    assert names == sorted(expected), names
    got = {n: fs.cat_file(f"{out}/{n}") for n in expected}
    manifest = json.loads(got.pop("k.manifest.json"))
    etags = [s.pop("etag") for s in manifest["shards"]]
    assert etags == [fs.info(f"{out}/{s['name']}")["ETag"] for s in manifest["shards"]]
    assert manifest == json.loads(expected["k.manifest.json"])
    assert got == {n: d for n, d in expected.items() if n != "k.manifest.json"}


def test_cp_over_a_set_on_s3_sends_no_copy_and_completes_an_upload_per_file(
        s3, s3_url, sets):
    """Over a set there (``--overwrite``), each file goes as an upload left incomplete,
    completed by the commit; into a directory holding nothing of the set, straight to
    its name (an early commit: ``storage/earlycommit.py``)."""
    out = f"{s3_url}/data"
    files = local_files(sets["B"])
    shards = [n for n in files if n != "k.manifest.json"]  # 5 shards and .k.chunks
    with s3_requests(bucket=s3_url) as sent:
        copy(str(sets["A"] / "k"), out, storage_options=s3.storage_options, progress=False)
    assert sent["CopyObject"] == sent["CreateMultipartUpload"] == 0, sent.log
    with s3_requests(bucket=s3_url) as sent:
        copy(str(sets["B"] / "k"), out, storage_options=s3.storage_options, progress=False,
             overwrite=True)
    assert sent["CopyObject"] == 0, sent.log
    completed = sorted(k.rsplit("/", 1)[1] for k in sent.keys_of("CompleteMultipartUpload"))
    assert completed == sorted(shards)
    assert sent["CreateMultipartUpload"] == len(shards)  # small files too: one part each
    assert_is_set(s3, out, files)
    assert open_uploads(s3, s3_url) == []


def test_an_upload_completed_before_a_kill_is_completed_again_only_if_it_is_there(
        s3, s3_url, monkeypatch):
    """A replay completes each upload again: one a killed commit completed (S3 then
    answers ``NoSuchUpload``) is fine when the object there is the one its parts make; a
    key holding anything else is an error naming the shard."""
    from botocore.exceptions import ClientError

    from recprep.storage.multipart import complete
    from recprep.write.uploads import UploadSlots, open_upload

    from ..tools.s3calls import S3Calls

    fs = s3.filesystem()
    path = f"{s3_url}/x/k-00000-of-00000"
    with open_upload(fs, path, UploadSlots(fs), deferred=True) as out:
        out.write(b"abc" * 1000)
    pending = out.pending
    assert pending is not None and [p.size for p in pending.parts] == [3000]
    assert not fs.exists(path)  # incomplete: invisible
    assert complete(fs, path, pending) == fs.info(path)["ETag"]
    assert fs.cat_file(path) == b"abc" * 1000

    def gone(method, kwargs):  # what S3 answers an upload completed already
        if method == "complete_multipart_upload":
            raise ClientError({"Error": {"Code": "NoSuchUpload", "Message": "gone"}},
                              "CompleteMultipartUpload")

    S3Calls(monkeypatch, fault=gone)
    complete(fs, path, pending)  # the object is the one its parts make: fine
    fs.pipe(path, b"something else")
    with pytest.raises(RecprepError, match="k-00000-of-00000.*isn't the one its parts make"):
        complete(fs, path, pending)


#: every step of the commit on S3 (where the side files go in one request: one cleanup)
CP_STEPS = ["cp.copied=3", "staging.rename=1", "commit.journal=1", "commit.uncommit=1",
            "commit.complete=1", "commit.complete=4", "commit.manifest=1", "commit.cleanup=1"]


@pytest.mark.parametrize("finish", ["resume", "copy-again"])
@pytest.mark.parametrize("failpoint", CP_STEPS)
def test_a_cp_overwrite_to_s3_killed_at_any_step_is_never_read_as_a_mix(
        s3, s3_url, sets, failpoint, finish):
    out = f"{s3_url}/data"
    options = s3.storage_options
    copy(str(sets["A"] / "k"), out, storage_options=options, progress=False)
    env = s3.env({**os.environ, "RECPREP_FAILPOINTS": failpoint})
    killed = cp(str(sets["B"] / "k"), out, "--overwrite", env=env)
    assert killed.returncode == 137, killed.stderr
    fs = s3.filesystem()
    got = seen(f"{out}/k-*", options)
    assert got in ("A", "B", "error")
    assert (got == "error") == (not fs.exists(f"{out}/k.manifest.json"))
    env.pop("RECPREP_FAILPOINTS")
    if finish == "resume":
        done = job(out, "--tag", "B", "--shards", "5", "--resume", "--overwrite", env=env)
    else:
        done = cp(str(sets["B"] / "k"), out, "--overwrite", env=env)
    assert done.returncode == 0, done.stderr
    assert_is_set(s3, out, local_files(sets["B"]))
    assert open_uploads(s3, s3_url) == []  # nothing left billed
    assert seen(f"{out}/k-*", options) == "B"


def test_a_journal_whose_upload_id_was_changed_is_refused(s3, s3_url, sets):
    out = f"{s3_url}/data"
    copy(str(sets["A"] / "k"), out, storage_options=s3.storage_options, progress=False)
    env = s3.env({**os.environ, "RECPREP_FAILPOINTS": "commit.journal=1"})
    killed = cp(str(sets["B"] / "k"), out, "--overwrite", env=env)
    assert killed.returncode == 137, killed.stderr
    fs = s3.filesystem()
    path = f"{out}/.recprep-staging-k/commit.json"
    doc = json.loads(fs.cat_file(path))
    name, upload = next(iter(doc["uploads"].items()))
    upload["upload_id"] = "forged-" + upload["upload_id"]
    fs.pipe(path, json.dumps(doc).encode())
    options = s3.storage_options
    with pytest.raises(UntrustedFileError, match="commit.json.*seal doesn't match"):
        convert(out, [1], 5, "k", resume=True, storage_options=options)
    assert seen(f"{out}/k-*", options) == "A"  # the commit touched nothing yet, nor this
    assert fs.cat_file(f"{out}/{name}") == (sets["A"] / name).read_bytes()  # A's, as it was


def test_a_pending_commit_whose_upload_was_aborted_is_written_again(s3, s3_url, sets):
    """Before the commit point a resume checks each recorded upload is still open with
    its parts (``ListParts``): one aborted meanwhile (a lifecycle rule, a user) makes the
    journal unfinishable, and the set is written again — never completed in part."""
    out = f"{s3_url}/data"
    copy(str(sets["A"] / "k"), out, storage_options=s3.storage_options, progress=False)
    env = s3.env({**os.environ, "RECPREP_FAILPOINTS": "commit.journal=1"})
    killed = cp(str(sets["B"] / "k"), out, "--overwrite", env=env)
    assert killed.returncode == 137, killed.stderr
    fs = s3.filesystem()
    doc = json.loads(fs.cat_file(f"{out}/.recprep-staging-k/commit.json"))
    name, upload = sorted(doc["uploads"].items())[1]
    fs.call_s3("abort_multipart_upload", Bucket=s3_url[5:], Key=f"data/{name}",
               UploadId=upload["upload_id"])
    env.pop("RECPREP_FAILPOINTS")
    done = job(out, "--tag", "B", "--shards", "5", "--resume", "--overwrite", env=env)
    assert done.returncode == 0, done.stderr
    assert_is_set(s3, out, local_files(sets["B"]))
    assert open_uploads(s3, s3_url) == []


#: every step of an early commit (a set copied whole where nothing of it is): before its
#: journal, with its journal alone, with files in place, past the manifest, cleaned up
EARLY_STEPS = ["staging.rename=1", "commit.journal=1", "cp.copied=1", "cp.copied=4",
               "commit.manifest=1", "commit.cleanup=1"]


@pytest.mark.parametrize("finish", ["resume", "copy-again"])
@pytest.mark.parametrize("failpoint", EARLY_STEPS)
def test_a_cp_into_a_directory_without_the_set_killed_at_any_step_is_never_read_part_written(
        s3, s3_url, sets, failpoint, finish):
    """Its files go to their names before the commit; while the manifest isn't there the
    journal makes readers refuse the set, and the next copy (without ``--overwrite``) or
    ``convert(..., resume=True)`` removes them first."""
    out = f"{s3_url}/data"
    options = s3.storage_options
    env = s3.env({**os.environ, "RECPREP_FAILPOINTS": failpoint})
    killed = cp(str(sets["B"] / "k"), out, env=env)
    assert killed.returncode == 137, killed.stderr
    fs = s3.filesystem()
    committed = fs.exists(f"{out}/k.manifest.json")
    assert committed == (failpoint in ("commit.manifest=1", "commit.cleanup=1"))
    placed = [p for p in fs.find(out) if "/k-" in p]
    if failpoint in ("staging.rename=1", "commit.journal=1"):  # the journal goes first
        assert placed == []
    elif failpoint == "cp.copied=4":  # (the window is real)
        assert len(placed) >= 3
    assert seen(f"{out}/k-*", options) == ("B" if committed else "error")
    env.pop("RECPREP_FAILPOINTS")
    if finish == "resume":
        done = job(out, "--tag", "B", "--shards", "5", "--resume", env=env)
    else:  # the same command again (a committed set needs --overwrite, as any set there)
        done = cp(str(sets["B"] / "k"), out, *(["--overwrite"] if committed else []), env=env)
    assert done.returncode == 0, done.stderr
    assert_is_set(s3, out, local_files(sets["B"]))
    assert open_uploads(s3, s3_url) == []
    assert seen(f"{out}/k-*", options) == "B"


def test_a_killed_early_commit_removes_only_its_own_set_files(s3, s3_url, sets):
    """A journal naming a file of another set (sealed with this user's key: as if its
    run had been told so) never removes it: only names of the set are rolled back."""
    from recprep.storage.seals import seal

    out = f"{s3_url}/data"
    options = s3.storage_options
    copy(str(sets["A"] / "k"), f"{out}/other", storage_options=options, progress=False)
    fs = s3.filesystem()
    fs.pipe(f"{out}/q-00000-of-00000", b"another set's")
    env = s3.env({**os.environ, "RECPREP_FAILPOINTS": "cp.copied=4"})
    assert cp(str(sets["B"] / "k"), out, env=env).returncode == 137
    staging = f"{out}/.recprep-staging-k"
    doc = json.loads(fs.cat_file(f"{staging}/commit.json"))
    assert doc["early"] == sorted(n for n in local_files(sets["B"]) if n != "k.manifest.json")
    doc = {k: v for k, v in doc.items() if k != "mac"}
    doc["early"] = [*doc["early"], "q-00000-of-00000"]
    fs.pipe(f"{staging}/commit.json", seal(doc))
    done = cp(str(sets["B"] / "k"), out, env=s3.env(dict(os.environ)))
    assert done.returncode == 0, done.stderr
    assert fs.cat_file(f"{out}/q-00000-of-00000") == b"another set's"
    assert seen(f"{out}/k-*", options) == "B"
    assert seen(f"{out}/other/k-*", options) == "A"


@pytest.mark.parametrize("refused", ["commit.json", "k-00002-of-00004", "k.manifest.json"])
def test_an_early_commit_that_fails_leaves_the_destination_as_it_was(
        s3, s3_url, sets, monkeypatch, refused):
    """The journal refused (no file may go before it: none is sent), a file refused
    (those already in place are removed, then the journal), the manifest refused (the
    commit point not passed: the same): a ``WriteError`` naming it, and nothing left."""
    from recprep.errors import WriteError

    from ..tools.s3calls import S3Calls

    def fault(method, kwargs):
        if method == "put_object" and kwargs.get("Key", "").endswith(refused):
            raise PermissionError(13, "Access Denied")

    calls = S3Calls(monkeypatch, fault=fault)
    out = f"{s3_url}/data"
    with pytest.raises(WriteError, match=f"{refused}.*Access Denied"):
        copy(str(sets["B"] / "k"), out, storage_options=s3.storage_options, progress=False)
    shards = [k for k in calls.of("put_object") if "/k-" in k]
    assert (shards == []) == (refused == "commit.json")  # (the gate held them)
    assert s3.filesystem().find(out) == []
    assert open_uploads(s3, s3_url) == []


def test_a_killed_copy_of_two_new_sets_is_rolled_back_whole_by_the_next(
        s3, s3_url, tmp_path):
    """Both sets' journals are settled before anything is listed as there (not only the
    first's): copying the directory again needs no ``--overwrite``."""
    src = tmp_path / "two"
    for prefix in ("a", "b"):
        convert(str(src), [f"{prefix}{i}" for i in range(40)], 3, prefix, progress=False)
    out = f"{s3_url}/both"
    env = s3.env({**os.environ, "RECPREP_FAILPOINTS": "cp.copied=5"})
    assert cp(str(src), out, env=env).returncode == 137
    fs = s3.filesystem()
    assert {p.rsplit("/", 1)[1][:1] for p in fs.find(out) if "-of-" in p} <= {"a", "b"}
    done = cp(str(src), out, env=s3.env(dict(os.environ)))
    assert done.returncode == 0, done.stderr
    options = s3.storage_options
    for prefix in ("a", "b"):
        got = list(RecordIO(f"{out}/{prefix}", storage_options=options)())
        assert got == [f"{prefix}{i}" for i in range(40)]
    names = sorted(p.rsplit("/", 1)[1] for p in fs.find(out))
    assert names == sorted(p.name for p in src.iterdir())
    assert open_uploads(s3, s3_url) == []
