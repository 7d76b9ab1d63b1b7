"""Reading a dataset into a DataFrame: find the files, settle the schema, one task each.

The plan (:func:`plan_read`) is made on the driver: :func:`~recprep.spark.layout.discover`
finds the partition directories and their files; the schema comes from, in order,

1. the ``schema`` the caller gives;
2. the manifests: their ``schema.spark.columns`` (written by :func:`recprep.spark.write`),
   else the columns every set of their codec has (``codec="raw"``: one ``byteArray``
   binary column), else their Example ``features`` (written by ``convert``);
3. the records of the first non-empty file (never an empty one), when there is no manifest
   (Spark-TFRecord output): up to 1000 records, of the codec ``record_type`` names, else
   the one their first record points to, else Examples.

What each codec's records are as columns is the table's (:mod:`recprep.spark.codecs`).

Partition columns take their types from the manifests (or the caller's schema); without
either they are ``int`` when every value is an integer, else ``string``. ``rs.read`` keeps
every partition column even when the caller's schema doesn't name it, as Spark's file
sources do (:meth:`ReadPlan.with_partition_columns`); the data sources can't (Spark fixes a
Python source's columns to the schema it is given). Executors then read one file per
Spark task (:func:`recprep.spark.decode.read_file`);
:func:`recprep.spark.jobs.read_dataframe` makes the DataFrame.
"""

from __future__ import annotations

import base64
import logging
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import cloudpickle

from ..containers import get_format, sniff
from ..errors import DecodeError, InvalidArgumentError, NotFoundError, SchemaConflictError
from ..storage.fs import display, open_regular
from ..storage.manifest import Manifest
from .codecs import FALLBACK_CODEC, SPARK_CODECS, guess_codec, record_codec, spark_codec
from .columns import (
    ATOMIC,
    ColumnSpec,
    columns_from_features,
    infer_partition_type,
    parse_partition_value,
    struct_type,
    type_string,
)
from .decode import FileTask
from .layout import Leaf, discover

__all__ = ["ReadPlan", "SchemaConflictError", "plan_read"]

log = logging.getLogger("recprep")

SAMPLE_RECORDS = 1000


@dataclass(frozen=True)
class ReadPlan:
    """What to read and how: plain data, pickled to the executors."""

    fs: Any
    columns: tuple[ColumnSpec, ...]
    partition_columns: tuple[ColumnSpec, ...]
    tasks: tuple[FileTask, ...]
    #: the caller's ``StructType``, kept as given (order, nullability, array elements)
    schema: Any = None

    def struct(self) -> Any:
        """The DataFrame's schema: the caller's, or the data columns then the partition
        columns."""
        if self.schema is not None:
            return self.schema
        return struct_type((*self.columns, *self.partition_columns))

    def with_partition_columns(self) -> ReadPlan:
        """This plan, its caller's schema (if any) completed as Spark's file sources do
        (``spark.read.schema(...).parquet(path)``): the schema's data columns in its order,
        then every partition column in directory order, as the schema types it when it
        names it, else as found (manifests, or inferred from the directory names)."""
        if self.schema is None:
            return self
        keys = {c.name for c in self.partition_columns}
        named = {f.name: f for f in self.schema}
        found = struct_type(self.partition_columns)
        fields = [*(f for f in self.schema if f.name not in keys),
                  *(named.get(f.name, f) for f in found)]
        return replace(self, schema=type(self.schema)(fields))

    def select(self, names: Sequence[str] | None) -> ReadPlan:
        """This plan reading only the columns ``names`` (data or partition columns), in
        that order: only those data columns are decoded. ``None``: this plan.

        Spark's Python data sources (pyspark 4.x) are not told which columns a query uses
        (``DataSource.reader`` always receives the full schema), so the pruning is asked
        for here: ``rs.read(..., columns=[...])`` or the sources' ``columns`` option."""
        if names is None:
            return self
        if isinstance(names, str):
            names = [names]
        struct = self.struct()
        fields = {f.name: f for f in struct}
        unknown = [n for n in names if n not in fields]
        if unknown or not names or len(set(names)) != len(names):
            problem = (f"{unknown} {'is' if len(unknown) == 1 else 'are'} not among them"
                       if unknown else "none named" if not names else "a name repeats")
            raise InvalidArgumentError(
                f"columns must name columns of the dataset, each once ({list(fields)}); got "
                f"{list(names)}: {problem}"
            )
        wanted = set(names)
        return replace(self, columns=tuple(c for c in self.columns if c.name in wanted),
                       schema=type(struct)([fields[n] for n in names]))

    def to_option(self) -> str:
        return base64.b64encode(cloudpickle.dumps(self)).decode("ascii")

    @staticmethod
    def from_option(text: str) -> ReadPlan:
        plan = cloudpickle.loads(base64.b64decode(text))
        assert isinstance(plan, ReadPlan)
        return plan


