"""application.replica_imbalance (diagnose.rules.application): a load balancer that sends one
replica far more than the mean replica, named only when that is more than a few arrivals'
chance: the busiest replica holds a whole request more than the mean one, or an even split of
the window's requests would rarely give it as many."""

from __future__ import annotations

from infertriage.diagnose import RULES
from infertriage.schemas import Thresholds

from .evidence_helpers import make_evidence

RULE = RULES["application.replica_imbalance"]


def test_a_light_load_split_over_replicas_is_no_imbalance() -> None:
    """Three replicas that each hold a request or less: 0.9 against 0.4 and 0.3 in flight is
    1.7× the mean replica but 0.37 of a request above it."""
    ev = make_evidence(fleet__replicas=3, fleet__imbalance=1.69, fleet__busiest_excess=0.37)
    assert RULE.fn(ev, Thresholds()) is None  # and the default evidence's even split


def test_the_same_ratio_at_ten_times_the_load_is_named() -> None:
    ev = make_evidence(fleet__replicas=3, fleet__imbalance=1.69, fleet__busiest_excess=3.7)
    finding = RULE.fn(ev, Thresholds())
    assert finding is not None
    assert "of 3 replicas" in finding.title and "3.7 requests" in finding.title
    shown = {e.signal: e.threshold for e in finding.evidence}
    assert shown["fleet.busiest_excess"] == Thresholds().min_excess_requests


def test_a_light_but_skewed_split_of_many_requests_is_named() -> None:
    """Two replicas weighted 8:1 at a light load: the queue gauges read under a request above
    the mean, the window's 90 and 11 requests cannot come from an even split."""
    ev = make_evidence(
        fleet__replicas=2, fleet__imbalance=1.79, fleet__busiest_excess=0.96,
        fleet__routing_chance=2e-16, fleet__request_imbalance=1.79,
    )  # fmt: skip
    finding = RULE.fn(ev, Thresholds())
    assert finding is not None and "even split" in finding.title


def test_an_even_split_with_a_light_load_is_no_imbalance() -> None:
    ev = make_evidence(
        fleet__replicas=3, fleet__imbalance=1.69, fleet__busiest_excess=0.37,
        fleet__routing_chance=0.4,
    )  # fmt: skip
    assert RULE.fn(ev, Thresholds()) is None


def test_a_fleet_without_queue_gauges_or_request_counts_is_judged_on_its_ratio() -> None:
    """Triton exports neither a running gauge the fleet view reads nor a finished counter by
    replica: the ratio is all there is (as before the floor), and the title says so."""
    ev = make_evidence(
        fleet__replicas=3, fleet__imbalance=2.5, fleet__busiest_excess=None,
        fleet__routing_chance=None,
    )  # fmt: skip
    finding = RULE.fn(ev, Thresholds())
    assert finding is not None and "tells it from chance" in finding.title
    assert RULE.missing(ev) == ()


def test_a_significant_but_small_request_skew_is_no_imbalance() -> None:
    """Six hours of 1.03 against 0.97 requests a second: no even split gives that
    (p = 5e-10), but the busiest finished 1.03× the mean's requests, no imbalance; the
    1.5× was an idle fleet's running gauge."""
    ev = make_evidence(
        fleet__replicas=2, fleet__imbalance=1.5, fleet__busiest_excess=0.15,
        fleet__routing_chance=4.6e-10, fleet__request_imbalance=1.03,
    )  # fmt: skip
    assert RULE.fn(ev, Thresholds()) is None


def test_a_replica_that_came_or_went_mid_window_is_no_imbalance() -> None:
    ev = make_evidence(
        fleet__replicas=3, fleet__imbalance=2.2, fleet__busiest_excess=None,
        fleet__routing_chance=None, fleet__replicas_partial=2,
    )  # fmt: skip
    assert RULE.fn(ev, Thresholds()) is None
