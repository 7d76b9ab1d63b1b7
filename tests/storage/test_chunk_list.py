"""The chunk index side file's entries read as arrays (``storage/chunklist.py``): taken for
the files ``convert`` writes, equal to ``json``'s reading on any bytes it accepts, and a
few bytes per shard held where ``json``'s dicts held hundreds."""

from __future__ import annotations

import gc
import json
import tracemalloc
from pathlib import Path

import fsspec
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import recprep.storage.chunkindex as chunkindex
from recprep import RecordIO, convert
from recprep.storage.chunkindex import chunks_name, encode, load_table
from recprep.storage.chunklist import pack_entries, pack_lean
from recprep.storage.manifest import Manifest, ShardInfo
from recprep.storage.shardnames import manifest_name, shard_name


def _manifest(prefix: str, sizes: list[int]) -> Manifest:
    shards = [ShardInfo(shard_name(prefix, i, len(sizes)), 1, size, (7 * i + 3) % (1 << 32))
              for i, size in enumerate(sizes)]
    return Manifest(name_prefix=prefix, format="recordio", codec="raw", compressor="none",
                    shards=shards, schema=None)


def _same(a, b) -> bool:  # two PackedChunks
    return (np.array_equal(a.bounds, b.bounds) and np.array_equal(a.deltas, b.deltas)
            and np.array_equal(a.counts, b.counts) and a.bad == b.bad)


def test_a_convert_written_side_file_is_read_as_arrays_not_by_json(tmp_path, monkeypatch):
    data = [(i, "x" * (i % 50)) for i in range(3000)]
    convert(str(tmp_path), data, 4, "s", chunk_bytes=2048, progress=False)
    careful = []
    monkeypatch.setattr(chunkindex, "pack_entries", lambda e: careful.append(e))
    fs = fsspec.filesystem("file")
    manifest = Manifest.from_json((tmp_path / manifest_name("s")).read_bytes())
    table = load_table(fs, str(tmp_path), manifest)
    assert table is not None and not careful
    body = json.loads((tmp_path / chunks_name("s")).read_bytes().splitlines()[0])
    for entry in body["shards"]:
        index = table.index(entry["name"])
        assert index is not None
        assert index.offsets.tolist() == np.cumsum(entry["offsets"]).tolist()
        assert index.num_records == sum(entry["counts"]) > 0
    monkeypatch.undo()
    ds = RecordIO(str(tmp_path)).dataset()  # reads by the side file's chunks
    assert [ds[i] for i in range(0, 3000, 97)] == data[::97]


_chunks = st.lists(st.integers(1, 10**12), max_size=5)  # deltas after the first


@settings(max_examples=150, deadline=None)
@given(st.lists(_chunks, max_size=6), st.data())
def test_the_lean_reading_equals_json_on_any_bytes_it_accepts(runs, draw):
    """Written side files read the same both ways; edited ones (a byte flipped, cut or
    put in) are either left to ``json`` (None) or read as ``json`` reads them."""
    sizes = [sum(r) + 10**13 for r in runs]
    manifest = _manifest("p", sizes)
    chunks = {s.name: ([0, *np.cumsum(r).tolist()], [1] * (len(r) + 1))
              for s, r in zip(manifest.shards, runs, strict=True)}
    text = encode(manifest, chunks).rstrip(b"\n").rpartition(b"\n")[0]
    names = [s.name for s in manifest.shards]
    crcs = [s.crc32c for s in manifest.shards]
    lean = pack_lean(text, names, sizes, crcs)
    assert lean is not None and _same(lean[1], pack_entries(json.loads(text)["shards"]))
    at = draw.draw(st.integers(0, len(text) - 1))
    edit = draw.draw(st.sampled_from(["flip", "cut", "insert"]))
    byte = draw.draw(st.sampled_from(b'0123456789,[]{}":ab\\'))
    edited = (text[:at] + bytes([byte]) + text[at + 1:] if edit == "flip" else
              text[:at] + text[at + 1:] if edit == "cut" else
              text[:at] + bytes([byte]) + text[at:])
    lean = pack_lean(edited, names, sizes, crcs)
    if lean is None:
        return
    rest, body = _parsed(lean[0]), _parsed(edited)
    assert (rest is None) == (body is None)  # json refuses the rest where it refuses all
    if body is None:
        return
    listed = [(e["name"], e["bytes"], e["crc32c"]) for e in body["shards"]]
    assert listed == list(zip(names, sizes, crcs, strict=True))
    assert _same(lean[1], pack_entries(body["shards"]))
    assert rest == {k: v for k, v in body.items() if k != "shards"}


def _parsed(text: bytes):
    try:
        return json.loads(text)
    except ValueError:
        return None


def _held_per_shard(tmp_path: Path, count: int) -> float:
    manifest = _manifest("s", [10**6] * count)
    chunks = {s.name: ([0, 1000, 5000], [1, 0, 0]) for s in manifest.shards}
    (tmp_path / chunks_name("s")).write_bytes(encode(manifest, chunks))
    manifest.side_files.append(chunkindex.binding(fsspec.filesystem("file"),
                                                  str(tmp_path / chunks_name("s"))))
    read = Manifest.from_json(manifest.to_json().encode()
                              if isinstance(manifest.to_json(), str) else manifest.to_json())
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    table = load_table(fsspec.filesystem("file"), str(tmp_path), read)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert table is not None and table.index(shard_name("s", count - 1, count)) is not None
    return held / count


def test_a_side_file_of_many_shards_holds_a_few_bytes_per_shard(tmp_path):
    """Three chunks a shard: 56 bytes of arrays (``json``'s dicts: some 840)."""
    assert _held_per_shard(tmp_path, 5000) < 100
