"""Plots of evaluation metrics (matplotlib, optional: ``pip install 'spector-gpu[plot]'``).

Each function takes ``EvalResult.metrics`` (or its ``"configs"`` mapping) and an optional
``ax``; it draws into ``ax`` when given (e.g. from ``plt.subplots()`` in a notebook) and returns
the axes. With ``ax=None`` a new figure is made on the non-interactive Agg canvas — pyplot and
the global backend are never touched — save it with ``ax.figure.savefig(path)``.

Every configuration keeps one style across the plots (:func:`config_style`: colour, marker and
line style for lines, colour and hatch for bars), distinct for up to 40 configurations, and
the legend sits outside the axes, beside the data it names.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..errors import MissingExtraError
from .records import CATEGORY_NAMES

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["config_style", "plot_by_category", "plot_by_type", "plot_recall_at_k", "save_plots"]

logger = logging.getLogger(__name__)

# matplotlib's tab10 colours, then the same ten again with other markers, dashes and hatches:
# the i-th configuration's (colour, marker) and (colour, hatch) pairs are distinct for i < 40.
_COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
_MARKERS = ("o", "s", "^", "D")
_LINES = ("-", "--", "-.", ":")
_HATCHES = ("", "//", "..", "xx")


def config_style(i: int) -> dict[str, dict[str, str]]:
    """The style of the ``i``-th configuration (0-based): ``{"line": plot kwargs, "bar": bar
    kwargs}``; no two of the first 40 share a line style or a bar style."""
    colour = _COLOURS[i % len(_COLOURS)]
    j = (i // len(_COLOURS)) % len(_MARKERS)
    return {
        "line": {"color": colour, "marker": _MARKERS[j], "linestyle": _LINES[j]},
        "bar": {"color": colour, "hatch": _HATCHES[j], "edgecolor": "white"},
    }


def _dodge(configs: Mapping[str, Mapping[str, Any]], metric: str) -> float:
    """The x step between configurations' points at one k: together they span a third of the
    closest two cut-offs, so configurations with equal values stay visible side by side."""
    ks = sorted({k for e in configs.values() for k in _ks(e, metric)})
    gap = min((b - a for a, b in pairwise(ks)), default=1)
    return gap / 3 / max(1, len(configs))


def _legend(ax: Axes) -> None:
    """The legend to the right of the axes (never over the data)."""
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def _new_axes() -> Axes:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MissingExtraError(
            "plotting needs matplotlib; install it with: pip install 'spector-gpu[plot]'"
        ) from exc
    fig = Figure(figsize=(9.5, 4.8), layout="constrained")
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
    configs = _configs(metrics)
    shift = _dodge(configs, metric)
    for i, (name, entry) in enumerate(configs.items()):
        ks = [k for k in _ks(entry, metric) if entry[f"{metric}@{k}"] is not None]
        values = [entry[f"{metric}@{k}"] for k in ks]
        xs = [k + (i - (len(configs) - 1) / 2) * shift for k in ks]
        ax.plot(xs, values, label=name, markersize=5, **config_style(i)["line"])
        all_ks.update(ks)
    ax.set_xticks(sorted(all_ks))
    ax.set_xlabel("k (cut-off)")
    ax.set_ylabel(f"{metric}@k (mean over questions)")
    ax.set_ylim(0.0, 1.02)
    ax.set_title(f"{metric}@k by configuration")
    ax.grid(True, alpha=0.3)
    _legend(ax)
    return ax


def plot_by_category(
    metrics: Mapping[str, Any], ax: Axes | None = None, *, metric: str | None = None
) -> Axes:
    """Grouped bars of ``metric`` (default ``recall@10``, else the largest recall@k) per
    question category (5 included when present), one bar per configuration; categories are
    named as LoCoMo names them (``records.CATEGORY_NAMES``)."""
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
        xs = [j + i * width for j in range(len(cats))]
        ax.bar(xs, values, width=width, label=name, **config_style(i)["bar"])
    ax.set_xticks([j + width * (len(configs) - 1) / 2 for j in range(len(cats))])
    ax.set_xticklabels([_category(c) for c in cats])
    ax.set_ylabel(metric)
    ax.set_ylim(0.0, 1.02)
    ax.set_title(f"{metric} by question category")
    ax.grid(True, axis="y", alpha=0.3)
    _legend(ax)
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
        xs = [j + i * width for j in range(len(types))]
        ax.bar(xs, values, width=width, label=name, **config_style(i)["bar"])
    ax.set_xticks([j + width * (len(configs) - 1) / 2 for j in range(len(types))])
    labels = [f"{t}\n(n={first.get(t, {}).get('n_scored', 0)})" for t in types]
    ax.set_xticklabels(labels, fontsize="small", rotation=20)
    ax.set_ylabel(metric)
    ax.set_ylim(0.0, 1.02)
    ax.set_title(f"{metric} by question type")
    ax.grid(True, axis="y", alpha=0.3)
    _legend(ax)
    return ax


def _category(c: str) -> str:
    name = CATEGORY_NAMES.get(int(c))
    return f"{c}: {name}" if name else f"category {c}"


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
    out = Path(out_dir)
    paths = []
    for filename, draw in _drawers(metrics):
        ax = draw(metrics)
        path = out / filename
        cast("Figure", ax.figure).savefig(path, dpi=100)
        paths.append(path)
    return paths
