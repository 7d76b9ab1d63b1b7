"""`make venv` installs torch's CPU build, never PyPI's CUDA one (issue 12, item 21).

A plain ``torch==X`` pin let pip's resolver, while it backtracked over s3fs/aiobotocore,
drop the find-links ``X+cpu`` wheel for PyPI's ``X`` (CUDA, 2.7 GB of nvidia-* libraries):
a 7.5 GB ``.venv``. The Makefile pins ``X+cpu`` with a constraint. These tests read what
``make -n`` would run; nothing is installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make")


def _torch_pin() -> str:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    match = re.search(r'^\s*"torch==([0-9.]+)"', text, re.MULTILINE)
    assert match, "the test extra pins torch==X"
    return match.group(1)


def _dry_run(tmp_path: Path, find_links: Path, **variables: str) -> str:
    env = {**os.environ, "PIP_FIND_LINKS": str(find_links), "PIP_CONFIG_FILE": os.devnull}
    args = ["make", "-n", "-B", "venv", f"VENV={tmp_path / 'venv'}"]
    args += [f"{name}={value}" for name, value in variables.items()]
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _install_line(output: str) -> str:
    return next(line for line in output.splitlines() if "-e '.[test,bench]'" in line)


def test_the_cpu_wheel_of_a_find_links_directory_is_pinned(tmp_path):
    version = _torch_pin()
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / f"torch-{version}+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").touch()
    output = _dry_run(tmp_path, wheels)
    assert f"echo 'torch=={version}+cpu' > {tmp_path / 'venv'}/torch-cpu.txt" in output
    line = _install_line(output)
    assert f"-c {tmp_path / 'venv'}/torch-cpu.txt" in line
    assert f"--find-links {wheels}/" in line
    assert "download.pytorch.org" not in line


def test_without_a_local_wheel_the_cpu_build_comes_from_pytorchs_index(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    line = _install_line(_dry_run(tmp_path, empty))
    assert "-c " in line and "--extra-index-url https://download.pytorch.org/whl/cpu" in line


def test_the_pin_can_be_lifted(tmp_path):
    line = _install_line(_dry_run(tmp_path, tmp_path, TORCH_CPU=""))
    assert "-c " not in line and "--extra-index-url" not in line
