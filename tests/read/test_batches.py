"""RecordIO.batches and recprep.batching: collate's column rules, and unbatching a pass's
batches gives exactly what read() gives (the rule in docs/reading.md, "Batches")."""

from __future__ import annotations

import math
import uuid
import warnings
from collections import namedtuple
from pathlib import Path

import fsspec
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recprep import InvalidArgumentError, RecordIO, convert
from recprep._core.batching import NUMBERS, batched, collate, unbatch
from recprep.errors import CorruptDataError, CorruptDataWarning

from ..support import flip_byte

INT64 = (-(2**63), 2**63 - 1)
Point = namedtuple("Point", "x y")


# --------------------------------------------------------------------------- the rule


def same(got, expected) -> bool:
    """The equivalence rule: structure equal; a leaf is the same type and value, except
    that a Python number may come back as the numpy scalar of its column's dtype."""
    if isinstance(expected, tuple):
        return (type(got) is type(expected) and len(got) == len(expected)
                and all(map(same, got, expected)))
    if isinstance(expected, dict):
        return (type(got) is dict and list(got) == list(expected)
                and all(same(got[k], v) for k, v in expected.items()))
    if isinstance(expected, np.ndarray):
        return (type(got) is np.ndarray and got.dtype == expected.dtype
                and got.shape == expected.shape
                and np.array_equal(got, expected, equal_nan=expected.dtype.kind in "fc"))
    if type(expected) in NUMBERS and type(got) is NUMBERS[type(expected)].type:
        return _equal(got.item(), expected)
    if isinstance(expected, np.generic):
        return type(got) is type(expected) and got.dtype == expected.dtype and _equal(
            got.item(), expected.item())
    return type(got) is type(expected) and _equal(got, expected)


