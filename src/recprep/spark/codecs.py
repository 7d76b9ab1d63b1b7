"""What each codec's records are in Spark: one class per codec, in one table.

A DataFrame's rows become records of one codec, and records of one codec become rows:
everything ``recprep.spark`` knows about a codec is a :class:`SparkCodec` in
:data:`SPARK_CODECS`, keyed by the codec's name, and the rest of the package asks it —
which columns it can write (:meth:`~SparkCodec.check_column`), how rows are encoded
(:meth:`~SparkCodec.encoder`, :mod:`recprep.spark.encode`), how a chunk's records become
Arrow arrays (:meth:`~SparkCodec.arrays`, :mod:`recprep.spark.arrays`), and what a set's
columns are when no manifest records them (:attr:`~SparkCodec.fixed_columns`,
:meth:`~SparkCodec.infer_columns`). A codec that isn't in the table doesn't map to
columns: writing it or reading it raises :class:`~recprep.errors.InvalidArgumentError`.

====================  ==========================  =======================  ===============
codec                 ``example``                 ``recprep``              ``raw``
====================  ==========================  =======================  ===============
a record              a ``tf.train.Example``      a ``{column: value}``    one binary
                                                  dict                     column's bytes
``recordType``        ``Example``                 —                        ``ByteArray``
guessed               from ``0x0A``, and when no  from ``0xF1``            never
                      other codec is
no manifest: columns  inferred from the lists     inferred from the dicts  ``byteArray``
====================  ==========================  =======================  ===============

What each codec can write, by Spark type:

============================  ===================  =======================================
Spark type                    ``codec="example"``  ``codec="recprep"``
============================  ===================  =======================================
tinyint, smallint, int,       int64_list           int
bigint, boolean
float                         float_list           float (the float32 value, exactly)
double                        refused: cast it,    float
                              or codec="recprep"
string                        bytes_list (UTF-8)   str
binary                        bytes_list           bytes
array<any of the above>       the list             list (nested arrays too)
============================  ===================  =======================================

``codec="raw"`` writes exactly one ``binary`` column, the record itself. Anything else
(decimal, date, timestamp, map, struct...) is refused with an error naming the column.

Examples
--------
>>> list(SPARK_CODECS)
['example', 'recprep', 'raw']
>>> record_codec("ByteArray"), guess_codec(b"\\xf1\\x0e"), guess_codec(b"\\x80\\x04")
('raw', 'recprep', 'example')
>>> spark_codec("raw").infer_columns([b"x"])
[ColumnSpec(name='byteArray', type='binary', nullable=True)]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import pyarrow as pa

from ..codecs import Codec, get_codec
from ..codecs.guess import likely_codecs
from ..errors import InvalidArgumentError, UnsupportedColumnError
from .arrays import example_arrays, value_arrays
from .columns import ATOMIC, ColumnSpec, infer_example_columns, infer_value_columns
from .encode import BatchEncoder, ExampleEncoder, RawEncoder, RecprepEncoder

__all__ = [
    "BYTE_ARRAY",
    "FALLBACK_CODEC",
    "SPARK_CODECS",
    "ExampleSparkCodec",
    "RawSparkCodec",
    "RecprepSparkCodec",
    "SparkCodec",
    "encoder_for",
    "guess_codec",
    "record_codec",
    "spark_codec",
]

#: the one column of ``raw`` records (Spark-TFRecord's name for it)
BYTE_ARRAY = ColumnSpec("byteArray", "binary")
#: the codec of a file without a manifest whose first record points to no codec of the
#: table, and of ``recordType``'s default (Spark-TFRecord writes Examples)
FALLBACK_CODEC = "example"


class SparkCodec:
    """One codec's records as DataFrame rows, and back (see the module docstring).

    A subclass sets :attr:`name` and the class attributes that differ, and gives its
    :meth:`encoder` and :meth:`arrays`; it is registered by being in
    :data:`SPARK_CODECS`.
    """

    #: the codec's name (``codec=``, a manifest's ``codec``)
    name: ClassVar[str] = ""
    #: Spark-TFRecord's ``recordType`` of these records (None: it has none)
    record_type: ClassVar[str | None] = None
    #: whether a file without a manifest is read with this codec when its first record
    #: points to it (:func:`recprep.codecs.guess.likely_codecs`)
    guessable: ClassVar[bool] = True
    #: the columns of every set of this codec, whatever its records hold (None: they come
    #: from the manifest, or are inferred from the records)
    fixed_columns: ClassVar[tuple[ColumnSpec, ...] | None] = None
    #: added to the error when a sample of records can't be decoded to infer columns
    sample_hint: ClassVar[str] = ""

    def check_data(self, data: Sequence[ColumnSpec]) -> None:
        """Refuse the data columns of a write this codec can't write (each is checked by
        :meth:`check_column`)."""
        for column in data:
            self.check_column(column)

    def check_column(self, column: ColumnSpec) -> None:
        """Refuse a column this codec can't write
        (:class:`~recprep.errors.UnsupportedColumnError`, naming it)."""
        if column.element not in ATOMIC:
            raise UnsupportedColumnError(
                column.name, column.type,
                "the supported types are integral, boolean, float, double, string, binary "
                "and arrays of them; cast it (e.g. F.col(...).cast('string') for dates and "
                "decimals, or to_json for structs and maps)",
            )

    def encoder(self, columns: Sequence[ColumnSpec]) -> BatchEncoder:
        """A fresh encoder of rows of ``columns`` into this codec's records."""
        raise NotImplementedError

    def arrays(
        self, codec: Codec, columns: Sequence[ColumnSpec], records: Sequence[bytes]
    ) -> list[pa.Array]:
        """The Arrow arrays of ``columns`` over a chunk's ``records``, decoded by
        ``codec`` (this codec's instance) where a record must be decoded on its own."""
        raise NotImplementedError

    def sample(self, records: Sequence[bytes]) -> list[Any]:
        """``records`` decoded, to infer columns from (raises
        :class:`~recprep.errors.DecodeError`)."""
        decode = get_codec(self.name).decode
        return [decode(r) for r in records]

    def infer_columns(self, values: Sequence[Any]) -> list[ColumnSpec]:
        """The columns of a set without a manifest, from :meth:`sample`'s values."""
        raise NotImplementedError


