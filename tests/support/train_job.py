"""A tiny training run as a process of its own, for the framework resume tests
(tests/adapters/test_lightning.py, test_accelerate.py).

``python tests/support/train_job.py FRAMEWORK PATTERN WORK [options]``: FRAMEWORK is
``lightning`` or ``accelerate``. The run trains a one-layer model on a
:class:`~recprep.torch.RecordIODataset` of ``(id, features)`` instances (shuffled, batched
by the dataset) through a ``StatefulDataLoader``, checkpoints after every step
(``--every epoch``: at each epoch's end), and appends the ids of each batch it trains on
to ``WORK/seen.jsonl`` (one JSON line per step: ``[epoch, step, ids]``). ``--kill-at S``
kills the process with SIGKILL at the start of step ``S`` (before that step is
recorded); ``--resume`` continues from the last checkpoint in ``WORK``. ``--stepping``
has ``configure_optimizers`` ask ``trainer.estimated_stepping_batches`` (Lightning issue
#20550); ``--guard MODE`` adds ``recprep.lightning.RecprepResume(on_missing=MODE)``;
``--set-epoch`` calls accelerate's ``data.set_epoch(epoch)`` after ``load_state``;
``--plain`` leaves accelerate's ``use_stateful_dataloader`` off.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch
from torchdata.stateful_dataloader import StatefulDataLoader

from recprep.torch import RecordIODataset

BATCH = 4


def loader(pattern: str, num_workers: int) -> StatefulDataLoader:
    ds = RecordIODataset(pattern, shuffle=True, seed=7, shuffle_buffer=8, batch_size=BATCH)
    return StatefulDataLoader(ds, batch_size=None, num_workers=num_workers)


def record(work: Path, epoch: int, step: int, ids: Any, kill_at: int | None) -> None:
    """Kill the process at step ``kill_at``; else append the step's ids to the log."""
    if kill_at is not None and step == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
    with open(work / "seen.jsonl", "a") as log:
        log.write(json.dumps([epoch, step, [int(i) for i in ids]]) + "\n")
        log.flush()
        os.fsync(log.fileno())


def run_lightning(args: argparse.Namespace) -> None:
    import lightning as L

    work = Path(args.work)

    class Model(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def train_dataloader(self) -> StatefulDataLoader:
            return loader(args.pattern, args.workers)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            ids, x = batch
            record(work, self.current_epoch, self.global_step, ids, args.kill_at)
            return self.layer(x.float()).pow(2).mean()

        def configure_optimizers(self) -> torch.optim.Optimizer:
            if args.stepping:  # as OneCycleLR users do: Lightning issue #20550
                assert self.trainer.estimated_stepping_batches > 0
            return torch.optim.SGD(self.parameters(), lr=0.01)

    every = ({"every_n_train_steps": 1} if args.every == "step" else
             {"every_n_epochs": 1, "save_on_train_epoch_end": True, "save_top_k": -1})
    callbacks: list[Any] = [L.pytorch.callbacks.ModelCheckpoint(
        dirpath=work / "ckpt", save_last=True, **{"save_top_k": 0, **every})]
    if args.guard:
        from recprep.lightning import RecprepResume

        callbacks.append(RecprepResume(on_missing=args.guard))
    trainer = L.Trainer(max_epochs=args.epochs, accelerator="cpu", devices=1, logger=False,
                        callbacks=callbacks, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0)
    last = work / "ckpt" / "last.ckpt"
    trainer.fit(Model(), ckpt_path=str(last) if args.resume else None)


def run_accelerate(args: argparse.Namespace) -> None:
    from accelerate import Accelerator
    from accelerate.utils import DataLoaderConfiguration

    work = Path(args.work)
    accelerator = Accelerator(cpu=True, dataloader_config=DataLoaderConfiguration(
        use_stateful_dataloader=not args.plain))
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model, optimizer, data = accelerator.prepare(
        model, optimizer, loader(args.pattern, args.workers))
    state = work / "state"
    step = first_epoch = 0
    if args.resume:
        accelerator.load_state(str(state))
        first_epoch, step = json.loads((work / "progress.json").read_text())
        if args.set_epoch:  # accelerate counts the loader's passes from 0 in each process
            data.set_epoch(first_epoch)
    for epoch in range(first_epoch, args.epochs):
        for ids, x in data:
            record(work, epoch, step, ids, args.kill_at)
            loss = model(x.float()).pow(2).mean()
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            step += 1
            accelerator.save_state(str(state))
            over = data.end_of_dataloader  # the epoch's last batch: resume at the next
            (work / "progress.json").write_text(json.dumps([epoch + over, step]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("framework", choices=["lightning", "accelerate"])
    parser.add_argument("pattern")
    parser.add_argument("work")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--kill-at", type=int)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--stepping", action="store_true")
    parser.add_argument("--guard", choices=["raise", "warn", "load"])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--set-epoch", action="store_true")
    parser.add_argument("--plain", action="store_true")  # accelerate's default loader
    parser.add_argument("--every", choices=["step", "epoch"], default="step")
    args = parser.parse_args()
    Path(args.work).mkdir(parents=True, exist_ok=True)
    (run_lightning if args.framework == "lightning" else run_accelerate)(args)


if __name__ == "__main__":
    main()


# -- for the tests: run the job, read what it trained on ---------------------------------------

JOB = Path(__file__)
SRC = JOB.resolve().parents[2] / "src"


def write_training_set(out: Path) -> str:
    """The set the jobs train on (40 instances ``(i, float32[4] of i)``, 3 shards of
    small chunks), written to ``out``; its pattern."""
    import numpy as np

    from recprep import convert

    convert(str(out), [(i, np.full(4, i, dtype=np.float32)) for i in range(40)], 3, "t",
            chunk_bytes=256, progress=False)
    return str(out / "t-*-of-*")


def start(framework: str, pattern: str, work: Path, *options: str) -> subprocess.Popen[str]:
    """Start the job in a process of its own."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(SRC), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.Popen([sys.executable, str(JOB), framework, pattern, str(work), *options],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def finish(job: subprocess.Popen[str], timeout: float = 300
           ) -> subprocess.CompletedProcess[str]:
    """Wait for a job :func:`start` started to end (or its SIGKILL)."""
    out, err = job.communicate(timeout=timeout)
    return subprocess.CompletedProcess(job.args, job.returncode, out, err)


def launch(framework: str, pattern: str, work: Path, *options: str,
           timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the job to its end (or its SIGKILL) in a process of its own."""
    return finish(start(framework, pattern, work, *options), timeout)


def trained_on(work: Path) -> list[list[int]]:
    """The ids of each batch the runs in ``work`` trained on, in order, a resumed run's
    taking the place of what its killed run did after the checkpoint it resumed from."""
    lines = [json.loads(line) for line in (work / "seen.jsonl").read_text().splitlines()]
    kept: list[list[Any]] = []
    for line in lines:
        while kept and kept[-1][1] >= line[1]:  # a resumed run starts at its checkpoint
            kept.pop()
        kept.append(line)
    return [ids for _, _, ids in kept]
