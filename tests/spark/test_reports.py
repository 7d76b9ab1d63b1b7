"""``recprep.spark.write`` brings its tasks' reports to the driver as JSON data, never by
unpickling a file from the (shared) output directory (issue 13 item 6)."""

from __future__ import annotations

import datetime
import pickle
from pathlib import Path

import fsspec
import pytest

from recprep.errors import CorruptDataError, EncodeError, TaskFailedError
from recprep.executors.base import Outcome, failed
from recprep.storage.staging import FileFacts
from recprep.write.options import check_options

writing = pytest.importorskip("recprep.spark.writing")
reports_module = pytest.importorskip("recprep.spark.reports")
from recprep.spark.pieces import PieceFile, TaskReport, WritePlan  # noqa: E402


def make_job(tmp_path: Path):
    fs = fsspec.filesystem("file")
    staging = tmp_path / ".recprep-staging-spark-x"
    staging.mkdir()
    plan = WritePlan(fs, str(tmp_path), str(staging), check_options("tfrecord", None,
                                                                    "example", 1, None), ())
    return writing.SparkWriteJob(plan, "part", "overwrite", False)


class Exploit:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (Path(self.marker), "pwned"))


def test_reports_round_trip_as_json(tmp_path):
    job = make_job(tmp_path)
    keys = [(1, "a", True, datetime.date(2026, 1, 2), None), (2, "b", False, None, None)]
    reports = [TaskReport(t, [PieceFile(k, t, n, FileFacts(f"{job.plan.staging}/piece-{t}-{n}",
                                                         3, 40, 7), None)
                              for n, k in enumerate(keys)], {keys[0]: {"v"}})
               for t in range(2)]
    reports_module.save_reports(job, [(t, Outcome(result=r)) for t, r in enumerate(reports)])
    assert Path(job.reports_path).read_bytes().startswith(b"[")  # data, not a pickle
    assert reports_module.load_reports(job) == reports


def test_a_failed_task_keeps_its_recprep_error(tmp_path):
    job = make_job(tmp_path)
    try:
        raise EncodeError("null element in column 'v'", instance_index=4)
    except EncodeError as err:
        outcome = failed(err)
    reports_module.save_reports(job, [(0, outcome)])
    with pytest.raises(TaskFailedError, match="null element") as info:
        reports_module.load_reports(job)
    original = info.value.original
    assert isinstance(original, EncodeError) and original.instance_index == 4


def test_a_swapped_reports_file_runs_nothing(tmp_path):
    job = make_job(tmp_path)
    marker = tmp_path / "marker"
    Path(job.reports_path).write_bytes(pickle.dumps([(0, Outcome(result=Exploit(str(marker))))]))
    with pytest.raises(CorruptDataError, match="task reports"):
        reports_module.load_reports(job)
    assert not marker.exists()
