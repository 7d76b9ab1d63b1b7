"""Batches of instances as columns: :func:`collate`, :func:`unbatch` and :func:`batched`,
and :class:`Columns` (a chunk decoded whole).

Their home is :mod:`recprep._core.batching` (the base layer: the rules of a batch's
layout are there); this is their public face.

>>> from recprep.batching import collate, unbatch
>>> batch = collate([(1, "a"), (2, "b")])
>>> batch[0].tolist(), unbatch(batch)[1]
([1, 2], (np.int64(2), 'b'))
"""

from __future__ import annotations

from ._core.batching import Columns, batched, check_batch_size, collate, unbatch

__all__ = ["Columns", "batched", "check_batch_size", "collate", "unbatch"]
