"""A set's shards as a table (issue 26 items 4 and 7): a manifest read from a file holds
its entries as arrays and a reader a whole set's paths as a rule, not an object per
shard — and each answers every question as the list of objects it stands for did."""

from __future__ import annotations

import json
import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from recprep import RecordIO, convert
from recprep.read.filetable import Counts, compact_paths, listed_counts
from recprep.storage import manifest as manifest_module
from recprep.storage.discovery import ShardSet
from recprep.storage.manifest import Manifest, ShardInfo
from recprep.storage.shardnames import shard_name
from recprep.storage.shardtable import SetPaths, ShardTable

_PREFIXES = st.sampled_from(["p", "a b", "é", "x.y-z", "s-00001-of-00002"])
_ETAG = st.none() | st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7e),
                            min_size=1, max_size=8)


@st.composite
def _entries(draw: st.DrawFn) -> tuple[str, list[ShardInfo]]:
    prefix = draw(_PREFIXES)
    count = draw(st.integers(0, 30))
    big = st.integers(0, (1 << 63) - 1)
    return prefix, [ShardInfo(shard_name(prefix, i, count), draw(big), draw(big),
                              draw(st.integers(0, (1 << 32) - 1)), draw(_ETAG))
                    for i in range(count)]


@settings(max_examples=60, deadline=None)
@given(entries=_entries(), probe=st.integers(-40, 40),
       other=st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7e), max_size=30))
def test_a_table_answers_as_the_list_of_its_entries(entries, probe, other):
    prefix, listed = entries
    table = ShardTable.of(prefix, listed)
    again = pickle.loads(pickle.dumps(table))
    for made in (table, again):
        assert len(made) == len(listed) and list(made) == listed and made == listed
        assert listed == made and made[probe:] == listed[probe:]
        assert list(made.names()) == [s.name for s in listed]
        if -len(listed) <= probe < len(listed):
            assert made[probe] == listed[probe]
        else:
            try:
                made[probe]
            except IndexError:
                pass
            else:
                raise AssertionError("no IndexError")
        for field in ("records", "bytes"):
            assert made.total(field) == sum(getattr(s, field) for s in listed)
        for i, s in enumerate(listed):
            assert made.find(s.name) == i and made.entry(s.name) == s
        names = {s.name for s in listed}
        for name in (other, f"{prefix}-{other}", shard_name(prefix, 0, len(listed) + 1),
                     shard_name(prefix + "x", 0, len(listed) or 1)):
            assert (made.find(name) is None) == (name not in names)
    assert table != listed[:-1] or not listed
    if listed:
        changed = [*listed[:-1], ShardInfo(listed[-1].name, 0, 0, 0, '"x"')]
        assert (table == changed) == (listed == changed)


def test_a_manifest_read_from_a_file_holds_a_table_either_way(monkeypatch):
    shards = [ShardInfo(shard_name("p", i, 300), i % 3, 10, i, None) for i in range(300)]
    manifest = Manifest("p", "recordio", "recprep", "snappy", shards)
    data = manifest.to_json()
    lean = Manifest.from_json(data)
    monkeypatch.setattr(manifest_module, "_lean_parse", lambda cls, data: None)
    careful = Manifest.from_json(data)
    for read in (lean, careful):
        assert isinstance(read.shards, ShardTable) and read.shards.etags is None
        assert read == manifest and read.to_json() == data
        assert read.num_records == 300 and read.total_bytes == 3000
    assert len(pickle.dumps(lean)) < len(pickle.dumps(manifest)) / 2


@settings(max_examples=200, deadline=None)
@given(count=st.integers(1, 12), prefix=_PREFIXES, name=st.one_of(
    st.text(st.sampled_from(".p-0123456789ofx"), max_size=30),
    st.builds(lambda i, kind, cut: f".{shard_name('p', i, 12)}.{kind}"[:cut],
              st.integers(0, 13), st.sampled_from(["", "tfindex", "x"]), st.integers(0, 40))))
def test_a_side_file_belongs_to_a_table_as_to_the_list(count, prefix, name):
    # the careful rule: `.{owner}.<kind>`, the owner the prefix or any shard's name
    listed = [ShardInfo(shard_name(prefix, i, count), 1, 10, 0) for i in range(count)]
    as_list = Manifest(prefix, "recordio", "recprep", "snappy", listed)
    as_table = Manifest(prefix, "recordio", "recprep", "snappy",
                        ShardTable.of(prefix, listed))
    owners = [prefix, *(s.name for s in listed)]
    expected = any(name.startswith(f".{o}.") and len(name) > len(o) + 2 for o in owners)
    assert manifest_module._side_file_owner(as_list, name) is expected
    assert manifest_module._side_file_owner(as_table, name) is expected


