"""Columns as Arrow: a batch of columns (as :func:`~recprep._core.batching.collate` makes
them) as a ``pyarrow.RecordBatch``, by the mapping :mod:`recprep.read.arrowout` documents.

Its home is the base layer so that codecs, which decode whole chunks into columns, make
their record batches by the very same rules as a reader makes them of decoded instances.

>>> from recprep._core.batching import collate
>>> rb = record_batch(collate([(1, "a", None), (2, "b", None)]))
>>> rb.schema.names, [str(t) for t in rb.schema.types]
(['f0', 'f1', 'f2'], ['int64', 'string', 'null'])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArrowMappingError, MissingDependencyError

if TYPE_CHECKING:
    import pyarrow

__all__ = ["INSTANCE_KEY", "VALUE_COLUMN", "arrow", "is_arrow", "numeric_batch", "record_batch"]

#: the column of instances that are neither dicts nor tuples
VALUE_COLUMN = "value"
#: the schema metadata saying what the instances were
INSTANCE_KEY = b"recprep.instance"


def arrow() -> Any:
    """The ``pyarrow`` module, or a :class:`~recprep.errors.MissingDependencyError`."""
    try:
        import pyarrow
    except ImportError:
        raise MissingDependencyError("pyarrow", "arrow", "Arrow output") from None
    return pyarrow


def is_arrow(value: Any) -> bool:
    """Whether ``value`` is a pyarrow object (without importing pyarrow)."""
    return type(value).__module__.startswith("pyarrow")


def record_batch(batch: Any, first: int = 0) -> pyarrow.RecordBatch:
    """The ``pyarrow.RecordBatch`` of a batch of columns (as
    :func:`~recprep.batching.collate` makes them; leaves may also be Arrow arrays) whose
    first instance is instance ``first`` of the pass (for errors).

    >>> from recprep._core.batching import collate
    >>> rb = record_batch(collate([{"x": 1, "s": None}, {"x": 2, "s": "b"}]))
    >>> rb.schema.names, rb.column(1).to_pylist()
    (['x', 's'], [None, 'b'])
    """
    pa = arrow()
    if isinstance(batch, pa.RecordBatch):  # a chunk's, made by these rules
        return batch
    if isinstance(batch, tuple) and batch:
        kind, names = "tuple", _field_names(batch)
        columns = list(batch)
    elif isinstance(batch, dict) and batch:
        kind, names = "dict", [_name(k, first) for k in batch]
        columns = list(batch.values())
    else:
        kind, names, columns = "value", [VALUE_COLUMN], [batch]
    arrays = [_array(pa, column, name, first) for name, column in
              zip(names, columns, strict=True)]
    if kind == "value" and pa.types.is_struct(arrays[0].type) and _dicts(batch):
        kind = "dict"  # dicts of several key sets: the union of their keys, nulls filled
        got = pa.RecordBatch.from_struct_array(arrays[0])
        names, arrays = got.schema.names, got.columns
    out = pa.RecordBatch.from_arrays(arrays, names=names)
    return out.replace_schema_metadata({INSTANCE_KEY: kind.encode()})


def numeric_batch(batch: Any, known: dict[Any, Any], first: int = 0
                  ) -> tuple[pyarrow.RecordBatch, pyarrow.Schema] | None:
    """:func:`record_batch` of a flat tuple or dict of numeric numpy columns, and the
    schema it has; None for any other batch. ``known`` (one dict for the batches of a
    pass) keeps each layout's schema: a batch of a layout seen before is its columns'
    buffers wrapped as they are under that very schema — no type looked up or inferred,
    no metadata replaced (~11 µs a batch of two columns against ~22).

    >>> known = {}
    >>> batch, schema = numeric_batch((np.zeros((2, 3)), np.arange(2)), known)
    >>> again, same = numeric_batch((np.ones((2, 3)), np.arange(2)), known)
    >>> same is schema, again.column(0).type, again.column(1).to_pylist()
    (True, FixedSizeListType(fixed_size_list<item: double>[3]), [0, 1])
    """
    if not isinstance(batch, (tuple, dict)):
        return None
    columns = batch.values() if isinstance(batch, dict) else batch
    try:
        key = (type(batch), tuple(batch) if isinstance(batch, dict) else None,
               tuple((c.dtype, c.shape[1:]) for c in columns))
    except (AttributeError, TypeError):  # a leaf that is no array, a key Arrow refuses
        return None
    spec = known.get(key, False)
    if spec is False:
        spec = known[key] = _numeric_spec(batch, key[2], first)
    if spec is None:
        return None
    schema, leaves = spec
    pa = arrow()
    arrays = []
    for column, (value_type, levels) in zip(columns, leaves, strict=True):
        flat = column.reshape(-1) if column.flags.c_contiguous else column.ravel()
        array = pa.Array.from_buffers(value_type, flat.size, [None, pa.py_buffer(flat)])
        for list_type in levels:
            array = pa.FixedSizeListArray.from_arrays(array, type=list_type)
        arrays.append(array)
    return pa.RecordBatch.from_arrays(arrays, schema=schema), schema


def _numeric_spec(batch: Any, forms: tuple[Any, ...], first: int) -> Any:
    """What :func:`numeric_batch` needs of a layout: the schema :func:`record_batch`
    gives its first batch, and each column's value type and fixed-size list types
    (innermost first); None where the columns aren't all plain numbers of this
    machine's byte order in a flat tuple or dict."""
    if not batch or any(
            dtype.kind not in "iuf" or not dtype.isnative or 0 in shape
            for dtype, shape in forms):
        return None
    made = record_batch(batch, first)
    leaves = []
    for field in made.schema:
        types = [field.type]
        while hasattr(types[-1], "list_size"):
            types.append(types[-1].value_type)
        leaves.append((types[-1], types[-2::-1]))
    return made.schema, leaves


