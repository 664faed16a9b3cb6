"""Plots of evaluation metrics (matplotlib, optional: ``pip install 'spector-gpu[plot]'``).

Each function takes ``EvalResult.metrics`` (or its ``"configs"`` mapping) and an optional
``ax``; it draws into ``ax`` when given (e.g. from ``plt.subplots()`` in a notebook) and returns
the axes. With ``ax=None`` a new figure is made on the non-interactive Agg canvas — pyplot and
the global backend are never touched — save it with ``ax.figure.savefig(path)``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..errors import MissingExtraError
from ..paths import output_path

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["plot_by_category", "plot_by_type", "plot_recall_at_k", "save_plots"]

logger = logging.getLogger(__name__)


def _new_axes() -> Axes:
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
    configs: Mapping[str, Mapping[str, Any]] = metrics.get("configs", metrics)
    return configs


def _ks(entry: Mapping[str, Any], prefix: str) -> list[int]:
    return sorted(int(key.split("@")[1]) for key in entry if key.startswith(f"{prefix}@"))


def plot_recall_at_k(
    metrics: Mapping[str, Any], ax: Axes | None = None, *, metric: str = "recall"
) -> Axes:
    """``<metric>@k`` against k, one line per configuration (overall means): ``"recall"``
    (LoCoMo, categories 1–4) or a LongMemEval key such as ``"session/recall_all"``."""
    ax = _new_axes() if ax is None else ax
    all_ks: set[int] = set()
    for name, entry in _configs(metrics).items():
        ks = [k for k in _ks(entry, metric) if entry[f"{metric}@{k}"] is not None]
        ax.plot(ks, [entry[f"{metric}@{k}"] for k in ks], marker="o", label=name)
        all_ks.update(ks)
    ax.set_xticks(sorted(all_ks))
    ax.set_xlabel("k (cut-off)")
    ax.set_ylabel(f"{metric}@k (mean over questions)")
    ax.set_ylim(0.0, 1.02)
    ax.set_title(f"{metric}@k by configuration")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    return ax


def plot_by_category(
    metrics: Mapping[str, Any], ax: Axes | None = None, *, metric: str | None = None
) -> Axes:
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


def plot_by_type(
    metrics: Mapping[str, Any], ax: Axes | None = None, *, metric: str = "session/recall_all@10"
) -> Axes:
    """Grouped bars of ``metric`` per LongMemEval ``question_type`` (``by_type``), one bar per
    configuration; the tick labels carry the number of scored questions."""
    ax = _new_axes() if ax is None else ax
    configs = _configs(metrics)
    types = sorted({t for e in configs.values() for t in e.get("by_type", {})})
    first = next(iter(configs.values()), {}).get("by_type", {})
    width = 0.8 / max(1, len(configs))
    for i, (name, entry) in enumerate(configs.items()):
        subs = [entry.get("by_type", {}).get(t, {}) for t in types]
        values = [sub.get(metric) or 0.0 for sub in subs]
        ax.bar([j + i * width for j in range(len(types))], values, width=width, label=name)
    ax.set_xticks([j + width * (len(configs) - 1) / 2 for j in range(len(types))])
    labels = [f"{t}\n(n={first.get(t, {}).get('n_scored', 0)})" for t in types]
    ax.set_xticklabels(labels, fontsize="small", rotation=20)
    ax.set_ylabel(metric)
    ax.set_ylim(0.0, 1.02)
    ax.set_title(f"{metric} by question type")
    ax.legend(fontsize="small")
    return ax


def _drawers(metrics: Mapping[str, Any]) -> list[tuple[str, Any]]:
    if not any("by_type" in e for e in _configs(metrics).values()):
        return [("recall_at_k.png", plot_recall_at_k), ("recall_by_category.png", plot_by_category)]
    return [
        ("session_recall_all_at_k.png", lambda m: plot_recall_at_k(m, metric="session/recall_all")),
        ("turn_recall_all_at_k.png", lambda m: plot_recall_at_k(m, metric="turn/recall_all")),
        ("session_recall_all_by_type.png", plot_by_type),
    ]


def save_plots(metrics: Mapping[str, Any], out_dir: str | Path) -> list[Path]:
    """Write the plots into ``out_dir``: ``recall_at_k.png`` and ``recall_by_category.png``
    (qrels metrics), or for LongMemEval ``session_recall_all_at_k.png``,
    ``turn_recall_all_at_k.png`` and ``session_recall_all_by_type.png``. Raises
    ``MissingExtraError`` without matplotlib. Returns the paths."""
    out = output_path(out_dir, "out_dir")
    paths = []
    for filename, draw in _drawers(metrics):
        ax = draw(metrics)
        path = out / filename
        cast("Figure", ax.figure).savefig(path, dpi=100)
        paths.append(path)
    return paths
