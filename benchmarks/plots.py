"""Plots of the benchmark results, for the documentation's Performance page.

    python benchmarks/plots.py [--results benchmarks] [--out docs/img]   (or: make plots)

Reads the markdown tables of ``benchmarks/RESULTS.md``, ``RESULTS-reading.md``,
``RESULTS-columnar.md`` and ``RESULTS-storage.md`` (what ``bench_core.py``,
``bench_reading.py``, ``bench_columnar.py`` and ``bench_storage.py`` write with
``--out``) and writes one PNG per figure into
``docs/img/``. Rerun it after a benchmark run; the PNGs are committed with the results.
Only the tables are read, so the plots always show the figures of the results files.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: Sized for the page that shows them. The docs theme's content column is about 690 CSS px
#: wide (Material, 1280 px screen): a figure WIDTH_IN wide fills it at 100 px per inch, so
#: a point there is 100/72 px and the smallest text, MIN_FONT_PT, renders at 12.5 px.
#: Saved at DPI (2 px per CSS px) for sharp HiDPI screens and for the full-size view the
#: site links each plot to. Panels are stacked rather than side by side where their labels
#: are long, so nothing is shrunk to fit.
COLUMN_PX = 690
WIDTH_IN = 6.9
DPI = 200
MIN_FONT_PT = 9
STYLE = {
    "figure.dpi": 100, "savefig.dpi": DPI, "font.size": 10, "axes.titlesize": 10,
    "axes.labelsize": 10, "xtick.labelsize": MIN_FONT_PT, "ytick.labelsize": MIN_FONT_PT,
    "legend.fontsize": MIN_FONT_PT, "figure.titlesize": 11, "svg.hashsalt": "recprep",
}
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


@dataclass
class Table:
    """One markdown table: the heading it sits under, its column names and its rows."""

    heading: str
    columns: list[str]
    rows: list[dict[str, str]]

    def number(self, row: dict[str, str], column: str) -> float:
        """The first number in a cell (``'1,024 KiB (default)'`` -> 1024.0)."""
        match = _NUMBER.search(row[column].replace("**", ""))
        if match is None:
            raise ValueError(f"{self.heading!r}: no number in column {column!r}: {row[column]!r}")
        return float(match.group(0).replace(",", ""))


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def parse_tables(text: str) -> list[Table]:
    """Every table of a markdown document, with the heading above it ('' if none)."""
    tables: list[Table] = []
    heading, in_fence = "", False
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        elif not in_fence and (match := _HEADING.match(line)):
            heading = match.group(2)
        elif (not in_fence and line.lstrip().startswith("|") and index + 1 < len(lines)
              and set(lines[index + 1].replace("|", "").strip()) <= set("-: ")
              and lines[index + 1].strip().startswith("|")):
            columns = _cells(line)
            rows = []
            index += 2
            while index < len(lines) and lines[index].lstrip().startswith("|"):
                rows.append(dict(zip(columns, _cells(lines[index]), strict=True)))
                index += 1
            tables.append(Table(heading, columns, rows))
            continue
        index += 1
    return tables


def find_table(tables: list[Table], heading: str, column: str | None = None) -> Table:
    """The first table under a heading that starts with ``heading`` (and has ``column``)."""
    for table in tables:
        if table.heading.startswith(heading) and (column is None or column in table.columns):
            return table
    raise LookupError(f"no table under a heading starting with {heading!r}"
                      + (f" with a column {column!r}" if column else ""))


def _short(label: str) -> str:
    label = label.replace("`", "").replace("**", "")
    for long, short in (("floor: pickle + length + write", "floor (pickle + write)"),
                        ("floor: file read + pickle.loads", "floor (read + pickle.loads)"),
                        ("recprep convert, ", "recprep, "),
                        ("pyrecordio 0.0.4 Writer, 1 MiB chunks, snappy", "pyrecordio 0.0.4"),
                        ("RecordIO, recprep codec, snappy (the defaults)", "RecordIO defaults"),
                        ("RecordIO, recprep codec, no compression", "RecordIO, no compression"),
                        ("RecordIO, pickle codec (the floor's decoder), no compression",
                         "RecordIO, pickle codec")):
        label = label.replace(long, short)
    return label


# -- the figures ------------------------------------------------------------------------------


def plot_core(tables: list[Table], plt) -> object:
    fig, axes = plt.subplots(2, 1, figsize=(WIDTH_IN, 6.4))
    for ax, heading, title in ((axes[0], "A:", "A: MNIST-like, 20,000 x (float64[784], int)"),
                               (axes[1], "B:", "B: 200,000 small tuples (int, float, str)")):
        table = find_table(tables, heading, "write inst/s")
        labels = [_short(row["path"]) for row in table.rows]
        ys = range(len(labels))
        write = [table.number(row, "write inst/s") / 1000 for row in table.rows]
        read = [table.number(row, "read inst/s") / 1000 for row in table.rows]
        ax.barh([y - 0.2 for y in ys], write, height=0.4, label="write")
        ax.barh([y + 0.2 for y in ys], read, height=0.4, label="read")
        ax.set_yticks(list(ys), labels)
        ax.invert_yaxis()
        ax.set_xlabel("thousand instances / s (higher is better)")
        ax.set_title(title)
        ax.grid(axis="x", alpha=0.3)
    axes[0].legend(loc="lower right")
    fig.suptitle("Core: convert and read, 10 shards, local disk\n(benchmarks/RESULTS.md)")
    return fig


def plot_chunk_sizes(tables: list[Table], plt) -> object:
    table = find_table(tables, "Chunk size sweep", "chunk_bytes")
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH_IN, 3.6))
    for ax, data_set in zip(axes, ("A", "B"), strict=True):
        rows = [row for row in table.rows if row["data set"] == data_set]
        kib = [table.number(row, "chunk_bytes") for row in rows]
        for column, label in (("write inst/s", "write"), ("read inst/s", "read")):
            ax.plot(kib, [table.number(row, column) / 1000 for row in rows], marker="o",
                    label=label)
        ax.set_xscale("log", base=2)
        ax.set_xticks(kib, [f"{int(k)}" for k in kib])
        ax.set_xlabel("chunk_bytes (KiB)")
        ax.set_ylabel("thousand instances / s")
        ax.set_title(f"set {data_set}")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    axes[0].legend(loc="lower right")
    fig.suptitle("Chunk size: throughput by chunk_bytes\n(benchmarks/RESULTS.md)")
    return fig


def plot_reading(tables: list[Table], plt) -> object:
    throughput = find_table(tables, "Read + decode throughput", "x floor")
    stall = find_table(tables, "A training loop", "input stall ms")
    remote = find_table(tables, "Simulated remote storage", "instances/s")
    fig, axes = plt.subplots(3, 1, figsize=(WIDTH_IN, 9.2))

    configs: dict[str, dict[int, float]] = {}
    for row in throughput.rows:
        match = re.search(r"num_threads=(\d+)", row["reader"])
        if match is None:
            continue
        name = _short(row["reader"].split(", num_threads")[0])
        configs.setdefault(name, {})[int(match.group(1))] = throughput.number(row, "x floor")
    for name, by_threads in configs.items():
        threads = sorted(by_threads)
        axes[0].plot([str(t) for t in threads], [by_threads[t] for t in threads], marker="o",
                     label=name)
    axes[0].axhline(1.0, color="grey", linestyle="--", linewidth=1)
    axes[0].text(0, 1.0, " floor (read + pickle.loads)", va="bottom", color="grey")
    top = max(v for by_threads in configs.values() for v in by_threads.values())
    axes[0].set_ylim(0, max(1.15, top * 1.15))
    axes[0].set_xlabel("num_threads")
    axes[0].set_ylabel("throughput, x floor")
    axes[0].set_title("local disk, the loop only reads")
    axes[0].legend(loc="lower left")

    for ax, table, column, xlabel, title in (
        (axes[1], stall, "input stall ms", "input stall, ms (lower is better)",
         "training loop: 2 ms GIL-free step / 128"),
        (axes[2], remote, "instances/s", "thousand instances / s (higher is better)",
         "remote storage: 20 ms per request"),
    ):
        labels = [_short(row["reader"]) for row in table.rows]
        values = [table.number(row, column) for row in table.rows]
        if column == "instances/s":
            values = [v / 1000 for v in values]
        ax.barh(range(len(labels)), values, color="tab:green")
        ax.set_yticks(range(len(labels)), labels)
        ax.invert_yaxis()
        ax.set_xlabel(xlabel)
        ax.set_title(title)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle("Reading: background threads (benchmarks/RESULTS-reading.md)")
    return fig


def plot_batches(tables: list[Table], plt) -> object:
    table = find_table(tables, "Batches", "x floor")
    sizes = find_table(tables, "Chunk size", "batches")
    fig, axes = plt.subplots(2, 1, figsize=(WIDTH_IN, 6.4))
    workloads = list(dict.fromkeys(row["workload"] for row in table.rows))
    readers = list(dict.fromkeys(row["reader"] for row in table.rows))
    width = 0.8 / len(readers)
    for k, reader in enumerate(readers):
        values = [next(table.number(row, "x floor") for row in table.rows
                       if row["workload"] == w and row["reader"] == reader) for w in workloads]
        bars = axes[0].bar([i + (k - (len(readers) - 1) / 2) * width
                            for i in range(len(workloads))], values, width=width,
                           label=_short(reader))
        axes[0].bar_label(bars, [f"{v:.2f}x" for v in values], padding=2,
                          fontsize=MIN_FONT_PT)
    axes[0].set_xticks(range(len(workloads)), workloads)
    axes[0].set_ylim(0, max(table.number(row, "x floor") for row in table.rows) * 1.2)
    axes[0].axhline(1.0, color="grey", linestyle="--", linewidth=1)
    axes[0].set_ylabel("instances / s, x floor")
    axes[0].set_title("read() and batches(256) against a pickle.loads loop")
    axes[0].legend(loc="upper right")
    labels = [_short(row["chunk_bytes"]) for row in sizes.rows]
    for k, column in enumerate(("write", "read()", "batches")):
        values = [sizes.number(row, column) / 1000 for row in sizes.rows]
        axes[1].barh([y + (k - 1) * 0.27 for y in range(len(labels))], values, height=0.27,
                     label=column)
    axes[1].set_yticks(range(len(labels)), labels)
    axes[1].invert_yaxis()
    axes[1].set_xlabel("thousand instances / s (higher is better)")
    axes[1].set_title("MNIST-like, by chunk_bytes")
    axes[1].legend(loc="lower right")
    axes[1].grid(axis="x", alpha=0.3)
    fig.suptitle("Batches from whole chunks (benchmarks/RESULTS-reading.md)")
    return fig


def plot_arrow(tables: list[Table], plt) -> object:
    # the last run of bench_columnar --part arrow (its tables alone have an "x floor"
    # column), whatever section it is in
    table = find_table(tables[::-1], "", "x floor")
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 3.8))
    sets = list(dict.fromkeys(row["set"] for row in table.rows))
    shown = [("`batches(256)`, without the C kernels", "batches(256), numpy alone"),
             ("`batches(256)`", "batches(256)"),
             ('`batches(256, format="arrow")`, without the C kernels', "Arrow, numpy alone"),
             ('`batches(256, format="arrow")`', "Arrow")]
    width = 0.8 / len(shown)
    for k, (contender, label) in enumerate(shown):
        values = [next(table.number(row, "x floor") for row in table.rows
                       if row["set"] == name and row["contender"] == contender)
                  for name in sets]
        bars = ax.bar([i + (k - (len(shown) - 1) / 2) * width for i in range(len(sets))],
                      values, width=width, label=label)
        ax.bar_label(bars, [f"{v:.2f}x" for v in values], padding=2, fontsize=MIN_FONT_PT)
    ax.set_xticks(range(len(sets)), sets)
    ax.set_ylim(0, max(table.number(row, "x floor") for row in table.rows
                       if not row["contender"].startswith("part")) * 1.25)
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.set_ylabel("instances / s, x floor")
    ax.legend(loc="upper right")
    fig.suptitle("Batches of 256, numpy and Arrow, with and without the C kernels\n"
                 "(benchmarks/RESULTS-columnar.md)")
    return fig


def plot_storage(tables: list[Table], plt) -> object:
    table = find_table(tables, "", "MB/s")
    labels = [_short(row["operation"]) for row in table.rows]
    values = [table.number(row, "MB/s") for row in table.rows]
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 3.2))
    bars = ax.barh(range(len(labels)), values, color="tab:purple")
    ax.bar_label(bars, [f"{v:,.0f} MB/s" for v in values], padding=3, fontsize=MIN_FONT_PT)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xlim(0, max(values) * 1.25)
    ax.set_xlabel("MB / s (higher is better)")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title("S3 (moto on loopback) and local disk: 500 MB in 10 shards\n"
                 "(benchmarks/RESULTS-storage.md)")
    return fig


def plot_network(tables: list[Table], plt) -> object:
    """MB/s per contender, epoch 1 and epoch 2, one panel per link setting (the tables
    under ``Network: ...`` headings, as ``bench_storage.py --network`` writes them)."""
    settings = [t for t in tables if t.heading.startswith("Network:")
                and "epoch 1 MB/s" in t.columns]
    if not settings:
        raise LookupError("no table under a heading starting with 'Network:'")
    fig, axes = plt.subplots(len(settings), 1, figsize=(WIDTH_IN, 2.9 * len(settings)),
                             squeeze=False)
    for ax, table in zip(axes[:, 0], settings, strict=True):
        labels = [_short(row["contender"]) for row in table.rows]
        for k, (column, label) in enumerate((("epoch 1 MB/s", "epoch 1"),
                                             ("epoch 2 MB/s", "epoch 2"))):
            values = [table.number(row, column) if _NUMBER.search(row[column]) else 0.0
                      for row in table.rows]
            bars = ax.barh([y + (k - 0.5) * 0.4 for y in range(len(labels))], values,
                           height=0.4, label=label)
            ax.bar_label(bars, [f"{v:.0f}" if v else "" for v in values], padding=2,
                         fontsize=MIN_FONT_PT)
        ax.set_yticks(range(len(labels)), labels)
        ax.invert_yaxis()
        link = _NUMBER.findall(table.heading)  # delay, per connection, link
        if len(link) >= 3:
            ax.axvline(float(link[2]), color="black", linewidth=1, linestyle="--")
            ax.annotate("the link", (float(link[2]), -0.55), fontsize=MIN_FONT_PT,
                        xytext=(3, 0), textcoords="offset points")
        ax.set_xscale("log")  # epoch 2 reads local copies: orders of magnitude apart
        ax.set_xlabel("MB / s, log scale (higher is better)")
        ax.set_title(table.heading.removeprefix("Network: "))
        ax.grid(axis="x", alpha=0.3)
        ax.legend(loc="upper right")
    fig.suptitle("Reading from S3 through an emulated link (bench_storage.py --network)")
    return fig


def draw_network(report: str, target: Path) -> None:
    """Draw :func:`plot_network` of a ``--network`` report's tables into ``target``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(STYLE)
    fig = plot_network(parse_tables(report), plt)
    fig.tight_layout()
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, metadata={"Software": None})
    plt.close(fig)


