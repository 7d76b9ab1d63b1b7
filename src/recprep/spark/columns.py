"""Spark columns: their types, their Example features, and their types inferred.

A column is kept as its name, its type as Spark's DDL spells it (``bigint``,
``array<float>``) and its nullability — plain data that travels to executors and into
manifests. Which types each codec can write is the table's
(:mod:`recprep.spark.codecs`); the types here are integral, boolean, float, double,
string, binary and arrays of them. Partition columns may be integral, boolean, string or
date.

Examples
--------
>>> element_type("array<array<float>>"), array_depth("array<array<float>>")
('float', 2)
>>> [f.to_json() for f in features([ColumnSpec("id", "bigint"), ColumnSpec("v", "array<float>")])]
[{'name': 'id', 'dtype': 'int64', 'shape': []}, {'name': 'v', 'dtype': 'float32', 'shape': [None]}]
>>> infer_partition_type(["8", "-1"]), infer_partition_type(["8", "x"])
('int', 'string')
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..codecs.features import Feature, as_features
from ..errors import DecodeError, InvalidArgumentError, UnsupportedColumnError

__all__ = [
    "ColumnSpec",
    "UnsupportedColumnError",
    "array_depth",
    "columns_from_features",
    "element_type",
    "features",
    "infer_example_columns",
    "infer_partition_type",
    "infer_value_columns",
    "parse_partition_value",
    "spark_type",
    "struct_type",
    "type_string",
]

INTEGRAL = {"tinyint": "int8", "smallint": "int16", "int": "int32", "bigint": "int64"}
ATOMIC = {**INTEGRAL, "boolean": "bool", "float": "float32", "double": "float64",
          "string": "str", "binary": "object"}
PARTITION_TYPES = (*INTEGRAL, "boolean", "string", "date")
_INT_RE = re.compile(r"^-?\d+$")
_INT32 = (-(2**31), 2**31 - 1)


@dataclass(frozen=True)
class ColumnSpec:
    """One column: its name, its Spark type as a DDL string, and whether it may be null."""

    name: str
    type: str
    nullable: bool = True

    @property
    def element(self) -> str:
        return element_type(self.type)

    @property
    def depth(self) -> int:
        return array_depth(self.type)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "nullable": self.nullable}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ColumnSpec:
        try:
            return cls(str(doc["name"]), str(doc["type"]), bool(doc.get("nullable", True)))
        except (KeyError, TypeError):
            raise InvalidArgumentError(
                f"a column in a manifest's schema needs 'name' and 'type', got {doc!r}"
            ) from None


def element_type(type: str) -> str:
    """The type inside every ``array<...>`` layer of ``type``."""
    while type.startswith("array<") and type.endswith(">"):
        type = type[6:-1]
    return type


def array_depth(type: str) -> int:
    """How many ``array<...>`` layers ``type`` has."""
    depth = 0
    while type.startswith("array<") and type.endswith(">"):
        type, depth = type[6:-1], depth + 1
    return depth


# -- Spark types (pyspark is imported only when these are called) --------------------------


def type_string(data_type: Any) -> str:
    """The DDL string of a pyspark ``DataType`` (``LongType()`` -> ``"bigint"``)."""
    return str(data_type.simpleString())


def spark_type(type: str) -> Any:
    """The pyspark ``DataType`` of a DDL type string this module knows."""
    from pyspark.sql import types as T

    atomic = {
        "tinyint": T.ByteType, "smallint": T.ShortType, "int": T.IntegerType,
        "bigint": T.LongType, "boolean": T.BooleanType, "float": T.FloatType,
        "double": T.DoubleType, "string": T.StringType, "binary": T.BinaryType,
        "date": T.DateType,
    }
    if type in atomic:
        return atomic[type]()
    if type.startswith("array<") and type.endswith(">"):
        return T.ArrayType(spark_type(type[6:-1]), True)
    raise InvalidArgumentError(f"unsupported Spark type {type!r}")


def struct_type(columns: Iterable[ColumnSpec]) -> Any:
    """The pyspark ``StructType`` of ``columns``."""
    from pyspark.sql import types as T

    return T.StructType([T.StructField(c.name, spark_type(c.type), c.nullable)
                         for c in columns])


# -- features: what the Example codec's manifest schema declares ---------------------------


def features(columns: Iterable[ColumnSpec]) -> list[Feature]:
    """The Example features of ``columns`` (scalars shape ``()``, arrays ``(None,)``)."""
    return [Feature(c.name, np.dtype(ATOMIC[c.element]), (None,) if c.depth else ())
            for c in columns]


_FROM_DTYPE = {"b": "boolean", "U": "string", "S": "binary", "O": "binary"}


def columns_from_features(schema_features: Iterable[Any]) -> list[ColumnSpec]:
    """Columns for the features of a manifest without Spark columns (from ``convert``)."""
    found = []
    for f in as_features(schema_features):
        dt = f.dtype
        if dt.kind in "iu":
            element = {1: "tinyint", 2: "smallint", 4: "int"}.get(dt.itemsize, "bigint")
            if dt.kind == "u" and dt.itemsize >= 4:
                element = "bigint"
            elif dt.kind == "u":
                element = {1: "smallint", 2: "int"}[dt.itemsize]
        elif dt.kind == "f":
            element = "float" if dt.itemsize <= 4 else "double"
        else:
            element = _FROM_DTYPE[dt.kind]
        scalar = all(d == 1 for d in f.shape)
        found.append(ColumnSpec(f.name, element if scalar else f"array<{element}>"))
    return found


# -- inference, when there is no manifest -----------------------------------------------------


def _example_kind(values: np.ndarray) -> str | None:
    """The column type a decoded Example list suggests (None: an empty list, no kind)."""
    if values.dtype.kind == "O":
        try:
            for value in values.tolist():
                value.decode("utf-8")
        except UnicodeDecodeError:
            return "binary"
        return "string"
    if values.dtype.kind == "i":
        return "bigint"
    return "float" if values.size else None  # an empty list decodes as float32


def _combine(name: str, old: str | None, new: str | None) -> str | None:
    if old is None or new is None or old == new:
        return old or new
    if {old, new} == {"string", "binary"}:
        return "binary"
    raise DecodeError(
        f"feature {name!r} is a {old} list in one record and a {new} list in another; read "
        "with an explicit schema"
    )


def infer_example_columns(examples: Sequence[Mapping[str, np.ndarray]]) -> list[ColumnSpec]:
    """Columns for decoded Examples (``{name: 1-D array}``): ``int64_list`` is bigint,
    ``float_list`` float, ``bytes_list`` string (binary when a value isn't UTF-8); a
    feature with other than one value in some record is an array."""
    kinds: dict[str, str | None] = {}
    arrays: set[str] = set()
    for example in examples:
        for name, values in example.items():
            kinds[name] = _combine(name, kinds.get(name), _example_kind(values))
            if values.size != 1:
                arrays.add(name)
    return [ColumnSpec(n, f"array<{k or 'float'}>" if n in arrays else (k or "float"))
            for n, k in kinds.items()]


def _value_type(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, np.integer)):
        return "bigint"
    if isinstance(value, (float, np.floating)):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (bytes, bytearray)):
        return "binary"
    if isinstance(value, (list, tuple)):
        inner = _merge_value_types(_value_type(v) for v in value)
        return None if inner is None else f"array<{inner}>"
    raise DecodeError(f"a {type(value).__name__} value has no Spark type here")


def _merge_value_types(types: Iterable[str | None]) -> str | None:
    found: str | None = None
    for t in types:
        if t is None or t == found:
            continue
        if found is None:
            found = t
        elif {found, t} == {"bigint", "double"}:
            found = "double"
        else:
            raise DecodeError(f"values of types {found} and {t} in one column; read with "
                              "an explicit schema")
    return found


def infer_value_columns(rows: Sequence[Any]) -> list[ColumnSpec]:
    """Columns for records of the ``recprep`` codec that are dicts ``{column: value}``."""
    order: dict[str, list[str | None]] = {}
    for row in rows:
        if not isinstance(row, Mapping):
            raise DecodeError(
                f"the records hold {type(row).__name__} values, not dicts of columns; read "
                "them with recprep.RecordIO"
            )
        for name, value in row.items():
            order.setdefault(str(name), []).append(_value_type(value))
    return [ColumnSpec(n, _merge_value_types(ts) or "string") for n, ts in order.items()]


def infer_partition_type(values: Iterable[str | None]) -> str:
    """``int`` (or ``bigint``) when every non-null value is an integer, else ``string``."""
    present = [v for v in values if v is not None]
    if not present or not all(_INT_RE.match(v) for v in present):
        return "string"
    numbers = [int(v) for v in present]
    return "int" if _INT32[0] <= min(numbers) and max(numbers) <= _INT32[1] else "bigint"


def parse_partition_value(raw: str | None, type: str, where: str) -> Any:
    """A directory's partition value as a Python value of the column's ``type``."""
    if raw is None:
        return None
    try:
        if type in INTEGRAL:
            return int(raw)
        if type == "boolean":
            if raw.lower() not in ("true", "false"):
                raise ValueError(raw)
            return raw.lower() == "true"
        if type == "date":
            return datetime.date.fromisoformat(raw)
        if type == "string":
            return raw
    except ValueError:
        pass
    raise InvalidArgumentError(f"{where}: partition value {raw!r} is not a {type}")
