"""The progress bar: on a terminal, in a real Jupyter kernel, and counted against a total."""

from __future__ import annotations

import time

import pytest

from recprep.write.progress import Progress, in_jupyter


def test_total_instances_gives_a_percentage(capsys):
    bar = Progress(True, total_shards=2, desc="demo", total_instances=40)
    bar.add_instances(10)
    bar.add_shards()
    bar.add_instances(30)
    bar.close()
    err = capsys.readouterr().err
    assert "demo: 100%" in err and "40/40" in err and "shards=1/2" in err


def test_without_a_total_counts_instances(capsys):
    bar = Progress(True, total_shards=1, desc="demo")
    bar.add_instances(7)
    bar.close()
    err = capsys.readouterr().err
    assert "demo: 7.00 instances" in err and "%" not in err


def test_default_is_no_bar_off_a_terminal_and_outside_jupyter(capsys):
    assert not in_jupyter()
    bar = Progress(None, total_shards=1, desc="demo", total_instances=3)
    bar.add_instances(3)
    bar.close()
    assert capsys.readouterr().err == ""


def test_in_a_jupyter_kernel_the_default_shows_a_bar_with_a_total(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    cells = [
        "from recprep.write.progress import Progress, in_jupyter\n"
        "print('jupyter', in_jupyter())\n"
        "bar = Progress(None, total_shards=2, desc='sized', total_instances=50)\n"
        "bar.add_instances(50); bar.add_shards(2); bar.close()",
        "from recprep import convert\n"
        f"result = convert({str(tmp_path)!r}, [(i,) for i in range(300)], 2, 'nb')\n"
        "print('records', result.num_records)",
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    start = time.monotonic()
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    elapsed = time.monotonic() - start
    texts = []
    for cell in notebook.cells:
        text = ""
        for output in cell.outputs:
            text += output.get("text", "") + str(output.get("data", {}).get("text/plain", ""))
        texts.append(text)
    assert "jupyter True" in texts[0]
    assert "sized: 100%" in texts[0] and "50/50" in texts[0] and "shards=2/2" in texts[0]
    assert "records 300" in texts[1] and "nb: " in texts[1] and "instances" in texts[1]
    assert elapsed < 60
