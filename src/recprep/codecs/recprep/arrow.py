"""A whole chunk of ``"recprep"`` records decoded straight into one ``pyarrow.RecordBatch``.

The chunk's records are checked against one layout and cut into columns exactly as
:mod:`~recprep.codecs.recprep.columns` does for numpy batches, with one difference: a
column of ``str`` or ``bytes`` is never made of Python objects. The chunk's payload is
taken as it is for the data of a binary array whose values are the column's values and
the gaps between them (offsets made with numpy), and one Arrow ``take`` of every other
value copies the column's bytes out into one buffer (``str`` values: all ASCII, by
numpy's ``max``, or checked as UTF-8 by Arrow, in C). Fixed-width values are numpy views
of the payload, copied once into Arrow's buffers; arrays of one shape are one buffer
under nested ``fixed_size_list`` types; a flat tuple or dict of such columns is made a
record batch with the schema its layout's chunks had before. The record batch follows the mapping of
:func:`recprep._core.arrowcols.record_batch` (the same as for decoded instances), so a
chunk decoded here and one decoded record by record give equal batches. Anything the
numpy decoding refuses (mixed layouts, damage, pickles...) or that has no Arrow type
gives ``None``: the caller decodes record by record.

>>> from recprep.codecs.recprep import RecprepCodec
>>> codec = RecprepCodec()
>>> records = [codec.encode((i, float(i), "w" * i)) for i in range(5)]
>>> batch = recprep_decode_arrow(records, codec.decode).tree
>>> batch.column_names, batch.column(2).to_pylist()
(['f0', 'f1', 'f2'], ['', 'w', 'ww', 'www', 'wwww'])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..._core.arrowcols import INSTANCE_KEY, arrow, is_arrow, record_batch
from ..._core.batching import Columns
from ..._core.native import kernels
from ...errors import ArrowMappingError
from .columns import _columns_and_layout
from .layout import Layout

__all__ = ["recprep_decode_arrow"]

#: past this many bytes of values, a column's offsets are 64-bit (``large_string``)
_OFFSETS_MAX = (1 << 31) - 1


def recprep_decode_arrow(records: Sequence[Any], decode: Callable[[bytes], Any]
                         ) -> Columns | None:
    """The records as :class:`~recprep.batching.Columns` whose tree is one record batch
    — or, without str or bytes values, the numpy columns ``decode_columns`` gives (a
    batch copies them once, and Arrow takes its arrays without another copy) — or None
    where they don't share one layout (or a column has no Arrow type)."""
    found = _columns_and_layout(records, decode, _arrow_strings)
    if found is None:
        return None
    columns, lay = found
    if not _has_strings(columns.tree):  # numpy columns: a batch copies them once, and
        return columns  # Arrow takes the batch's arrays as they are (no second copy)
    batch = _flat_batch(columns.tree, columns.n, lay)
    if batch is None:
        try:
            batch = record_batch(columns.tree)
        except ArrowMappingError:
            return None
    return Columns(batch, columns.n, ("arrow", lay.signature))


def _flat_batch(tree: Any, n: int, lay: Layout) -> Any:
    """The record batch :func:`~recprep._core.arrowcols.record_batch` makes of a flat
    tuple or dict of columns of plain numbers (numpy) and strings (Arrow), made with the
    schema the layout's chunks had before (a chunk's buffers as they are); None for any
    other tree."""
    pa = arrow()
    template = lay.template
    if template[0] == "leaf" or any(t[0] != "leaf" for t in template[-1]) or (
            template[0] == "dict" and not all(isinstance(k, str) for k in template[1])):
        return None
    arrays = []
    for leaf in (tree if template[0] == "tuple" else tree.values()):
        if is_arrow(leaf):
            arrays.append(leaf)
        elif isinstance(leaf, np.ndarray) and leaf.ndim == 1 and leaf.dtype.kind in "iuf" \
                and leaf.dtype.isnative:
            arrays.append(pa.Array.from_buffers(pa.from_numpy_dtype(leaf.dtype), n, [
                None, pa.py_buffer(np.ascontiguousarray(leaf))]))
        else:
            return None
    kinds = tuple(a.type.id for a in arrays)  # numbers, string / binary (large or not)
    known = lay.arrow_schema  # (kinds, schema) of the layout's chunk before, replaced whole
    if known is None or known[0] != kinds:
        names = ([f"f{i}" for i in range(len(arrays))] if template[0] == "tuple"
                 else list(template[1]))
        known = lay.arrow_schema = (kinds, pa.schema(
            [pa.field(k, a.type) for k, a in zip(names, arrays, strict=True)],
            metadata={INSTANCE_KEY: template[0].encode()}))
    return pa.RecordBatch.from_arrays(arrays, schema=known[1])


