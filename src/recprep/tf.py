"""TensorFlow: ``to_tf_dataset``, a reader as a ``tf.data.Dataset``.

``import recprep`` never imports TensorFlow; :func:`to_tf_dataset` imports it when called
and raises :class:`~recprep.errors.MissingDependencyError` when it is missing.

The dataset's output signature comes, in order of preference, from the ``output_signature``
argument, from the manifest's ``schema`` (``{"features": [{"name", "dtype", "shape"}]}``,
as the ``example`` codec writes it: a dict of tensors by feature name), or from the first
instance, whose structure (tuples, dicts), dtypes and shapes :func:`describe_tensors` reads
(``recprep.tf.describe``, its earlier name, still works):

>>> import numpy as np
>>> describe_tensors((np.zeros((2, 3), np.float32), 7, "label"))
(((2, 3), 'float32'), ((), 'int64'), ((), 'string'))
>>> features_from_schema({"features": [{"name": "x", "dtype": "float32", "shape": [-1]}]})
{'x': ((None,), 'float32')}

With ``batch_size=``, the dataset's elements are whole batches made by
:meth:`recprep.RecordIO.batches` (collated once per batch in numpy, no ``ds.batch``):
every tensor of the signature gets a leading batch dimension.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from ._core.batching import batched, check_batch_size
from .errors import InvalidArgumentError, MissingDependencyError

__all__ = ["describe_tensors", "features_from_schema", "to_tf_dataset"]

log = logging.getLogger("recprep")

_STRING_DTYPES = {"bytes", "string", "str", "object"}


def _import_tf() -> Any:
    try:
        import tensorflow as tf
    except ImportError:
        raise MissingDependencyError("tensorflow", "tf", "recprep.tf") from None
    return tf


def _tensor_dtype_name(dtype: np.dtype) -> str:
    return "string" if dtype.kind in "OSUa" else dtype.name


def describe_tensors(instance: Any) -> Any:
    """The structure of ``instance`` with each leaf as ``(shape, dtype name)``.

    Tuples and dicts are structure; a list, an array, a scalar, a ``str`` or ``bytes`` is
    one tensor (strings and bytes have dtype ``'string'``; Python ints ``'int64'``,
    floats ``'float64'``, bools ``'bool'``).
    """
    if isinstance(instance, tuple):
        return tuple(describe_tensors(x) for x in instance)
    if isinstance(instance, dict):
        return {k: describe_tensors(v) for k, v in instance.items()}
    if instance is None:
        raise InvalidArgumentError(
            "an instance holds None, which has no tensor type; pass output_signature="
        )
    array = _as_array(instance)
    if array.dtype.kind not in "biufcOSUa":
        raise InvalidArgumentError(
            f"a {type(instance).__qualname__} of dtype {array.dtype} has no tensor type; "
            "pass output_signature="
        )
    return tuple(array.shape), _tensor_dtype_name(array.dtype)


def _as_array(value: Any) -> np.ndarray:
    if isinstance(value, bool):
        return np.asarray(value, dtype=np.bool_)
    if isinstance(value, int):
        return np.asarray(value, dtype=np.int64)
    if isinstance(value, (str, bytes)):
        return np.asarray(value, dtype=object)
    return np.asarray(value)


def features_from_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """``{name: (shape, dtype name)}`` from a manifest schema's ``features``, or None.

    A dimension of ``-1`` or ``None`` is of unknown length.
    """
    features = schema.get("features") if isinstance(schema, dict) else None
    if not features:
        return None
    out: dict[str, Any] = {}
    for feature in features:
        try:
            name, dtype, shape = feature["name"], str(feature["dtype"]), feature["shape"]
            dims = tuple(None if d is None or d < 0 else int(d) for d in shape)
        except (KeyError, TypeError, ValueError) as err:
            raise InvalidArgumentError(
                f"the manifest's schema has a feature the TF adapter can't read ({feature!r}: "
                f"{type(err).__name__}: {err}); pass output_signature="
            ) from None
        out[name] = (dims, _schema_dtype(dtype))
    return out


def _schema_dtype(name: str) -> str:
    if name in _STRING_DTYPES:
        return "string"
    try:
        return _tensor_dtype_name(np.dtype(name))
    except TypeError:
        raise InvalidArgumentError(
            f"the manifest's schema has a feature of dtype {name!r}, which is not a numpy "
            "dtype; pass output_signature="
        ) from None


def _manifest_features(reader: Any) -> dict[str, Any] | None:
    found = [
        features_from_schema(m.schema)
        for m in getattr(reader, "manifests", [])
        if m is not None
    ]
    found = [f for f in found if f is not None]
    if not found:
        return None
    if any(f != found[0] for f in found[1:]):
        raise InvalidArgumentError(
            "the shard sets of this reader have different schemas, so no one signature "
            "fits them all; read them separately or pass output_signature="
        )
    return found[0]


def _to_specs(tf: Any, described: Any) -> Any:
    if isinstance(described, dict):
        return {k: _to_specs(tf, v) for k, v in described.items()}
    if len(described) == 2 and isinstance(described[1], str):  # a leaf: (shape, dtype)
        shape, dtype = described
        return tf.TensorSpec(shape=shape, dtype=tf.string if dtype == "string" else dtype)
    return tuple(_to_specs(tf, x) for x in described)


def _batch_dims(described: Any, dim: int | None) -> Any:
    """``described`` with a leading dimension ``dim`` on every leaf."""
    if isinstance(described, dict):
        return {k: _batch_dims(v, dim) for k, v in described.items()}
    if len(described) == 2 and isinstance(described[1], str):  # a leaf: (shape, dtype)
        shape, dtype = described
        return (dim, *shape), dtype
    return tuple(_batch_dims(x, dim) for x in described)


def _tensorable(instance: Any) -> Any:
    """Lists become arrays (one tensor), tuples and dicts stay structure."""
    if isinstance(instance, tuple):
        return tuple(_tensorable(x) for x in instance)
    if isinstance(instance, dict):
        return {k: _tensorable(v) for k, v in instance.items()}
    if isinstance(instance, list):
        return _dense(instance)
    return instance


def _dense(values: list[Any]) -> np.ndarray:
    """A list (a list value, or a batch's list column) as one array, or an error."""
    try:
        array = np.asarray(values)
    except ValueError:
        array = None
    if array is None or (array.dtype.hasobject and not all(
        isinstance(x, (str, bytes)) for x in array.flat
    )):
        shown = repr(values)
        raise InvalidArgumentError(
            f"a list of ragged or mixed values has no dense tensor type: "
            f"{shown[:80]}{'...' if len(shown) > 80 else ''}; without batch_size, give an "
            "output_signature with None dimensions (and use ds.ragged_batch or "
            "ds.padded_batch), or make the values equal-shape"
        )
    return array


def to_tf_dataset(
    reader: Callable[[], Iterable[Any]],
    *,
    output_signature: Any = None,
    batch_size: int | None = None,
    drop_last: bool = False,
) -> Any:
    """A ``tf.data.Dataset`` of a reader's instances.

    Parameters
    ----------
    reader
        A :class:`~recprep.RecordIO` (or any reader: a no-argument callable returning an
        iterable of instances). Every pass over the dataset is a fresh pass of the reader.
    output_signature
        A nested structure of ``tf.TensorSpec``. ``None``: from the manifest's schema,
        else from the first instance (exact shapes; pass a signature with ``None``
        dimensions for instances whose shapes vary). With ``batch_size``, the signature
        of a batch.
    batch_size
        Make the dataset's elements batches of this many instances, collated by
        :meth:`recprep.RecordIO.batches` (by :func:`recprep.batching.batched` for other
        readers) rather than one instance each: tuples/dicts of columns, each one tensor
        with a leading batch dimension (``None``; ``batch_size`` with ``drop_last``).
        Columns must be dense: instances of one shape, no ``None``.
    drop_last
        With ``batch_size``: leave out the last, short batch of each pass.

    Returns
    -------
    tf.data.Dataset

    Examples
    --------
    >>> import pytest; tf = pytest.importorskip("tensorflow")
    >>> import numpy as np
    >>> from recprep import RecordIO, convert
    >>> data = [(np.full(3, i, np.float32), i) for i in range(4)]
    >>> _ = convert("memory://doc/tf", data, 2, "d")
    >>> ds = to_tf_dataset(RecordIO("memory://doc/tf/d-*"))
    >>> ds.element_spec
    (TensorSpec(shape=(3,), dtype=tf.float32, name=None), \
TensorSpec(shape=(), dtype=tf.int64, name=None))
    >>> next(iter(ds.batch(2)))[1].numpy().tolist()
    [0, 1]
    >>> batches = to_tf_dataset(RecordIO("memory://doc/tf/d-*"), batch_size=3)
    >>> batches.element_spec[0]
    TensorSpec(shape=(None, 3), dtype=tf.float32, name=None)
    >>> [labels.numpy().tolist() for _, labels in batches]
    [[0, 1, 2], [3]]
    """
    tf = _import_tf()
    if not callable(reader):
        raise InvalidArgumentError(
            f"to_tf_dataset takes a reader (such as recprep.RecordIO(...)), got "
            f"{type(reader).__qualname__}"
        )
    if batch_size is not None:
        batch_size = check_batch_size(batch_size)
    elif drop_last:
        raise InvalidArgumentError("drop_last=True needs a batch_size")
    if output_signature is None:
        described = _manifest_features(reader)
        if described is None:
            first = next(iter(reader()), None)
            if first is None:
                raise InvalidArgumentError(
                    "the reader yields nothing, so there is no instance to infer the "
                    "signature from; pass output_signature="
                )
            described = describe_tensors(_tensorable(first))
        if batch_size is not None:
            described = _batch_dims(described, batch_size if drop_last else None)
        output_signature = _to_specs(tf, described)
        log.debug("recprep: tf.data signature %s", output_signature)

    def generate() -> Iterator[Any]:
        if batch_size is None:
            items = iter(reader())
        elif callable(getattr(reader, "batches", None)):
            items = reader.batches(batch_size, drop_last=drop_last)  # type: ignore[attr-defined]
        else:
            items = batched(reader(), batch_size, drop_last)
        for item in items:
            yield _tensorable(item)

    return tf.data.Dataset.from_generator(generate, output_signature=output_signature)


def __getattr__(name: str) -> Any:
    if name == "describe":  # the name of describe_tensors until this release
        return describe_tensors
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
