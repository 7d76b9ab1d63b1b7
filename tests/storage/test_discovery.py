"""One discovery rule (``recprep.storage.discovery``): every caller — the reader, the tools,
``convert``'s overwrite check, ``recprep cp`` and Spark's layout — sees the same files of a
directory full of odd names (issue 14)."""

from __future__ import annotations

import json

import pytest

from recprep import convert
from recprep.errors import AmbiguousPathError, OutputExistsError
from recprep.spark.commit import _files_of
from recprep.spark.layout import discover, visible_entries
from recprep.storage import resolve
from recprep.storage.discovery import (
    Kind,
    classify,
    is_data_name,
    list_directory,
    resolve_shard_sets,
    set_files,
)
from recprep.tools import copy
from recprep.tools._sets import find_sets

# name (a trailing / marks a directory), its kind, the set it belongs to
TABLE = [
    ("p-00000-of-00002", Kind.SHARD, "p"),
    ("p-00001-of-00002", Kind.SHARD, "p"),
    ("p-00002-of-00002", Kind.SHARD, "p"),
    ("p.manifest.json", Kind.MANIFEST, "p"),
    (".p.chunks", Kind.SET_SIDE, "p"),
    (".p-00001-of-00002.tfindex", Kind.SHARD_SIDE, "p"),
    (".hidden", Kind.HIDDEN, None),
    (".p-00000-of-00002.crc", Kind.HIDDEN, None),  # Hadoop's checksum sibling
    (".p.manifest.json", Kind.HIDDEN, None),
    ("p-00000-of-00002.crc", Kind.MARKER, None),
    ("_SUCCESS", Kind.MARKER, None),
    ("_committed_123", Kind.MARKER, None),
    ("_temporary/", Kind.DIRECTORY, None),
    ("notes/", Kind.DIRECTORY, None),
    (".recprep-lock-q", Kind.WORK, None),
    (".recprep-staging-p/", Kind.WORK, None),
    (".recprep-cp-0123-p-00000-of-00002", Kind.WORK, None),
    (".q-00000-of-00001.tfindex", Kind.SHARD_SIDE, "q"),  # side files of another prefix
    (".q.chunks", Kind.SET_SIDE, "q"),
    ("q.manifest.json", Kind.MANIFEST, "q"),  # a manifest of another prefix
    ("p-00000-of-00002-00000-of-00000", Kind.SHARD, "p-00000-of-00002"),  # -of- in a prefix
    ("_p-00000-of-00000", Kind.SHARD, "_p"),
    ("part-00000.tfrecord.gz", Kind.DATA, None),
    ("notes.txt", Kind.DATA, None),
    ("number=8/", Kind.PARTITION, None),
    ("_number=8/", Kind.DIRECTORY, None),
]


@pytest.mark.parametrize(("name", "kind", "prefix"), TABLE)
def test_each_name_is_classified_by_the_one_rule(name, kind, prefix):
    what = classify(name.rstrip("/"), directory=name.endswith("/"))
    assert (what.kind, what.prefix) == (kind, prefix)
    if not name.endswith("/"):
        assert is_data_name(name) == (kind in (Kind.SHARD, Kind.DATA))


def odd_directory(tmp_path):
    """A committed set ``p`` (RecordIO: with its chunk side file), then every other file
    of the table beside it. Returns the directory and p's own files."""
    out = tmp_path / "out"
    convert(str(out), list(range(9)), 3, "p")
    own = sorted(p.name for p in out.iterdir())
    assert own == [".p.chunks", "p-00000-of-00002", "p-00001-of-00002", "p-00002-of-00002",
                   "p.manifest.json"]
    for name, _, _ in TABLE:
        path = out / name.rstrip("/")
        if name.endswith("/"):
            path.mkdir()
            (path / "part-00000").write_bytes(b"read only in a partition directory")
        elif not path.exists():
            path.write_bytes(b"{}" if name.endswith(".json") else b"odd")
    return out, sorted([*own, ".p-00001-of-00002.tfindex"])


def names(paths):
    return sorted(str(p).rsplit("/", 1)[1] for p in paths)


