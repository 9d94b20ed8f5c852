"""Values set aside as impossible become artefact signals (analyze.signals.metrics), on
hand-made metrics.jsonl records as collect writes them (`metric.artefact`)."""

from __future__ import annotations

import pytest

from infertriage.analyze.signals.metrics import Phases, metric_signals
from infertriage.schemas import Sample
from infertriage.schemas.artefacts import ARTEFACT_SAMPLE

WINDOW = Phases(load_start_ts=0.0, load_end_ts=10.0)


def _artefact(t: float, kind: str, metric: str, raw: str, value: float) -> Sample:
    labels = {"kind": kind, "metric": metric, "raw": raw, "said": f"{value:g}"}
    return Sample(t, ARTEFACT_SAMPLE, value, labels)


def test_each_kind_and_metric_is_one_signal_with_its_worst_reading() -> None:
    samples = [
        _artefact(1.0, "artefact.negative_gauge", "queue.waiting", 'w{engine="0"}', -1.0),
        _artefact(2.0, "artefact.negative_gauge", "queue.waiting", 'w{engine="1"}', -7.0),
        _artefact(3.0, "artefact.fraction_above_one", "kv.usage", "kv", 97.0),
        Sample(3.0, "queue.waiting", 4.0, {}),
    ]
    signals = {s.name: s for s in metric_signals(samples, WINDOW)}
    waiting = signals["artefact.negative_gauge:queue.waiting"]
    assert waiting.value == -7.0 and waiting.unit == "requests"
    assert waiting.source == 'w{engine="1"} reads -7 (and 1 more series)'
    assert waiting.window == (1.0, 2.0)
    assert signals["artefact.fraction_above_one:kv.usage"].unit == "fraction"
    assert signals["queue.waiting_max"].value == 4.0  # the values that could be true, only


def test_a_histogram_artefact_counts_observations_and_an_unknown_kind_is_ignored() -> None:
    samples = [
        _artefact(0.0, "artefact.histogram_count_mismatch", "server.ttft", "ttft", 2.0),
        _artefact(0.0, "artefact.from_a_newer_build", "kv.usage", "kv", 2.0),
    ]
    names = {s.name: s.unit for s in metric_signals(samples, WINDOW)}
    assert names["artefact.histogram_count_mismatch:server.ttft"] == "1"
    assert not any("newer_build" in name for name in names)


def test_more_hits_than_queries_over_the_load_is_an_artefact_not_a_hit_rate() -> None:
    samples = [Sample(t, "prefix_cache.queries", q, {}) for t, q in ((0, 100), (10, 200))]
    samples += [Sample(t, "prefix_cache.hits", h, {}) for t, h in ((0, 100), (10, 250))]
    signals = {s.name: s for s in metric_signals(samples, WINDOW)}
    assert "prefix_cache.hit_rate" not in signals
    found = signals["artefact.fraction_above_one:prefix_cache.hit_rate"]
    assert found.value == pytest.approx(1.5) and "150 / 100" in found.source


def test_the_prefix_hit_rate_counts_the_lookups_of_the_windows_first_scrape_interval() -> None:
    # healthy-pp, 1-token outputs: the window opens at the first answer (t=0.5), the level's
    # first prompts resend the warm-up's and hit, and the first scrape inside the window
    # (t=1) already holds those hits: from it alone the rate read 0 % against the 27 % of
    # reuse the client counted over the same requests
    scrapes = ((0.0, 1000, 0), (1.0, 2000, 900), (10.0, 5000, 900))
    samples = [Sample(t, "prefix_cache.queries", q, {}) for t, q, _ in scrapes]
    samples += [Sample(t, "prefix_cache.hits", h, {}) for t, _, h in scrapes]
    window = Phases(load_start_ts=0.5, load_end_ts=10.0)
    signals = {s.name: s.value for s in metric_signals(samples, window)}
    assert signals["prefix_cache.hit_rate"] == pytest.approx(900 / 4000)
