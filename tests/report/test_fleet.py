"""`metrics --prometheus`' table (`report.fleet.render_fleet`): an uneven row is called an
imbalance only beyond a few arrivals' chance, as `application.replica_imbalance` judges it."""

from __future__ import annotations

import io

from rich.console import Console

from infertriage.collect.prometheus_api import FleetFigure, FleetView, InstanceValue
from infertriage.report.fleet import render_fleet


def _figure(name: str, figure: str, means: tuple[float, ...]) -> FleetFigure:
    values = tuple(InstanceValue(f"pod-{i}", m, m, 30) for i, m in enumerate(means))
    ratio = max(means) / (sum(means) / len(means))
    return FleetFigure(name, figure, "", "expr", values, ratio, ratio >= 1.5)


def _shown(*figures: FleetFigure) -> str:
    view = FleetView(
        "http://p", 'job="vllm"', "vllm", (0.0, 60.0), 5.0, ("pod-0", "pod-1", "pod-2"), figures
    )
    out = io.StringIO()
    render_fleet(view, Console(file=out, width=200, force_terminal=False, color_system=None))
    return out.getvalue()


def test_a_nearly_idle_fleet_is_uneven_within_chance() -> None:
    """0.9, 0.4 and 0.3 requests running (1.7× the mean, 0.37 above it), 20, 19 and 21
    requests finished in the 60 s: an even split's."""
    text = _shown(
        _figure("queue.running", "mean", (0.9, 0.4, 0.3)),
        _figure("requests.finished", "rate", (20 / 60, 19 / 60, 21 / 60)),
    )
    assert "imbalanced:" not in text
    assert "uneven: queue.running mean" in text and "within a few arrivals' chance" in text


def test_a_skewed_split_is_an_imbalance() -> None:
    """90, 12 and 12 requests finished: no even split gives one replica 90."""
    text = _shown(
        _figure("queue.running", "mean", (0.9, 0.4, 0.3)),
        _figure("requests.finished", "rate", (1.5, 0.2, 0.2)),
    )
    assert "imbalanced: queue.running mean" in text and "p = " in text


def test_replicas_that_came_or_went_are_uneven_not_an_imbalance() -> None:
    """Two of three replicas served a third of the window (20 points of 60): the survivor's
    1.8× is no routing fault, and the line says why."""
    values = (InstanceValue("pod-0", 3.0, 3.0, 60), InstanceValue("pod-1", 1.0, 1.0, 20),
              InstanceValue("pod-2", 1.0, 1.0, 20))  # fmt: skip
    figure = FleetFigure("requests.finished", "rate", "", "expr", values, 1.8, True)
    text = _shown(figure)
    assert "imbalanced:" not in text and "came or went within the window" in text
