"""``recprep.spark`` reading a chunk at a time into Arrow, and reading only some columns.

The decoder (``RecordDecoder``) is checked against its own per-record path — the one every
read took before — on random Example and recprep-codec chunks: the same record batch, or
the same error. Then, on a real local Spark session, full and pruned reads
(``rs.read(..., columns=)``, the sources' ``columns`` option) give the values written.
"""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("pyarrow")

from recprep.codecs.example import ExampleCodec  # noqa: E402
from recprep.codecs.recprep import RecprepCodec  # noqa: E402
from recprep.errors import DecodeError, InvalidArgumentError  # noqa: E402
from recprep.spark import arrays  # noqa: E402
from recprep.spark.columns import ColumnSpec  # noqa: E402
from recprep.spark.decode import RecordDecoder  # noqa: E402

SETTINGS = settings(max_examples=80, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

#: column -> (Example value kind, what one value is drawn from)
EXAMPLE_COLUMNS = {
    ColumnSpec("id", "bigint"): ("int", st.integers(-(2**63), 2**63 - 1)),
    ColumnSpec("small", "int"): ("int", st.integers(-(2**33), 2**33)),  # may not fit
    ColumnSpec("flag", "boolean"): ("int", st.integers(0, 2)),
    ColumnSpec("score", "float"): ("float", st.floats(width=32, allow_nan=False)),
    ColumnSpec("wide", "double"): ("float", st.floats(width=32, allow_nan=False)),
    ColumnSpec("word", "string"): ("bytes", st.sampled_from([b"", b"a", "\u00e9t\u00e9".encode(),
                                                             b"\xff", b"word-12"])),
    ColumnSpec("blob", "binary"): ("bytes", st.binary(max_size=5)),
    ColumnSpec("emb", "array<float>"): ("float", st.floats(width=32, allow_nan=False)),
    ColumnSpec("ids", "array<bigint>"): ("int", st.integers(-5, 300)),
    ColumnSpec("words", "array<string>"): ("bytes", st.sampled_from([b"x", b"yz", b"\xc3"])),
    ColumnSpec("missing", "string"): ("bytes", st.just(b"never written")),
}
_DTYPE = {"int": np.int64, "float": np.float32, "bytes": object}


def per_record(decoder: RecordDecoder, records: list[bytes]):
    """What the decoder gives record by record (the path every read took before)."""
    with mock.patch.object(arrays, "parse_chunk", lambda *a, **k: None), \
            mock.patch.object(decoder._codec, "decode_columns", lambda records: None):
        return outcome(decoder, records)


def outcome(decoder: RecordDecoder, records: list[bytes]):
    try:
        return decoder.decode(records)
    except DecodeError as err:
        return f"DecodeError: {err}"


def same(got, want) -> None:
    if isinstance(want, str):
        assert got == want
    else:
        assert not isinstance(got, str), got
        assert got.schema == want.schema and got.equals(want), (got.to_pylist(), want.to_pylist())


@st.composite
def example_chunks(draw):
    """Columns to read, and Examples where each feature holds a fixed or varying number of
    values, or (for some) is absent from some records or from all."""
    chosen = draw(st.lists(st.sampled_from(list(EXAMPLE_COLUMNS)), min_size=1, max_size=5,
                           unique=True))
    written = [c for c in chosen if c.name != "missing"] or [ColumnSpec("id", "bigint")]
    plan = {c: draw(st.sampled_from(["one", "fixed", "vary", "sometimes"])) for c in written}
    fixed = {c: draw(st.integers(0, 3)) for c in written}
    records = []
    for _ in range(draw(st.integers(1, 10))):
        instance = {}
        for column, how in plan.items():
            kind, values = EXAMPLE_COLUMNS[column]
            if how == "sometimes" and draw(st.booleans()):
                continue
            count = {"one": 1, "fixed": fixed[column]}.get(how) or draw(st.integers(0, 2))
            drawn = draw(st.lists(values, min_size=count, max_size=count))
            instance[column.name] = np.array(drawn, dtype=_DTYPE[kind])
        records.append(ExampleCodec().encode(instance))
    return chosen, records


@SETTINGS
@given(example_chunks())
def test_example_chunks_decode_as_record_by_record(case):
    columns, records = case
    decoder = RecordDecoder("example", columns)
    same(outcome(decoder, records), per_record(decoder, records))


@st.composite
def recprep_chunks(draw):
    columns = [ColumnSpec("id", "bigint"), ColumnSpec("score", "double"),
               ColumnSpec("small", "int"), ColumnSpec("word", "string"),
               ColumnSpec("flag", "boolean"), ColumnSpec("emb", "array<double>")]
    chosen = draw(st.lists(st.sampled_from(columns), min_size=1, max_size=4, unique=True))
    values = {"id": st.integers(-(2**63), 2**63 - 1), "score": st.floats(allow_nan=False),
              "small": st.integers(-(2**33), 2**33), "word": st.text(max_size=4),
              "flag": st.booleans(), "emb": st.lists(st.floats(allow_nan=False), max_size=3)}
    nullable = draw(st.booleans())
    records = []
    for _ in range(draw(st.integers(1, 10))):
        row = {c.name: draw(values[c.name]) for c in chosen}
        if nullable and draw(st.booleans()):
            row[chosen[0].name] = None
        records.append(RecprepCodec().encode(row))
    read = draw(st.lists(st.sampled_from(columns), min_size=1, max_size=3, unique=True))
    return read, records


@SETTINGS
@given(recprep_chunks())
def test_recprep_chunks_decode_as_record_by_record(case):
    columns, records = case
    decoder = RecordDecoder("recprep", columns)
    same(outcome(decoder, records), per_record(decoder, records))


def test_uniform_chunks_decode_no_record_by_itself():
    codec = ExampleCodec()
    records = [codec.encode({"id": i, "score": np.float32(i / 2), "word": f"w{i}".encode(),
                             "emb": np.full(3, i, np.float32)}) for i in range(50)]
    columns = [ColumnSpec("emb", "array<float>"), ColumnSpec("word", "string"),
               ColumnSpec("id", "bigint"), ColumnSpec("absent", "float")]
    decoder = RecordDecoder("example", columns)
    with mock.patch.object(decoder._codec, "decode", side_effect=AssertionError("per record")):
        batch = decoder.decode(records)
    assert batch.to_pylist()[7] == {"emb": [7.0] * 3, "word": "w7", "id": 7, "absent": None}
    same(batch, per_record(decoder, records))
    rows = [RecprepCodec().encode({"id": i, "score": i / 3, "word": f"w{i}"}) for i in range(50)]
    decoder = RecordDecoder("recprep", [ColumnSpec("score", "float"), ColumnSpec("id", "int")])
    codec = decoder._codec
    with mock.patch.object(codec, "decode", wraps=codec.decode) as spy:
        batch = decoder.decode(rows)
    assert spy.call_count <= 1  # the first record, for its layout
    same(batch, per_record(decoder, rows))


def test_a_pruned_chunk_reads_only_the_columns_asked_for():
    codec = ExampleCodec()
    records = [codec.encode({"id": i, "word": b"\xff"}) for i in range(8)]  # not UTF-8
    assert RecordDecoder("example", [ColumnSpec("id", "int")]).decode(records).num_rows == 8
    with pytest.raises(DecodeError, match="not UTF-8"):
        RecordDecoder("example", [ColumnSpec("word", "string")]).decode(records)


# -- a real Spark session ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark(spark_session):
    pytest.importorskip("pyspark")
    from recprep import spark as rs

    rs.register(spark_session)
    return spark_session


@pytest.fixture(scope="module")
def written(spark, tmp_path_factory):
    """A dataset of four data columns (nulls in one) and a partition column, in both
    codecs; and its rows as Spark holds them."""
    from pyspark.sql import functions as F

    from recprep import spark as rs

    df = spark.range(300, numPartitions=2).select(
        F.col("id"),
        F.when(F.col("id") % 7 == 0, None).otherwise(F.col("id") / 4).cast("float")
        .alias("score"),
        F.concat(F.lit("w\u00e9-"), F.col("id").cast("string")).alias("word"),
        F.transform(F.sequence(F.lit(0), F.col("id") % 3), lambda x: (x / 2).cast("float"))
        .alias("emb"),
        (F.col("id") % 2).cast("int").alias("part"),
    )
    root = tmp_path_factory.mktemp("columns")
    paths = {}
    for codec in ("example", "recprep"):
        paths[codec] = str(root / codec)
        rs.write(df, paths[codec], codec=codec, partition_by="part", mode="overwrite")
    return paths, {r["id"]: r.asDict() for r in df.collect()}


def by_id(df, key="id") -> dict:
    return {r[key]: r.asDict() for r in df.collect()}


@pytest.mark.parametrize("codec", ["example", "recprep"])
def test_spark_read_full_and_pruned_give_the_values_written(spark, written, codec):
    from recprep import spark as rs

    paths, want = written
    full = rs.read(spark, paths[codec])
    assert full.columns == ["id", "score", "word", "emb", "part"]
    assert by_id(full) == want
    pruned = rs.read(spark, paths[codec], columns=["word", "id", "part"])
    assert pruned.columns == ["word", "id", "part"]
    assert by_id(pruned) == {k: {c: v[c] for c in ("word", "id", "part")}
                             for k, v in want.items()}
    one = rs.read(spark, paths[codec], columns=["score"])
    assert one.columns == ["score"]
    assert sorted(one.collect(), key=repr) == sorted(
        ((v["score"],) for v in want.values()), key=repr)


def test_the_data_source_reads_the_columns_option(spark, written):
    paths, want = written
    df = (spark.read.format("tfrecord").option("columns", "emb, id").load(paths["example"]))
    assert df.columns == ["emb", "id"]
    assert by_id(df) == {k: {"emb": v["emb"], "id": k} for k, v in want.items()}


def test_unknown_columns_are_refused_with_the_columns_there_are(spark, written):
    from recprep import spark as rs

    paths, _ = written
    with pytest.raises(InvalidArgumentError, match=r"\['nope'\] is not among them") as err:
        rs.read(spark, paths["example"], columns=["id", "nope"])
    assert "'id', 'score', 'word', 'emb', 'part'" in str(err.value)
    with pytest.raises(InvalidArgumentError, match="a name repeats"):
        rs.read(spark, paths["example"], columns=["id", "id"])


# -- only partition columns: one row per record, nothing decoded --------------------------------

#: (p, q) of each row of the partitioned sets below: partitions of 2, 3 and 1 rows
PARTITIONED = [(1, "a"), (1, "a"), (2, "b"), (2, "b"), (2, "b"), (2, "c")]


@pytest.mark.parametrize("codec", ["example", "recprep", "raw"])
def test_a_decoder_of_no_columns_gives_a_row_per_record_and_decodes_nothing(codec):
    records = [b"\x00not a record of any codec"] * 5
    decoder = RecordDecoder(codec, [])
    with mock.patch.object(decoder._codec, "decode", side_effect=AssertionError("decoded")):
        batch = decoder.decode(records)
    assert (batch.num_rows, batch.num_columns) == (5, 0)


@pytest.fixture(scope="module")
def partitioned(spark, tmp_path_factory):
    """Sets of PARTITIONED's rows, partitioned by ``p`` then ``q``: ``(format, codec)`` ->
    path. Each row holds an ``id`` (or, for ``raw``, its bytes) that says nothing of its
    partition."""
    from recprep import spark as rs

    root = tmp_path_factory.mktemp("partitioned")
    df = spark.createDataFrame([(i, p, q) for i, (p, q) in enumerate(PARTITIONED)],
                               "id bigint, p int, q string")
    raw = spark.createDataFrame([(bytes([i]), p, q) for i, (p, q) in enumerate(PARTITIONED)],
                                "byteArray binary, p int, q string")
    paths = {}
    for fmt, codec in [("tfrecord", "example"), ("recordio", "example"),
                       ("recordio", "recprep"), ("tfrecord", "raw")]:
        paths[fmt, codec] = str(root / f"{fmt}-{codec}")
        rs.write(raw if codec == "raw" else df, paths[fmt, codec], format=fmt, codec=codec,
                 partition_by=["p", "q"], mode="overwrite")
    return paths


def rows_of(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


@pytest.mark.parametrize("where", [("tfrecord", "example"), ("recordio", "example"),
                                   ("recordio", "recprep"), ("tfrecord", "raw")])
def test_partition_columns_alone_read_a_row_per_record(spark, partitioned, where):
    from recprep import spark as rs

    path, fmt = partitioned[where], where[0]
    ps = [(p,) for p, _ in PARTITIONED]
    assert rows_of(rs.read(spark, path, columns=["p"])) == ps
    assert rows_of(rs.read(spark, path, columns=["q", "p"])) == sorted(
        (q, p) for p, q in PARTITIONED)
    # a schema of partition columns: rs.read keeps the others, as Spark's file sources do
    assert rows_of(rs.read(spark, path, schema="p int")) == PARTITIONED
    assert rows_of(spark.read.format(fmt).option("columns", "p").load(path)) == ps
    assert rows_of(spark.read.format(fmt).schema("q string").load(path)) == sorted(
        (q,) for _, q in PARTITIONED)
    assert rs.read(spark, path, columns=["p"]).select().count() == len(PARTITIONED)
    assert rs.read(spark, path).select().count() == len(PARTITIONED)
    assert rs.read(spark, path, columns=["p"]).filter("p = 2").count() == 4


def test_a_schema_of_no_columns_counts_the_records(spark, tmp_path):
    from pyspark.sql.types import StructType

    from recprep import spark as rs

    df = spark.createDataFrame([(i,) for i in range(7)], "id bigint")
    rs.write(df, str(tmp_path), mode="overwrite")
    nothing = rs.read(spark, str(tmp_path), schema=StructType([]))
    assert nothing.columns == [] and nothing.count() == 7
    assert spark.read.format("tfrecord").schema(StructType([])).load(str(tmp_path)).count() == 7


@pytest.mark.parametrize("fmt", ["tfrecord", "recordio"])
def test_reading_no_data_column_still_checks_every_crc(tmp_path, fmt):
    """No record is decoded, but every chunk's checksums are verified as before."""
    import fsspec

    from recprep.containers import get_format
    from recprep.errors import CorruptDataError
    from recprep.spark.decode import FileTask, read_file

    records = [ExampleCodec().encode({"id": i}) for i in range(40)]
    path = tmp_path / "part-00000"
    with open(path, "wb") as f:
        writer = get_format(fmt).writer(f, "none", 64)  # chunks of a few records
        for record in records:
            writer.write(record)
        writer.close()
    p, fs = ColumnSpec("p", "int"), fsspec.filesystem("file")
    batches = list(read_file(fs, FileTask(str(path), "part", "example", partition=(2,)), [], [p]))
    assert [row for b in batches for row in b.to_pylist()] == [{"p": 2}] * 40
    data = path.read_bytes()
    at = data.rindex(records[-1]) + len(records[-1]) - 1  # the last record's last byte
    path.write_bytes(data[:at] + bytes([data[at] ^ 1]) + data[at + 1:])
    with pytest.raises(CorruptDataError, match="part"):
        list(read_file(fs, FileTask(str(path), "part", "example", partition=(2,)), [], [p]))
