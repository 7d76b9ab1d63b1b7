"""``recprep prepare`` on 2,000 small image files: 2 workers vs 1, and its overhead.

The raw directory is the MNIST example's (``examples/mnist``: nested folders of 28x28
``.npy`` images); the model file's function is timed in a bare loop over the same files
(the floor), then the whole job with 1 and 2 local worker processes.

Run: ``python benchmarks/bench_prepare.py [--files 2000]``; prints a markdown table.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples" / "mnist"))

from generate_raw import generate  # noqa: E402

from recprep import prepare  # noqa: E402

MODEL = ROOT / "examples" / "mnist" / "model.py"

#: the MNIST model file plus realistic preprocessing: augment with a blur, standardise
HEAVY = MODEL.read_text().replace(
    "    image = np.load(filename).astype(np.float32) / 255.0\n",
    "    image = np.load(filename).astype(np.float32) / 255.0\n"
    "    kernel = np.outer(np.hanning(28), np.hanning(28))\n"
    "    for _ in range(8):\n"
    "        image = np.real(np.fft.ifft2(np.fft.fft2(image) * np.fft.fft2(kernel)))\n"
    "    image = ((image - image.mean()) / (image.std() + 1e-6)).astype(np.float32)\n",
)


def bare_loop(raw: Path, model: Path) -> float:
    spec = importlib.util.spec_from_file_location("bench_model", model)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    files = sorted(str(p) for p in raw.rglob("*.npy"))
    started = time.perf_counter()
    for path in files:
        module.prepare_data_for_a_single_file(path)
    return time.perf_counter() - started


def job(raw: Path, out: Path, workers: int, model: Path) -> float:
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    prepare(str(model), str(raw), str(out), "local", num_workers=workers, num_shards=8,
            progress=False)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rp-bench-prepare-"))
    n = args.files
    print(f"{n} raw files (28x28 .npy) -> 8 shards, Example codec, snappy; 2 cores\n")
    print("| model file | run | seconds | files/s | per file (ms) |")
    print("|---|---|---:|---:|---:|")
    try:
        raw, out = work / "raw", work / "out"
        generate(str(raw), args.files, seed=1)
        heavy = work / "heavy_model.py"
        heavy.write_text(HEAVY)
        for label, model in [("mnist (np.load, scale)", MODEL),
                             ("mnist + blur/standardise", heavy)]:
            floor = min(bare_loop(raw, model) for _ in range(3))
            one = min(job(raw, out, 1, model) for _ in range(2))
            two = min(job(raw, out, 2, model) for _ in range(2))
            for name, seconds in [("bare loop over the function", floor),
                                  ("prepare, 1 worker", one), ("prepare, 2 workers", two)]:
                print(f"| {label} | {name} | {seconds:.2f} | {n / seconds:,.0f} "
                      f"| {1000 * seconds / n:.3f} |")
            print(f"| {label} | **2 workers vs 1** | {one / two:.2f}x | | |")
            print(f"| {label} | prepare's overhead per file (1 worker) | "
                  f"{1000 * (one - floor) / n:.3f} ms | | |")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\ntarget: 2 workers >= 1.6x 1 worker")


if __name__ == "__main__":
    main()
