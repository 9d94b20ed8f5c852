"""Screening a mapped scrape (collect.adapters.screen): ranks kept apart and named, copies read
once, values that cannot be true set aside as artefacts — on the dumps of
tests/data/metrics_dumps (hand-made, see its README), real incident pastes
(tests/data/incidents) and the real captures of ../shared/fixtures."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from infertriage.collect import Adapted, adapt_scrape, parse_metrics_text
from infertriage.collect.scraper import samples_of
from infertriage.schemas.artefacts import (
    ARTEFACT_SAMPLE,
    COPIES_DISAGREE,
    FRACTION_ABOVE_ONE,
    HISTOGRAM_COUNT_MISMATCH,
    HISTOGRAM_NOT_CUMULATIVE,
    NEGATIVE_COUNTER,
    NEGATIVE_GAUGE,
)

DUMPS = Path(__file__).parents[1] / "data" / "metrics_dumps"
INCIDENTS = Path(__file__).parents[1] / "data" / "incidents"


def _engine(text: str) -> Adapted:
    return adapt_scrape(parse_metrics_text(text, "dump"))[0]


def _dump(name: str) -> Adapted:
    return _engine((DUMPS / name).read_text())


def _excerpt(case: str) -> str:
    """The pasted excerpt of a real incident case (after its `# ---` header line)."""
    return (INCIDENTS / case).read_text().partition("\n# ---\n")[2]


def _values(adapted: Adapted, name: str) -> dict[str, float]:
    return {dict(s.labels).get("dp_rank", ""): s.value for s in adapted.scalars if s.name == name}


def test_the_dumps_are_what_make_dumps_writes() -> None:
    spec = importlib.util.spec_from_file_location("make_dumps", DUMPS / "make_dumps.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, text in module.DUMPS.items():
        assert (DUMPS / name).read_bytes() == text.encode(), name


def test_vllm_engines_are_kept_apart_and_named_as_ranks() -> None:
    adapted = _dump("vllm_dp2_one_rank_queues.txt")
    assert _values(adapted, "queue.running") == {"0": 64.0, "1": 2.0}
    assert _values(adapted, "queue.waiting") == {"0": 30.0, "1": 0.0}
    ttft = [h for h in adapted.histograms if h.name == "server.ttft"]
    assert sorted(dict(h.labels)["dp_rank"] for h in ttft) == ["0", "1"]
    assert adapted.scrape_notes == () and adapted.artefacts == ()


def test_sglang_dp_ranks_keep_their_label_and_tp_copies_count_once() -> None:
    adapted = _dump("sglang_dp2_tp_copies.txt")
    assert _values(adapted, "queue.running") == {"0": 3.0, "1": 96.0}
    assert _values(adapted, "tokens.prompt") == {"0": 10422.0, "1": 803311.0}
    assert any("40 was used once, not added up to 80" in n for n in adapted.scrape_notes)


def test_pid_copies_with_one_value_are_read_once_and_the_note_says_which() -> None:
    adapted = _dump("vllm_api_server_pid_copies.txt")
    assert adapted.values("queue.running") == (12.0,)
    assert adapted.values("kv.usage") == (0.52,)
    note = next(n for n in adapted.scrape_notes if "num_requests_running" in n)
    assert "3 times (pid 2711, pid 2712, pid 2713)" in note
    assert "12 was used once, not added up to 36" in note
    # a counter each API-server process counts its own of: added up, and said
    assert sorted(adapted.values("requests.finished")) == [298.0, 305.0, 310.0]
    assert any("each process counts its own" in n for n in adapted.scrape_notes)


def test_a_line_repeated_verbatim_counts_once() -> None:
    line = 'vllm:num_requests_running{engine="0",model_name="m"} 5.0\n'
    adapted = _engine("# TYPE vllm:num_requests_running gauge\n" + line * 2)
    assert adapted.values("queue.running") == (5.0,)
    assert any("2 times verbatim with one value" in n for n in adapted.scrape_notes)


def test_a_gauge_whose_pid_copies_disagree_is_an_artefact() -> None:
    """vLLM PR #28792: `kv_cache_usage_perc` once per API-server pid, one real, seven 0."""
    adapted = _engine(_excerpt("vllm/002-kv-usage-gauge-per-api-server-pid.txt"))
    assert adapted.values("kv.usage") == ()  # none is the engine's for sure: set aside
    (artefact,) = adapted.artefacts
    assert artefact.kind == COPIES_DISAGREE and artefact.metric == "kv.usage"
    assert artefact.value == pytest.approx(0.6530455880475035)
    assert "0 in 7 of 8 copies" in artefact.said and "pid 271" in artefact.said
    status = adapted.status("kv.usage")
    assert status is not None and "set aside" in status.note


