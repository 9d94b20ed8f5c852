"""analyze.signals.deployment.fleet_signals: a fleet view (raw/fleet.json) read into
`fleet.*` signals, the busiest replica's excess in requests and the chance of its request
count under an even split beside the ratio."""

from __future__ import annotations

import dataclasses

import pytest

from infertriage.analyze.signals.deployment import fleet_signals
from infertriage.collect.prometheus_api import FleetFigure, FleetView, InstanceValue


def _figure(name: str, figure: str, means: dict[str, float]) -> FleetFigure:
    instances = tuple(InstanceValue(i, m, m, 10) for i, m in means.items())
    mean = sum(means.values()) / len(means)
    return FleetFigure(name, figure, "1", "", instances, max(means.values()) / mean, False)


def _view(*figures: FleetFigure) -> dict[str, object]:
    """A fleet view as api.fleet writes it."""
    view = FleetView("http://p", 'job="vllm"', "vllm", (0.0, 60.0), 1.0, ("a", "b", "c"), figures)
    return dataclasses.asdict(view)


def _signals(view: dict[str, object]) -> dict[str, float]:
    return {s.name: s.value for s in fleet_signals(view)}


def test_the_busiest_replicas_excess_is_its_running_and_waiting_over_the_mean() -> None:
    running = _figure("queue.running", "mean", {"a": 6.0, "b": 2.0, "c": 1.0})
    waiting = _figure("queue.waiting", "mean", {"a": 3.0, "b": 0.0})  # c has no waiting series
    signals = _signals(_view(running, waiting))
    assert signals["fleet.replicas"] == 3
    assert signals["fleet.imbalance"] == pytest.approx(6.0 / 3.0)
    assert signals["fleet.busiest_excess"] == pytest.approx(9.0 - 12.0 / 3)


def test_a_replica_of_the_fleet_with_no_series_of_a_figure_counts_zero() -> None:
    """An engine makes a series on its first use (TGI's requests): replica c, seen in the
    fleet's other figures, ran and finished nothing (it was left out, and the others looked
    even)."""
    running = _figure("queue.running", "mean", {"a": 2.0, "b": 2.0})
    finished = _figure("requests.finished", "rate", {"a": 1.0, "b": 1.0})
    tokens = _figure("tokens.generation", "rate", {"a": 300.0, "b": 300.0, "c": 1.0})
    signals = _signals(_view(running, finished, tokens))
    assert signals["fleet.busiest_excess"] == pytest.approx(2.0 - 4.0 / 3)
    assert signals["fleet.request_imbalance"] == pytest.approx(1.5)
    assert signals["fleet.routing_chance"] < 1e-3  # 60, 60 and 0 of 120 requests: 3.6e-4


def test_a_replica_present_for_part_of_the_window_says_no_chance_either_way() -> None:
    """Two of three replicas died a third of the way in and the survivor took the traffic:
    their figures cover another span, so neither the excess nor the chance is said."""
    values = (InstanceValue("a", 3.0, 3.0, 60), InstanceValue("b", 0.5, 0.5, 20),
              InstanceValue("c", 0.5, 0.5, 20))  # fmt: skip
    finished = FleetFigure("requests.finished", "rate", "1", "", values, 3.0 / (4.0 / 3), True)
    signals = _signals(_view(finished))
    assert signals["fleet.replicas_partial"] == 2
    assert "fleet.routing_chance" not in signals and "fleet.busiest_excess" not in signals


def test_a_nearly_idle_fleet_has_an_uneven_ratio_and_no_excess() -> None:
    """0.9 against 0.4 and 0.3 requests running: 1.7× the mean, 0.37 of a request above it."""
    running = _figure("queue.running", "mean", {"a": 0.9, "b": 0.4, "c": 0.3})
    signals = _signals(_view(running))
    assert signals["fleet.imbalance"] > 1.5
    assert signals["fleet.busiest_excess"] == pytest.approx(0.9 - 1.6 / 3)


def test_no_running_figure_no_excess() -> None:
    tokens = _figure("tokens.generation", "rate", {"a": 300.0, "b": 100.0, "c": 100.0})
    signals = _signals(_view(tokens))
    assert signals["fleet.imbalance"] == pytest.approx(1.8)
    assert "fleet.busiest_excess" not in signals


def test_an_even_split_of_many_requests_is_not_skewed_and_an_eight_to_one_split_is() -> None:
    """The window is 60 s: 1.0 / 0.95 / 1.05 requests a second is 60 / 57 / 63 requests,
    an even split's chance; 1.5 / 0.2 / 0.2 (90 / 12 / 12) is not."""
    even = _figure("requests.finished", "rate", {"a": 1.0, "b": 0.95, "c": 1.05})
    assert _signals(_view(even))["fleet.routing_chance"] > 0.5
    skewed = _figure("requests.finished", "rate", {"a": 1.5, "b": 0.2, "c": 0.2})
    assert _signals(_view(skewed))["fleet.routing_chance"] < 1e-6


def test_a_few_requests_are_chance_whatever_their_split() -> None:
    """3 requests in 60 s, all on one replica of three: 3 · (1/3)³ = 0.11."""
    few = _figure("requests.finished", "rate", {"a": 0.05, "b": 0.0, "c": 0.0})
    assert _signals(_view(few))["fleet.routing_chance"] == pytest.approx(3 * (1 / 3) ** 3)
