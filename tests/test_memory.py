"""``convert`` streams: a 2 GiB generator goes into 10 shards in under 300 MB of RSS.

The conversion runs in a fresh interpreter (this file run as a script), so that the
peak RSS is that of ``convert`` alone, not of pytest and whatever earlier tests left.
The peak is the child's ``VmHWM``: ``ru_maxrss`` of a child started by ``subprocess``
also counts the parent's pages before ``exec`` and would over-report.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from recprep import RecordIO, convert

INSTANCES = 2048
ARRAY_BYTES = 1 << 20  # 2048 x 1 MiB = 2 GiB of input
NUM_SHARDS = 10
PREFIX = "big"
LIMIT_MB = 300  # 1 MB = 10**6 bytes
SEED = 2048


def _array() -> np.ndarray:
    """The one preallocated 1 MiB float64 array every instance holds."""
    return np.random.default_rng(SEED).uniform(-1, 1, ARRAY_BYTES // 8)


def _peak_rss_mb() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / 1e6  # kB (KiB) -> MB
    except OSError:
        pass
    import resource  # not Linux: ru_maxrss (over-reports, so the test stays strict)

    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 1e6


def _child(out: str) -> None:
    array = _array()

    def reader():
        for i in range(INSTANCES):
            yield array, i

    result = convert(out, reader, NUM_SHARDS, PREFIX, progress=False)
    print(json.dumps({"peak_rss_mb": _peak_rss_mb(), "records": result.num_records}))


@pytest.mark.slow
def test_2gib_generator_converts_in_under_300mb_rss(tmp_path: Path) -> None:
    out = tmp_path / "out"
    try:
        done = subprocess.run(
            [sys.executable, __file__, str(out)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout.strip().splitlines()[-1])
        assert report["peak_rss_mb"] < LIMIT_MB, report

        manifest = json.loads((out / f"{PREFIX}.manifest.json").read_text())
        assert manifest["num_records"] == INSTANCES == report["records"]
        assert [s["records"] for s in manifest["shards"]] == [205] * 8 + [204] * 2
        # random floats barely compress: the 2 GiB really went through to the files
        assert manifest["total_bytes"] > 0.9 * INSTANCES * ARRAY_BYTES
        assert sum(p.stat().st_size for p in out.glob(f"{PREFIX}-*-of-*")) == (
            manifest["total_bytes"]
        )

        read = RecordIO(str(out / f"{PREFIX}-*-of-*"))
        assert len(read) == INSTANCES
        first_array, first_label = next(read())
        np.testing.assert_array_equal(first_array, _array())
        assert first_label == 0
    finally:
        shutil.rmtree(out, ignore_errors=True)  # 2 GiB: do not leave it to tmp_path retention


if __name__ == "__main__":
    _child(sys.argv[1])
