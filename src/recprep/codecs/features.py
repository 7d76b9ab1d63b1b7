"""Features: the names, dtypes and shapes of what each instance holds, and checking them.

A :class:`Feature` declares one value of an instance: ``Feature("image", "float32",
(28, 28))``. A ``None`` dimension is variable. :func:`as_features` also takes TensorFlow
``numeric_column``-style objects (anything with ``key``, ``shape`` and ``dtype``; a
``tf.DType`` is read through its ``as_numpy_dtype``) without importing TensorFlow, and
the ``{"name", "dtype", "shape"}`` dicts a manifest's ``schema`` holds.

:func:`check_instance` validates one instance against the features and returns its
values as arrays of the declared dtypes. The rules:

* a tuple (or list) gives the values in feature order, a dict gives them by name; the
  count, or the set of names, must match;
* a numpy value's dtype must cast *safely* to the declared one (``np.can_cast(...,
  "safe")``: ``int32`` into ``int64`` yes, ``float64`` into ``float32`` no); strings
  match strings of the same kind (``str`` for ``str``, ``bytes`` for ``bytes``, either
  for ``object``);
* plain Python values are accepted for a matching kind when they convert exactly (ints
  within the declared range; floats into any float dtype, as declared, as long as a
  finite value stays finite);
* the shape must match, ``None`` dimensions matching any length; a scalar is accepted
  for a shape whose dimensions are all 1 (``(1,)``, TensorFlow's default).

Any mismatch raises :class:`SchemaMismatchError` naming the feature, what was expected
and what was found.

Examples
--------
>>> import numpy as np
>>> features = as_features([Feature("image", "float32", (2, None)), Feature("label", int)])
>>> features[0]
Feature('image', 'float32', (2, None))
>>> values = check_instance(features, (np.zeros((2, 3), np.float32), 7))
>>> values["image"].shape, values["label"].dtype.name
((2, 3), 'int64')
>>> check_instance(features, {"image": np.zeros((2, 3)), "label": 7})
Traceback (most recent call last):
...
recprep.errors.SchemaMismatchError: feature 'image': expected float32[2, None], found \
float64[2, 3] (float64 can't be cast safely to float32)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError, SchemaMismatchError

__all__ = [
    "Feature",
    "SchemaMismatchError",
    "as_dtype",
    "as_features",
    "check_instance",
    "check_value",
    "fixed_size",
]

Shape = tuple[int | None, ...]
#: what a feature may hold: numbers, str, bytes, object (str or bytes)
_FEATURE_KINDS = "biufcUSO"


def as_dtype(dtype: Any) -> np.dtype:
    """The numpy dtype (native byte order) for ``dtype``: a numpy/Python type, a string,
    or a ``tf.DType`` (through its ``as_numpy_dtype``).

    >>> as_dtype("float32"), as_dtype(str), as_dtype(">i2")
    (dtype('float32'), dtype('<U'), dtype('int16'))
    """
    source = dtype
    if hasattr(dtype, "as_numpy_dtype"):  # tf.DType, duck-typed: no TensorFlow import
        dtype = dtype.as_numpy_dtype
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise InvalidArgumentError(f"{source!r} is not a dtype") from None
    if dt.kind not in _FEATURE_KINDS or dt.fields is not None or dt.subdtype is not None:
        raise InvalidArgumentError(
            f"a feature holds numbers, str or bytes; {source!r} (numpy {dt}) is none of them"
        )
    return dt.newbyteorder("=") if dt.byteorder not in "=|" else dt


def _dtype_label(dt: np.dtype) -> str:
    """``float32``, ``str``, ``U5``...: a name ``np.dtype()`` reads back as ``dt``."""
    try:
        if np.dtype(dt.name) == dt:
            return dt.name
    except TypeError:
        pass
    return dt.str.lstrip("<>=|")


def _as_shape(shape: Any, name: str) -> Shape:
    if shape is None:
        return ()
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        dims = tuple(None if d is None else int(d) for d in shape)
        if any(d is not None and (d < 0 or d != s) for d, s in zip(dims, shape, strict=True)):
            raise ValueError
    except (TypeError, ValueError):
        raise InvalidArgumentError(
            f"feature {name!r}: shape must be a tuple of non-negative ints or None "
            f"(variable), got {shape!r}"
        ) from None
    return dims


def _describe_shape(shape: Sequence[Any]) -> str:
    return "[" + ", ".join("None" if d is None else str(d) for d in shape) + "]"


@dataclass(frozen=True)
class Feature:
    """One named value of an instance: its dtype and its shape (``None``: variable).

    ``dtype`` is normalised to a numpy dtype in native byte order; ``shape`` to a tuple.

    >>> Feature("label", "int64")
    Feature('label', 'int64', ())
    >>> Feature("name", bytes, [None]).describe()
    'bytes[None]'
    """

    name: str
    dtype: np.dtype
    shape: Shape = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InvalidArgumentError(f"a feature name is a non-empty str, got {self.name!r}")
        object.__setattr__(self, "dtype", as_dtype(self.dtype))
        object.__setattr__(self, "shape", _as_shape(self.shape, self.name))

    def describe(self) -> str:
        """``dtype[dims]``, as error messages show it."""
        return _dtype_label(self.dtype) + _describe_shape(self.shape)

    def to_json(self) -> dict[str, Any]:
        """The feature as a manifest's ``schema`` stores it."""
        return {"name": self.name, "dtype": _dtype_label(self.dtype), "shape": list(self.shape)}

    def __repr__(self) -> str:
        return f"Feature({self.name!r}, {_dtype_label(self.dtype)!r}, {self.shape!r})"


