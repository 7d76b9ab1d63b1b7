"""Spark DataFrames in and out (``recprep.spark``), on a real local[2] SparkSession.

Covers the seed example of the issue, nulls and empty partitions, the write modes
(dynamic and static overwrite, append, error), schema errors, TensorFlow reading what
``rs.write`` wrote, RecordIO vs TFRecord, balanced shards, the Python data sources, and
directories written by Spark-TFRecord.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from recprep import OutputExistsError, RecordIO, TaskFailedError  # noqa: E402
from recprep import spark as rs  # noqa: E402
from recprep.codecs.example import ExampleCodec  # noqa: E402
from recprep.containers import get_format  # noqa: E402
from recprep.errors import EncodeError, InvalidArgumentError  # noqa: E402
from recprep.spark.columns import UnsupportedColumnError  # noqa: E402
from recprep.storage import resolve  # noqa: E402
from recprep.storage.sideindex import count_records, load_index  # noqa: E402

SEED = [(8, "bat"), (8, "abc"), (1, "xyz"), (2, "aaa")]


@pytest.fixture(scope="module")
def spark(spark_session):
    rs.register(spark_session)
    return spark_session


def tree(root: Path) -> dict[str, list[str]]:
    """Each directory (relative) and its files, sorted."""
    found = {}
    for directory, _, files in os.walk(root):
        rel = os.path.relpath(directory, root)
        found["" if rel == "." else rel] = sorted(files)
    return found


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def rows(df) -> list[tuple]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


# -- the seed example ------------------------------------------------------------------------


def test_seed_example_partition_by_number(spark, tmp_path):
    df = spark.createDataFrame(SEED, ["number", "word"]).repartition(2)
    result = rs.write(df, str(tmp_path), partition_by="number")
    layout = tree(tmp_path)
    assert layout[""] == ["_SUCCESS"]
    assert sorted(d for d in layout if d) == ["number=1", "number=2", "number=8"]
    assert result.directories == ["number=1", "number=2", "number=8"]
    assert result.num_records == 4
    back = rs.read(spark, str(tmp_path))
    assert back.schema.simpleString() == "struct<word:string,number:bigint>"
    assert rows(back.select("number", "word")) == sorted(SEED, key=repr)
    manifest = json.loads((tmp_path / "number=8" / "part.manifest.json").read_text())
    assert manifest["schema"]["spark"] == {
        "columns": [{"name": "word", "type": "string", "nullable": True}],
        "partition_columns": [{"name": "number", "type": "bigint"}],
    }
    assert manifest["schema"]["features"] == [{"name": "word", "dtype": "str", "shape": []}]
    # the shard sets read with RecordIO too, partitions in sorted path order
    words = [str(x["word"]) for x in RecordIO(str(tmp_path))()]
    assert sorted(words[2:]) == ["abc", "bat"] and words[:2] == ["xyz", "aaa"]


def test_partition_values_are_escaped_typed_and_nested(spark, tmp_path):
    import datetime

    day = datetime.date(2024, 2, 29)
    data = [(day, "a/b=c", 1), (day, None, 2), (day, "", 3), (None, "x", 4)]
    df = spark.createDataFrame(data, "d date, w string, v int")
    rs.write(df, str(tmp_path), partition_by=["d", "w"])
    assert sorted(d for d in tree(tmp_path) if d.count("/") == 1) == [
        "d=2024-02-29/w=__HIVE_DEFAULT_PARTITION__", "d=2024-02-29/w=a%2Fb%3Dc",
        "d=__HIVE_DEFAULT_PARTITION__/w=x",
    ]
    back = rs.read(spark, str(tmp_path))
    assert back.schema.simpleString() == "struct<v:int,d:date,w:string>"
    # an empty string partition value is a null, as in Spark
    assert rows(back) == sorted([(1, day, "a/b=c"), (2, day, None), (3, day, None),
                                 (4, None, "x")], key=repr)


# -- nulls and empty partitions ----------------------------------------------------------------


NULLY = [
    (1, None, "a", [1.0, 2.0], b"\x00\xff"),
    (2, 2.5, None, None, None),
    (3, -1.5, "", [], b""),
]
NULLY_DDL = "id bigint, f float, s string, v array<float>, b binary"


@pytest.mark.parametrize("codec", ["example", "recprep"])
def test_nulls_and_empty_partitions_round_trip(spark, tmp_path, codec):
    df = spark.createDataFrame(NULLY, NULLY_DDL).repartition(5)  # two empty partitions
    result = rs.write(df, str(tmp_path), codec=codec)
    assert result.num_records == 3
    back = rs.read(spark, str(tmp_path))
    assert back.schema == df.schema
    assert rows(back) == sorted(NULLY, key=repr)
    manifest = json.loads((tmp_path / "part.manifest.json").read_text())
    assert "features" not in manifest["schema"]  # some value was null
    if codec == "example":  # a null leaves its feature out of that Example
        records = [ExampleCodec().decode(r) for r in RecordIO(str(tmp_path), codec="raw")()]
        by_id = {int(r["id"][0]): r for r in records}
        assert sorted(by_id[2]) == ["f", "id"]  # s, v and b were null
        assert by_id[3]["v"].size == 0 and by_id[3]["s"].tolist() == [b""]
    else:  # the recprep codec keeps None
        values = {r["id"]: r for r in RecordIO(str(tmp_path))()}
        assert values[2] == {"id": 2, "f": 2.5, "s": None, "v": None, "b": None}


def test_empty_dataframe_writes_an_empty_set_with_its_schema(spark, tmp_path):
    df = spark.createDataFrame([], "id bigint, v array<float>")
    rs.write(df, str(tmp_path), num_shards=2)
    assert tree(tmp_path)[""] == ["_SUCCESS", "part-00000-of-00001", "part-00001-of-00001",
                                  "part.manifest.json"]
    back = rs.read(spark, str(tmp_path))
    assert back.schema == df.schema and back.count() == 0


# -- modes -------------------------------------------------------------------------------------


def _numbers(spark, pairs):
    return spark.createDataFrame(pairs, "n int, w string").repartition(2)


def test_overwrite_is_dynamic_by_default(spark, tmp_path):
    rs.write(_numbers(spark, [(1, "old1"), (2, "old2")]), str(tmp_path), partition_by="n")
    kept = snapshot(tmp_path / "n=1")
    rs.write(_numbers(spark, [(2, "new2"), (3, "new3")]), str(tmp_path), partition_by="n",
             mode="overwrite")
    assert snapshot(tmp_path / "n=1") == kept  # a partition the DataFrame lacks is untouched
    assert rows(rs.read(spark, str(tmp_path))) == [("new2", 2), ("new3", 3), ("old1", 1)]
    assert sorted(tree(tmp_path)) == ["", "n=1", "n=2", "n=3"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".recprep-staging")]


def test_static_overwrite_replaces_everything(spark, tmp_path):
    rs.write(_numbers(spark, [(1, "old1"), (2, "old2")]), str(tmp_path), partition_by="n")
    rs.write(_numbers(spark, [(2, "new2")]), str(tmp_path), partition_by="n",
             mode="overwrite", partition_overwrite="static")
    assert sorted(tree(tmp_path)) == ["", "n=2"]
    assert rows(rs.read(spark, str(tmp_path))) == [("new2", 2)]
    # static overwrite may also change the layout
    rs.write(_numbers(spark, [(5, "flat")]), str(tmp_path), mode="overwrite",
             partition_overwrite="static")
    assert sorted(tree(tmp_path)) == [""]
    assert rows(rs.read(spark, str(tmp_path))) == [(5, "flat")]


def test_append_adds_a_set_and_touches_nothing(spark, tmp_path):
    rs.write(_numbers(spark, [(1, "a"), (2, "b")]), str(tmp_path), partition_by="n")
    before = snapshot(tmp_path)
    result = rs.write(_numbers(spark, [(1, "c")]), str(tmp_path), partition_by="n",
                      mode="append")
    after = snapshot(tmp_path)
    assert {k: v for k, v in after.items() if k in before and k != "_SUCCESS"} == {
        k: v for k, v in before.items() if k != "_SUCCESS"
    }
    assert result.name_prefix.startswith("part-") and result.directories == ["n=1"]
    new = [k for k in after if k not in before]
    assert new and all(result.name_prefix in k for k in new)
    assert rows(rs.read(spark, str(tmp_path))) == [("a", 1), ("b", 2), ("c", 1)]


def test_error_mode_and_layout_mismatch_are_refused(spark, tmp_path):
    df = _numbers(spark, [(1, "a")])
    rs.write(df, str(tmp_path), partition_by="n")
    before = snapshot(tmp_path)
    with pytest.raises(OutputExistsError, match="already holds"):
        rs.write(df, str(tmp_path), partition_by="n")
    with pytest.raises(InvalidArgumentError, match="partitioned by n; this write partitions "
                                                   "by w"):
        rs.write(df, str(tmp_path), partition_by="w", mode="append")
    with pytest.raises(InvalidArgumentError, match="partition_overwrite must be one of"):
        rs.write(df, str(tmp_path), mode="overwrite", partition_overwrite="everything")
    assert snapshot(tmp_path) == before


# -- schema errors -----------------------------------------------------------------------------


def test_schema_errors_name_the_column_before_anything_is_written(spark, tmp_path):
    out = tmp_path / "out"
    dated = spark.sql("select 1 as id, current_date() as day")
    with pytest.raises(UnsupportedColumnError, match="column 'day' \\(date\\)") as info:
        rs.write(dated, str(out))
    assert info.value.column == "day" and isinstance(info.value, InvalidArgumentError)
    doubles = spark.createDataFrame([(1, 0.1)], "id int, score double")
    with pytest.raises(UnsupportedColumnError, match="'score'.*float32.*cast.*codec='recprep'"):
        rs.write(doubles, str(out))
    mapped = spark.sql("select map('a', 1) as m, 1 as id")
    with pytest.raises(UnsupportedColumnError, match="column 'm'"):
        rs.write(mapped, str(out), codec="recprep")
    with pytest.raises(UnsupportedColumnError, match="partition column"):
        rs.write(doubles, str(out), codec="recprep", partition_by="score")
    assert not out.exists()
    # float64 is exact with the recprep codec
    rs.write(doubles, str(out), codec="recprep")
    assert rows(rs.read(spark, str(out))) == [(1, 0.1)]


def test_a_failing_task_commits_nothing(spark, tmp_path):
    rs.write(_numbers(spark, [(1, "a")]), str(tmp_path), partition_by="n")
    before = snapshot(tmp_path)
    bad = spark.createDataFrame([(1, [1.0, None])], "n int, v array<float>")
    with pytest.raises(TaskFailedError, match="null element") as info:
        rs.write(bad, str(tmp_path), partition_by="n", mode="overwrite")
    assert isinstance(info.value.original, EncodeError)
    assert snapshot(tmp_path) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


# -- TensorFlow, RecordIO vs TFRecord, balanced shards ------------------------------------------


MIXED = [(i, float(i) / 4, f"w{i}", [float(i)] * (i % 3), i % 2 == 0) for i in range(40)]
MIXED_DDL = "id bigint, f float, s string, v array<float>, flag boolean"


@pytest.mark.parametrize("compressor", ["none", "gzip"])
def test_tensorflow_reads_what_rs_write_wrote(spark, tmp_path, compressor):
    tf = pytest.importorskip("tensorflow")
    df = spark.createDataFrame(MIXED, MIXED_DDL).repartition(3)
    rs.write(df, str(tmp_path), compressor=compressor, num_shards=2)
    files = sorted(str(p) for p in tmp_path.glob("part-*-of-*"))
    spec = {
        "id": tf.io.FixedLenFeature([], tf.int64), "f": tf.io.FixedLenFeature([], tf.float32),
        "s": tf.io.FixedLenFeature([], tf.string), "v": tf.io.VarLenFeature(tf.float32),
        "flag": tf.io.FixedLenFeature([], tf.int64),
    }
    kind = {"none": "", "gzip": "GZIP"}[compressor]
    seen = []
    for raw in tf.data.TFRecordDataset(files, compression_type=kind):
        ex = tf.io.parse_single_example(raw, spec)
        seen.append((int(ex["id"]), float(ex["f"]), ex["s"].numpy().decode(),
                     tf.sparse.to_dense(ex["v"]).numpy().tolist(), bool(ex["flag"])))
    assert sorted(seen) == MIXED


def test_recordio_and_tfrecord_read_back_equal(spark, tmp_path):
    df = spark.createDataFrame(MIXED, MIXED_DDL).repartition(3)
    tf_out, rio_out = tmp_path / "tf", tmp_path / "rio"
    rs.write(df, str(tf_out), format="tfrecord", partition_by="flag")
    rs.write(df, str(rio_out), format="recordio", partition_by="flag")
    from_tf, from_rio = rs.read(spark, str(tf_out)), rs.read(spark, str(rio_out))
    assert from_tf.schema == from_rio.schema
    assert from_tf.collect() == from_rio.collect()  # the same rows, in the same order
    assert rows(from_tf.select(*df.columns)) == sorted(MIXED, key=repr)
    assert get_format("recordio").sniff((rio_out / "flag=true" / "part-00000-of-00002")
                                        .read_bytes()[:64])


@pytest.mark.parametrize("fmt,compressor", [("tfrecord", "none"), ("tfrecord", "zlib"),
                                            ("recordio", "gzip")])
def test_balanced_shards(spark, tmp_path, fmt, compressor):
    df = spark.createDataFrame(MIXED, MIXED_DDL).repartition(3)
    result = rs.write(df, str(tmp_path), format=fmt, compressor=compressor,
                      records_per_shard=7, partition_by="flag")
    for rel, manifest in result.manifests.items():
        counts = [s.records for s in manifest.shards]
        assert len(counts) == 3 and max(counts) - min(counts) <= 1, (rel, counts)
        if fmt == "tfrecord":
            fs, base = resolve(str(tmp_path / rel))
            for shard in manifest.shards:
                path = f"{base}/{shard.name}"
                assert load_index(fs, path) is not None
                assert count_records(fs, path) == shard.records
    assert rows(rs.read(spark, str(tmp_path)).select(*df.columns)) == sorted(MIXED, key=repr)


# -- the data sources --------------------------------------------------------------------------


def test_data_sources_write_and_read(spark, tmp_path):
    df = spark.createDataFrame(SEED, ["number", "word"]).repartition(2)
    out = str(tmp_path / "tfrecord")
    (df.write.format("tfrecord").mode("overwrite").option("recordType", "Example")
     .option("partitionBy", "number").save(out))
    assert sorted(tree(Path(out))) == ["", "number=1", "number=2", "number=8"]
    back = spark.read.format("tfrecord").load(out)
    assert rows(back.select("number", "word")) == sorted(SEED, key=repr)
    assert rows(rs.read(spark, out).select("number", "word")) == sorted(SEED, key=repr)
    # overwrite through the source is dynamic too
    (spark.createDataFrame([(2, "zzz")], ["number", "word"]).write.format("tfrecord")
     .mode("overwrite").option("partitionBy", "number").save(out))
    assert sorted(r.word for r in spark.read.format("tfrecord").load(out).collect()) == [
        "abc", "bat", "xyz", "zzz"]
    # RecordIO, and ByteArray records
    rio = str(tmp_path / "recordio")
    df.write.format("recordio").mode("append").save(rio)
    assert rows(spark.read.format("recordio").load(rio).select("number", "word")) == sorted(
        SEED, key=repr)
    blobs = spark.createDataFrame([(b"\x00raw",), (b"",)], "byteArray binary")
    raw_out = str(tmp_path / "bytes")
    blobs.write.format("tfrecord").mode("overwrite").option("recordType", "ByteArray").save(raw_out)
    assert sorted(list(RecordIO(raw_out, codec="raw")())) == [b"", b"\x00raw"]
    got = spark.read.format("tfrecord").load(raw_out)
    assert got.schema.simpleString() == "struct<byteArray:binary>"
    assert sorted(bytes(r.byteArray) for r in got.collect()) == [b"", b"\x00raw"]


def test_data_source_refuses_sequence_examples(spark, tmp_path):
    df = spark.createDataFrame(SEED, ["number", "word"])
    with pytest.raises(Exception, match="SequenceExample records are not supported"):
        (df.write.format("tfrecord").mode("overwrite").option("recordType", "SequenceExample")
         .save(str(tmp_path)))


# -- directories written by Spark-TFRecord -----------------------------------------------------


def _spark_tfrecord_dir(root: Path) -> list[dict]:
    """What Spark-TFRecord writes for SEED partitioned by number: part files with suffixes,
    an empty one first, .crc siblings, _SUCCESS, no manifest."""
    codec, fmt = ExampleCodec(), get_format("tfrecord")
    examples = {8: [{"word": "bat"}, {"word": "abc"}], 1: [{"word": "xyz"}],
                2: [{"word": "aaa"}]}
    written = []
    for number, values in examples.items():
        directory = root / f"number={number}"
        directory.mkdir(parents=True)
        (directory / "part-00000-0f1e.c000.tfrecord").write_bytes(b"")  # an empty task
        name = f"part-00001-0f1e.c000.tfrecord{'.gz' if number == 8 else ''}"
        with open(directory / name, "wb") as f:
            sink = gzip.GzipFile(fileobj=f, mode="wb") if number == 8 else f
            writer = fmt.writer(sink, "none", 1 << 20)
            for value in values:
                writer.write(codec.encode({"word": np.array([value["word"]], object)}))
            writer.close()
            if sink is not f:
                sink.close()
        (directory / f".{name}.crc").write_bytes(b"crc\x00")
        written += [{"number": number, **v} for v in values]
    (root / "_SUCCESS").write_bytes(b"")
    return written


def test_reads_spark_tfrecord_directories(spark, tmp_path):
    written = _spark_tfrecord_dir(tmp_path)
    back = rs.read(spark, str(tmp_path))
    assert back.schema.simpleString() == "struct<word:string,number:int>"
    assert rows(back.select("number", "word")) == sorted(SEED, key=repr)
    assert rows(spark.read.format("tfrecord").load(str(tmp_path)).select("number", "word")) == (
        sorted(SEED, key=repr))
    # RecordIO: the part files, partitions in sorted path order, files sorted within
    decoded = [str(x["word"][0], "utf-8") for x in RecordIO(str(tmp_path), codec="example")()]
    assert decoded == ["xyz", "aaa", "bat", "abc"]
    assert len(written) == 4
    glob = [x["word"][0] for x in RecordIO(str(tmp_path / "number=8" / "part-*"),
                                           codec="example")()]
    assert glob == [b"bat", b"abc"]


def test_read_with_an_explicit_schema(spark, tmp_path):
    _spark_tfrecord_dir(tmp_path)
    back = rs.read(spark, str(tmp_path), schema="word binary, number bigint")
    assert back.schema.simpleString() == "struct<word:binary,number:bigint>"
    assert sorted((r.number, bytes(r.word)) for r in back.collect()) == sorted(
        (n, w.encode()) for n, w in SEED)
    with pytest.raises(Exception, match="record holds 2 values.*array<bigint>"):
        many = spark.createDataFrame([(1, [1, 2])], "id int, v array<bigint>")
        rs.write(many, str(tmp_path / "many"))
        rs.read(spark, str(tmp_path / "many"), schema="id int, v bigint").collect()


LANGS = [(8, "bat", "en"), (1, "xyz", "fr"), (2, "007", "en")]


@pytest.mark.parametrize("schema, columns", [
    ("word string", ["word", "lang", "number"]),
    ("word binary", ["word", "lang", "number"]),
    ("number string, word string", ["word", "lang", "number"]),
    ("lang string, word string, extra int", ["word", "extra", "lang", "number"]),
])
def test_a_schema_keeps_the_partition_columns_it_doesnt_name(spark, tmp_path, schema, columns):
    df = spark.createDataFrame(LANGS, ["number", "word", "lang"])
    rs.write(df, str(tmp_path / "rs"), partition_by=["lang", "number"])
    df.write.partitionBy("lang", "number").parquet(str(tmp_path / "pq"))
    ours = rs.read(spark, str(tmp_path / "rs"), schema=schema)
    spark_own = spark.read.schema(schema).parquet(str(tmp_path / "pq"))
    assert ours.columns == spark_own.columns == columns
    # a type the schema gives wins; the others are as the manifests record them
    named = dict(f.split() for f in schema.split(", "))
    assert [(f.name, f.dataType.simpleString()) for f in ours.schema] == [
        (n, named.get(n) or {"word": "string", "lang": "string", "number": "bigint"}[n])
        for n in columns]
    assert rows(ours.select(*(c for c in columns if c != "word"))) == rows(
        spark_own.select(*(c for c in columns if c != "word")))
    assert sorted(bytes(w) if isinstance(w, (bytes, bytearray)) else w
                  for (w,) in ours.select("word").collect()) == sorted(
        w.encode() if "binary" in schema else w for _, w, _ in LANGS)


def test_a_schema_keeps_inferred_partition_columns_without_manifests(spark, tmp_path):
    _spark_tfrecord_dir(tmp_path)
    back = rs.read(spark, str(tmp_path), schema="word string")
    assert back.schema.simpleString() == "struct<word:string,number:int>"
    assert rows(back.select("number", "word")) == sorted(SEED, key=repr)
    # the data source takes the schema as given: Spark fixes a Python source's columns
    given = spark.read.format("tfrecord").schema("word string").load(str(tmp_path))
    assert given.columns == ["word"] and sorted(r.word for r in given.collect()) == sorted(
        w for _, w in SEED)


def test_example_rows_are_in_tensorflows_key_order():
    import pyarrow as pa

    from recprep.spark.codecs import encoder_for
    from recprep.spark.columns import ColumnSpec

    tf = pytest.importorskip("tensorflow")
    batch = pa.record_batch({"ab": pa.array([1, 2]), "a": pa.array(["x", "y"]),
                             "abc": pa.array([[0.5], []], pa.list_(pa.float32())),
                             "b": pa.array([True, False])})
    columns = [ColumnSpec("ab", "bigint"), ColumnSpec("a", "string"),
               ColumnSpec("abc", "array<float>"), ColumnSpec("b", "boolean")]
    records = encoder_for("example", columns).encode(batch)
    for record, row in zip(records, batch.to_pylist(), strict=True):
        theirs = tf.train.Example(features=tf.train.Features(feature={
            "ab": tf.train.Feature(int64_list=tf.train.Int64List(value=[row["ab"]])),
            "a": tf.train.Feature(bytes_list=tf.train.BytesList(value=[row["a"].encode()])),
            "abc": tf.train.Feature(float_list=tf.train.FloatList(value=row["abc"])),
            "b": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(row["b"])])),
        }))
        assert record == theirs.SerializeToString(deterministic=True)
        assert list(ExampleCodec().decode(record)) == ["abc", "ab", "a", "b"]
        assert record == ExampleCodec().encode({
            "ab": np.array([row["ab"]]), "a": np.array([row["a"]], object),
            "abc": np.array(row["abc"], np.float32), "b": np.array([row["b"]])})


def test_reads_sets_written_by_convert(spark, tmp_path):
    from recprep import Feature, convert

    features = [Feature("x", "float32", (2,)), Feature("label", "int64")]
    examples = [(np.array([i, -i], np.float32), i) for i in range(5)]
    convert(str(tmp_path / "ex"), examples, 2, "c", format="tfrecord",
            codec=ExampleCodec(features))
    back = rs.read(spark, str(tmp_path / "ex"))
    assert back.schema.simpleString() == "struct<x:array<float>,label:bigint>"
    assert sorted((r.label, r.x) for r in back.collect()) == [
        (i, [float(i), float(-i)]) for i in range(5)]
    # recprep-codec dicts without recorded columns: the records tell
    convert(str(tmp_path / "rp"), [{"id": i, "w": f"w{i}", "p": 0.5 * i} for i in range(4)], 1,
            "d")
    back = rs.read(spark, str(tmp_path / "rp"))
    assert back.schema.simpleString() == "struct<id:bigint,w:string,p:double>"
    assert rows(back) == [(i, f"w{i}", 0.5 * i) for i in range(4)]


def test_import_is_lazy_and_a_missing_pyspark_names_the_extra(monkeypatch):
    import subprocess
    import sys

    code = ("import sys; from recprep import spark as rs; "
            "assert 'pyspark' not in sys.modules and 'pyarrow' not in sys.modules, 'eager'")
    subprocess.run([sys.executable, "-c", code], check=True)
    from recprep.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "pyspark", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'recprep\[spark\]'"):
        rs.read(None, "anywhere")