@pytest.mark.parametrize(
    ("lines", "kind", "metric", "value"),
    [
        (["# TYPE vllm:num_requests_waiting gauge", "vllm:num_requests_waiting -3"],
         NEGATIVE_GAUGE, "queue.waiting", -3.0),
        (["# TYPE vllm:num_preemptions counter", "vllm:num_preemptions_total -1"],
         NEGATIVE_COUNTER, "preemptions", -1.0),
        # vLLM's `_perc` is a fraction 0..1 despite its name: 97 is 9,700 %
        (["# TYPE vllm:kv_cache_usage_perc gauge", "vllm:kv_cache_usage_perc 97"],
         FRACTION_ABOVE_ONE, "kv.usage", 97.0),
        (["# TYPE vllm:gpu_prefix_cache_hit_rate gauge", "vllm:gpu_prefix_cache_hit_rate 1.4"],
         FRACTION_ABOVE_ONE, "prefix_cache.hit_rate", 1.4),
        (["# TYPE vllm:prefix_cache_queries counter", "vllm:prefix_cache_queries_total 100",
          "# TYPE vllm:prefix_cache_hits counter", "vllm:prefix_cache_hits_total 150"],
         FRACTION_ABOVE_ONE, "prefix_cache.hit_rate", 1.5),
        (["# TYPE vllm:e2e_request_latency_seconds histogram",
          'vllm:e2e_request_latency_seconds_bucket{le="1.0"} 3',
          'vllm:e2e_request_latency_seconds_bucket{le="+Inf"} 5',
          "vllm:e2e_request_latency_seconds_count 7", "vllm:e2e_request_latency_seconds_sum 9"],
         HISTOGRAM_COUNT_MISMATCH, "server.e2e", 2.0),
        (["# TYPE vllm:e2e_request_latency_seconds histogram",
          'vllm:e2e_request_latency_seconds_bucket{le="1.0"} 6',
          'vllm:e2e_request_latency_seconds_bucket{le="+Inf"} 5',
          "vllm:e2e_request_latency_seconds_count 5", "vllm:e2e_request_latency_seconds_sum 9"],
         HISTOGRAM_NOT_CUMULATIVE, "server.e2e", 1.0),
    ],
    ids=["negative gauge", "negative counter", "perc above 1", "hit-rate gauge", "hits > queries",
         "count != +Inf", "shrinking buckets"],
)  # fmt: skip
def test_an_impossible_value_is_set_aside_as_its_artefact(
    lines: list[str], kind: str, metric: str, value: float
) -> None:
    adapted = _engine("\n".join(lines) + "\n")
    (artefact,) = adapted.artefacts
    assert (artefact.kind, artefact.metric) == (kind, metric)
    assert artefact.value == pytest.approx(value)
    assert metric not in {s.name for s in adapted.scalars} | {h.name for h in adapted.histograms}
    assert any("cannot be true" in note for note in adapted.scrape_notes)
    # it reaches metrics.jsonl as its own record, never as the metric's value
    (record,) = [s for s in samples_of(0.0, [adapted]) if s.name == ARTEFACT_SAMPLE]
    assert record.labels["kind"] == kind and record.labels["metric"] == metric


def test_the_possible_extremes_and_the_servers_nan_are_not_artefacts() -> None:
    text = (
        "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc 1.0\n"
        "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 0\n"
        "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running NaN\n"
    )
    adapted = _engine(text)
    assert adapted.artefacts == ()
    assert adapted.values("kv.usage") == (1.0,)


@pytest.mark.parametrize(
    "name", ["vllm", "sglang", "tgi", "llamacpp", "triton", "trtllm_triton", "dcgm"]
)
def test_real_captures_hold_no_artefact(shared_fixture, name: str) -> None:  # type: ignore[no-untyped-def]
    for adapted in adapt_scrape(
        parse_metrics_text(shared_fixture(f"metrics/{name}.txt").read_text(), name)
    ):
        assert adapted.artefacts == (), adapted.engine
