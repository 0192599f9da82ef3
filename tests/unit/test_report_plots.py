"""Report plots read right: recall from 0, overlapping lines visible, bench sizes as 1k / 10k / 100k."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("matplotlib")

import matplotlib.pyplot as plt

from memory_orchestrator.evaluation.bench import OPERATIONS
from memory_orchestrator.evaluation.bench_report import scaling_figure, size_label
from memory_orchestrator.evaluation.reports import recall_figure


def summary(modes: dict[str, float]) -> dict[str, Any]:
    """Every mode at the same recall (the lines overlap), all of it high (autoscale would not reach 0)."""
    ks = [5, 10, 25]
    return {
        "config": {"ks": ks},
        "headline": {
            "set": "dev",
            "modes": {mode: {f"recall@{k}": value for k in ks} for mode, value in modes.items()},
        },
    }


def test_recall_plot_starts_at_zero_and_overlapping_lines_stay_visible() -> None:
    figure = recall_figure(summary({"raw": 0.8, "orchestrated": 0.8, "expanded": 0.8, "bm25": 0.8}))
    try:
        (axis,) = figure.axes
        assert axis.get_ylim() == (0.0, 100.0)
        lines = axis.get_lines()
        assert len(lines) == 4
        assert len({line.get_marker() for line in lines}) == 4
        assert len({line.get_markersize() for line in lines}) == 4  # nested, the first drawn largest
        assert all(line.get_markerfacecolor() == "none" for line in lines)
    finally:
        plt.close(figure)


@pytest.mark.parametrize(
    ("size", "label"), [(500, "500"), (1000, "1k"), (10_000, "10k"), (100_000, "100k"), (1_500_000, "1.5M")]
)
def test_size_labels_read_as_plain_numbers(size: int, label: str) -> None:
    assert size_label(size) == label


def test_bench_x_axis_names_the_sizes() -> None:
    latency = {name: {"p50": 1.0 + i, "p95": 2.0 + i} for i, name in enumerate(OPERATIONS)}
    document = {
        "meta": {"backend": "sqlite"},
        "sizes": [{"size": size, "latency_ms": latency} for size in (1000, 10_000, 100_000)],
    }
    figure = scaling_figure(document)
    try:
        (axis,) = figure.axes
        assert [tick.get_text() for tick in axis.get_xticklabels()] == ["1k", "10k", "100k"]
        assert not axis.xaxis.get_minorticklocs().size
    finally:
        plt.close(figure)