def test_every_caller_sees_the_same_files_of_set_p(tmp_path):
    out, own = odd_directory(tmp_path)
    fs, root = resolve(str(out))
    shards = [n for n, k, p in TABLE if k is Kind.SHARD and p == "p"]
    # the reader: dir/p and p's manifest name the shards of p only
    for named in (f"{root}/p", f"{root}/p.manifest.json"):
        (only,) = resolve_shard_sets(fs, [named])
        assert (only.prefix, names(only.paths)) == ("p", shards)
    # the tools (ls/head/verify/cp)
    (found,) = find_sets(fs, f"{root}/p")
    assert names(found.shards) == shards and found.missing == found.unexpected == []
    assert names(found.side_files) == [".p.chunks"]
    # convert's overwrite check: the set's files, side files included
    assert names(e.path for e in set_files(fs, root, "p")) == own
    with pytest.raises(OutputExistsError) as refused:
        convert(str(out), [1], 1, "p")
    assert names(refused.value.existing) == [n for n in own if n != ".p.chunks"]
    # cp: the set and its side file, nothing else
    result = copy(f"{root}/p", str(tmp_path / "copy"))
    assert names(f.dest for f in result.files) == [".p.chunks", *shards, "p.manifest.json"]


def test_every_caller_sees_the_same_data_files(tmp_path):
    out, _ = odd_directory(tmp_path)
    fs, root = resolve(str(out))
    data = sorted(n for n, k, _ in TABLE if k in (Kind.SHARD, Kind.DATA))
    # a glob over all of it names several sets (and data files of none): the reader and
    # the tools refuse it alike, naming the same sets and files (issue 22, item 7)
    named = sorted(["_p", "p", "p-00000-of-00002", "q", "notes.txt", "part-00000.tfrecord.gz"])
    for glob in (lambda: resolve_shard_sets(fs, [f"{root}/*"]),
                 lambda: find_sets(fs, f"{root}/*")):
        with pytest.raises(AmbiguousPathError) as several:
            glob()
        assert sorted(several.value.sets) == named
    # the reader's glob of the data files of no set, and of a partition directory
    sets = resolve_shard_sets(fs, [f"{root}/n*", f"{root}/part-*"])
    assert [s.paths for s in sets] == [[f"{root}/notes.txt"], [f"{root}/number=8/part-00000"],
                                       [f"{root}/part-00000.tfrecord.gz"]]
    # the reader's (and Spark's) directory listing
    files, manifests, subdirs = list_directory(fs, root)
    assert names(files) == data
    assert names(manifests) == ["p.manifest.json", "q.manifest.json"]
    assert names(subdirs) == ["number=8"]
    # the tools' directory: the sets (data files of no set are not a set's)
    found = find_sets(fs, root)
    assert sorted(f.prefix or "" for f in found) == ["_p", "p", "p-00000-of-00002", "q"]
    # a directory with several sets is ambiguous to the reader, and names them
    with pytest.raises(AmbiguousPathError) as ambiguous:
        resolve_shard_sets(fs, [root])
    assert sorted(ambiguous.value.sets) == ["_p", "p", "p-00000-of-00002", "q"]


def test_hidden_and_work_names_are_the_same_for_every_caller(tmp_path):
    out, _ = odd_directory(tmp_path)
    fs, root = resolve(str(out))
    visible = sorted(n.rstrip("/") for n, _, _ in TABLE if not n.startswith("."))
    assert names(visible_entries(fs, root)) == visible
    # what a Spark overwrite replaces in a directory: every file but recprep's own
    files = sorted(n for n, k, _ in TABLE if not n.endswith("/") and k is not Kind.WORK)
    assert names(e.path for e in _files_of(fs, root)) == files
    # recprep cp of the directory copies its visible files (markers too), not hidden ones
    result = copy(str(out), str(tmp_path / "copy"))
    copied = names(f.dest for f in result.files)
    assert copied == sorted([*(n for n in visible if n in files), ".p.chunks"])


def test_spark_leaves_hold_the_reader_data_files(tmp_path):
    root = tmp_path / "spark"
    leaf = root / "number=8"
    leaf.mkdir(parents=True)
    for name in ("part-00000.tfrecord", "part-00001.tfrecord", "_SUCCESS", ".part-00000.crc",
                 "part-00000.crc", "_committed_1", ".hidden"):
        (leaf / name).write_bytes(b"")
    (root / "_temporary").mkdir()
    (root / "_temporary" / "part-00009.tfrecord").write_bytes(b"")
    (root / "_SUCCESS").write_bytes(b"")
    fs, path = resolve(str(root))
    (only,) = discover(fs, path)
    assert only.partition == (("number", "8"),)
    assert names(only.files) == ["part-00000.tfrecord", "part-00001.tfrecord"]
    assert names(p for s in resolve_shard_sets(fs, [path]) for p in s.paths) == names(only.files)


def test_a_lone_stale_side_file_is_no_set_and_is_replaced(tmp_path):
    """convert refuses an existing set, not its side file left alone; the commit replaces it."""
    out = tmp_path / "out"
    out.mkdir()
    (out / ".p.chunks").write_bytes(json.dumps({"stale": True}).encode())
    convert(str(out), list(range(4)), 2, "p")
    assert (out / ".p.chunks").read_bytes() != b'{"stale": true}'