#: output file -> (results file, figure function)
FIGURES = {
    "bench-core.png": ("RESULTS.md", plot_core),
    "bench-chunk-size.png": ("RESULTS.md", plot_chunk_sizes),
    "bench-reading.png": ("RESULTS-reading.md", plot_reading),
    "bench-batches.png": ("RESULTS-reading.md", plot_batches),
    "bench-arrow.png": ("RESULTS-columnar.md", plot_arrow),
    "bench-storage.png": ("RESULTS-storage.md", plot_storage),
    "bench-network.png": ("RESULTS-storage.md", plot_network),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=HERE,
                        help="the folder holding RESULTS*.md (default: benchmarks/)")
    parser.add_argument("--out", type=Path, default=HERE.parent / "docs" / "img",
                        help="where the PNGs go (default: docs/img/)")
    args = parser.parse_args(argv)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(STYLE)
    args.out.mkdir(parents=True, exist_ok=True)
    parsed: dict[str, list[Table]] = {}
    for name, (results, figure) in FIGURES.items():
        if results not in parsed:
            parsed[results] = parse_tables((args.results / results).read_text(encoding="utf-8"))
        fig = figure(parsed[results], plt)
        fig.tight_layout()
        target = args.out / name
        # no Software/date metadata: the same tables give the same bytes
        fig.savefig(target, metadata={"Software": None})
        plt.close(fig)
        print(f"wrote {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
