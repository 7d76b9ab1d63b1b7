"""A whole chunk of ``"example"`` records decoded straight into one ``pyarrow.RecordBatch``.

The chunk is parsed at once (:func:`~recprep.codecs.example.chunk.parse_chunk`) and each
feature's :class:`~recprep.codecs.example.chunk.Values` become an Arrow array without a
Python object per value — the same batch
:func:`recprep._core.arrowcols.record_batch` makes of the instances
:class:`~recprep.codecs.example.ExampleCodec` decodes (the mapping of
:mod:`recprep.read.arrowout`):

* numbers of which every record holds as many: the stacked numpy columns of
  :func:`~recprep.codecs.example.columns.example_decode_columns` (``fixed_size_list``
  over their one buffer; a chunk of such features only is given as those numpy columns,
  which a batch copies once and Arrow takes as they are);
* byte strings: a ``binary`` array over the joined bytes and offsets made of their sizes
  (:func:`byte_strings`), in a ``list`` array over offsets made of each record's count
  (:func:`run_offsets`) — or alone, for a feature declared of shape ``()``;
* numbers declared of shape ``()``: an ``int64``, ``double`` or ``bool`` column (what
  Arrow makes of the Python numbers of the 0-d arrays the codec decodes);
* numbers of which records hold different counts (undeclared, or declared ``float32``,
  ``float64`` or ``int64`` of one dimension): a ``list`` of ``int64``, or of ``double``
  for floats (what Arrow makes of the Python floats the mapping reads out of ``float32``
  arrays of several shapes).

Anything else (a feature without values in the whole chunk, declared features of other
shapes, what :func:`example_decode_columns` refuses) gives ``None``: the reader then
makes the batch of the chunk's columns, or of its instances, as before.
:mod:`recprep.spark.arrays` builds its Spark columns with the same two helpers.

>>> from recprep.codecs.example import ExampleCodec
>>> codec = ExampleCodec()
>>> records = [codec.encode({"w": np.array([b"ab"] * (i % 3), object), "n": i})
...            for i in range(4)]
>>> batch = example_decode_arrow(records).tree
>>> batch.column("w").to_pylist(), batch.column("n").type
([[], [b'ab'], [b'ab', b'ab'], []], FixedSizeListType(fixed_size_list<item: int64>[1]))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..._core.arrowcols import arrow, record_batch
from ..._core.batching import Columns
from ...errors import ArrowMappingError
from ..features import Feature
from .chunk import Values
from .columns import _declared_column, _declared_shape, _undeclared_column, parsed_chunk
from .wire import BYTES, FLOATS

__all__ = ["byte_strings", "example_decode_arrow", "run_offsets"]

_INT32_MAX = 2**31 - 1


def run_offsets(sizes: np.ndarray) -> Any:
    """The int32 Arrow offsets of runs of ``sizes`` (``0, s0, s0 + s1, …``); None past
    int32.

    >>> run_offsets(np.array([2, 0, 3])).to_pylist()
    [0, 2, 2, 5]
    """
    pa = arrow()
    offsets = np.zeros(len(sizes) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return None if offsets[-1] > _INT32_MAX else pa.array(offsets.astype(np.int32))


def byte_strings(values: Values, text: bool = False) -> Any:
    """The byte strings of ``values`` (an Example ``bytes_list``'s, every record's in
    order) as one Arrow ``binary`` array — ``string`` with ``text``, None where one isn't
    UTF-8 — over their joined bytes; None past int32 offsets.

    >>> from recprep.codecs.example import ExampleCodec, parse_chunk
    >>> records = [ExampleCodec().encode({"w": np.array([b"a", b"bc"], object)})] * 4
    >>> byte_strings(parse_chunk(records)["w"], text=True).to_pylist()[:3]
    ['a', 'bc', 'a']
    """
    pa = arrow()
    assert values.sizes is not None
    offsets = run_offsets(values.sizes)
    if offsets is None:
        return None
    data = np.ascontiguousarray(values.values)
    found = pa.Array.from_buffers(pa.string() if text else pa.binary(), len(values.sizes),
                                  [None, offsets.buffers()[1], pa.py_buffer(data)])
    if text:
        try:
            found.validate(full=True)  # UTF-8
        except pa.ArrowInvalid:
            return None
    return found


def _bytes_column(feature: Feature | None, values: Values) -> Any:
    """A feature of byte strings as the mapping makes it: a ``list<binary>`` (a scalar
    ``binary`` column when declared of shape ``()``); None where it doesn't map simply."""
    pa = arrow()
    counts = values.counts
    if feature is not None:
        if feature.dtype.kind != "O":
            return None
        shapes = {_declared_shape(feature, int(c)) for c in np.unique(counts)}
        if shapes == {()}:
            return byte_strings(values)  # one value a record: 0-d arrays, bytes
        if any(s is None or len(s) != 1 for s in shapes):
            return None
    if not len(values.sizes):  # type: ignore[arg-type]
        return None  # no value in the chunk: the mapping's list<null>
    strings, offsets = byte_strings(values), run_offsets(counts)
    if strings is None or offsets is None:
        return None
    return pa.ListArray.from_arrays(offsets, strings)


