"""Progress a newcomer can trust (issue 22 items 16 and 18).

* ``recprep prepare`` on more raw files than reading tasks (more than 256: files share
  tasks) counted finished tasks against a total of files, so the bar ended at 1-2% with
  an ETA of minutes; it counts files.
* In Jupyter the text bar left a stderr output per refresh in the saved notebook (a dozen
  lines per cell); the bar is now one output, replaced in place, and a saved notebook
  holds its final line. Run in a real kernel (nbclient), saved and read back.
"""

from __future__ import annotations

import re
import textwrap

import pytest

from recprep import RecordIO, prepare

MODEL = """
def prepare_data_for_a_single_file(filename):
    with open(filename) as f:
        return [(int(f.read()),)]
"""


def _raw_files(tmp_path, count: int):
    raw = tmp_path / "raw"
    raw.mkdir()
    for i in range(count):
        (raw / f"{i:04d}.txt").write_text(str(i))
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    return str(model), str(raw)


def _last_line(text: str) -> str:
    return re.split(r"[\r\n]+", text.strip())[-1]


def test_prepare_counts_files_when_files_share_tasks(tmp_path, capsys):
    model, raw = _raw_files(tmp_path, 600)  # 600 files, 256 reading tasks
    result = prepare(model, raw, str(tmp_path / "out"), executor="serial", num_shards=2,
                     progress=True)
    assert result.files == 600
    last = _last_line(capsys.readouterr().err)
    assert re.match(r"data: 100%\|.*\| 600/600 \[", last), last
    assert "shards=2/2" in last and "instances=600" in last
    assert sorted(x for (x,) in RecordIO(str(tmp_path / "out" / "data"))()) == list(range(600))


def test_a_saved_notebook_holds_one_final_progress_line_per_bar(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    model, raw = _raw_files(tmp_path, 300)
    out = str(tmp_path / "out")
    cells = [
        textwrap.dedent(f"""
            import time
            from recprep import convert

            def slow():  # refreshes the bar many times
                for i in range(3000):
                    if i % 100 == 0:
                        time.sleep(0.04)
                    yield (i,)

            print("records", convert({out!r}, slow, 2, "unsized").num_records)
        """),
        f"print('records', convert({out!r}, list(range(20000)), 2, 'sized').num_records)",
        textwrap.dedent(f"""
            from recprep import prepare
            print("files", prepare({model!r}, {raw!r}, {out + "/p"!r}, executor="serial",
                                   num_shards=2).files)
        """),
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(notebook, timeout=180, kernel_name="python3").execute()
    saved = tmp_path / "saved.ipynb"
    nbformat.write(notebook, str(saved))
    notebook = nbformat.read(str(saved), as_version=4)
    finals = []
    for cell in notebook.cells:
        stderr = [o for o in cell.outputs if o.get("name") == "stderr"]
        assert not stderr, f"the bar left {len(stderr)} stderr output(s): {stderr[:3]}"
        bars = [o for o in cell.outputs if o["output_type"] == "display_data"]
        assert len(bars) == 1, cell.outputs
        (line,) = bars[0]["data"]["text/plain"].splitlines()
        finals.append(line)
    assert re.match(r"unsized: 3\.00k instances \[.*shards=2/2\]$", finals[0]), finals[0]
    assert re.match(r"sized: 100%\|█+\| 20\.0k/20\.0k \[.*shards=2/2\]$", finals[1]), finals[1]
    assert re.match(r"data: 100%\|█+\| 300/300 \[.*shards=2/2, instances=300\]$",
                    finals[2]), finals[2]
    prints = ["".join(o.get("text", "") for o in c.outputs if o.get("name") == "stdout")
              for c in notebook.cells]
    assert prints == ["records 3000\n", "records 20000\n", "files 300\n"]
