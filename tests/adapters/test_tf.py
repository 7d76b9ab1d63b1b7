"""recprep.tf: to_tf_dataset's signature (manifest schema, inferred) and its tensors."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from recprep import InvalidArgumentError, MissingDependencyError, RecordIO, convert
from recprep.codecs import get_codec
from recprep.codecs.base import Codec

tf = pytest.importorskip("tensorflow")

from recprep.tf import to_tf_dataset  # noqa: E402


def test_signature_inferred_from_the_first_instance(mem_url):
    data = [
        (np.arange(6, dtype=np.float32).reshape(2, 3) + i, i, f"w{i}", [i, i + 1], b"\x00%d" % i)
        for i in range(7)
    ]
    convert(mem_url, data, 3, "d", progress=False)
    ds = to_tf_dataset(RecordIO(f"{mem_url}/d-*"))
    spec = ds.element_spec
    assert [s.dtype for s in spec] == [tf.float32, tf.int64, tf.string, tf.int64, tf.string]
    assert [tuple(s.shape) for s in spec] == [(2, 3), (), (), (2,), ()]
    rows = list(ds.as_numpy_iterator())
    assert len(rows) == 7
    for i, (x, y, w, pair, raw) in enumerate(rows):
        np.testing.assert_array_equal(x, data[i][0])
        assert y == i and w == f"w{i}".encode() and pair.tolist() == [i, i + 1]
        assert raw == b"\x00%d" % i
    images, labels = next(iter(ds.map(lambda x, y, *_: (x, y)).batch(4)))
    assert images.shape == (4, 2, 3) and labels.numpy().tolist() == [0, 1, 2, 3]


def test_dict_instances_and_a_tf_pipeline(mem_url):
    data = [{"x": np.full(3, i, np.float64), "label": i % 2} for i in range(10)]
    convert(mem_url, data, 2, "d", progress=False)
    ds = to_tf_dataset(RecordIO(f"{mem_url}/d-*", shuffle=True, seed=1))
    assert ds.element_spec["x"] == tf.TensorSpec((3,), tf.float64)
    assert ds.element_spec["label"] == tf.TensorSpec((), tf.int64)
    total = ds.batch(3).reduce(np.float64(0), lambda acc, b: acc + tf.reduce_sum(b["x"]))
    assert float(total) == 3 * sum(range(10))


class FeatureCodec(Codec):
    """A stand-in for the ``example`` codec: dicts of arrays, features in the schema."""

    name = "test-features"
    features = [
        {"name": "pixels", "dtype": "float32", "shape": [-1]},
        {"name": "label", "dtype": "int64", "shape": [1]},
        {"name": "id", "dtype": "bytes", "shape": []},
    ]

    def encode(self, instance):
        return get_codec("recprep").encode(instance)

    def decode(self, record, *, allow_pickle=False):
        return get_codec("recprep").decode(record)

    def schema(self):
        return {"features": self.features}


def test_signature_from_the_manifest_schema(mem_url):
    data = [
        {"pixels": np.ones(2 + i, np.float32), "label": np.array([i]), "id": b"r%d" % i}
        for i in range(5)
    ]
    convert(mem_url, data, 2, "e", codec=FeatureCodec(), progress=False)
    reader = RecordIO(f"{mem_url}/e-*", codec=FeatureCodec())
    assert reader.manifests[0].schema == {"features": FeatureCodec.features}
    ds = to_tf_dataset(reader)
    assert ds.element_spec == {
        "pixels": tf.TensorSpec((None,), tf.float32),  # -1: not the first instance's 2
        "label": tf.TensorSpec((1,), tf.int64),
        "id": tf.TensorSpec((), tf.string),
    }
    rows = list(ds.as_numpy_iterator())
    assert [len(r["pixels"]) for r in rows] == [2, 3, 4, 5, 6]
    assert [r["id"] for r in rows] == [b"r%d" % i for i in range(5)]


def test_explicit_signature_and_errors(mem_url):
    convert(mem_url, [(i, None) for i in range(3)], 1, "n", progress=False)
    reader = RecordIO(f"{mem_url}/n-*")
    with pytest.raises(InvalidArgumentError, match="None"):
        to_tf_dataset(reader)
    ds = to_tf_dataset(lambda: ((i, float(i)) for i in range(3)),
                       output_signature=(tf.TensorSpec((), tf.int32),
                                         tf.TensorSpec((), tf.float32)))
    assert [int(a) for a, _ in ds] == [0, 1, 2] and ds.element_spec[1].dtype == tf.float32
    with pytest.raises(InvalidArgumentError, match="yields nothing"):
        to_tf_dataset(lambda: iter(()))
    with pytest.raises(InvalidArgumentError, match="reader"):
        to_tf_dataset([1, 2])


def test_missing_tensorflow_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow", None)
    with pytest.raises(MissingDependencyError, match=r"recprep\[tf\]"):
        to_tf_dataset(lambda: iter([1]))


def test_the_example_codecs_schema_gives_the_signature(mem_url):
    example = pytest.importorskip("recprep.codecs.example")
    features = pytest.importorskip("recprep.codecs.features")
    declared = [
        features.Feature("image", "float32", (2, 3)),
        features.Feature("label", "int64", ()),
        features.Feature("names", "bytes", (None,)),
    ]
    data = [
        {"image": np.full((2, 3), i, np.float32), "label": i, "names": [b"n%d" % i] * (i + 1)}
        for i in range(5)
    ]
    convert(mem_url, data, 2, "ex", codec=example.ExampleCodec(declared), progress=False)
    ds = to_tf_dataset(RecordIO(f"{mem_url}/ex-*"))
    assert ds.element_spec == {
        "image": tf.TensorSpec((2, 3), tf.float32),
        "label": tf.TensorSpec((), tf.int64),
        "names": tf.TensorSpec((None,), tf.string),
    }
    rows = list(ds.as_numpy_iterator())
    assert [int(r["label"]) for r in rows] == list(range(5))
    assert [list(r["names"]) for r in rows] == [[b"n%d" % i] * (i + 1) for i in range(5)]
    np.testing.assert_array_equal(rows[3]["image"], data[3]["image"])


def test_batches_as_the_datasets_elements(mem_url):
    data = [(np.full((2, 3), i, np.float32), i, f"w{i}", [i, -i]) for i in range(10)]
    convert(mem_url, data, 3, "b", chunk_bytes=200, progress=False)
    reader = RecordIO(f"{mem_url}/b-*", shuffle=True, seed=2)
    ds = to_tf_dataset(reader, batch_size=4)
    assert [tuple(s.shape) for s in ds.element_spec] == [(None, 2, 3), (None,), (None,),
                                                         (None, 2)]
    assert [s.dtype for s in ds.element_spec] == [tf.float32, tf.int64, tf.string, tf.int64]
    reader.set_epoch(5)
    batches = list(ds.as_numpy_iterator())
    expected = list(reader.batches(4))
    assert [len(b[1]) for b in batches] == [4, 4, 2]
    for got, want in zip(batches, expected, strict=True):
        np.testing.assert_array_equal(got[0], want[0])
        assert got[1].tolist() == want[1].tolist()
        assert [w.decode() for w in got[2]] == list(want[2])
        assert got[3].tolist() == [list(p) for p in want[3]]
    dropped = to_tf_dataset(reader, batch_size=4, drop_last=True)
    assert dropped.element_spec[0].shape == (4, 2, 3)
    assert [len(b[1]) for b in dropped.as_numpy_iterator()] == [4, 4]


def test_batches_of_dicts_any_reader_and_errors(mem_url):
    ds = to_tf_dataset(lambda: ({"x": np.full(2, i), "y": float(i)} for i in range(5)),
                       batch_size=2)
    assert ds.element_spec == {"x": tf.TensorSpec((None, 2), tf.int64),
                               "y": tf.TensorSpec((None,), tf.float64)}
    assert [b["y"].tolist() for b in ds.as_numpy_iterator()] == [[0, 1], [2, 3], [4]]
    with pytest.raises(InvalidArgumentError, match="drop_last=True needs a batch_size"):
        to_tf_dataset(lambda: iter([1]), drop_last=True)
    with pytest.raises(InvalidArgumentError, match="batch_size must be a positive int"):
        to_tf_dataset(lambda: iter([1]), batch_size=0)
    ragged = to_tf_dataset(lambda: ((np.zeros(i),) for i in range(1, 4)),
                           output_signature=(tf.TensorSpec((None, None), tf.float64),),
                           batch_size=2)
    with pytest.raises(Exception, match="ragged or mixed values"):
        list(ragged)
