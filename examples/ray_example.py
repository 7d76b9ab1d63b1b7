"""Convert with Ray: one reader per input file, run as Ray tasks on a local Ray instance.

    python examples/ray_example.py [OUTPUT_DIR]          (needs: pip install 'recprep[ray]')

recprep joins the Ray instance ``ray.init`` started (here a local one with 2 CPUs); to use
a cluster, call ``ray.init(address="auto")`` first, or pass
``executor_options={"address": "auto"}``, with an output path every node reaches.
"""

from __future__ import annotations

import functools
import sys
import tempfile
from pathlib import Path

from recprep import RecordIO, convert, partitions


def write_raw(raw: Path, files: int = 4, lines: int = 250) -> list[Path]:
    """Some raw text files: 'sentence<TAB>label' lines."""
    raw.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in range(files):
        path = raw / f"part-{f}.tsv"
        path.write_text("".join(f"file {f} line {i}\t{(f + i) % 2}\n" for i in range(lines)))
        paths.append(path)
    return paths


def read_tsv(path: str):
    """One instance per line: (tokens, label)."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            text, label = line.rstrip("\n").split("\t")
            yield text.split(), int(label)


def main(output: str) -> None:
    """Convert the raw files with Ray into ``output``; starts a local Ray instance (2 CPUs)
    unless one is running, and shuts it down at the end if it started it."""
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        files = write_raw(Path(output) / "raw")
        readers = [functools.partial(read_tsv, str(path)) for path in files]
        result = convert(f"{output}/shards", partitions(readers), 4, "sentences",
                         executor="ray", overwrite=True, progress=False)
        print(f"ray: {result}")

        read = RecordIO(f"{output}/shards/sentences-*-of-*")
        instances = list(read())
        assert len(instances) == 1000
        assert instances[0] == (["file", "0", "line", "0"], 0)
        assert instances[250] == (["file", "1", "line", "0"], 1)   # files in order
        print(f"read back {len(instances)} instances, in file order; the first: {instances[0]}")
    finally:
        if started:
            ray.shutdown()


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(tmp)
