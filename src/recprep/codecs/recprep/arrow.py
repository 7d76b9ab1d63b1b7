"""A whole chunk of ``"recprep"`` records decoded straight into one ``pyarrow.RecordBatch``.

The chunk's records are checked against one layout and cut into columns exactly as
:mod:`~recprep.codecs.recprep.columns` does for numpy batches, with one difference: a
column of ``str`` or ``bytes`` is never made of Python objects. Its values' bytes are
gathered out of the chunk's payload with numpy into one buffer, their lengths summed
into Arrow offsets, and the two buffers are the Arrow array (``str`` values checked as
UTF-8 by Arrow, in C). Fixed-width values are numpy views of the payload, copied once
into Arrow's buffers; arrays of one shape are one buffer under nested
``fixed_size_list`` types. The record batch follows the mapping of
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

from ..._core.arrowcols import arrow, is_arrow, record_batch
from ..._core.batching import Columns
from ...errors import ArrowMappingError
from .columns import _columns_and_layout

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
    try:
        batch = record_batch(columns.tree)
    except ArrowMappingError:
        return None
    return Columns(batch, columns.n, ("arrow", lay.signature))


def _has_strings(tree: Any) -> bool:
    """Whether a column tree has a column of str or bytes (Arrow arrays here)."""
    if isinstance(tree, (tuple, dict)):
        return any(map(_has_strings, tree.values() if isinstance(tree, dict) else tree))
    return is_arrow(tree)


def _arrow_strings(u8: np.ndarray, pos: np.ndarray, size: np.ndarray, is_str: bool,
                   n: int) -> Any:
    """The Arrow array of the ``n`` str (or bytes) values at ``pos`` of ``size`` bytes of
    ``u8``, or None if a str isn't valid UTF-8 (its record then fails as it decodes)."""
    pa = arrow()
    total = int(size.sum())
    wide = total > _OFFSETS_MAX or len(u8) > _OFFSETS_MAX
    index = np.int64 if wide else np.int32
    offsets = np.zeros(n + 1, np.int64 if total > _OFFSETS_MAX else np.int32)
    np.cumsum(size, out=offsets[1:])
    placed = offsets[:-1].astype(index, copy=False)
    gather = np.repeat((pos.astype(index, copy=False) - placed), size)
    gather += np.arange(total, dtype=index)
    data = u8[gather]
    kind = (pa.large_string() if is_str else pa.large_binary()) if total > _OFFSETS_MAX else (
        pa.string() if is_str else pa.binary())
    out = pa.Array.from_buffers(kind, n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    if is_str:
        try:
            out.validate(full=True)
        except pa.ArrowInvalid:
            return None
    return out
