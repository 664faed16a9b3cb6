"""Plots of evaluation metrics (matplotlib, optional: ``pip install 'spector-gpu[plot]'``).

Each function takes ``EvalResult.metrics`` (or its ``"configs"`` mapping) and an optional
``ax``; it draws into ``ax`` when given (e.g. from ``plt.subplots()`` in a notebook) and returns
the axes. With ``ax=None`` a new figure is made on the non-interactive Agg canvas — pyplot and
the global backend are never touched — save it with ``ax.figure.savefig(path)``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, cast

from ..errors import MissingExtraError

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["plot_recall_at_k", "plot_by_category", "save_plots"]

logger = logging.getLogger(__name__)


def _new_axes() -> "Axes":
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MissingExtraError(
            "plotting needs matplotlib; install it with: pip install 'spector-gpu[plot]'"
        ) from exc
    fig = Figure(figsize=(7.0, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    return fig.add_subplot()


def _configs(metrics: Mapping[str, Any]) -> Mapping[str, Mapping[str, Any]]:
    return metrics.get("configs", metrics)


def _ks(entry: Mapping[str, Any], prefix: str) -> list[int]:
    return sorted(int(key.split("@")[1]) for key in entry if key.startswith(f"{prefix}@"))


def plot_recall_at_k(metrics: Mapping[str, Any], ax: "Axes | None" = None) -> "Axes":
    """Recall@k against k, one line per configuration (overall means, categories 1–4)."""
    ax = _new_axes() if ax is None else ax
    all_ks: set[int] = set()
    for name, entry in _configs(metrics).items():
        ks = [k for k in _ks(entry, "recall") if entry[f"recall@{k}"] is not None]
        ax.plot(ks, [entry[f"recall@{k}"] for k in ks], marker="o", label=name)
        all_ks.update(ks)
    ax.set_xticks(sorted(all_ks))
    ax.set_xlabel("k (memories returned)")
    ax.set_ylabel("recall@k (mean over questions)")
    ax.set_ylim(0.0, 1.02)
    ax.set_title("Recall@k by configuration")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    return ax


def plot_by_category(
    metrics: Mapping[str, Any], ax: "Axes | None" = None, *, metric: str | None = None
) -> "Axes":
    """Grouped bars of ``metric`` (default ``recall@10``, else the largest recall@k) per
    question category (5 included when present), one bar per configuration."""
    ax = _new_axes() if ax is None else ax
    configs = _configs(metrics)
    if metric is None:
        ks = _ks(next(iter(configs.values()), {}), "recall")
        metric = "recall@10" if 10 in ks or not ks else f"recall@{ks[-1]}"
    cats = sorted({c for e in configs.values() for c in e.get("by_category", {})}, key=int)
    if any(e.get("category_5", {}).get("n_questions") for e in configs.values()):
        cats.append("5")
    width = 0.8 / max(1, len(configs))
    for i, (name, entry) in enumerate(configs.items()):
        values = []
        for c in cats:
            if c == "5":
                sub = entry.get("category_5", {})
            else:
                sub = entry.get("by_category", {}).get(c, {})
            values.append(sub.get(metric) or 0.0)
        ax.bar([j + i * width for j in range(len(cats))], values, width=width, label=name)
    ax.set_xticks([j + width * (len(configs) - 1) / 2 for j in range(len(cats))])
    ax.set_xticklabels([f"cat {c}" + (" (adv.)" if c == "5" else "") for c in cats])
    ax.set_ylabel(metric)
    ax.set_ylim(0.0, 1.02)
    ax.set_title(f"{metric} by question category")
    ax.legend(fontsize="small")
    return ax


def save_plots(metrics: Mapping[str, Any], out_dir: str | Path) -> list[Path]:
    """Write ``recall_at_k.png`` and ``recall_by_category.png`` into ``out_dir``; raises
    ``MissingExtraError`` without matplotlib. Returns the paths."""
    out = Path(out_dir)
    paths = []
    drawers = (("recall_at_k.png", plot_recall_at_k), ("recall_by_category.png", plot_by_category))
    for filename, draw in drawers:
        ax = draw(metrics)
        path = out / filename
        cast("Figure", ax.figure).savefig(path, dpi=100)
        paths.append(path)
    return paths
