"""A table without columns is refused, whatever its kind (issue 22, item 14).

A DataFrame of 3 rows and no columns used to write 0 instances with only an empty-shard
warning: a table's rows would be empty instances, so every kind of table ``convert``
takes (pandas, pyarrow Table / RecordBatch / Dataset in memory or on files, a dict of
columns) is refused the same way, before anything is written.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from recprep import InvalidArgumentError, convert, partitions
from recprep.errors import ColumnsError


def three_rows_no_columns(kind: str, tmp_path):
    table = pa.table({"a": [1, 2, 3]}).drop_columns(["a"])
    assert table.num_rows == 3 and table.num_columns == 0
    if kind == "pandas":
        return pd.DataFrame(index=range(3))
    if kind == "pandas-selected":
        return pd.DataFrame({"a": [1, 2, 3]})[[]]
    if kind == "table":
        return table
    if kind == "record-batch":
        return table.to_batches()[0]
    if kind == "dataset":
        return ds.dataset(table)
    path = tmp_path / "empty.parquet"
    pq.write_table(table, path)
    return ds.dataset(str(path))


KINDS = ["pandas", "pandas-selected", "table", "record-batch", "dataset", "parquet-dataset"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("executor", ["serial", "processes"])
def test_a_table_of_rows_without_columns_is_refused(tmp_path, kind, executor):
    table = three_rows_no_columns(kind, tmp_path)
    out = tmp_path / "out"
    with pytest.raises(InvalidArgumentError) as info:
        convert(str(out), table, 2, "t", executor=executor, progress=False)
    message = str(info.value)
    rows = 0 if kind == "parquet-dataset" else 3  # Parquet keeps no rows without columns
    assert f"{rows} row(s) and no columns" in message and "empty instance" in message
    assert "select the columns" in message
    assert not out.exists() or list(out.iterdir()) == []


@pytest.mark.parametrize("kind", ["pandas", "table"])
def test_a_partition_without_columns_is_refused_naming_it(tmp_path, kind):
    good = pd.DataFrame({"a": np.arange(3)})
    with pytest.raises(InvalidArgumentError, match=r"^partition 1: reader is a table"):
        convert(str(tmp_path), partitions([good, three_rows_no_columns(kind, tmp_path)]), 2,
                "t", progress=False)


def test_every_kind_without_columns_and_rows_is_refused_too(tmp_path):
    """No rows, no columns: refused like a dict without columns always was."""
    for table in (pd.DataFrame(), pa.table({}), {}):
        with pytest.raises(InvalidArgumentError, match="no columns"):
            convert(str(tmp_path), table, 1, "t", progress=False)
    with pytest.raises(ColumnsError):
        convert(str(tmp_path), {}, 1, "t", progress=False)
    assert list(tmp_path.iterdir()) == []


def test_a_table_with_columns_and_no_rows_still_writes_an_empty_set(tmp_path):
    with pytest.warns(UserWarning, match="shards are empty"):
        result = convert(str(tmp_path), pd.DataFrame({"a": np.zeros(0)}), 1, "t",
                         progress=False)
    assert result.num_records == 0
