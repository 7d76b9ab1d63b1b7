"""The ``"recprep"`` codec's three ways to decode a chunk agree, on any bytes (hypothesis).

A chunk of records is decoded record by record (``decode``), as a list
(``decode_many``, which cuts records of one layout out of the chunk's columns) and as
columns (``decode_columns``, for batches and Spark). Fed chunks of valid records mutated
in the same way (so that the column paths still see one layout) or in one record only,
they must agree: the same values, or — when a record is not a valid encoding — a
recprep error from ``decode`` and ``decode_many`` (the same one) and no columns. Never a
foreign exception, never values that differ between paths (issue 22 item 12: a packed
dict with a key twice gave ``{'a': 100}`` record by record and a bare ``ValueError`` as
columns).

``RECPREP_FUZZ_EXAMPLES`` sets the examples per target, as in ``tests/test_fuzz.py``.
"""

from __future__ import annotations

import os
import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recprep.batching import collate
from recprep.codecs.recprep import RecprepCodec
from recprep.errors import DecodeError, RecprepError

pytestmark = pytest.mark.filterwarnings("ignore::recprep.errors.RecprepWarning")

EXAMPLES = int(os.environ.get("RECPREP_FUZZ_EXAMPLES", "1000"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=2000,
    derandomize=os.environ.get("RECPREP_FUZZ_RANDOM") is None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
CODEC = RecprepCodec()

#: dict keys of one length, so that renaming one into another keeps every offset
KEYS = ["ka", "kb", "kc", "kd", "ke"]


def _row(shape: int, i: int, x: float, text: str) -> Any:
    """Row ``i`` of a chunk of layout ``shape``: layouts the column decoder covers (packed
    and plain dicts and tuples, arrays, numpy scalars, None) and some it doesn't."""
    if shape == 0:  # a packed dict
        return {"ka": i, "kb": x, "kc": text, "kd": text.encode("utf-8", "surrogatepass"),
                "ke": i % 2 == 0}
    if shape == 1:  # a packed tuple
        return (i, x, text)
    if shape == 2:  # a plain dict of arrays, numpy scalars, None and a packed tuple
        return {"ka": np.arange(3, dtype=np.int32) * (i % 1000), "kb": np.float64(x), "kc": None,
                "kd": (i, text)}
    if shape == 3:  # a plain tuple: a Fortran-order array, complex, bool, a '>i4' array
        return (np.asfortranarray(np.full((2, 2), x)), complex(x, i), i % 3 == 0,
                np.arange(2, dtype=">i4") + i % 1000)
    if shape == 4:  # a packed dict of int keys
        return {1: i, 2: -i, 3: x}
    if shape == 5:  # nested dicts
        return {"ka": {"kb": i, "kc": text}, "kd": {"ke": x}}
    return {"ka": [i, text], "kb": {i, -1}}  # lists and sets: record by record only


@st.composite
def chunks(draw: st.DrawFn) -> list[bytes]:
    shape = draw(st.integers(0, 6))
    n = draw(st.integers(4, 8))
    rows = [
        _row(shape, draw(st.integers(-(2**63), 2**63 - 1)),
             draw(st.floats(allow_nan=True, allow_infinity=True)),
             draw(st.text(max_size=4)))
        for _ in range(n)
    ]
    return [CODEC.encode(row) for row in rows]


@st.composite
def edits(draw: st.DrawFn) -> list[tuple]:
    """Mutations, applied alike to each record they touch."""
    out = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "delete", "count", "rename"]))
        at = draw(st.integers(0, 200))
        if kind == "flip":
            out.append((kind, at, 1 << draw(st.integers(0, 7))))
        elif kind == "insert":
            out.append((kind, at, draw(st.binary(min_size=1, max_size=8))))
        elif kind == "delete":
            out.append((kind, at, draw(st.integers(1, 8))))
        elif kind == "count":  # a length, count or code field
            out.append((kind, at, draw(st.sampled_from([0, 1, 2, 3, 0xFFFFFFF0]))))
        elif kind == "rename":  # a key made another's: damaged or forged data
            out.append((kind, draw(st.sampled_from(KEYS)), draw(st.sampled_from(KEYS))))
        else:
            out.append((kind, at, None))
    return out