def _as_feature(column: Any) -> Feature:
    if isinstance(column, Feature):
        return column
    if isinstance(column, Mapping):
        try:
            return Feature(column["name"], column["dtype"], column.get("shape", ()))
        except KeyError as err:
            raise InvalidArgumentError(
                f"a feature dict needs 'name' and 'dtype' keys, {column!r} lacks {err}"
            ) from None
    if all(hasattr(column, a) for a in ("key", "shape", "dtype")):  # tf numeric_column
        return Feature(column.key, column.dtype, column.shape)
    if isinstance(column, tuple) and 2 <= len(column) <= 3:
        return Feature(*column)
    raise InvalidArgumentError(
        f"can't make a feature of {column!r}: pass recprep.Feature(name, dtype, shape), a "
        "(name, dtype, shape) tuple, or an object with key, shape and dtype attributes "
        "(such as tf.feature_column.numeric_column)"
    )


def as_features(columns: Iterable[Any]) -> list[Feature]:
    """The :class:`Feature` list for ``columns``: features, TensorFlow-style feature
    columns (``key``, ``shape``, ``dtype``), ``(name, dtype, shape)`` tuples or schema dicts.

    >>> class Column:  # what tf.feature_column.numeric_column returns, duck-typed
    ...     key, shape, dtype = "x", (3,), "float32"
    >>> as_features([Column(), ("y", "int8")])
    [Feature('x', 'float32', (3,)), Feature('y', 'int8', ())]
    """
    if isinstance(columns, (str, bytes, Mapping)) or not isinstance(columns, Iterable):
        raise InvalidArgumentError(f"features must be a list of features, got {columns!r}")
    features = [_as_feature(c) for c in columns]
    if not features:
        raise InvalidArgumentError("features must list at least one feature")
    names = [f.name for f in features]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InvalidArgumentError(f"feature names must be unique; repeated: {duplicates}")
    return features


# -- checking instances ------------------------------------------------------------------


def _found(arr: np.ndarray) -> str:
    name = {"U": "str", "S": "bytes"}.get(arr.dtype.kind) or _dtype_label(arr.dtype)
    return name + _describe_shape(arr.shape)


def _mismatch(feature: Feature, arr: np.ndarray | str, reason: str = "") -> SchemaMismatchError:
    if isinstance(arr, str):
        return SchemaMismatchError(feature.name, feature.describe(), arr, reason)
    err = SchemaMismatchError(feature.name, feature.describe(), _found(arr), reason)
    err.found_dtype = arr.dtype
    return err


def _as_declared_strings(feature: Feature, arr: np.ndarray) -> np.ndarray:
    """``arr`` as the declared string feature: ``str`` for U, ``bytes`` for S, either for O."""
    dt = feature.dtype
    if arr.dtype.kind == "O":
        want = (str, bytes) if dt.kind == "O" else str if dt.kind == "U" else bytes
        if not all(isinstance(v, want) for v in arr.flat):
            raise _mismatch(feature, arr, "holds values that are not strings of the declared kind")
        if dt.kind == "O":
            return arr
        arr = arr.astype(dt.kind)
    elif arr.dtype.kind not in ("US" if dt.kind == "O" else dt.kind):
        raise _mismatch(feature, arr, "not strings of the declared kind")
    if dt.kind == "O":
        return arr.astype(object)
    if dt.itemsize and not np.can_cast(arr.dtype, dt):
        raise _mismatch(feature, arr, "strings longer than the declared width")
    return arr


def _from_numpy(feature: Feature, value: np.ndarray | np.generic) -> np.ndarray:
    arr = np.asarray(value)
    dt = feature.dtype
    if dt.kind in "USO":
        return _as_declared_strings(feature, arr)
    if arr.dtype.kind not in "biufc" or not np.can_cast(arr.dtype, dt, "safe"):
        raise _mismatch(
            feature, arr, f"{_dtype_label(arr.dtype)} can't be cast safely to {_dtype_label(dt)}"
        )
    return arr.astype(dt, copy=False)


_PY_KINDS = {"b": "b", "i": "biu", "u": "biu", "f": "biuf", "c": "biufc", "U": "U", "S": "S"}