def _user_columns(schema: Any) -> list[ColumnSpec]:
    columns = [ColumnSpec(f.name, type_string(f.dataType), bool(f.nullable)) for f in schema]
    for column in columns:
        if column.element not in ATOMIC and column.type != "date":
            raise InvalidArgumentError(
                f"column {column.name!r} ({column.type}) can't be read: the schema may hold "
                "integral, boolean, float, double, string and binary columns, arrays of them, "
                "and date partition columns"
            )
    return columns


def _manifest_columns(manifest: Manifest) -> list[ColumnSpec] | None:
    spark = manifest.schema.get("spark") if isinstance(manifest.schema, dict) else None
    if isinstance(spark, dict) and spark.get("columns"):
        return [ColumnSpec.from_json(c) for c in spark["columns"]]
    known = SPARK_CODECS.get(manifest.codec)
    if known is not None and known.fixed_columns is not None:
        return list(known.fixed_columns)
    if manifest.schema.get("features"):
        return columns_from_features(manifest.schema["features"])
    return None


def _sample(fs: Any, path: str, shown: str, codec: str | None) -> tuple[str, list[Any]] | None:
    """``(codec, decoded records)`` of up to SAMPLE_RECORDS records of one file, or None
    when it has none. ``codec`` None: the codec the first record points to
    (:func:`~recprep.spark.codecs.guess_codec`)."""
    records: list[bytes] = []
    with open_regular(fs, path) as handle:
        container = sniff(handle, path=shown)
        if container is None:
            return None
        for chunk in container.read_chunks(handle, path=shown):
            records.extend(chunk.records[: SAMPLE_RECORDS - len(records)])
            if len(records) >= SAMPLE_RECORDS:
                break
    if not records:
        return None
    if codec is None:
        codec = guess_codec(records[0])
    known = spark_codec(codec)
    try:
        return codec, known.sample(records)
    except DecodeError as err:
        raise DecodeError(f"{shown}: can't infer a schema: {err.detail}{known.sample_hint}"
                          ) from None