class ExampleSparkCodec(SparkCodec):
    """Rows as ``tf.train.Example`` records: a column is a feature, a flat list."""

    name = "example"
    record_type = "Example"
    sample_hint = "; pass record_type='ByteArray' to read the records as bytes"

    def check_column(self, column: ColumnSpec) -> None:
        super().check_column(column)
        if column.element == "double":
            narrow = column.type.replace("double", "float")
            raise UnsupportedColumnError(
                column.name, column.type,
                "it is float64, and Example floats are float32; nothing is narrowed "
                f"silently: cast it (F.col({column.name!r}).cast({narrow!r})) or write "
                "with codec='recprep', which keeps float64 exactly",
            )
        if column.depth > 1:
            raise UnsupportedColumnError(
                column.name, column.type,
                "an Example feature is a flat list; flatten the array (F.flatten) or "
                "write with codec='recprep'",
            )

    def encoder(self, columns: Sequence[ColumnSpec]) -> BatchEncoder:
        return ExampleEncoder(columns)

    def arrays(
        self, codec: Codec, columns: Sequence[ColumnSpec], records: Sequence[bytes]
    ) -> list[pa.Array]:
        return example_arrays(codec, columns, records)

    def infer_columns(self, values: Sequence[Any]) -> list[ColumnSpec]:
        return infer_example_columns(values)


class RecprepSparkCodec(SparkCodec):
    """Rows as ``{column: value}`` dicts of the ``recprep`` codec (nulls kept as
    ``None``)."""

    name = "recprep"

    def encoder(self, columns: Sequence[ColumnSpec]) -> BatchEncoder:
        return RecprepEncoder(columns)

    def arrays(
        self, codec: Codec, columns: Sequence[ColumnSpec], records: Sequence[bytes]
    ) -> list[pa.Array]:
        return value_arrays(codec, columns, records)

    def infer_columns(self, values: Sequence[Any]) -> list[ColumnSpec]:
        return infer_value_columns(values)


