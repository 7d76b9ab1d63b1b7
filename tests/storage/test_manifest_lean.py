"""A manifest's shard list read entry by entry (issue 26 item 4: the trainer's memory at
100,000 shards): the same manifest as the careful ``json`` parse, or the same error, for
any bytes — and no JSON object per entry made on the way."""

from __future__ import annotations

import json
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recprep.errors import CorruptDataError
from recprep.storage import manifest as manifest_module
from recprep.storage.manifest import Manifest, ShardInfo
from recprep.storage.shardnames import shard_name


def made(count: int, prefix: str = "p", etags: list[str | None] | None = None,
         records: int = 3, schema: dict | None = None) -> Manifest:
    shards = [ShardInfo(shard_name(prefix, i, count), records + i % 3, 60 + i, 0xABCDEF01 + i,
                        None if etags is None else etags[i % len(etags)])
              for i in range(count)]
    return Manifest(prefix, "recordio", "recprep", "snappy", shards,
                    schema=schema or {"a": [1, {"b": 2}]})


def outcome(data: bytes, monkeypatch: pytest.MonkeyPatch | None = None,
            careful: bool = False) -> object:
    """What ``from_json`` gives: the manifest's bytes, or the error's type and text."""
    if careful:
        assert monkeypatch is not None
        monkeypatch.setattr(manifest_module, "_lean_parse", lambda cls, data: None)
    try:
        return Manifest.from_json(data, path="m").to_json()
    except CorruptDataError as err:
        return type(err), str(err)
    finally:
        if careful:
            assert monkeypatch is not None
            monkeypatch.undo()


def test_a_manifest_as_written_is_read_the_lean_way(monkeypatch):
    manifest = made(300, etags=['"9b2c-1"', None, "x\\y"])
    data = manifest.to_json()
    lean = manifest_module._lean_parse(Manifest, data)
    assert lean is not None and lean == manifest and lean.to_json() == data
    assert Manifest.from_json(data) == manifest
    assert outcome(data, monkeypatch, careful=True) == data


_etag = st.none() | st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7f),
                            min_size=0, max_size=260)


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(count=st.integers(1, 40), etags=st.lists(_etag, min_size=1, max_size=3),
       records=st.integers(0, 30), prefix=st.sampled_from(["p", "a b", "é", "x.y-z"]),
       edit=st.integers(0, 10_000), how=st.sampled_from(
           ["none", "flip", "cut", "insert", "dup-shards", "dup-key", "spaces"]))
def test_any_bytes_give_what_the_careful_parse_gives(count, etags, records, prefix, edit,
                                                     how):
    """Manifests as written (any counts, ETags of any visible ASCII, or too long), then
    edited: a byte flipped, cut or inserted; a second ``shards`` list after the first
    (``json`` takes the last one), a key twice in an entry, other spacing. Whatever the
    bytes, ``from_json`` gives the manifest (or error) the careful parse gives."""
    data = made(count, prefix, etags, records).to_json()
    at = edit % len(data)
    if how == "flip":
        data = data[:at] + bytes([data[at] ^ 0x04]) + data[at + 1:]
    elif how == "cut":
        data = data[:at] + data[at + 1:]
    elif how == "insert":
        data = data[:at] + b'"{[,\\ 9' [edit % 8:edit % 8 + 1] + data[at:]
    elif how == "dup-shards":
        other = made(1, prefix).to_json()
        tail = other[other.index(b'\n  "shards"'):other.index(b'\n  "schema"')]
        data = data.replace(b'\n  "schema"', tail + b'\n  "schema"')
    elif how == "dup-key":
        data = data.replace(b'"records": ', b'"records": 1,\n      "records": ', 1 + edit % 2)
    elif how == "spaces":
        data = data.replace(b"\n      ", b"\n     ", 1)
    with pytest.MonkeyPatch.context() as patch:
        careful = outcome(data, patch, careful=True)
    assert outcome(data) == careful


def test_a_nested_shards_list_is_not_taken_for_the_sets(monkeypatch):
    """A list laid out like the shard list, at the same indentation but inside the
    schema, after the real one: the careful parse's manifest, not that list."""
    data = made(3).to_json()
    decoy = made(2).to_json()
    listed = decoy[decoy.index(b'\n  "shards"'):decoy.index(b'\n  "schema"') - 1]
    data = data.replace(b'"schema": {', b'"schema": {' + listed + b",", 1)
    assert manifest_module._lean_parse(Manifest, data) is None
    assert outcome(data) == outcome(data, monkeypatch, careful=True)
    assert Manifest.from_json(data).num_shards == 3


def test_the_lean_parse_makes_no_object_per_entry_at_once():
    """At 20,000 shards the careful parse holds every entry's dict at once (its peak
    about 2.4x the manifest it gives); the lean one little more than the manifest."""
    data = made(20_000, etags=['"9b2c-1"']).to_json()
    tracemalloc.start()
    try:
        manifest = Manifest.from_json(data)
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert manifest.num_shards == 20_000 and json.loads(data)["num_shards"] == 20_000
    assert peak < 1.25 * kept, (peak, kept)