def _apply(record: bytes, ops: list[tuple]) -> bytes:
    out = bytearray(record)
    for kind, at, arg in ops:
        if kind == "rename":
            old, new = at.encode(), arg.encode()
            found = out.find(old)
            if found >= 0:
                out[found : found + len(old)] = new
            continue
        at = at % max(1, len(out))
        if kind == "flip" and out:
            out[at] ^= arg
        elif kind == "cut":
            del out[at:]
        elif kind == "insert":
            out[at:at] = arg
        elif kind == "delete":
            del out[at : at + arg]
        elif kind == "count" and len(out) >= at + 4:
            out[at : at + 4] = struct.pack("<I", arg)
    return bytes(out)


def _same(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are the same value (floats bit for bit, arrays by dtype, shape and
    elements; numpy scalars of collated columns equal to the Python values)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype.newbyteorder("=") != b.dtype.newbyteorder("="):
            return False
        if a.dtype.kind == "O":
            return all(_same(x, y) for x, y in zip(a.tolist(), b.tolist(), strict=True))
        native = a.dtype.newbyteorder("=")
        return (np.ascontiguousarray(a, native).tobytes()
                == np.ascontiguousarray(b, native).tobytes())
    if isinstance(a, dict):
        return (isinstance(b, dict) and list(map(repr, a)) == list(map(repr, b))
                and all(_same(x, y) for x, y in zip(a.values(), b.values(), strict=True)))
    if isinstance(a, (tuple, list)):
        return (type(a) is type(b) and len(a) == len(b)
                and all(_same(x, y) for x, y in zip(a, b, strict=True)))
    if isinstance(a, (float, np.floating)) and isinstance(b, (float, np.floating)):
        return np.float64(a).tobytes() == np.float64(b).tobytes()
    return bool(type(a) is type(b) and a == b) or repr(a) == repr(b)


def _outcome(fn: Any) -> tuple[Any, RecprepError | None]:
    """``fn()`` and None, or None and the recprep error it raised (any other exception
    propagates: the test fails on it)."""
    try:
        return fn(), None
    except RecprepError as err:
        return None, err


def check_paths_agree(records: list[bytes]) -> None:
    each = [_outcome(lambda r=r: CODEC.decode(r)) for r in records]
    many, many_err = _outcome(lambda: CODEC.decode_many(records))
    cols, cols_err = _outcome(lambda: CODEC.decode_columns(records))
    failed = [err for _, err in each if err is not None]
    if failed:
        assert many_err is not None, "decode_many gave values where decode refuses a record"
        assert type(many_err) is type(failed[0]) and str(many_err) == str(failed[0])
        assert cols is None and cols_err is None, (
            "decode_columns gave columns where decode refuses a record")
        return
    values = [value for value, _ in each]
    assert many_err is None, f"decode_many refused records decode reads: {many_err}"
    assert len(many) == len(values)
    assert all(_same(a, b) for a, b in zip(values, many, strict=True))
    assert cols_err is None, f"decode_columns refused records decode reads: {cols_err}"
    if cols is not None:
        assert len(cols) == len(records)
        assert _same(collate(values), cols.tree)


@FUZZ
@given(chunks(), edits())
def test_mutated_chunks_decode_alike_on_every_path(records, ops):
    """Every record mutated alike: the column paths still see one layout."""
    check_paths_agree([_apply(r, ops) for r in records])


@FUZZ
@given(chunks(), edits(), st.integers(0, 7))
def test_one_mutated_record_decodes_alike_on_every_path(records, ops, which):
    records[which % len(records)] = _apply(records[which % len(records)], ops)
    check_paths_agree(records)


@pytest.mark.parametrize("shape", [0, 2, 4, 5])
@pytest.mark.parametrize("where", ["all", "first", "last"])
def test_a_key_twice_is_refused_on_every_path(shape, where):
    """The duplicate-key mutation, always applied: every path refuses it alike, with a
    DecodeError naming the key."""
    records = [CODEC.encode(_row(shape, i, 0.5, "t")) for i in range(10, 16)]
    if shape == 4:  # int keys: the second key made the first
        key = "1"

        def forge(r: bytes) -> bytes:
            return r.replace(struct.pack("<q", 2), struct.pack("<q", 1), 1)
    else:
        key = "'kb'"
        old, new = ("kc", "kb") if shape == 5 else ("ka", "kb")

        def forge(r: bytes) -> bytes:
            return r.replace(old.encode(), new.encode(), 1)
    picked = range(6) if where == "all" else [0] if where == "first" else [5]
    for i in picked:
        records[i] = forge(records[i])
        with pytest.raises(DecodeError, match=f"holds the key {key} twice"):
            CODEC.decode(records[i])
    check_paths_agree(records)