def _from_python(feature: Feature, value: Any) -> np.ndarray:
    dt = feature.dtype
    try:
        if dt.kind == "O":
            empty = isinstance(value, (list, tuple)) and not value
            arr = np.empty(0, object) if empty else np.array(value, dtype=object)
        else:
            arr = np.asarray(value)
    except ValueError as err:  # ragged nested lists
        raise _mismatch(feature, type(value).__name__, str(err)) from None
    if dt.kind in "USO":
        return _as_declared_strings(feature, arr)
    if arr.dtype.kind not in _PY_KINDS[dt.kind]:
        raise _mismatch(
            feature, arr, f"Python {type(value).__name__} for a {_dtype_label(dt)} feature"
        )
    with np.errstate(all="ignore"):
        cast = arr.astype(dt)
    if arr.dtype.kind in "biu":  # ints: in range (and exact, into a float)
        lost = not np.array_equal(cast, arr)
    else:  # floats into the declared float dtype: rounding as declared, no overflow
        lost = not np.array_equal(np.isfinite(cast), np.isfinite(arr))
    if lost:
        raise _mismatch(feature, arr, f"a value doesn't fit in {_dtype_label(dt)}")
    return cast


def _shaped(feature: Feature, arr: np.ndarray) -> np.ndarray:
    shape = feature.shape
    if arr.shape == shape:
        return arr
    if len(arr.shape) == len(shape) and all(
        d is None or d == n for d, n in zip(shape, arr.shape, strict=True)
    ):
        return arr
    if arr.ndim == 0 and shape and all(d == 1 for d in shape):
        return arr.reshape(shape)
    raise _mismatch(feature, arr, "wrong shape")


def _scalar(feature: Feature, value: int | float) -> np.ndarray | None:
    """A Python int/float/bool as a 0-d array of the feature's dtype; None: the slow path."""
    dt = feature.dtype
    kind = dt.kind
    if type(value) is int and kind in "iu":
        bounds = _BOUNDS.get(dt)
        if bounds is None:
            info = np.iinfo(dt)
            bounds = _BOUNDS[dt] = (int(info.min), int(info.max))
        if not bounds[0] <= value <= bounds[1]:
            raise _mismatch(feature, "int " + str(value), f"out of range for {dt.name}")
        return np.array(value, dt)
    if type(value) is float and kind == "f":
        with np.errstate(over="ignore"):
            arr = np.array(value, dt)
        if math.isinf(float(arr)) and not math.isinf(value):
            raise _mismatch(feature, "float " + repr(value), f"overflows {dt.name}")
        return arr
    return None


_BOUNDS: dict[np.dtype, tuple[int, int]] = {}


def check_value(feature: Feature, value: Any) -> np.ndarray:
    """The array of one feature's ``value`` (declared dtype, checked shape) or an error."""
    arr: np.ndarray | None
    if isinstance(value, (np.ndarray, np.generic)):
        arr = _from_numpy(feature, value)
    else:
        arr = _scalar(feature, value)
        if arr is None:
            arr = _from_python(feature, value)
    return arr if arr.shape == feature.shape else _shaped(feature, arr)


def check_instance(features: Sequence[Feature], instance: Any) -> dict[str, np.ndarray]:
    """Check ``instance`` against ``features``; return its values by name, as arrays.

    ``instance`` is a tuple (or list) in feature order or a dict by name. Raises
    :class:`SchemaMismatchError` on a missing or extra value, a dtype that can't be cast
    safely, or a wrong shape.

    >>> check_instance([Feature("x", "int64")], (1, 2))
    Traceback (most recent call last):
    ...
    recprep.errors.SchemaMismatchError: instance: expected a tuple of 1 value (x), found \
a tuple of 2 values
    """
    if not all(isinstance(f, Feature) for f in features):
        features = as_features(features)
    if isinstance(instance, Mapping):
        names = [f.name for f in features]
        if len(instance) != len(names) or any(n not in instance for n in names):
            missing = [n for n in names if n not in instance]
            if missing:
                raise SchemaMismatchError(missing[0], "a value", "none in the instance dict")
            extra = [k for k in instance if k not in set(names)]
            raise SchemaMismatchError(
                str(extra[0]), "no such feature", "a value", f"the features are {names}"
            )
        return {f.name: check_value(f, instance[f.name]) for f in features}
    if isinstance(instance, (tuple, list)):
        if len(instance) != len(features):
            n = len(features)
            raise SchemaMismatchError(
                None,
                f"a tuple of {n} value{'s' * (n != 1)} ({', '.join(f.name for f in features)})",
                f"a {type(instance).__name__} of {len(instance)} value"
                + "s" * (len(instance) != 1),
            )
        return {f.name: check_value(f, v) for f, v in zip(features, instance, strict=True)}
    raise SchemaMismatchError(
        None,
        "a tuple of values in feature order or a dict by feature name",
        type(instance).__name__,
    )


def fixed_size(shape: Shape) -> int | None:
    """The number of elements of ``shape``, or ``None`` if a dimension is variable."""
    return None if None in shape else math.prod(shape)  # type: ignore[arg-type]
