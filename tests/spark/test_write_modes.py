"""``recprep.spark.write`` on a path that holds data: advice that works (issue 22 item 20).

It used to say "pass overwrite=True", which ``rs.write`` refuses with a ``TypeError``;
the modes are ``mode="overwrite"`` and ``mode="append"``. The test does what the error
says, as a user would.
"""

from __future__ import annotations

import pytest

from recprep import errors
from recprep.errors import OutputExistsError

pytest.importorskip("pyspark")


def test_the_advice_of_an_existing_path_is_a_mode_that_works(spark_session, tmp_path):
    from recprep import spark as rs

    path = str(tmp_path / "ds")
    first = spark_session.createDataFrame([(1, "a"), (2, "b")], "n bigint, w string")
    rs.write(first, path, partition_by="n")
    second = spark_session.createDataFrame([(2, "c")], "n bigint, w string")
    with pytest.raises(OutputExistsError) as caught:  # as before, for code that catches it
        rs.write(second, path, partition_by="n")
    err = caught.value
    assert type(err) is getattr(errors, "DatasetExistsError", None)
    assert isinstance(err, FileExistsError)
    message = str(err)
    assert "overwrite=True" not in message
    assert "; pass mode='overwrite' to replace the partition directories the DataFrame has " \
           "rows for" in message
    assert "; pass mode='append' to add a shard set beside what is there" in message
    assert err.path == path and err.existing  # the entries found
    assert [(r.option, r.value) for r in err.remedies] == [("mode", "overwrite"),
                                                            ("mode", "append")]
    # do as it says: each remedy is an argument rs.write takes
    for remedy in err.remedies:
        rs.write(second, path, partition_by="n", **{remedy.option: remedy.value})
    got = sorted(tuple(r) for r in rs.read(spark_session, path).select("w", "n").collect())
    assert got == [("a", 1), ("c", 2), ("c", 2)]  # n=2 replaced by "c", then "c" appended
