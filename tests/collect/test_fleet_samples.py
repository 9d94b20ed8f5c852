"""A fleet's series from Prometheus as one server's samples: values at a step, replicas merged."""

from __future__ import annotations

import pytest

from infertriage.collect import adapt_scrape, detect
from infertriage.collect.fleet_samples import exposition_at, merge_replicas
from infertriage.collect.prometheus_api import PromSeries
from infertriage.schemas import Sample


def _series(
    name: str, instance: str, points: list[tuple[float, float]], **labels: str
) -> PromSeries:
    return PromSeries(
        {"__name__": name, "instance": instance, "job": "vllm", **labels}, tuple(points)
    )


def test_the_values_at_one_step_map_as_a_scrape_of_every_replica() -> None:
    series = [
        _series("vllm:num_preemptions_total", "a:1", [(10.0, 3.0), (11.0, 4.0)]),
        _series("vllm:num_preemptions_total", "b:1", [(10.0, 1.0)]),
        _series("vllm:kv_cache_usage_perc", "a:1", [(10.0, 0.5), (11.0, 0.7)]),
        _series("vllm:time_to_first_token_seconds_bucket", "a:1", [(11.0, 2.0)], le="0.1"),
        _series("vllm:time_to_first_token_seconds_bucket", "a:1", [(11.0, 5.0)], le="+Inf"),
        _series("vllm:time_to_first_token_seconds_count", "a:1", [(11.0, 5.0)]),
    ]
    first = exposition_at(series, 10.0, "prom")
    assert first is not None
    adapted = adapt_scrape(first, detect(first))[0]
    assert adapted.engine == "vllm"
    assert sorted(adapted.values("preemptions")) == [1.0, 3.0]
    later = exposition_at(series, 11.0, "prom")
    assert later is not None
    assert later.get("vllm:num_preemptions") == later.get("vllm:num_preemptions_total")
    histogram = adapt_scrape(later, detect(later))[0].histograms[0]
    assert histogram.buckets == ((0.1, 2.0), (float("inf"), 5.0))
    assert exposition_at(series, 12.0, "prom") is None


def test_replicas_merge_into_one_server_counters_summed_gauges_at_their_worst() -> None:
    raw = {"raw": "x"}
    samples = [
        Sample(1.0, "preemptions", 3.0, {**raw, "instance": "a"}),
        Sample(1.0, "preemptions", 1.0, {**raw, "instance": "b"}),
        Sample(1.0, "kv.usage", 0.4, {**raw, "instance": "a"}),
        Sample(1.0, "kv.usage", 0.9, {**raw, "instance": "b"}),
        Sample(1.0, "server.ttft", 2.0, {**raw, "instance": "a", "le": "0.1"}),
        Sample(1.0, "server.ttft", 5.0, {**raw, "instance": "b", "le": "0.1"}),
        Sample(2.0, "kv.usage", 0.1, {**raw, "instance": "a"}),
    ]
    merged = {(s.t, s.name, s.labels.get("le")): s for s in merge_replicas(samples)}
    assert merged[(1.0, "preemptions", None)].value == 4.0
    assert merged[(1.0, "kv.usage", None)].value == pytest.approx(0.9)
    assert merged[(1.0, "server.ttft", "0.1")].value == 7.0
    assert merged[(1.0, "kv.usage", None)].labels == {"raw": "x", "replicas": "2"}
    assert merged[(2.0, "kv.usage", None)].labels["replicas"] == "1"
    assert "instance" not in merged[(1.0, "preemptions", None)].labels
