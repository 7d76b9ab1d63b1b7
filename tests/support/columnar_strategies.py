"""Hypothesis strategies and exact comparisons for the columnar property tests
(``tests/write/test_columnar_properties.py``): instances per codec, with mixed layouts inside
one chunk, and the comparison rules batches are held to."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import fsspec
import numpy as np
from hypothesis import strategies as st

from recprep._core.batching import NUMBERS
from recprep.codecs.example import ExampleCodec
from recprep.codecs.features import Feature
from recprep.containers import get_format

from . import builtin_formats

INT64 = (-(2**63), 2**63 - 1)

#: every (format, compressor) pair the registry declares (a new format is covered by
#: being registered)
FORMS = [(name, compressor) for name in builtin_formats()
         for compressor in get_format(name).compressors]

#: codecs whose instances each strategy below makes
CODECS = ("recprep", "pickle", "raw", "example", "example-typed")


# --------------------------------------------------------------------------- comparisons


def _bits(x: float | complex) -> bytes:
    return struct.pack("<dd", x.real, x.imag) if isinstance(x, complex) else struct.pack(
        "<d", x)


def _array_equal(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype.kind in "fc":  # bit for bit: NaN payloads and the sign of zero count
        kind = f"u{a.dtype.itemsize // 2}" if a.dtype.kind == "c" else f"u{a.dtype.itemsize}"
        if a.dtype.itemsize in (2, 4, 8, 16) and a.dtype.isnative and b.dtype.isnative:
            return bool(np.array_equal(np.ascontiguousarray(a).view(kind),
                                       np.ascontiguousarray(b).view(kind)))
        return bool(np.array_equal(a, b, equal_nan=True))
    return bool(np.array_equal(a, b))


def exact(got, expected) -> bool:
    """``got`` is ``expected``: the same types (named tuples, numpy scalars), dtypes
    (byte order included), shapes, dict key orders and values, floats bit for bit."""
    if type(got) is not type(expected):
        return False
    if isinstance(expected, np.ndarray):
        if got.dtype != expected.dtype or got.shape != expected.shape:
            return False
        if expected.dtype.hasobject:
            return all(map(exact, got.reshape(-1).tolist(), expected.reshape(-1).tolist()))
        return _array_equal(got, expected)
    if isinstance(expected, np.generic):
        return got.dtype == expected.dtype and _array_equal(np.asarray(got),
                                                            np.asarray(expected))
    if isinstance(expected, (tuple, list)):
        return len(got) == len(expected) and all(map(exact, got, expected))
    if isinstance(expected, dict):
        return list(got) == list(expected) and all(
            exact(got[k], v) for k, v in expected.items())
    if isinstance(expected, (float, complex)):
        return _bits(got) == _bits(expected)
    return got == expected


def same(got, expected) -> bool:
    """An unbatched instance is the instance read() gave: :func:`exact`, except that a
    Python number of a stacked column comes back as the numpy scalar of its dtype
    (``int`` → ``int64``...), as :func:`recprep.batching.unbatch` documents."""
    kind = type(expected)
    if kind in NUMBERS and type(got) is NUMBERS[kind].type:
        return exact(got.item(), expected)
    if isinstance(expected, (tuple, list)) and type(got) is kind:
        return len(got) == len(expected) and all(map(same, got, expected))
    if isinstance(expected, dict) and type(got) is dict:
        return list(got) == list(expected) and all(same(got[k], v) for k, v in
                                                   expected.items())
    return exact(got, expected)


def first_difference(got: list, expected: list, rule=exact) -> str:
    """Where two lists of instances (or batches) first differ: for assertion messages."""
    if len(got) != len(expected):
        return f"{len(got)} items, expected {len(expected)}"
    for k, (a, b) in enumerate(zip(got, expected, strict=True)):
        if not rule(a, b):
            return f"item {k}: got {a!r}, expected {b!r}"
    return "equal"


# --------------------------------------------------------------------------- instances

_text = st.text(st.characters(codec=None), max_size=6)  # lone surrogates too
LEAVES = {
    "int": st.integers(*INT64),
    "bigint": st.one_of(st.integers(*INT64), st.integers(2**63, 2**66)),
    "float": st.floats(),
    "bool": st.booleans(),
    "complex": st.complex_numbers(),
    "none": st.none(),
    "str": _text,
    "bytes": st.binary(max_size=6),
    "f32": st.builds(np.float32, st.floats(width=32)),
    "u8": st.builds(np.uint8, st.integers(0, 255)),
    "i2": st.builds(np.int16, st.integers(-(2**15), 2**15 - 1)),
    # arrays: the "big" ones (>= 256 bytes) make chunks the reader decodes as columns
    "big": st.builds(lambda x: np.full(40, x, np.float64), st.floats()),
    "img": st.builds(lambda i: (np.arange(24, dtype=np.uint8) * i).reshape(2, 3, 4),
                     st.integers(0, 255)),
    "fort": st.builds(lambda i: np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3)
                                                  * i), st.integers(-9, 9)),
    "barr": st.builds(lambda b: np.array([b, not b, b]), st.booleans()),
    "uarr": st.builds(lambda s: np.array([s, s + "x"]), st.text(min_size=2, max_size=2)),
}
#: (native byte order only: batches of big-endian arrays are native, see the xfail test)
NATIVE = sorted(LEAVES)
#: how a leaf of one instance may differ from the chunk's layout (a different layout
#: within one chunk)
_ODD = {
    "int": st.one_of(st.none(), st.floats(allow_nan=False), st.builds(np.int64)),
    "float": st.one_of(st.none(), st.integers(-5, 5), st.builds(np.float64, st.floats())),
    "str": st.one_of(st.none(), st.binary(max_size=3)),
    "big": st.one_of(st.none(), st.builds(lambda n: np.zeros(n, np.float64),
                                          st.integers(0, 45)),
                     st.just(np.zeros(40, np.float32))),
    "img": st.just(np.zeros((3, 2, 4), np.uint8)),
    "f32": st.builds(np.float64, st.floats()),
}


@st.composite
def recprep_rows(draw, min_size: int = 0, max_size: int = 40) -> list:
    """Instances for the recprep / pickle codecs: mostly one layout (a tuple, dict,
    nested or bare value of random leaves), some instances (``odd``) of another one."""
    kinds = draw(st.lists(st.sampled_from(NATIVE), min_size=1, max_size=4))
    if draw(st.booleans()):  # records of >= 256 bytes: chunks the reader decodes whole
        kinds.insert(draw(st.integers(0, len(kinds))), "big")
    shape = draw(st.sampled_from(["tuple", "dict", "nested", "bare"]))
    odd_share = draw(st.sampled_from([0.0, 0.0, 0.05, 0.3]))
    n = draw(st.integers(min_size, max_size))
    rows = []
    for _ in range(n):
        values = [draw(LEAVES[k]) for k in kinds]
        if odd_share and draw(st.floats(0, 1)) < odd_share:
            k = draw(st.integers(0, len(values) - 1))
            values[k] = draw(_ODD.get(kinds[k], st.none()))
            if shape == "dict" and draw(st.booleans()):  # other keys, or another order
                values = values[::-1] if draw(st.booleans()) else values[:-1]
        rows.append(_shaped(shape, values))
    return rows


def _shaped(shape: str, values: list):
    if shape == "dict":
        return {f"k{i}": v for i, v in enumerate(values)}
    if shape == "nested":
        return (values[0], {"rest": tuple(values[1:]) or (0,)})
    if shape == "bare":
        return values[0]
    return tuple(values)


@st.composite
def example_rows(draw, min_size: int = 0, max_size: int = 40, ragged: bool = False) -> list:
    """Instances for the example codec: dicts of float32 / int64 / bytes features, mostly
    of one set of keys and lengths, some with a key missing (or, ``ragged``, features of
    another length)."""
    length = draw(st.integers(0, 70))  # 70 float32: records of ~300 bytes
    odd_share = draw(st.sampled_from([0.0, 0.1, 0.4]))
    rows = []
    for _ in range(draw(st.integers(min_size, max_size))):
        odd = bool(odd_share) and draw(st.floats(0, 1)) < odd_share
        n = draw(st.integers(0, 5)) if odd and ragged else length
        row = {
            "image": np.full(n, draw(st.floats(width=32, allow_nan=False)), np.float32),
            "label": np.array([draw(st.integers(*INT64))]),
            "tags": np.array([draw(st.binary(max_size=4)) for _ in range(n % 3)] or [b""],
                             dtype=object),
        }
        if odd and (not ragged or draw(st.booleans())):
            del row["tags"]
        rows.append(row)
    return rows


#: the features of the "example-typed" codec (an ExampleCodec with a schema)
TYPED_FEATURES = (Feature("image", "float32", (8, 9)), Feature("label", "int64"),
                  Feature("word", str), Feature("ids", "uint8", (3,)))


def typed_example_rows(min_size: int = 0, max_size: int = 40) -> st.SearchStrategy:
    """Tuples in :data:`TYPED_FEATURES` order."""
    row = st.tuples(st.builds(lambda x: np.full((8, 9), x, np.float32), st.floats(width=32)),
                    st.integers(*INT64), st.text(max_size=4),
                    st.builds(lambda i: np.arange(3, dtype=np.uint8) + i, st.integers(0, 9)))
    return st.lists(row, min_size=min_size, max_size=max_size)


def codec_of(name: str):
    """What ``convert`` is given for the codec ``name`` (of :data:`CODECS`)."""
    return ExampleCodec(TYPED_FEATURES) if name == "example-typed" else name


def rows_for(codec: str, min_size: int = 0, max_size: int = 40) -> st.SearchStrategy:
    """Instances ``codec`` encodes (Example features of one length within a set: ragged
    ones have a property of their own, see the xfail test)."""
    if codec in ("recprep", "pickle"):
        return recprep_rows(min_size, max_size)
    if codec == "raw":
        return st.lists(st.one_of(st.binary(max_size=40), st.binary(min_size=300,
                                                                     max_size=400)),
                        min_size=min_size, max_size=max_size)
    if codec == "example-typed":
        return typed_example_rows(min_size, max_size)
    return example_rows(min_size, max_size)


# --------------------------------------------------------------------------- places


@contextmanager
def memory_dir(tag: str) -> Iterator[str]:
    """A fresh ``memory://`` directory, removed afterwards (function fixtures and
    hypothesis don't mix: each example makes its own)."""
    path = f"/recprep-test-{tag}-{uuid.uuid4().hex}"
    try:
        yield f"memory://{path}"
    finally:
        fs = fsspec.filesystem("memory")
        if fs.exists(path):
            fs.rm(path, recursive=True)