def test_a_whole_sets_paths_are_a_rule_and_its_counts_one_copy():
    paths = [f"/d/{shard_name('p', i, 4)}" for i in range(4)]
    made = compact_paths(ShardSet("/d", "p", list(paths)))
    assert isinstance(made, SetPaths) and made == paths and list(made) == paths
    assert made[-1] == paths[-1] and made[1:3] == paths[1:3]
    assert [made.index_of(p) for p in paths] == [0, 1, 2, 3]
    assert made.index_of("/e/" + shard_name("p", 1, 4)) is None
    assert pickle.loads(pickle.dumps(made)) == paths
    for partial in (paths[:3], paths[1:], [paths[0], paths[2], paths[1], paths[3]]):
        assert compact_paths(ShardSet("/d", "p", list(partial))) == partial
        assert not isinstance(compact_paths(ShardSet("/d", "p", list(partial))), SetPaths)
    table = ShardTable.of("p", [ShardInfo(shard_name("p", i, 4), 5 + i, 9, 0)
                                for i in range(4)])
    fast, slow = Counts(5), Counts(5)
    listed_counts(fast, (1, 5), made, table)  # one copy of the array
    listed_counts(slow, (1, 5), paths, list(table))  # a lookup by name each
    assert [fast.get(n) for n in range(5)] == [slow.get(n) for n in range(5)] == [
        None, 5, 6, 7, 8]
    partial = Counts(3)
    listed_counts(partial, (0, 3), [paths[3], "/d/other", paths[0]], table)
    assert [partial.get(n) for n in range(3)] == [8, None, 5]


def test_a_reader_holds_its_set_as_a_table_and_a_rule(tmp_path):
    convert(str(tmp_path), [(i, float(i)) for i in range(40)], 8, "s", progress=False)
    reader = RecordIO(str(tmp_path / "s"))
    sources = reader._sources
    assert isinstance(sources.shard_sets[0].paths, SetPaths)
    assert isinstance(sources.manifests[0].shards, ShardTable)
    assert sources.commits._entries == {}  # looked up in the table, no dict per set
    assert sorted(int(i) for i, _ in reader()) == list(range(40))
    assert sources.commits._entries == {}
    # a set named shard by shard (one missing from the glob's match) keeps its list
    one = RecordIO(str(tmp_path / shard_name("s", 3, 8)))
    assert one._sources.shard_sets[0].paths == [str(tmp_path / shard_name("s", 3, 8))]
    assert len(list(one())) == 5


@settings(max_examples=80, deadline=None)
@given(kind=st.sampled_from([("tfrecord", "none"), ("recordio", "snappy"),
                             ("recordio", "gzip")]),
       sizes=st.lists(st.integers(0, 200) | st.integers(0, (1 << 63) - 1), min_size=1,
                      max_size=6),
       over=st.integers(-2, 2), at=st.integers(0, 5))
def test_the_lean_parse_refuses_the_counts_the_careful_one_does(kind, sizes, over, at):
    """Counts at what their shard's bytes can hold, one of them off by ``over``: the lean
    parse checks them all at once (an array; past 2**52 bytes one by one) and accepts
    exactly what the careful parse accepts."""
    bound = Manifest("p", *kind[:1], "recprep", kind[1], [])
    most = [min(bound.max_records(size), (1 << 63) - 1) for size in sizes]
    records = [max(0, min(m + (over if i == at % len(sizes) else 0), (1 << 63) - 1))
               for i, m in enumerate(most)]
    shards = [ShardInfo(shard_name("p", i, len(sizes)), r, s, 0)
              for i, (r, s) in enumerate(zip(records, sizes, strict=True))]
    data = Manifest("p", kind[0], "recprep", kind[1], shards).to_json()
    try:
        careful = manifest_module._parse_manifest(Manifest, json.loads(data))
    except manifest_module._Invalid:
        careful = None
    lean = manifest_module._lean_parse(Manifest, data)
    assert (lean is None) == (careful is None)
    assert lean is None or (lean == careful and lean.shards == shards)
