"""Checkpoint a PyTorch input pipeline with torchdata's ``StatefulDataLoader``.

``RecordIODataset`` implements the ``state_dict`` protocol ``StatefulDataLoader`` uses:
``loader.state_dict()`` holds the position of every DataLoader worker's reader (a few
hundred bytes of JSON each, no data), and a loader given it with ``load_state_dict``
continues with exactly the batches the interrupted run had not handed out yet.

Run it as is (``python examples/stateful_dataloader.py``): it writes a small set, trains
two epochs without a break, then again stopping after 7 steps and resuming in a fresh
loader, and checks both runs saw the same batches. With ``--data``, it is one training
process, for a job that may be killed at any point and restarted
(``tests/adapters/test_torch_stateful.py`` SIGKILLs it)::

    python examples/stateful_dataloader.py --data 'out/train-*-of-*' \\
        --checkpoint ckpt.json --log seen.txt --num-workers 2

It resumes from ``--checkpoint`` when that exists, writes it atomically every
``--every`` steps, and appends the labels of each batch to ``--log``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from torchdata.stateful_dataloader import StatefulDataLoader

from recprep import convert
from recprep.torch import RecordIODataset

EPOCHS = 2


def make_loader(pattern: str, num_workers: int) -> tuple[Any, StatefulDataLoader]:
    ds = RecordIODataset(pattern, shuffle=True, seed=7, shuffle_buffer=64, batch_size=16)
    return ds, StatefulDataLoader(ds, batch_size=None, num_workers=num_workers)


def save(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` as JSON, atomically: a kill leaves the old file or the new one."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, path)


def train(
    pattern: str,
    checkpoint: Path,
    *,
    num_workers: int = 2,
    every: int = 1,
    steps: int | None = None,
    log: Path | None = None,
    pause: float = 0.0,
) -> list[list[int]]:
    """Train (here: collect each batch's labels) from the checkpoint, if any; stop after
    ``steps`` steps (a stand-in for being killed) or after the last epoch."""
    ds, loader = make_loader(pattern, num_workers)
    start_epoch, step = 0, 0
    if checkpoint.exists():
        state = json.loads(checkpoint.read_text())
        loader.load_state_dict(state["loader"])  # with the model's and optimiser's
        start_epoch, step = state["epoch"], state["step"]
    seen: list[list[int]] = []
    for epoch in range(start_epoch, EPOCHS):
        ds.set_epoch(epoch)  # before iter(loader): the workers copy the dataset
        for _images, labels in loader:
            seen.append(labels.tolist())  # the training step on the batch
            step += 1
            if log is not None:
                with log.open("a") as out:
                    out.write(json.dumps(labels.tolist()) + "\n")
            if step % every == 0:
                save(checkpoint, {"epoch": epoch, "step": step, "loader": loader.state_dict()})
            if steps is not None and len(seen) == steps:
                return seen
            time.sleep(pause)
    return seen


def demo(num_workers: int = 2) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data = [(np.full(4, i, dtype=np.float32), i) for i in range(500)]
        convert(f"{tmp}/set", data, num_shards=4, name_prefix="train", progress=False)
        pattern = f"{tmp}/set/train-*-of-*"
        whole = train(pattern, Path(tmp, "a.json"), num_workers=num_workers)
        first = train(pattern, Path(tmp, "b.json"), num_workers=num_workers, steps=7)
        rest = train(pattern, Path(tmp, "b.json"), num_workers=num_workers)
        assert first + rest == whole, "the resumed run differs from the uninterrupted one"
        per_epoch = sorted(y for batch in whole for y in batch)
        assert per_epoch == sorted(list(range(500)) * EPOCHS)
        print(f"{len(whole)} batches; stopped after {len(first)}, resumed for {len(rest)}: "
              "the same stream")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", help="the set's files (a glob); without it, the demo")
    parser.add_argument("--checkpoint", type=Path, default=Path("ckpt.json"))
    parser.add_argument("--log", type=Path)
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--every", type=int, default=1)
    parser.add_argument("--pause", type=float, default=0.0)
    args = parser.parse_args()
    if args.data is None:
        demo(args.num_workers)
    else:
        train(args.data, args.checkpoint, num_workers=args.num_workers, every=args.every,
              log=args.log, pause=args.pause)


if __name__ == "__main__":
    main()