def _equal(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


def stacked(values) -> np.dtype | None:
    """What collate must make of a column of leaves (per the rules): the dtype of the
    one numpy array, or None for a list."""
    kinds = {type(v) for v in values}
    if len(kinds) != 1:
        return None
    kind = kinds.pop()
    if kind is int:
        return np.dtype(np.int64) if all(INT64[0] <= v <= INT64[1] for v in values) else None
    if kind in NUMBERS:
        return NUMBERS[kind]
    if kind in (str, bytes):
        return np.dtype(object)
    if kind is np.ndarray:
        forms = {(v.dtype, v.shape) for v in values}
        ok = len(forms) == 1 and values[0].ndim > 0 and values[0].dtype != object
        return values[0].dtype if ok else None
    return None


def check_columns(column, values) -> None:
    """``column`` is what collate made of ``values`` (one place of each instance)."""
    first = values[0]
    if isinstance(first, (tuple, dict)) and len({type(v) for v in values}) == 1 and all(
        len(v) == len(first) and (not isinstance(v, dict) or list(v) == list(first))
        for v in values
    ) and len(first):
        assert type(column) is type(first)
        keys = list(first) if isinstance(first, dict) else range(len(first))
        for k in keys:
            check_columns(column[k], [v[k] for v in values])
        return
    dtype = stacked(values)
    if dtype is None:
        assert type(column) is list and len(column) == len(values)
    else:
        assert type(column) is np.ndarray and column.dtype == dtype
        assert len(column) == len(values)


# --------------------------------------------------------------------------- collate


def test_numbers_strings_and_arrays_become_numpy_columns():
    batch = collate([(1, 0.5, True, 1j, "a", b"x", np.float32(1), np.zeros((2, 3), np.int16)),
                     (2, 1.5, False, 2j, "bc", b"", np.float32(2), np.ones((2, 3), np.int16))])
    dtypes = [c.dtype for c in batch]
    assert dtypes == [np.int64, np.float64, np.bool_, np.complex128, object, object,
                      np.float32, np.int16]
    assert batch[0].tolist() == [1, 2] and batch[4].tolist() == ["a", "bc"]
    assert batch[5].shape == (2,) and batch[5][1] == b""
    assert batch[7].shape == (2, 2, 3) and batch[7][1].sum() == 6


@pytest.mark.parametrize("values", [
    [1, None],                                   # None anywhere
    [1, 2.0],                                    # mixed types
    [True, 1],                                   # bool is not int here
    [1, 2**63],                                  # beyond int64
    ["a", b"a"],                                 # str and bytes
    [np.zeros(2), np.zeros(3)],                  # ragged
    [np.zeros(2, np.float32), np.zeros(2)],      # two dtypes
    [np.array(1.0), np.array(2.0)],              # 0-d arrays
    [np.array([None]), np.array([1])],           # object arrays
    [np.float32(1), np.float64(2)],              # numpy scalars of two dtypes
    [[1, 2], [3, 4]],                            # lists are values, not structure
    [(1, 2), (3,)], [(), ()], [{}, {}],          # tuples of two lengths, empty structure
    [{"a": 1}, {"b": 1}], [{"a": 1, "b": 2}, {"b": 2, "a": 1}],  # other keys / order
    [Point(1, 2), (1, 2)],                       # a named tuple and a tuple
    [{1, 2}, {3}],                               # other objects
])
def test_other_columns_stay_lists_of_the_same_objects(values):
    column = collate(values)
    assert type(column) is list and all(a is b for a, b in zip(column, values, strict=True))
    assert all(a is b for a, b in zip(unbatch(column), values, strict=True))


def test_structure_is_collated_recursively():
    instances = [{"p": Point(i, float(i)), "t": (str(i), {"n": [i] * i, "m": i})}
                 for i in range(3)]
    batch = collate(instances)
    assert list(batch) == ["p", "t"] and type(batch["p"]) is Point
    assert batch["p"].x.dtype == np.int64 and batch["p"].y.tolist() == [0.0, 1.0, 2.0]
    assert batch["t"][0].dtype == object and batch["t"][1]["n"] == [[], [1], [2, 2]]
    assert batch["t"][1]["m"].tolist() == [0, 1, 2]
    back = unbatch(batch)
    assert all(map(same, back, instances)) and type(back[1]["p"].x) is np.int64
    assert back[2]["t"][1]["n"] is instances[2]["t"][1]["n"]


def test_unbatch_gives_numpy_values_and_the_same_strings():
    arrays = [np.arange(4, dtype=np.uint8) + i for i in range(3)]
    instances = [(a, i, f"s{i}") for i, a in enumerate(arrays)]
    rows = unbatch(collate(instances))
    assert [type(x) for x in rows[0]] == [np.ndarray, np.int64, str]
    assert all(map(same, rows, instances)) and rows[2][2] is instances[2][2]
    with pytest.raises(InvalidArgumentError, match="got int"):
        unbatch(3)


def test_batched_cuts_runs_and_checks_its_size():
    assert [b.tolist() for b in batched(range(7), 3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [b.tolist() for b in batched(range(7), 3, drop_last=True)] == [[0, 1, 2],
                                                                         [3, 4, 5]]
    assert list(batched([], 2)) == []
    for bad in (0, -1, True, 2.0, "2"):
        with pytest.raises(InvalidArgumentError, match="batch_size must be a positive int"):
            batched(range(3), bad)


# --------------------------------------------------------------------------- RecordIO


def numbers_set(url: str, n: int = 50, shards: int = 3) -> str:
    data = [(np.full(3, i, np.float32), i, f"w{i}") for i in range(n)]
    convert(url, data, shards, "d", chunk_bytes=256, progress=False)
    return f"{url}/d-*"


def test_batches_of_a_reader(mem_url):
    read = RecordIO(numbers_set(mem_url))
    batches = list(read.batches(16))
    assert [len(b[1]) for b in batches] == [16, 16, 16, 2]
    images, labels, words = batches[0]
    assert images.dtype == np.float32 and images.shape == (16, 3)
    assert labels.tolist() == list(range(16)) and words[3] == "w3" and words.dtype == object
    assert [len(b[1]) for b in read.batches(16, drop_last=True)] == [16, 16, 16]
    for bad in (0, True, 1.5):
        with pytest.raises(InvalidArgumentError, match="batch_size"):
            read.batches(bad)


def test_a_batches_pass_is_a_pass_for_the_epoch(mem_url):
    pattern = numbers_set(mem_url)
    read = RecordIO(pattern, shuffle=True, seed=4, shuffle_buffer=8)
    list(read())                                   # pass 0
    got = [x for b in read.batches(7) for x in unbatch(b)]  # pass 1
    other = RecordIO(pattern, shuffle=True, seed=4, shuffle_buffer=8)
    other.set_epoch(1)
    expected = list(other())
    assert len(got) == 50 and all(map(same, got, expected)) and read.epoch == 2


def test_stopping_early_with_threads(mem_url):
    read = RecordIO(numbers_set(mem_url, n=200), num_threads=2)
    for _ in range(3):
        passes = read.batches(10)
        assert next(passes)[1].tolist() == list(range(10))
        passes.close()


def damaged_set(tmp_path: Path) -> str:
    data = [(np.full(8, i, np.float64), i) for i in range(60)]
    convert(str(tmp_path), data, 2, "d", chunk_bytes=300, progress=False)
    shard = sorted(tmp_path.glob("d-*-of-*"))[0]
    flip_byte(shard)
    return str(tmp_path / "d-*")


def test_damage_skipped_or_raised_as_read_does(tmp_path):
    pattern = damaged_set(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CorruptDataWarning)
        expected = list(RecordIO(pattern, on_corrupt="skip")())
        skipping = RecordIO(pattern, on_corrupt="skip")
        got = [x for b in skipping.batches(9) for x in unbatch(b)]
    assert 0 < len(got) < 60 and all(map(same, got, expected)) and len(got) == len(expected)
    assert skipping.skipped.events >= 1
    with pytest.raises(CorruptDataError):
        list(RecordIO(pattern).batches(9))


# --------------------------------------------------------------------------- the property

_NAMES = ("int", "float", "str", "bytes", "equal", "ragged", "bigint", "mixed")


def _leaf(kind: str) -> st.SearchStrategy:
    ints = st.integers(*INT64)
    return {
        "int": ints,
        "float": st.floats(allow_nan=True, allow_infinity=True),
        "str": st.text(max_size=5),
        "bytes": st.binary(max_size=5),
        "equal": st.builds(lambda i: np.full((2, 3), i, np.float32), st.integers(-9, 9)),
        "ragged": st.builds(lambda n: np.arange(n, dtype=np.int16), st.integers(0, 3)),
        "bigint": st.one_of(ints, st.integers(2**63, 2**70)),
        "mixed": st.one_of(st.none(), ints, st.floats(allow_nan=False), st.text(max_size=3)),
    }[kind]


@st.composite
def data_sets(draw):
    kinds = draw(st.lists(st.sampled_from(_NAMES), min_size=1, max_size=4))
    none_at = draw(st.sets(st.integers(0, len(kinds) - 1)))  # None sometimes, in these
    as_dict = draw(st.booleans())
    row = st.tuples(*(
        st.one_of(_leaf(k), st.none()) if i in none_at else _leaf(k)
        for i, k in enumerate(kinds)
    ))
    rows = draw(st.lists(row, max_size=40))
    if as_dict:
        return [{f"k{i}": v for i, v in enumerate(r)} for r in rows]
    return [tuple(r) for r in rows]


@pytest.mark.filterwarnings("ignore:.*shards are empty")
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    instances=data_sets(),
    shards=st.integers(1, 3),
    batch_size=st.integers(1, 12),
    drop_last=st.booleans(),
    shuffle=st.booleans(),
    seed=st.integers(0, 2**31),
    buffer=st.integers(0, 16),
    world=st.integers(1, 3).flatmap(lambda w: st.tuples(st.integers(0, w - 1), st.just(w))),
    threads=st.integers(0, 2),
    split=st.sampled_from(["auto", "range"]),
    epoch=st.integers(0, 3),
)
def test_unbatched_batches_are_exactly_what_read_gives(
    instances, shards, batch_size, drop_last, shuffle, seed, buffer, world, threads, split,
    epoch,
):
    url = f"memory://recprep-test-batches-{uuid.uuid4().hex}"
    try:
        convert(url, instances, shards, "p", chunk_bytes=200, progress=False)
        rank, world_size = world
        read = RecordIO(f"{url}/p-*", shuffle=shuffle, seed=seed, shuffle_buffer=buffer,
                        rank=rank, world_size=world_size, num_threads=threads, split=split)
        read.set_epoch(epoch)
        expected = list(read())
        batches = list(read.batches(batch_size, drop_last=drop_last))
        kept = len(expected) - (len(expected) % batch_size if drop_last else 0)
        assert [len(unbatch(b)) for b in batches] == [
            min(batch_size, kept - s) for s in range(0, kept, batch_size)]
        got = [x for b in batches for x in unbatch(b)]
        assert len(got) == kept
        assert all(map(same, got, expected[:kept]))
        for k, batch in enumerate(batches):
            check_columns(batch, expected[k * batch_size:(k + 1) * batch_size])
    finally:
        fs = fsspec.filesystem("memory")
        path = url.removeprefix("memory://")
        if fs.exists(path):
            fs.rm(path, recursive=True)


# --------------------------------------------------------------------------- chunk columns

from recprep.batching import Columns  # noqa: E402
from recprep.codecs import get_codec  # noqa: E402
from recprep.read.blocks import assemble, part, pick  # noqa: E402


def same_batch(got, expected) -> bool:
    """Two batches are the same: structure, container types, dtypes, shapes, values."""
    if isinstance(expected, np.ndarray):
        if type(got) is not np.ndarray or got.dtype != expected.dtype or (
                got.shape != expected.shape):
            return False
        if expected.dtype == object:
            return all(map(same, got.tolist(), expected.tolist()))
        return bool(np.array_equal(got, expected, equal_nan=expected.dtype.kind in "fc"))
    if isinstance(expected, list):
        return type(got) is list and len(got) == len(expected) and all(map(same, got, expected))
    if isinstance(expected, tuple):
        return (type(got) is type(expected) and len(got) == len(expected)
                and all(map(same_batch, got, expected)))
    if isinstance(expected, dict):
        return (type(got) is dict and list(got) == list(expected)
                and all(same_batch(got[k], v) for k, v in expected.items()))
    return False


_COLUMN_LEAVES = {
    "int": st.integers(*INT64), "float": st.floats(), "bool": st.booleans(),
    "complex": st.complex_numbers(allow_nan=False), "none": st.none(),
    "str": st.text(max_size=6), "bytes": st.binary(max_size=6),
    "f32": st.builds(np.float32, st.floats(width=32)),
    "i2": st.builds(lambda i: np.int16(i), st.integers(-9, 9)),
    "arr": st.builds(lambda i: np.full((2, 3), i, np.float64), st.integers(-9, 9)),
    "arrF": st.builds(lambda i: np.asfortranarray(np.arange(6, dtype=">i4").reshape(2, 3) * i),
                      st.integers(-9, 9)),
    "arrb": st.builds(lambda b: np.array([b, not b]), st.booleans()),
    "arrU": st.builds(lambda s: np.array([s, s + "x"]), st.text(max_size=3)),
}


@st.composite
def chunks(draw):
    """Records of one chunk: one layout, or (mixed) a few layouts shuffled together."""
    def layout():
        kinds = draw(st.lists(st.sampled_from(sorted(_COLUMN_LEAVES)), min_size=1, max_size=4))
        shape = draw(st.sampled_from(["tuple", "dict", "nested", "bare"]))
        leaves = st.tuples(*(_COLUMN_LEAVES[k] for k in kinds))
        if shape == "dict":
            return leaves.map(lambda t: {f"k{i}": v for i, v in enumerate(t)})
        if shape == "nested":
            return leaves.map(lambda t: (t[0], {"rest": t[1:] or (0,)}))
        if shape == "bare":
            return _COLUMN_LEAVES[kinds[0]]
        return leaves
    layouts = [layout() for _ in range(draw(st.integers(1, 2)))]
    values = draw(st.lists(st.one_of(*layouts), min_size=0, max_size=30))
    return values


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(values=chunks(), cut=st.integers(0, 40), flip=st.integers(0, 10**6))
def test_decode_columns_equal_collated_decodes(values, cut, flip):
    codec = get_codec("recprep")
    records = [codec.encode(v) for v in values]
    if records and cut % 3 == 0:  # damage: a flipped byte, or a cut record
        k = flip % len(records)
        raw = bytearray(records[k])
        if cut % 2:
            raw[flip % len(raw)] ^= 0xFF
        else:
            del raw[flip % len(raw):]
        records[k] = bytes(raw)
    cols = codec.decode_columns(records)
    try:
        expected = collate(codec.decode_many(records, allow_pickle=False))
    except Exception:
        assert cols is None  # a record that doesn't decode is never in columns
        return
    if cols is None:
        return
    cols.decode = lambda: codec.decode_many(records)
    assert cols.n == len(cols) == len(records)
    assert same_batch(assemble([cols]), expected)
    n = len(records)
    for a, b in ((0, n), (1, n - 1), (n // 2, n)):
        if a < b:
            assert same_batch(assemble([part(cols, a, b)]),
                              collate(codec.decode_many(records[a:b])))
    rows = np.arange(n)[::-2]  # out of order: gathered by index
    (picked,) = pick([part(cols, 0, n // 2), part(cols, n // 2, n)], rows)
    assert same_batch(assemble([picked]), collate([cols.instances()[i] for i in rows]))


def test_uniform_chunks_are_decoded_as_columns():
    codec = get_codec("recprep")
    for values in ([(np.full(784, i, np.float64), i) for i in range(8)],
                   [(i, float(i), f"token-{i * 37}") for i in range(8)],
                   [{"id": i, "ok": i % 2 == 0, "v": np.float32(i), "b": b"x" * i}
                    for i in range(8)]):
        records = [codec.encode(v) for v in values]
        cols = codec.decode_columns(records)
        assert isinstance(cols, Columns) and cols.n == 8
        cols.decode = lambda r=records: codec.decode_many(r)
        assert same_batch(assemble([cols]), collate(values))
    mixed = [codec.encode(v) for v in [(1, 2.0)] * 4 + [(1, "2")] * 4]
    assert codec.decode_columns(mixed) is None
    assert get_codec("pickle").decode_columns(mixed) is None  # codecs without: None


def test_rows_of_chunks_with_other_layouts_are_decoded_and_collated():
    codec = get_codec("recprep")
    a = [codec.encode((i, 1.0)) for i in range(4)]
    b = [codec.encode((np.int64(i), 1.0)) for i in range(4)]  # int64 too, but numpy scalars
    ca, cb = codec.decode_columns(a), codec.decode_columns(b)
    ca.decode, cb.decode = (lambda: codec.decode_many(a)), (lambda: codec.decode_many(b))
    run = [part(ca, 2, 4), part(cb, 0, 2)]
    assert ca.signature != cb.signature
    expected = collate(codec.decode_many(a)[2:] + codec.decode_many(b)[:2])
    assert type(expected[0]) is list  # int and numpy.int64 mixed: a list, as collate says
    assert same_batch(assemble(run), expected)


@pytest.mark.filterwarnings("ignore:.*shards are empty")
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(values=chunks(), form=st.sampled_from(
           [("recordio", "snappy"), ("recordio", "none"), ("recordio", "gzip"),
            ("tfrecord", "none"), ("tfrecord", "gzip")]),
       codec=st.sampled_from(["recprep", "pickle"]), shards=st.integers(1, 3),
       batch_size=st.integers(1, 9), threads=st.integers(0, 2), shuffle=st.booleans())
def test_batches_from_columns_are_those_of_read(values, form, codec, shards, batch_size,
                                                threads, shuffle):
    url = f"memory://recprep-test-columns-{uuid.uuid4().hex}"
    try:
        convert(url, values, shards, "p", chunk_bytes=300, format=form[0],
                compressor=form[1], codec=codec, progress=False)
        read = RecordIO(f"{url}/p-*", num_threads=threads, shuffle=shuffle, seed=3,
                        shuffle_buffer=7, allow_pickle=codec == "pickle")
        read.set_epoch(1)
        expected = list(read())
        got = list(read.batches(batch_size))
        for k, batch in enumerate(got):
            assert same_batch(batch, collate(expected[k * batch_size:(k + 1) * batch_size]))
        assert sum(len(unbatch(b)) for b in got) == len(expected)
    finally:
        fs = fsspec.filesystem("memory")
        path = url.removeprefix("memory://")
        if fs.exists(path):
            fs.rm(path, recursive=True)


def test_damaged_chunks_skipped_with_columns(tmp_path):
    pattern = damaged_set(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CorruptDataWarning)
        expected = list(RecordIO(pattern, on_corrupt="skip")())
        got = list(RecordIO(pattern, on_corrupt="skip").batches(9))
    assert 0 < len(expected) < 60
    for k, batch in enumerate(got):
        assert same_batch(batch, collate(expected[k * 9:(k + 1) * 9]))


def test_packed_dicts_with_keys_after_strings_decode_as_columns():
    """A packed dict's keys after a str/bytes value sit after that value's bytes: the
    layout follows the first record's lengths to find them (they were missed before)."""
    codec = get_codec("recprep")
    values = [{"id": i, "word": "w" * i, "score": float(i), "tag": b"x" * (i % 3)}
              for i in range(8)]
    cols = codec.decode_columns([codec.encode(v) for v in values])
    assert cols is not None
    cols.decode = lambda: values
    assert same_batch(assemble([cols]), collate(values))


@pytest.mark.parametrize("dtype,order", [("<f4", "C"), ("<i8", "C"), ("|b1", "C"),
                                         (">i4", "C"), ("<f8", "F")])
def test_decode_many_gives_arrays_as_decode_makes_them(dtype, order):
    """Per-instance reading cuts array rows out of a chunk's columns (C order, native
    byte order): each an array of its own, as decode makes it; other arrays are decoded
    record by record. Either way the values, dtype, shape and flags are decode's."""
    codec = get_codec("recprep")
    values = [(np.asarray(np.arange(6).reshape(2, 3) + i, dtype=dtype, order=order), i, "x")
              for i in range(12)]
    records = [codec.encode(v) for v in values]
    got, want = codec.decode_many(records), [codec.decode(r) for r in records]
    for g, w in zip(got, want, strict=True):
        assert type(g) is tuple and g[1:] == w[1:] and type(g[1]) is int
        assert g[0].dtype == w[0].dtype and g[0].shape == w[0].shape
        assert np.array_equal(g[0], w[0]) and g[0].flags.writeable
        assert g[0].flags.c_contiguous == w[0].flags.c_contiguous
        assert g[0].flags.owndata or g[0].base is not got[0][0].base  # not a shared block
    got[0][0][...] = 0  # writing one instance leaves the others alone
    assert np.array_equal(got[1][0], want[1][0])
