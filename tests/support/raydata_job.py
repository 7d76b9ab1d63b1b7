"""recprep.ray against a ``ray start`` cluster, as its own process (see test_raydata.py).

``python -m tests.support.raydata_job OUT ADDRESS`` (as a module: run as a script, this
directory's ``requests.py`` would shadow the package ``ray.data`` imports): writes a set,
reads it with ``recprep.ray.read``, writes the dataset back with ``recprep.ray.write`` and
prints what it found as JSON.
"""

from __future__ import annotations

import json
import sys

import ray

import recprep.ray as rr
from recprep import RecordIO, convert


def main(out: str, address: str) -> None:
    ray.init(address=address, log_to_driver=False)
    rows = [{"id": i, "s": f"s{i}"} for i in range(2000)]
    convert(f"{out}/in", rows, 4, "in", chunk_bytes=4096, progress=False)
    ds = rr.read(f"{out}/in", override_num_blocks=4).materialize()
    ids = [int(r["id"]) for r in ds.take_all()]
    result = rr.write(ds, f"{out}/out", 2, "out", progress=False)
    back = [int(r["id"]) for r in RecordIO(f"{out}/out")()]
    print(json.dumps({"read": len(set(ids)), "written": result.records_per_shard,
                      "back": len(back), "in_order": back == ids}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
