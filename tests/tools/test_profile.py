"""``recprep profile``: run as a user runs it (``python -m recprep``, a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from recprep import convert

N = 500
RECORDS = [bytes([i % 251]) * (10 + i % 90) for i in range(N)]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "recprep", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def raw_set(tmp_path):
    convert(tmp_path, RECORDS, 2, "p", codec="raw")
    return str(tmp_path / "p")


def test_profile_prints_the_rate_where_the_time_goes_and_a_hint(raw_set):
    done = run_cli("profile", raw_set, "--seconds", "0.3")
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines()}
    assert set(lines) == {"profile", "read", "rate", "time", "hint"}  # local: no store line
    assert raw_set in lines["profile"] and "num_threads=0" in lines["profile"]
    assert "instances/s" in lines["rate"] and "MB/s" in lines["rate"]
    for part in ("fetching", "decoding", "other"):
        assert f"{part} " in lines["time"]
    assert lines["hint"].split()[1].rstrip(":") in {"chunks", "workers", "prefetch"}


def test_profile_json_holds_the_figures(raw_set):
    done = run_cli("profile", raw_set, "--seconds", "0.3", "--json", "--num-threads", "2",
                   "--batch-size", "64")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    seconds, n, complete = report["seconds"], report["instances"], report["passes_complete"]
    assert seconds >= 0.3 and complete >= 1 and report["num_threads"] == 2
    assert complete * N <= n < (complete + 1) * N and n == report["stats"]["instances"]
    per_pass = sum(map(len, RECORDS))  # every chunk decoded of the passes completed
    assert report["record_bytes"] >= complete * per_pass
    assert report["instances_per_second"] == pytest.approx(n / seconds)
    assert report["mb_per_second"] == pytest.approx(report["record_bytes"] / seconds / 1e6)
    spent = report["time"]
    assert set(spent) == {"fetching", "decoding", "other"} and min(spent.values()) >= 0
    assert spent["decoding"] == report["stats"]["decoding"] > 0
    assert report["hint"]["rule"] in {"chunks", "workers", "prefetch", "cache"}
    assert report["hint"]["text"] and report["batch_size"] == 64


def test_profile_of_an_empty_set_stops_at_once(tmp_path):
    with pytest.warns(UserWarning, match="1 of 1 shards are empty"):
        convert(tmp_path, [], 1, "e", codec="raw")
    done = run_cli("profile", str(tmp_path / "e"), "--seconds", "60", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["instances"], report["passes_complete"]) == (0, 1)
    assert report["hint"]["rule"] == "nothing" and report["seconds"] < 60


@pytest.mark.parametrize(("args", "said"), [
    (["--seconds", "0"], "--seconds must be more than 0, got 0.0"),
    (["--num-threads", "-1"], "num_threads must be a non-negative int"),
])
def test_profile_refuses_bad_options(raw_set, args, said):
    done = run_cli("profile", raw_set, *args)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("recprep: error: ") and said in done.stderr


def test_profile_of_a_missing_set_is_an_error(tmp_path):
    done = run_cli("profile", str(tmp_path / "nothing-here"), "--seconds", "0.1")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"recprep: error: {tmp_path / 'nothing-here'}: no such file")


def test_profile_of_a_set_on_s3_says_what_the_store_was_asked(remote_set):
    url, records, options = remote_set  # 16 KiB chunks, 4 shards, on moto's S3
    storage = ["--storage-options", json.dumps(options)]
    done = run_cli("profile", url, "--seconds", "0.5", "--json", *storage)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    stats, complete = report["stats"], report["passes_complete"]
    assert complete >= 1 and stats["requests"] >= 4 and stats["failed"] == 0
    assert stats["bytes"] >= complete * sum(map(len, records))  # framing besides
    assert report["hint"]["rule"] == "chunks" and "KiB of records" in report["hint"]["text"]
    text = run_cli("profile", url, "--seconds", "0.3", *storage)
    assert text.returncode == 0, text.stderr
    [store] = [line for line in text.stdout.splitlines() if line.startswith("store ")]
    assert " requests, " in store and "MB fetched" in store and "0 throttled" in store
