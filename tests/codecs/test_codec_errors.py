"""Codec errors every read path agrees on, and advice that names the right codec (issue 22).

* Item 12: a packed dict whose record holds a key twice can't have been written by
  recprep's encoder (damaged or forged data). Record by record it used to decode as
  ``{'ka': <the second value>}``, as columns it raised a bare ``ValueError``; now
  ``read()``, ``batches()``, ``read_range``, ``dataset()``, ``recprep head`` and
  ``recprep.spark.read`` all raise the same ``DecodeError``, naming file, chunk offset and
  record index.
* Item 17: forcing ``codec="pickle"`` on recprep records said they hold a pickled value and
  to pass ``allow_pickle=True``; now the record is said not to be a pickle, and the codecs
  suggested start with the one the set's manifest names.
"""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

from recprep import RecordIO, convert
from recprep.codecs import get_codec
from recprep.codecs.recprep import RecprepCodec
from recprep.errors import DecodeError, PickleRefusedError

N = 12
FORGED = 5  # the record forged when only one is


class _Forging(RecprepCodec):
    """recprep's codec (manifests say "recprep"), writing ``{"ka": .., "kb": ..}`` rows
    whose ``forge`` flag is set with the key ``kb`` made ``ka``: a record the real encoder
    never writes."""

    name = "recprep"

    def encode(self, instance):
        forge = instance.pop("forge", False)
        record = super().encode(instance)
        return record.replace(b"kakb", b"kaka") if forge else record

    def encode_columns(self, columns, n):
        return None


def _forged_set(directory, which: str) -> str:
    rows = [{"ka": i, "kb": 100 + i, "forge": which == "all" or i == FORGED}
            for i in range(N)]
    convert(str(directory), rows, 1, "d", codec=_Forging())
    return str(directory / "d")


def _check(err: DecodeError, which: str) -> None:
    assert "holds the key 'ka' twice" in str(err)
    assert err.path.endswith("d-00000-of-00000")
    assert err.offset == 0
    assert err.record_index == (0 if which == "all" else FORGED)


@pytest.mark.parametrize("which", ["one", "all"])
def test_a_key_twice_raises_the_same_error_on_every_read_path(tmp_path, which):
    path = _forged_set(tmp_path, which)
    reader = RecordIO(path)
    (shard,) = reader.paths
    paths = {
        "read": lambda: list(reader()),
        "batches": lambda: list(reader.batches(4)),
        "batches of columns": lambda: list(RecordIO(path).batches(N)),
        "read_range": lambda: list(reader.read_range(shard, 0, N)),
        "dataset": lambda: reader.dataset()[FORGED if which == "one" else 0],
        "threads": lambda: list(RecordIO(path, num_threads=2)()),
    }
    for name, read in paths.items():
        with pytest.raises(DecodeError) as caught:
            read()
        _check(caught.value, which)
        assert type(caught.value) is DecodeError, name