def _field_names(columns: tuple[Any, ...]) -> list[str]:
    fields = getattr(columns, "_fields", None)
    return list(fields) if fields is not None else [f"f{i}" for i in range(len(columns))]


def _name(key: Any, first: int) -> str:
    if not isinstance(key, str):
        raise ArrowMappingError(repr(key), first, f"a column name must be a str, got "
                                f"{type(key).__qualname__}")
    return key


def _dicts(column: Any) -> bool:
    return isinstance(column, list) and all(isinstance(v, dict) or v is None for v in column)


def _array(pa: Any, column: Any, name: str, first: int) -> Any:
    """One column as an Arrow array."""
    if is_arrow(column):
        return column
    if isinstance(column, tuple) and column:
        names = _field_names(column)
    elif isinstance(column, dict) and column:
        names = [_name(k, first) for k in column]
        column = tuple(column.values())
    elif isinstance(column, np.ndarray):
        return _numpy_array(pa, column, name, first)
    else:
        return _list_array(pa, list(column), name, first)
    children = [_array(pa, c, f"{name}.{n}", first) for n, c in zip(names, column,
                                                                    strict=True)]
    return pa.StructArray.from_arrays(children, names=names)


def _numpy_array(pa: Any, column: np.ndarray, name: str, first: int) -> Any:
    """A numpy column as ``collate`` makes it: numbers, stacked arrays, str or bytes."""
    if column.dtype == object:  # collate's str-only or bytes-only column
        text = isinstance(column[0], str)
        try:
            out = pa.array(column, type=pa.string() if text else pa.binary())
            if isinstance(out, pa.ChunkedArray):  # past int32 offsets
                out = pa.array(column, type=pa.large_string() if text else pa.large_binary())
        except (pa.ArrowException, ValueError) as err:
            raise ArrowMappingError(name, first + _failing(pa, list(column)), str(err)
                                    ) from None
        return out
    if column.dtype.kind == "c":
        raise ArrowMappingError(name, first, f"{column.dtype} numbers have no Arrow type")
    if not column.dtype.isnative:
        column = column.astype(column.dtype.newbyteorder("="))
    flat = np.ascontiguousarray(column).reshape(-1)
    try:
        if flat.dtype.kind in "iuf":  # its buffer as it is (pa.array scans it: slower)
            values = pa.Array.from_buffers(pa.from_numpy_dtype(flat.dtype), len(flat),
                                           [None, pa.py_buffer(flat)])
        else:
            values = pa.array(flat)
    except pa.ArrowException as err:
        raise ArrowMappingError(name, first, f"{column.dtype}: {err}") from None
    for size in reversed(column.shape[1:]):
        values = pa.FixedSizeListArray.from_arrays(values, size)
    return values


def _list_array(pa: Any, values: list[Any], name: str, first: int) -> Any:
    """A column ``collate`` left a list: None among values, lists, mixed types..."""
    if all(v is None for v in values):
        return pa.nulls(len(values))
    kinds: dict[Any, int] = {}
    for i, value in enumerate(values):
        if value is not None and kinds.setdefault(_arrow_kind(value), i) == i and len(kinds) > 1:
            one, at = type(values[next(iter(kinds.values()))]), i
            raise ArrowMappingError(name, first + at, f"values of one type were expected, "
                                    f"found {one.__qualname__} and then "
                                    f"{type(value).__qualname__}")
    try:
        if next(iter(kinds)) is np.ndarray:
            return _array_column(pa, values, name, first)
        return pa.array(values)
    except (pa.ArrowException, ValueError, TypeError, OverflowError) as err:
        at = _failing(pa, values)
        raise ArrowMappingError(name, first + at, f"{type(values[at]).__qualname__}: {err}"
                                ) from None


def _array_column(pa: Any, values: list[Any], name: str, first: int) -> Any:
    """A column of numpy arrays and None: of one dtype and shape, ``fixed_size_list`` as
    when stacked (a null where None is); else nested lists of their values."""
    present = [v for v in values if v is not None]
    forms = {(v.dtype, v.shape) for v in present}
    if len(forms) > 1 or present[0].ndim == 0 or present[0].dtype.hasobject:
        return pa.array([None if v is None else v.tolist() for v in values])
    missing = np.fromiter((v is None for v in values), bool, len(values))
    stacked = np.zeros((len(values), *present[0].shape), present[0].dtype)
    stacked[~missing] = np.stack(present)
    got = _numpy_array(pa, stacked, name, first)
    return pa.FixedSizeListArray.from_arrays(got.values, got.type.list_size,
                                             mask=pa.array(missing))


def _arrow_kind(value: Any) -> Any:
    """What Arrow type ``value`` maps to, as far as telling types apart needs: a Python
    number and the numpy scalar of its dtype are one (``int`` and ``numpy.int64``)."""
    if isinstance(value, (str, bytes)):
        return str if isinstance(value, str) else bytes
    if isinstance(value, (bool, np.bool_)):
        return bool
    if isinstance(value, int):
        return np.dtype(np.int64)
    if isinstance(value, float):  # numpy.float64 too
        return np.dtype(np.float64)
    if isinstance(value, np.generic):
        return value.dtype.newbyteorder("=")
    return type(value)


def _failing(pa: Any, values: list[Any]) -> int:
    """The first of ``values`` pyarrow can't convert alone (else 0)."""
    for i, value in enumerate(values):
        try:
            pa.array([value])
        except Exception:
            return i
    return 0
