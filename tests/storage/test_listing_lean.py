"""A local directory listed one file's facts at a time (issue 26 item 4: the trainer's
memory at 100,000 shards): the same entries as fsspec's ``ls(detail=True)``, without
the facts of every file held at once."""

from __future__ import annotations

import os
import tracemalloc

import fsspec
import pytest

from recprep.storage import listing
from recprep.storage.listing import DirectoryEntry, list_entries


def careful(fs: fsspec.AbstractFileSystem, directory: str) -> list[DirectoryEntry]:
    return sorted((DirectoryEntry.of(info) for info in fs.ls(directory, detail=True)),
                  key=lambda e: e.path)


def test_a_local_listing_gives_fsspecs_entries(tmp_path, monkeypatch):
    for name in ("s-00000-of-00001", "s-00001-of-00001", "s.manifest.json", ".s.chunks",
                 "notes.txt"):
        (tmp_path / name).write_bytes(b"x" * len(name))
    (tmp_path / "number=8").mkdir()
    (tmp_path / "sub").mkdir()
    os.symlink(tmp_path / "notes.txt", tmp_path / "link")
    os.symlink(tmp_path / "gone", tmp_path / "dangling")
    fs = fsspec.filesystem("file")
    expected = careful(fs, str(tmp_path))
    monkeypatch.setattr(type(fs), "ls", lambda *a, **k: pytest.fail("listed at once"))
    try:
        assert list_entries(fs, str(tmp_path)) == expected
        assert list_entries(fs, f"file://{tmp_path}/s.manifest.json") == [
            e for e in expected if e.name == "s.manifest.json"]
    finally:
        monkeypatch.undo()
    assert len(expected) == 9


def test_other_filesystems_are_listed_by_their_ls():
    fs = fsspec.filesystem("memory")
    fs.pipe({"/lean/s-00000-of-00000": b"abc", "/lean/s.manifest.json": b"{}"})
    assert [(e.name, e.size) for e in list_entries(fs, "/lean")] == [
        ("s-00000-of-00000", 3), ("s.manifest.json", 2)]
    assert list(listing._listed(fs, "/lean")) == fs.ls("/lean", detail=True)


def test_a_big_directory_is_not_listed_all_at_once(tmp_path):
    """3,000 files: fsspec's facts of all of them at once are about 3x the entries
    recprep keeps; listed one at a time, the peak is the entries (and a little)."""
    for i in range(3000):
        (tmp_path / f"s-{i:05d}-of-02999").touch()
    fs = fsspec.filesystem("file")
    tracemalloc.start()
    try:
        entries = list_entries(fs, str(tmp_path))
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(entries) == 3000 and entries == careful(fs, str(tmp_path))
    assert peak < 1.5 * kept, (peak, kept)
