#!/usr/bin/python3
"""Draws the documentation's performance plots from the benchmarks' own
output (benchmarks/results/*.txt: the tables `bazel run //benchmarks:...`
printed, with the command on the first line) with Debian's matplotlib:

    /usr/bin/python3 scripts/make_plots.py [OUT_DIR]   # default docs/img

Each plot is an SVG whose bytes depend only on the input tables (a fixed
hash salt, no date), so //tests/docs:docs_test can check that the committed
images are what this script draws from the committed figures."""

import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")

plt.rcParams.update({
    "svg.hashsalt": "lockstep",
    "svg.fonttype": "path",
    "font.size": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
})
COLORS = {"lockstep": "#1f6fb4", "pytorch": "#e07b28", "gloo": "#e07b28",
          "mpi": "#5a9e4b"}


def table(name):
    """(command, [row dicts]) of a results file: the first '#' line is the
    command; the header names the columns (split on 2+ spaces, as names
    hold spaces: "lockstep GB/s"); a row's values split on spaces, a
    number and its unit ("16 MiB", "205 us") kept as one value."""
    path = os.path.join(RESULTS, name)
    with open(path) as f:
        lines = [l.rstrip("\n") for l in f if l.strip()]
    command = lines[0].lstrip("# ").strip()
    body = [l for l in lines if not l.startswith("#")]
    header = re.split(r"\s{2,}", body[0].strip())
    rows = []
    for line in body[1:]:
        joined = re.sub(r"(\d[\d.,]*) (KiB|MiB|GiB|us|ms|s)\b", r"\1_\2",
                        line.strip())
        cells = [c.replace("_", " ") for c in joined.split()]
        if len(cells) < len(header):
            raise SystemExit(f"{path}: a row with {len(cells)} cells under "
                             f"{len(header)} columns: {line!r}")
        rows.append(dict(zip(header, cells)))
    return command, rows


def number(text):
    return float(text.replace(",", "").rstrip("x"))


def mib(size):
    """'4 KiB' / '16 MiB' -> MiB."""
    value, unit = size.split()
    return float(value) * {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024}[unit]


def save(fig, out_dir, name, command):
    fig.text(0.01, 0.005, command, fontsize=6, color="#555555")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    path = os.path.join(out_dir, name)
    fig.savefig(path, format="svg", metadata={"Date": None})
    plt.close(fig)
    return path


def train_vs_pytorch(out_dir):
    command, rows = table("train_vs_pytorch_cpu.txt")
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    labels = [f"{r['model']}, {r['threads']} thread"
              + ("s" if r["threads"] != "1" else "") for r in rows]
    xs = range(len(rows))
    width = 0.38
    ax.bar([x - width / 2 for x in xs],
           [number(r["lockstep samples/s"]) for r in rows], width,
           label="lockstep", color=COLORS["lockstep"])
    ax.bar([x + width / 2 for x in xs],
           [number(r["pytorch samples/s"]) for r in rows], width,
           label="PyTorch 1.13", color=COLORS["pytorch"])
    for x, r in zip(xs, rows):
        ax.annotate(r["ratio"], (x, number(r["lockstep samples/s"])),
                    ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels)
    ax.set_yscale("log")
    ax.set_ylabel("training samples/s (log)")
    ax.set_title("One process on the CPU, batch 64: lockstep beside PyTorch")
    ax.legend()
    return save(fig, out_dir, "train_vs_pytorch_cpu.svg", command)


def allreduce_loopback(out_dir):
    command, rows = table("allreduce_loopback.txt")
    fig, axes = plt.subplots(1, 2, figsize=(7.2, 3.0), sharey=True)
    for ax, world in zip(axes, ("2", "4")):
        sel = [r for r in rows if r["world"] == world]
        sizes = [mib(r["size"]) for r in sel]
        for system, column in (("lockstep", "lockstep GB/s"),
                               ("gloo", "gloo GB/s")):
            ax.plot(sizes, [number(r[column]) for r in sel], marker="o",
                    label="lockstep (gRPC ring)" if system == "lockstep"
                    else "Gloo", color=COLORS[system])
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (MiB, log)")
        ax.set_title(f"world {world}, loopback, 2 cores")
    axes[0].set_ylabel("bus bandwidth GB/s")
    axes[0].legend()
    return save(fig, out_dir, "allreduce_loopback.svg", command)


def allreduce_links(out_dir):
    command, rows = table("allreduce_links.txt")
    links = ("1gbit", "10gbit")
    fig, axes = plt.subplots(2, 2, figsize=(7.2, 5.2), sharex=True)
    for i, link in enumerate(links):
        for j, world in enumerate(("2", "4")):
            ax = axes[i][j]
            sel = [r for r in rows if r["link"] == link and r["world"] == world]
            sizes = [mib(r["size"]) for r in sel]
            for system, column, label in (
                    ("lockstep", "lockstep GB/s", "lockstep (gRPC ring)"),
                    ("gloo", "gloo GB/s", "Gloo"),
                    ("mpi", "mpi GB/s", "Open MPI")):
                ax.plot(sizes, [number(r[column]) for r in sel], marker="o",
                        label=label, color=COLORS[system])
            line_rate = 0.125 if link == "1gbit" else 1.25
            ax.axhline(line_rate, color="#999999", linestyle="--",
                       linewidth=0.8)
            ax.set_xscale("log", base=2)
            ax.set_ylim(bottom=0)
            ax.set_title(f"{link.replace('gbit', ' Gbit/s')}, world {world}"
                         " (dashed: the line rate)")
            if i == 1:
                ax.set_xlabel("message size (MiB, log)")
            if j == 0:
                ax.set_ylabel("bus bandwidth GB/s")
    axes[0][0].legend()
    return save(fig, out_dir, "allreduce_links.svg", command)


PLOTS = (train_vs_pytorch, allreduce_loopback, allreduce_links)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        ROOT, "docs", "img")
    os.makedirs(out_dir, exist_ok=True)
    for plot in PLOTS:
        print(plot(out_dir))


if __name__ == "__main__":
    main()