def test_a_key_twice_stops_recprep_head(tmp_path):
    path = _forged_set(tmp_path, "one")
    done = subprocess.run([sys.executable, "-m", "recprep", "head", path, "-n", str(N)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "record 5 of the chunk: a dict of 2 entries holds the key 'ka' twice" in done.stderr
    assert "Traceback" not in done.stderr and "ValueError" not in done.stderr
    assert "{'ka': int 105}" not in done.stdout  # never the forged record's collapsed value


@pytest.mark.parametrize("which", ["one", "all"])
def test_a_key_twice_fails_a_spark_read(spark_session, tmp_path, which):
    from recprep import spark as rs

    path = _forged_set(tmp_path / "set", which)
    df = rs.read(spark_session, str(tmp_path / "set"), schema="ka bigint, kb bigint")
    with pytest.raises(Exception) as caught:
        df.collect()
    text = str(caught.value)
    assert "DecodeError" in text and "holds the key 'ka' twice" in text
    assert f"record {0 if which == 'all' else FORGED}" in text
    assert path.endswith("/d")


# -- item 17: the codec suggested is the one that wrote the data -----------------------------


@pytest.fixture
def recprep_set(tmp_path):
    convert(str(tmp_path), [(i, "x") for i in range(6)], 1, "d")
    return str(tmp_path / "d")


@pytest.mark.parametrize("allow_pickle", [False, True])
def test_forcing_pickle_on_recprep_records_says_it_is_no_pickle(recprep_set, allow_pickle):
    with pytest.raises(DecodeError) as caught:
        list(RecordIO(recprep_set, codec="pickle", allow_pickle=allow_pickle)())
    err = caught.value
    assert not isinstance(err, PickleRefusedError)
    message = str(err)
    assert "it starts with byte 0xf1 (it looks like a recprep record)" in message
    assert message.endswith("pass codec='recprep' or codec='raw' if it was written with "
                            "another codec")
    assert "allow_pickle" not in message
    assert err.remedy.values == ("recprep", "raw")


def test_forcing_example_on_recprep_records_suggests_recprep(recprep_set):
    with pytest.raises(DecodeError) as caught:
        list(RecordIO(recprep_set, codec="example")())
    assert "pass codec='recprep' or codec='raw'" in str(caught.value)


def test_the_manifests_codec_comes_first(tmp_path):
    """Records written with codec="raw" that happen to start like recprep's: the manifest
    says raw, so raw is suggested first, on every path."""
    records = [get_codec("recprep").encode(i) for i in range(6)]
    convert(str(tmp_path), records, 1, "d", codec="raw")
    reader = RecordIO(str(tmp_path / "d"), codec="pickle")
    for read in (lambda: list(reader()), lambda: reader.dataset()[3],
                 lambda: list(reader.batches(2))):
        with pytest.raises(DecodeError) as caught:
            read()
        assert caught.value.remedy.values == ("raw", "recprep")
        assert "pass codec='raw' or codec='recprep'" in str(caught.value)


def test_an_error_without_codec_advice_gets_the_manifests(tmp_path):
    convert(str(tmp_path), [b"\xf1\x1f"] * 4, 1, "d", codec="raw")  # tag 0x1f: unassigned
    with pytest.raises(DecodeError) as caught:
        list(RecordIO(str(tmp_path / "d"), codec="recprep")())
    assert str(caught.value).endswith(
        "record 0 of the chunk: unknown type tag 0x1f, at byte 1 of the record (read with "
        "codec='recprep'); pass codec='raw' to read it with the codec its manifest names")
    assert caught.value.remedy.values == ("raw",)


def test_the_cli_says_the_codec_as_a_flag(recprep_set):
    done = subprocess.run(
        [sys.executable, "-m", "recprep", "head", recprep_set, "--codec", "pickle"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2
    assert "is not a pickle" in done.stderr
    assert "pass --codec recprep or --codec raw" in done.stderr
    assert "--allow-pickle" not in done.stderr


@pytest.mark.parametrize("protocol", [0, 1, 2, 4, 5])
def test_real_pickles_are_still_refused_with_allow_pickle_advice(tmp_path, protocol):
    """Pickles a user stored with codec="raw" and reads with codec="pickle": they are
    pickles, so the advice stays allow_pickle (and they decode with it)."""
    records = [pickle.dumps({"k": i}, protocol=protocol) for i in range(4)]
    convert(str(tmp_path), records, 1, "d", codec="raw")
    with pytest.raises(PickleRefusedError, match="allow_pickle=True"):
        list(RecordIO(str(tmp_path / "d"), codec="pickle")())
    got = list(RecordIO(str(tmp_path / "d"), codec="pickle", allow_pickle=True)())
    assert got == [{"k": i} for i in range(4)]


@pytest.mark.parametrize("record, said", [
    (b"", "it is empty"),
    (b"\x0a\x02\x0a\x00", "it starts with byte 0x0a (it looks like a tf.train.Example)"),
    (b"\x80\x04\x95garbage", "its opcodes don't make a pickle"),
    (b"I12", "its opcodes don't make a pickle"),  # a protocol-0 opener, then no newline
])
def test_the_pickle_codec_refuses_what_is_no_pickle(record, said):
    with pytest.raises(DecodeError, match="not a pickle") as caught:
        get_codec("pickle").decode(record)
    assert said in str(caught.value)
    assert not isinstance(caught.value, PickleRefusedError)


@pytest.mark.parametrize("data", [list(range(5)), [str(i) for i in range(5)],
                                  [(i, "a", 1.5) for i in range(5)], [b"xy"] * 5])
def test_forcing_example_on_recprep_records_is_an_error_not_empty_examples(mem_url, data):
    """A recprep record parses as protobuf of unknown fields only: that is no Example
    (it used to decode as ``{}``, wrong data with no error)."""
    convert(mem_url, data, 1, "s")
    reader = RecordIO(f"{mem_url}/s", codec="example")
    for read in (lambda: list(reader()), lambda: list(reader.batches(2)),
                 lambda: reader.dataset()[0]):
        with pytest.raises(DecodeError, match="not a tf.train.Example|not a valid tf.train"):
            read()
