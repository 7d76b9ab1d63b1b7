"""Ray Data: a set as a ``ray.data.Dataset``, and a ``Dataset`` written as a set.

::

    import recprep.ray as rr

    ds = rr.read("s3://bucket/train", columns=["image", "label"], shuffle=True, seed=7)
    rr.write(ds.map_batches(augment), "s3://bucket/augmented", 64, "aug")

:func:`read` plans one read task per rank share of the set (``RecordIO(...).for_rank``:
together every instance once), sized from the manifests and chunk indexes without
decoding, and hands Ray Arrow tables; every reader option passes through (``shuffle``,
``seed``, ``on_corrupt``, ``storage_options``, ``codec``...), but ``rank`` and
``world_size`` (Ray splits the set). :func:`write` is ``convert`` on the Ray executor
with the dataset's blocks as its partitions: the same staging, commit, manifest and chunk
index, one task per block, retried tasks writing into directories of their own.
See ``docs/ray.md``.

``import recprep.ray`` imports neither Ray nor pyarrow: they are imported when a
function is called (``pip install 'recprep[ray]'``).

Example
-------
Ray splits the set itself, so a rank is refused (before Ray is started):

>>> import pytest; _ = pytest.importorskip("ray.data")
>>> import recprep, recprep.ray as rr
>>> _ = recprep.convert("memory://doc/ray", [(i, f"w{i}") for i in range(5)], 2, "r")
>>> rr.read("memory://doc/ray", rank=0, world_size=2)
Traceback (most recent call last):
...
recprep.errors.InvalidArgumentError: recprep.ray.read got rank, world_size: Ray splits \
the set across its read tasks itself (one rank share each); leave them out, or read one \
share with RecordIO(..., rank=, world_size=)
"""

from __future__ import annotations

from .raydata.reading import ray_read as read
from .raydata.writing import ray_write as write

__all__ = ["read", "write"]
