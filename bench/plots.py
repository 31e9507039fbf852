"""The report's PNG plots (matplotlib, Agg backend: no display needed). Each figure's title
names its command, so an image read on its own still says how it was made."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from bench.render import E2E_COLUMNS

STYLE = {"ckptlog": "C0-", "ckptlog-apply": "C2-", "ray-bare": "C1--", "ray": "C3--"}
LABEL = {
    "ckptlog": "ckptlog fold",
    "ckptlog-apply": "ckptlog Fold.apply",
    "ray-bare": "Ray bookkeeping",
    "ray": "Ray as shipped",
}


def draw(results: dict[str, Any], img: Path) -> dict[str, str]:
    """Section name -> file name, for every section with results."""
    out = {}
    for name, (file, plot) in PLOTS.items():
        if name not in results:
            continue
        fig = plot(results[name]["data"])
        fig.suptitle(results[name]["command"], fontsize=8, y=0.995)
        fig.savefig(img / file, dpi=110, bbox_inches="tight")
        plt.close(fig)
        out[name] = file
    return out


def ray_plot(data: dict[str, list[dict[str, Any]]]) -> Figure:
    fig, axes = plt.subplots(2, len(data), figsize=(6 * len(data), 8), squeeze=False)
    for col, (keep, passes) in enumerate(data.items()):
        seen = set()
        for p in passes:
            if p["side"] in seen or not p["points"]:
                continue  # the fold's second pass (drift check) is in the tables, not the plot
            seen.add(p["side"])
            xs = [pt["reports"] for pt in p["points"]]
            axes[0][col].plot(
                xs,
                [pt["reports"] / pt["seconds"] for pt in p["points"]],
                STYLE[p["side"]],
                marker="o",
                label=LABEL[p["side"]],
            )
            axes[1][col].plot(
                xs, [pt["marginal_us"] for pt in p["points"]], STYLE[p["side"]], marker="o", label=LABEL[p["side"]]
            )
            if p.get("stopped_at"):
                axes[1][col].plot([p["stopped_at"]], [p["last_us"]], "x", color=STYLE[p["side"]][:2], markersize=10)
        _axes(axes[0][col], f"keep={keep}: throughput", "reports in the log", "reports/s (whole prefix)")
        _axes(
            axes[1][col],
            f"keep={keep}: cost per report at that size (x: budget spent)",
            "reports in the log",
            "µs per report",
        )
    return fig


def _axes(ax: Axes, title: str, xlabel: str, ylabel: str, logy: bool = True) -> None:
    ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


def e2e_plot(data: list[list[dict[str, Any]]]) -> Figure:
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    labels = E2E_COLUMNS
    for ax, workload in zip(axes, ("dense", "sparse"), strict=True):
        rows = [w for run in data for w in run if w["workload"] == workload]
        width = 0.8 / len(labels)
        for i, label in enumerate(labels):
            ratios = [w[label] / w["bare"] for w in rows if label in w]
            ax.bar([r + i * width for r in range(len(ratios))], ratios, width, label=label)
        ax.axhline(0.5, color="red", linestyle="--", linewidth=1, label="target 0.5×")
        ax.axhline(0.8, color="green", linestyle=":", linewidth=1, label="goal 0.8×")
        ax.set_xticks([r + width for r in range(len(rows))], [f"run {r + 1}" for r in range(len(rows))])
        ax.set_title(f"{workload}: processor ÷ bare aiokafka loop (same run)", fontsize=10)
        ax.set_ylabel("ratio to the bare loop")
        ax.legend(fontsize=7)
    return fig


def latency_plot(data: list[dict[str, float]]) -> Figure:
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    rates = [r["rate"] for r in data]
    for key, style in (("p50", "C0-o"), ("p99", "C3-o"), ("max", "C7:")):
        ax.plot(rates, [r[key] * 1e3 for r in data], style, label=key)
    ax.axhline(150, color="red", linestyle="--", linewidth=1, label="target p99 at 1,000/s")
    ax.set_xscale("log")
    ax.set_xticks(rates, [f"{r:,}" for r in rates])
    ax.set_title("report → committed watermark, exactly_once", fontsize=10)
    ax.set_xlabel("reports/s")
    ax.set_ylabel("ms")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def recovery_plot(data: dict[str, list[dict[str, float]]]) -> Figure:
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, part, x in zip(axes, ("history", "intervals"), ("history", "snapshot_every"), strict=True):
        rows = sorted(data[part], key=lambda r: r[x])
        xs = [r[x] for r in rows]
        ax.plot(xs, [r["new_process"] for r in rows], "C3-o", label="new process (spawn → caught up)")
        ax.plot(xs, [r["in_process"] for r in rows], "C0-o", label="in-process")
        _axes(
            ax,
            f"restart after SIGKILL against {x.replace('_', ' ')}",
            f"{x.replace('_', ' ')} (events)",
            "seconds",
            logy=False,
        )
        ax.set_ylim(bottom=0)
    return fig


def partitions_plot(data: list[dict[str, Any]]) -> Figure:
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for n, color in ((1, "C0"), (2, "C1")):
        rates = [r["rate"] for r in data if r["instances"] == n]
        ax.bar([i * 3 + n for i in range(len(rates))], rates, color=color, label=f"{n} process(es)")
    ax.set_title("4 input partitions, dense workload, exactly_once", fontsize=10)
    ax.set_ylabel("events/s, resume → committed")
    ax.set_xticks([])
    ax.legend(fontsize=8)
    return fig


PLOTS: dict[str, tuple[str, Callable[[Any], Figure]]] = {
    "ray": ("fold_vs_ray.png", ray_plot),
    "e2e": ("e2e_vs_bare.png", e2e_plot),
    "latency": ("latency_vs_rate.png", latency_plot),
    "recovery": ("recovery_vs_history.png", recovery_plot),
    "partitions": ("partitions.png", partitions_plot),
}