def _data_columns(fs: Any, leaves: Sequence[Leaf], codec: str | None) -> tuple[list[ColumnSpec],
                                                                           str | None]:
    """The data columns from the manifests, else from a sample; and the codec of files
    without a manifest."""
    found: list[ColumnSpec] | None = None
    where = ""
    for leaf in leaves:
        for manifest in leaf.manifests:
            columns = _manifest_columns(manifest)
            if columns is None:
                continue
            place = posixpath.join(leaf.path, f"{manifest.name_prefix}.manifest.json")
            if found is None:
                found, where = columns, place
            elif [(c.name, c.type) for c in columns] != [(c.name, c.type) for c in found]:
                raise SchemaConflictError(
                    display(fs, where), display(fs, place),
                    f"{[c.to_json() for c in found]} vs {[c.to_json() for c in columns]}",
                )
            else:  # a column is nullable if it may be null in any set
                found = [replace(c, nullable=c.nullable or o.nullable)
                         for c, o in zip(found, columns, strict=True)]
    lone = [p for leaf in leaves for p in leaf.files if p not in leaf.manifest_of]
    candidates: list[tuple[str, str | None]] = [(p, codec) for p in lone]
    if found is None:  # sets whose manifests record no columns: their records tell
        candidates += [
            (p, leaf.manifests[n].codec) for leaf in leaves for p, n in leaf.manifest_of.items()
            if leaf.manifests[n].codec in SPARK_CODECS
        ]
    lone_paths = set(lone)
    if found is None or (codec is None and lone):
        for path, hint in candidates:
            sampled = _sample(fs, path, display(fs, path), hint)
            if sampled is None:
                continue  # an empty file says nothing: try the next one
            if path in lone_paths:
                codec = sampled[0]
            values = sampled[1]
            if found is None:
                sampled_codec = sampled[0]
                found = spark_codec(sampled_codec).infer_columns(values)
                log.info("recprep: inferred the columns of %s from its records (%s): %s",
                         display(fs, path), sampled_codec, [c.to_json() for c in found])
            break
    if found is None:
        raise NotFoundError(
            display(fs, leaves[0].path) if leaves else "",
            "no manifest and no non-empty data file to infer a schema from; pass schema=",
        )
    return found, codec


def plan_read(
    fs: Any, root: str, *, schema: Any = None, record_type: str | None = None
) -> ReadPlan:
    """Find the files under ``root`` and settle the columns (see the module docstring)."""
    codec = record_codec(record_type)
    leaves = [leaf for leaf in discover(fs, root) if leaf.files or leaf.manifests]
    keys = leaves[0].keys if leaves else ()
    given = {c.name: c for c in _user_columns(schema)} if schema is not None else None
    if given is not None:
        columns = [c for n, c in given.items() if n not in keys]
        lone = next((p for leaf in leaves for p in leaf.files if p not in leaf.manifest_of),
                    None)
        if codec is None and lone is not None:
            sampled = _sample(fs, lone, display(fs, lone), None)
            codec = sampled[0] if sampled else FALLBACK_CODEC
    elif leaves:
        columns, codec = _data_columns(fs, leaves, codec)
    else:
        raise NotFoundError(display(fs, root), "no data file or manifest to read; pass "
                                               "schema= to read an empty dataset")
    partition_columns = _partition_columns(fs, leaves, keys, given)
    tasks = []
    for leaf in leaves:
        values = tuple(
            parse_partition_value(raw, column.type, display(fs, leaf.path))
            for (_, raw), column in zip(leaf.partition, partition_columns, strict=True)
        )
        for path in leaf.files:
            number = leaf.manifest_of.get(path)
            manifest = None if number is None else leaf.manifests[number]
            file_codec = manifest.codec if manifest is not None else (codec or FALLBACK_CODEC)
            if file_codec not in SPARK_CODECS:
                raise InvalidArgumentError(
                    f"{display(fs, path)} holds records of codec {file_codec!r}, which don't "
                    "map to columns; read it with recprep.RecordIO"
                )
            tasks.append(FileTask(
                path, display(fs, path), file_codec,
                None if manifest is None else get_format(manifest.format),
                None if manifest is None else manifest.compressor, values,
            ))
    return ReadPlan(fs, tuple(columns), tuple(partition_columns), tuple(tasks), schema)


def _partition_columns(
    fs: Any, leaves: Sequence[Leaf], keys: Sequence[str],
    given: Mapping[str, ColumnSpec] | None,
) -> list[ColumnSpec]:
    recorded: dict[str, str] = {}
    for leaf in leaves:
        for manifest in leaf.manifests:
            spark = manifest.schema.get("spark") or {}
            for column in spark.get("partition_columns") or []:
                recorded.setdefault(str(column["name"]), str(column["type"]))
    found = []
    for position, key in enumerate(keys):
        if given is not None and key in given:
            found.append(given[key])
            continue
        values = [leaf.partition[position][1] for leaf in leaves]
        found.append(ColumnSpec(key, recorded.get(key) or infer_partition_type(values)))
    return found
