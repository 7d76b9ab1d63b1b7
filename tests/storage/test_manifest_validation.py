"""Hostile manifests (issue 13 item 8): every malformed manifest is a ``CorruptDataError``
naming the file, never a ``RecursionError``, ``OverflowError``, ``TypeError`` or bare
``ValueError``; a schema its codec can't use is one too."""

from __future__ import annotations

import json

import fsspec
import pytest

from recprep import RecordIO, convert
from recprep.errors import CorruptDataError
from recprep.storage import manifest as manifest_module
from recprep.storage.manifest import Manifest, ShardInfo, read_manifest


def valid_doc() -> dict:
    shards = [ShardInfo(f"p-0000{i}-of-00001", 3, 60, 0xABCDEF01) for i in range(2)]
    m = Manifest("p", "recordio", "raw", "snappy", shards, schema={"a": [1, {"b": 2}]})
    return json.loads(m.to_json())


def mutated(path: str, value: object) -> bytes:
    doc = valid_doc()
    keys = path.split(".")
    target = doc
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    last = keys[-1]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return json.dumps(doc).encode()


def refused(data: bytes | str, match: str) -> CorruptDataError:
    with pytest.raises(CorruptDataError, match=match) as info:
        Manifest.from_json(data, path="m.manifest.json")
    assert info.value.path == "m.manifest.json"
    return info.value


def test_the_valid_manifest_round_trips():
    data = json.dumps(valid_doc()).encode()
    assert Manifest.from_json(data).to_json() == Manifest.from_json(data).to_json()
    assert Manifest.from_json(data).num_records == 6


def test_deep_json_is_not_a_recursion_error():
    refused("[" * 100_000 + "]" * 100_000, "nests too deeply|JSON object")
    deep: object = 1
    for _ in range(40):
        deep = [deep]
    refused(mutated("schema", {"a": deep}),
            "schema must be a JSON object at most 32 levels deep")


@pytest.mark.parametrize("text", ["Infinity", "-Infinity", "NaN", "1e400", "3.0", "true",
                                  str(2**63), "-1", "1" + "0" * 5000, '"5"'])
def test_counts_are_ints_in_range(text):
    doc = json.dumps(valid_doc()).replace('"records": 3', f'"records": {text}', 1)
    refused(doc, "records must be an int in|not a number a manifest can hold|not JSON")


@pytest.mark.parametrize("path,value,match", [
    ("shards.0.name", 7, r"shards\[0\].name must be 'p-00000-of-00001'"),
    ("shards.1.name", "p-00000-of-00001", r"shards\[1\].name must be 'p-00001-of-00001'"),
    ("shards.0.name", "../../etc/passwd", "name must be"),
    ("shards.0.crc32c", "xyz", "8 hex digits"),
    ("shards.0.crc32c", 12345678, "8 hex digits"),
    ("shards.0.bytes", -5, "bytes must be an int"),
    ("shards.0", [], "must be an object"),
    ("shards", {"a": 1}, "shards must be a list"),
    ("name_prefix", "a/b", "name_prefix"),
    ("name_prefix", None, "name_prefix must be a non-empty string"),
    ("format", ["recordio"], "format must be a non-empty string"),
    ("schema", [1, 2], "schema must be a JSON object"),
    ("num_records", -7, "num_records must be an int"),
    ("num_shards", 3, "num_shards is 3"),
    ("manifest_version", 99, "newer than this recprep reads"),
    ("shards.0.records", 1000, "claims 1000 records in 60 bytes"),
    # an ETag goes into a request header (If-Match): visible ASCII only, bounded
    ("shards.0.etag", '"abc"\r\nX-Injected: 1', r"shards\[0\].etag must be 1 to 256 visible"),
    ("shards.0.etag", "a b", "etag must be"),
    ("shards.0.etag", "", "etag must be"),
    ("shards.0.etag", "e" * 257, "etag must be"),
    ("shards.1.etag", 1234, "etag must be"),
    ("shards.1.etag", ["x"], "etag must be"),
])
def test_every_field_is_validated(path, value, match):
    refused(mutated(path, value), match)


def test_an_etag_is_kept_and_written_only_when_there_is_one():
    doc = valid_doc()
    assert all("etag" not in s for s in doc["shards"])  # no ETag: the bytes of before
    doc["shards"][1]["etag"] = '"9b2cf535f27731c974343645a3985328"'
    m = Manifest.from_json(json.dumps(doc))
    assert [s.etag for s in m.shards] == [None, '"9b2cf535f27731c974343645a3985328"']
    assert Manifest.from_json(m.to_json()) == m
    assert [("etag" in s) for s in json.loads(m.to_json())["shards"]] == [False, True]


def test_not_an_object_and_not_json():
    refused(b"[]", "expected a JSON object")
    refused(b"\xff\xfe\x00garbage", "not JSON")
    refused(b"{", "not JSON")


def test_a_huge_manifest_is_refused_before_it_is_parsed(monkeypatch, mem_url):
    monkeypatch.setattr(manifest_module, "MAX_MANIFEST_BYTES", 1000)
    fs, root = fsspec.core.url_to_fs(mem_url)
    fs.pipe(f"{root}/p.manifest.json", b" " * 2000)
    with pytest.raises(CorruptDataError, match="2000 bytes, more than a manifest may have"):
        read_manifest(fs, f"{root}/p.manifest.json")


def test_a_schema_its_codec_cannot_use_is_a_damaged_manifest(tmp_path):
    from recprep.codecs.example import ExampleCodec
    from recprep.codecs.features import Feature

    codec = ExampleCodec([Feature("x", "int64", (2,))])
    convert(str(tmp_path), [{"x": [1, 2]}], 1, "p", codec=codec)
    path = tmp_path / "p.manifest.json"
    doc = json.loads(path.read_text())
    for shape in ([2] + [1] * 64, [2**70], "ab"):  # numpy refuses 65 dimensions
        doc["schema"]["features"][0]["shape"] = shape
        path.write_text(json.dumps(doc))
        with pytest.raises(CorruptDataError, match="the manifest's schema is not one codec"):
            list(RecordIO(str(tmp_path / "p-*")))
