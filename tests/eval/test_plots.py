"""The evaluation plots: one distinct style per configuration, named categories, the legend
outside the data."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("matplotlib")

from spector_gpu.eval.plots import (
    config_style,
    plot_by_category,
    plot_by_type,
    plot_recall_at_k,
)


def _metrics(n: int) -> dict[str, Any]:
    configs = {}
    for i in range(n):
        value = 0.5  # every configuration equal: only the style tells them apart
        configs[f"c{i}"] = {
            "recall@1": value,
            "recall@5": value,
            "recall@10": value,
            "by_category": {str(c): {"recall@10": value} for c in (1, 2, 3, 4)},
            "category_5": {"n_questions": 3, "recall@10": value},
            "by_type": {"temporal-reasoning": {"n_scored": 2, "session/recall_all@10": value}},
        }
    return {"configs": configs}


def test_forty_configurations_have_forty_styles() -> None:
    lines = {tuple(sorted(config_style(i)["line"].items())) for i in range(40)}
    bars = {tuple(sorted(config_style(i)["bar"].items())) for i in range(40)}
    assert len(lines) == 40 and len(bars) == 40


def _outside(ax: Any) -> bool:
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend().get_window_extent(renderer)
    axes = ax.get_window_extent(renderer)
    return bool(legend.x0 >= axes.x1)


def test_lines_are_distinct_and_the_legend_is_outside() -> None:
    ax = plot_recall_at_k(_metrics(12))
    lines = ax.get_lines()
    styles = {(ln.get_color(), ln.get_marker(), ln.get_linestyle()) for ln in lines}
    assert len(lines) == 12 and len(styles) == 12
    xs = {float(ln.get_xdata()[0]) for ln in lines}  # equal values drawn side by side
    assert len(xs) == 12
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [f"c{i}" for i in range(12)]
    assert _outside(ax)


def test_category_bars_are_named_and_styled_per_configuration() -> None:
    ax = plot_by_category(_metrics(12))
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == [
        "1: multi-hop",
        "2: temporal",
        "3: open-domain",
        "4: single-hop",
        "5: adversarial",
    ]
    bars = ax.patches
    assert len(bars) == 12 * 5
    styles = {(tuple(b.get_facecolor()), b.get_hatch()) for b in bars}
    assert len(styles) == 12
    assert _outside(ax)


def test_type_bars_keep_the_legend_outside() -> None:
    ax = plot_by_type(_metrics(3))
    assert len(ax.patches) == 3 and _outside(ax)