def _has_strings(tree: Any) -> bool:
    """Whether a column tree has a column of str or bytes (Arrow arrays here)."""
    if isinstance(tree, (tuple, dict)):
        return any(map(_has_strings, tree.values() if isinstance(tree, dict) else tree))
    return is_arrow(tree)


#: the take indexes :func:`_every_other` made, the longest of each width: a chunk's is
#: a slice of it (chunks of one set hold about as many records, seldom exactly)
_EVERY_OTHER: dict[bool, Any] = {}


def _every_other(n: int, wide: bool) -> Any:
    """The Arrow array ``0, 2, …, 2n - 2`` (int64 if ``wide``, else int32): a slice of
    one kept for the next chunks (a thread that decodes another chunk meanwhile may
    replace it whole with a longer one).

    >>> _every_other(3, False).to_pylist(), _every_other(2, False).to_pylist()
    ([0, 2, 4], [0, 2])
    """
    index = _EVERY_OTHER.get(wide)
    if index is None or len(index) < n:
        index = arrow().array(np.arange(0, 2 * max(n, 1024), 2,
                                        dtype=np.int64 if wide else np.int32))
        _EVERY_OTHER[wide] = index
    return index.slice(0, n)


def _arrow_strings(u8: np.ndarray, pos: np.ndarray, size: np.ndarray, is_str: bool,
                   n: int) -> Any:
    """The Arrow array of the ``n`` str (or bytes) values at ``pos`` of ``size`` bytes of
    ``u8``, or None if a str isn't valid UTF-8 (its record then fails as it decodes).

    The values are copied out into one buffer by recprep's C kernel
    (:func:`_gathered_strings`) or, without it, by Arrow's ``take``
    (:func:`_taken_strings`). Text all ASCII is UTF-8; other text is checked by Arrow.
    """
    pa = arrow()
    if not n:
        return pa.array([], pa.string() if is_str else pa.binary())
    native = kernels()
    found = (_gathered_strings(native, u8, pos, size) if native is not None
             else _taken_strings(u8, pos, size, n))
    if found is None:
        return None
    out, high = found
    if not is_str:
        return out
    out = out.view(pa.large_string() if out.type == pa.large_binary() else pa.string())
    if high:
        try:
            out.validate(full=True)
        except pa.ArrowInvalid:
            return None
    return out


def _gathered_strings(native: Any, u8: np.ndarray, pos: np.ndarray, size: np.ndarray
                      ) -> tuple[Any, bool]:
    """The binary (or large binary) array of the values, copied out by the C kernel
    ``gather_spans`` into one buffer behind the offsets it writes, and whether a byte of
    them is past ASCII. The values lie in distinct places of ``u8``: they hold no more
    bytes than it, so its size says whether 32-bit offsets do."""
    pa = arrow()
    wide = len(u8) > _OFFSETS_MAX
    offsets = np.empty(len(size) + 1, np.int64 if wide else np.int32)
    data, high = native.gather_spans(u8, pos, size, offsets)
    out = pa.Array.from_buffers(pa.large_binary() if wide else pa.binary(), len(size),
                                [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    if wide and len(data) <= _OFFSETS_MAX:  # the type Arrow's take path gives it
        out = out.cast(pa.binary())
    return out, high


def _taken_strings(u8: np.ndarray, pos: np.ndarray, size: np.ndarray, n: int
                   ) -> tuple[Any, bool] | None:
    """:func:`_gathered_strings` without the C kernels: ``u8`` is taken as it is for the
    data of a binary array of ``2n - 1`` values — each value, then the gap to the next
    — and Arrow's ``take`` of every other one copies the values out (in C, a value at a
    time; numpy's ``max`` tells ASCII); None if the values aren't in order."""
    pa = arrow()
    ends = pos + size
    if not bool((pos[1:] >= ends[:-1]).all()):
        return None  # not in order (records given out of order): record by record
    wide = len(u8) > _OFFSETS_MAX
    index: Any = np.int64 if wide else np.int32
    bounds = np.empty((n, 2), index)
    bounds[:, 0] = pos
    bounds[:, 1] = ends
    spaced = pa.Array.from_buffers(pa.large_binary() if wide else pa.binary(), 2 * n - 1,
                                   [None, pa.py_buffer(bounds), pa.py_buffer(u8)])
    out = spaced.take(_every_other(n, wide))
    total = int(size.sum())
    data = out.buffers()[2]
    high = data is not None and total > 0 and int(
        np.frombuffer(data, np.uint8, total).max()) >= 0x80
    if total > _OFFSETS_MAX:
        return out.cast(pa.large_binary()), high
    return (out.cast(pa.binary()) if wide else out), high