class RawSparkCodec(SparkCodec):
    """Rows of one binary column whose bytes are the record (Spark-TFRecord's
    ``ByteArray``)."""

    name = "raw"
    record_type = "ByteArray"
    guessable = False  # it reads anything: asked for, never guessed
    fixed_columns = (BYTE_ARRAY,)

    def check_data(self, data: Sequence[ColumnSpec]) -> None:
        if len(data) != 1:
            raise InvalidArgumentError(
                f"recordType ByteArray (codec='raw') writes one binary column as the "
                f"record; the DataFrame has {len(data)} data columns "
                f"({[c.name for c in data]})"
            )
        super().check_data(data)

    def check_column(self, column: ColumnSpec) -> None:
        if column.type != "binary":
            raise UnsupportedColumnError(
                column.name, column.type,
                "recordType ByteArray (codec='raw') writes one binary column as the record",
            )

    def encoder(self, columns: Sequence[ColumnSpec]) -> BatchEncoder:
        return RawEncoder(columns)

    def arrays(
        self, codec: Codec, columns: Sequence[ColumnSpec], records: Sequence[bytes]
    ) -> list[pa.Array]:
        return [pa.array(list(records), pa.binary())]

    def sample(self, records: Sequence[bytes]) -> list[Any]:
        return list(records)

    def infer_columns(self, values: Sequence[Any]) -> list[ColumnSpec]:
        return [BYTE_ARRAY]


#: every codec whose records map to DataFrame rows, by name (the order of error messages)
SPARK_CODECS: dict[str, SparkCodec] = {
    c.name: c for c in (ExampleSparkCodec(), RecprepSparkCodec(), RawSparkCodec())
}


def spark_codec(name: str) -> SparkCodec:
    """The table's entry of codec ``name``; another name raises
    :class:`~recprep.errors.InvalidArgumentError` listing the table's.

    >>> spark_codec("pickle")
    Traceback (most recent call last):
    ...
    recprep.errors.InvalidArgumentError: codec must be one of ['example', 'recprep', \
'raw'], got 'pickle'
    """
    found = SPARK_CODECS.get(name) if isinstance(name, str) else None
    if found is None:
        raise InvalidArgumentError(f"codec must be one of {list(SPARK_CODECS)}, got {name!r}")
    return found


def encoder_for(codec: str, columns: Sequence[ColumnSpec]) -> BatchEncoder:
    """A fresh encoder of ``columns`` for ``codec`` (a name of :data:`SPARK_CODECS`)."""
    return spark_codec(codec).encoder(columns)


def record_codec(record_type: str | None) -> str | None:
    """The codec of a Spark-TFRecord ``record_type`` (``Example``/``ByteArray``, in any
    case), or None for None."""
    if record_type is None:
        return None
    wanted = str(record_type).lower()
    for codec in SPARK_CODECS.values():
        if codec.record_type is not None and codec.record_type.lower() == wanted:
            return codec.name
    hint = (" (SequenceExample records are not supported: read them with "
            "record_type='ByteArray' and parse them with TensorFlow)"
            if wanted == "sequenceexample" else "")
    named = " or ".join(repr(c.record_type) for c in SPARK_CODECS.values() if c.record_type)
    raise InvalidArgumentError(f"record_type must be {named}, got {record_type!r}{hint}")


def guess_codec(record: bytes | memoryview) -> str:
    """The codec of a file without a manifest, from its first ``record``: the first codec
    :func:`~recprep.codecs.guess.likely_codecs` names that the table lets guess, else
    :data:`FALLBACK_CODEC`."""
    for name in likely_codecs(record):
        found = SPARK_CODECS.get(name)
        if found is not None and found.guessable:
            return name
    return FALLBACK_CODEC
