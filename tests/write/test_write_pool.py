"""The write pool, as a property (issue 22, item 10): whatever the writes, the pool size
and whether the storage appends, every file ends up holding exactly the bytes written to
it, in order, with never more than ``max_open`` handles open.

``RECPREP_FUZZ_EXAMPLES`` (default 1000) examples, as in ``tests/test_fuzz.py``.
"""

from __future__ import annotations

import os
import uuid

import fsspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .test_many_shards import NoAppendFileSystem

EXAMPLES = int(os.environ.get("RECPREP_FUZZ_EXAMPLES", "1000"))
PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=2000,
    derandomize=os.environ.get("RECPREP_FUZZ_RANDOM") is None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)

writes = st.lists(st.tuples(st.integers(0, 7), st.binary(max_size=40)), max_size=60)


@PROPERTY
@given(writes=writes, files=st.integers(1, 8), max_open=st.integers(1, 5),
       appends=st.booleans(), data=st.data())
def test_pooled_files_hold_what_was_written(writes, files, max_open, appends, data):
    from recprep.write.filepool import WritePool

    protocol = "memory" if appends else "noappend"
    fs = fsspec.filesystem(protocol)
    root = f"/h1-pool-{uuid.uuid4().hex}"
    pool = WritePool(fs, max_open=max_open)
    assert pool.appends is appends
    closing = data.draw(st.permutations(range(files)), label="closing order")
    pooled = [pool.open(f"{root}/f{k}") for k in range(files)]
    expected = [b""] * files
    NoAppendFileSystem.open_now = 0
    try:
        for k, chunk in writes:
            k %= files
            pooled[k].write(chunk)
            expected[k] += chunk
            assert pool.num_open <= max_open
            if not appends:
                assert NoAppendFileSystem.open_now == pool.num_open
        for k in closing:
            pooled[k].close()
            assert pool.num_open <= max_open
        assert pool.num_open == 0
        found = {p.rsplit("/", 1)[1]: bytes(fs.cat_file(p))
                 for p in fs.find(root, withdirs=False)}
        assert found == {f"f{k}": expected[k] for k in range(files)}  # no segment left
    finally:
        for file in pooled:  # (after a failure: no handle left to count later)
            file.abort()
        if fs.exists(root):
            fs.rm(root, recursive=True)