def _ragged_numbers(feature: Feature | None, values: Values) -> Any:
    """Numbers of several counts a record as the mapping makes them: ``list<int64>``, or
    ``list<double>`` for floats — undeclared, or declared ``float32``/``float64``/``int64``
    of one dimension; None for others."""
    pa = arrow()
    if feature is not None:
        dt = feature.dtype
        if dt not in (np.float32, np.float64, np.int64) or (dt.kind == "f") != (
                values.kind == FLOATS) or any(
                len(_declared_shape(feature, int(c)) or ()) != 1 for c in np.unique(
                    values.counts)):
            return None
    flat = values.flat()
    offsets = run_offsets(values.counts)
    if not flat.size or offsets is None:
        return None
    wide = flat.astype(np.float64 if values.kind == FLOATS else np.int64)
    return pa.ListArray.from_arrays(offsets, pa.Array.from_buffers(
        pa.from_numpy_dtype(wide.dtype), len(wide), [None, pa.py_buffer(wide)]))


def _declared_scalars(feature: Feature, values: Values) -> Any:
    """A number declared of shape ``()`` (one value a record) as the mapping makes the
    0-d arrays the codec decodes: ``int64`` for integers, ``double`` for floats, ``bool``;
    None where the codec would refuse a value (out of the dtype's range) or for
    ``uint64``."""
    pa = arrow()
    dt = feature.dtype
    if feature.shape != () or dt == np.uint64 or dt.kind not in "biuf" or (
            dt.kind == "f") != (values.kind == FLOATS) or not bool((values.counts == 1).all()):
        return None
    flat = values.flat()
    if dt.kind == "f":
        return pa.array(flat.astype(dt).astype(np.float64))
    low, high = (0, 1) if dt.kind == "b" else (np.iinfo(dt).min, np.iinfo(dt).max)
    if flat.size and (flat.min() < low or flat.max() > high):
        return None
    return pa.array(flat != 0) if dt.kind == "b" else pa.array(flat.astype(np.int64))


def _arrow_column(feature: Feature | None, values: Values, n: int) -> tuple[Any, Any] | None:
    """One feature's column (numpy stacked, or Arrow) and its signature, or None."""
    if values.kind == BYTES:
        got = _bytes_column(feature, values)
        return None if got is None else (got, ("arrow", str(got.type)))
    if not values.kind:
        return None
    if feature is not None and feature.shape == ():
        got = _declared_scalars(feature, values)
        return None if got is None else (got, ("arrow", str(got.type)))
    if values.fixed() is None:
        got = _ragged_numbers(feature, values)
        return None if got is None else (got, ("arrow", str(got.type)))
    column = _undeclared_column(values, n) if feature is None else _declared_column(
        feature, values, n)
    if column is None or column[1][0] != "stack" or not column[0].size:
        return None
    return column


def example_decode_arrow(records: Sequence[bytes | memoryview],
                         features: Sequence[Feature] = ()) -> Columns | None:
    """The records (as ``ExampleCodec(features)`` decodes them) as
    :class:`~recprep.batching.Columns` whose tree is one record batch, or None (see the
    module docstring)."""
    n = len(records)
    parsed = parsed_chunk(records, features)
    if parsed is None:
        return None
    wanted: list[tuple[str, Feature | None]] = (
        [(f.name, f) for f in features] if features else [(k, None) for k in parsed])
    tree: dict[str, Any] = {}
    signature = []
    for name, feature in wanted:
        values = parsed.get(name)
        column = None if values is None else _arrow_column(feature, values, n)
        if column is None:
            return None
        tree[name], sig = column
        signature.append((name, sig))
    if all(isinstance(column, np.ndarray) for column in tree.values()):
        return Columns(tree, n, ("example", tuple(signature)))  # numbers only: as
        # decode_columns gives them (a batch copies them once, and Arrow takes that copy)
    try:
        batch = record_batch(tree)
    except ArrowMappingError:
        return None
    return Columns(batch, n, ("arrow", "example", tuple(signature)))
