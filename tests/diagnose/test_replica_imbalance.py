"""application.replica_imbalance (diagnose.rules.application): a load balancer that sends one
replica far more than the mean replica, named only when that is more than a few arrivals'
chance (the busiest replica holds a whole request more than the mean one)."""

from __future__ import annotations

from infertriage.diagnose import RULES
from infertriage.schemas import Thresholds

from .evidence_helpers import make_evidence

RULE = RULES["application.replica_imbalance"]


def test_a_light_load_split_over_replicas_is_no_imbalance() -> None:
    """Three replicas that each hold a request or less: 0.9 against 0.4 and 0.3 in flight is
    1.7× the mean replica but 0.37 of a request above it."""
    ev = make_evidence(fleet__replicas=3, fleet__imbalance=1.69, fleet__busiest_excess=0.37)
    assert RULE.fn(ev, Thresholds()) is None


def test_the_same_ratio_at_ten_times_the_load_is_named() -> None:
    ev = make_evidence(fleet__replicas=3, fleet__imbalance=1.69, fleet__busiest_excess=3.7)
    finding = RULE.fn(ev, Thresholds())
    assert finding is not None
    assert "of 3 replicas" in finding.title and "3.7 requests" in finding.title
    shown = {e.signal: e.threshold for e in finding.evidence}
    assert shown["fleet.busiest_excess"] == Thresholds().min_excess_requests


def test_a_fleet_without_its_replicas_queues_is_not_evaluated() -> None:
    """Without the replicas' requests in flight the ratio cannot be told from chance."""
    ev = make_evidence(fleet__replicas=3, fleet__imbalance=2.5, fleet__busiest_excess=None)
    assert RULE.missing(ev) == ("fleet.busiest_excess",)
