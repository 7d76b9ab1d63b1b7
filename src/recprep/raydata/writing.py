"""``recprep.ray.write``: a Ray Data ``Dataset`` written as a set by ``convert`` itself.

The dataset is executed once (``to_arrow_refs()``: its blocks stay in Ray's object store,
spilled to disk as it fills; the driver holds only references). A small actor of no CPU
keeps those references for the write's tasks, and each block becomes one partition of
``convert(output_path, partitions(readers), num_shards, name_prefix, executor="ray")``:
a :class:`BlockPartition` that, where its task runs, asks the actor for its block's
reference, gets the block, and hands ``convert`` its columns (a table: the columnar
encode path). Everything after that is ``convert``'s: per-attempt staging directories
(a retried task, which reads the same block again, never mixes with an earlier attempt),
the assembly of pieces in partition order, the chunk index and the commit, manifest last.
Instance ``i`` of the set is row ``i`` of the dataset, in the order of its blocks.

Memory: a task holds one block (and its encoded records) at a time.

Failpoint (tests only): with ``RECPREP_RAY_FAILPOINT`` naming a file in the driver's
environment, the first block reader to remove that file ends its worker process at once
(``os._exit(137)``, like a crash); Ray runs the task again.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ..write.convert import ConvertResult, convert
from ..write.plan import partitions
from ..write.tables import TableReader
from .reading import import_ray_data

#: the environment variable of the failpoint (see the module docs)
FAILPOINT_ENV = "RECPREP_RAY_FAILPOINT"


def ray_write(
    dataset: Any, output_path: str | os.PathLike[str], num_shards: int, name_prefix: str,
    **convert_options: Any,
) -> ConvertResult:
    """Write the rows of a ``ray.data.Dataset`` as a set. See :mod:`recprep.ray`."""
    import_ray_data("recprep.ray.write")
    import ray

    if not hasattr(dataset, "to_arrow_refs"):
        raise InvalidArgumentError(
            f"recprep.ray.write takes a ray.data.Dataset, got {type(dataset).__name__}; "
            "write other input with recprep.convert")
    for name in ("executor", "reader"):
        if name in convert_options:
            raise InvalidArgumentError(
                f"recprep.ray.write got {name}=: it runs convert on the Ray executor, "
                "with the dataset's blocks as the input")
    refs = list(dataset.to_arrow_refs())
    holder_name = f"recprep-blocks-{uuid.uuid4().hex}"
    holder: Any = ray.remote(num_cpus=0)(BlockHolder).options(name=holder_name).remote(refs)
    failpoint = os.environ.get(FAILPOINT_ENV)
    readers = [BlockPartition(holder_name, i, failpoint) for i in range(len(refs))]
    try:
        ray.get(holder.count.remote())  # up before any task asks it
        source: Any = partitions(readers) if readers else []
        return convert(output_path, source, num_shards, name_prefix, executor="ray",
                       **convert_options)
    finally:
        ray.kill(holder)


class BlockHolder:
    """A Ray actor keeping the references of a dataset's blocks while they are written."""

    def __init__(self, refs: list[Any]) -> None:
        self.refs = refs

    def count(self) -> int:
        return len(self.refs)

    def block(self, index: int) -> list[Any]:
        """Block ``index``'s reference, in a list (so Ray hands the reference over, not
        the block)."""
        return [self.refs[index]]


class BlockPartition:
    """Partition ``index`` of a write: one block of the dataset, fetched where the task
    runs (again if the task is retried), as a table of columns."""

    def __init__(self, holder: str, index: int, failpoint: str | None = None) -> None:
        self.holder, self.index, self.failpoint = holder, index, failpoint

    def __repr__(self) -> str:
        return f"BlockPartition(block {self.index})"

    def __call__(self) -> Any:
        import ray

        if self.failpoint is not None:
            _fail_once(self.failpoint)
        [ref] = ray.get(ray.get_actor(self.holder).block.remote(self.index))
        table = ray.get(ref)
        if not table.num_columns:
            return iter(())
        return TableReader(block_columns(table))()


def _fail_once(marker: str) -> None:
    try:
        os.remove(marker)
    except FileNotFoundError:
        return
    os._exit(137)


def block_columns(table: Any) -> dict[str, Any]:
    """A block's columns as ``convert`` takes a dict of them: Arrow columns as they are,
    tensor columns (Ray's tensor extension, Arrow's fixed-shape tensor) as one N-D numpy
    array each (row ``i`` is a sub-array).

    >>> import pytest; pa = pytest.importorskip("pyarrow")
    >>> cols = block_columns(pa.table({"x": [1, 2]}))
    >>> list(cols), cols["x"].to_pylist()
    (['x'], [1, 2])
    """
    columns: dict[str, Any] = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        kind = column.type
        if _is_tensor(kind):
            chunks = [c.to_numpy_ndarray() if hasattr(c, "to_numpy_ndarray") else c.to_numpy()
                      for c in column.chunks]
            columns[name] = np.concatenate(chunks) if len(chunks) != 1 else chunks[0]
        else:
            columns[name] = column
    return columns


def _is_tensor(kind: Any) -> bool:
    name = type(kind).__name__
    return name.startswith("ArrowTensorType") or name in (
        "ArrowVariableShapedTensorType", "FixedShapeTensorType")
