"""Run-versus-baseline verdicts on synthetic closed-loop runs, traffic shape and config diffs."""

from __future__ import annotations

import numpy as np
import pytest

from infertriage.analyze.compare import (
    DEFAULT_IGNORED,
    METRICS,
    Comparison,
    ConfigChange,
    MetricComparison,
    compare_records,
    config_diff,
    traffic_shape,
)
from infertriage.schemas import Chunk, ErrorKind, RequestRecord


def _record(i: int, sent: float, times: np.ndarray, prompt: int) -> RequestRecord:
    chunks = tuple(Chunk(float(t), 1) for t in times)
    return RequestRecord(
        id=str(i),
        scheduled_ts=sent,
        sent_ts=sent,
        first_token_ts=chunks[0].ts,
        last_token_ts=chunks[-1].ts,
        end_ts=chunks[-1].ts,
        chunks=chunks,
        prompt_tokens=prompt,
        output_tokens=len(chunks),
        chunk_tokens_exact=True,
    )


def _failure(i: int, sent: float, prompt: int) -> RequestRecord:
    return RequestRecord(
        id=str(i),
        scheduled_ts=sent,
        sent_ts=sent,
        end_ts=sent + 0.01,
        prompt_tokens=prompt,
        error_kind=ErrorKind.HTTP,
        http_status=503,
    )


def _run(
    n: int = 300,
    *,
    seed: int = 0,
    ttft: float = 1.0,
    tail: float = 1.0,
    itl: float = 1.0,
    prompt: float = 1.0,
    failed: int = 0,
    ttft_s: float = 0.2,
    concurrency: int = 4,
) -> list[RequestRecord]:
    """A closed-loop run: `concurrency` users, each sending when its last request ends.

    TTFT is log-normal around `ttft_s`, scaled by `ttft` (and every tenth request by
    `tail` too); 15–25 one-token chunks with log-normal 20 ms gaps scaled by `itl`;
    100–199 prompt tokens scaled by `prompt`; `failed` requests spread evenly fail.
    The same seed draws the same numbers whatever the scales.
    """
    rng = np.random.default_rng(seed)
    free = [0.0] * concurrency
    fail_every = n // failed if failed else 0
    records = []
    for i in range(n):
        sent = free[i % concurrency]
        scale = ttft * (tail if i % 10 == 0 else 1.0)
        first = sent + ttft_s * scale * rng.lognormal(0.0, 0.3)
        gaps = 0.02 * itl * rng.lognormal(0.0, 0.3, int(rng.integers(15, 26)) - 1)
        num_prompt = int(prompt * rng.integers(100, 200))
        if fail_every and i % fail_every == 0:
            record = _failure(i, sent, num_prompt)
        else:
            record = _record(i, sent, first + np.concatenate(([0.0], np.cumsum(gaps))), num_prompt)
        assert record.end_ts is not None
        free[i % concurrency] = record.end_ts
        records.append(record)
    return records


BASE = _run()


def _by_name(comparison: Comparison) -> dict[str, MetricComparison]:
    return {m.metric: m for m in comparison.metrics}


def test_metrics_catalogue() -> None:
    got = {m.name: (m.unit, m.lower_is_better) for m in METRICS}
    assert got == {
        "ttft": ("s", True),
        "tpot": ("s", True),
        "itl": ("s", True),
        "e2e": ("s", True),
        "output_throughput": ("tokens/s", False),
        "error_rate": ("fraction", True),
    }


def test_identical_runs_are_unchanged_everywhere() -> None:
    result = compare_records(BASE, BASE)
    assert [m.verdict for m in result.metrics] == ["unchanged"] * len(METRICS)
    assert result.shape == () and result.regressions == () and result.improvements == ()
    ttft = _by_name(result)["ttft"]
    assert ttft.change_p50 == 0.0 and ttft.p_value == 1.0 and ttft.base == ttft.run
    assert ttft.base_n == ttft.run_n == 300


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_same_distribution_another_seed_is_no_regression(seed: int) -> None:
    result = compare_records(BASE, _run(seed=seed))
    assert {m.metric: m.verdict for m in result.metrics} == {m.name: "unchanged" for m in METRICS}
    assert result.shape == ()


def test_ttft_up_30_percent_is_a_regression() -> None:
    result = compare_records(BASE, _run(ttft=1.3))
    ttft = _by_name(result)["ttft"]
    assert ttft.verdict == "regression" and ttft.p_value < 1e-6
    assert ttft.change_p50 == pytest.approx(0.3) and ttft.change_p95 == pytest.approx(0.3)
    assert ttft.p50_diff_ci is not None and ttft.p50_diff_ci[0] > 0.0
    assert ttft in result.regressions
    assert "p50 +30.0%" in ttft.reason
    by_name = _by_name(result)
    assert by_name["tpot"].verdict == by_name["itl"].verdict == "unchanged"


def test_ttft_down_30_percent_is_an_improvement() -> None:
    result = compare_records(BASE, _run(ttft=0.7))
    ttft = _by_name(result)["ttft"]
    assert ttft.verdict == "improvement" and ttft.p_value < 1e-6
    assert ttft.p95_diff_ci is not None and ttft.p95_diff_ci[1] < 0.0
    assert ttft in result.improvements


def test_small_change_is_below_the_practical_threshold() -> None:
    assert _by_name(compare_records(BASE, _run(ttft=1.03)))["ttft"].verdict == "unchanged"


def test_change_below_the_absolute_minimum_is_unchanged() -> None:
    # +30 % of a 1 ms TTFT is well under the 1 ms minimum that matters, however significant.
    ttft = _by_name(compare_records(_run(ttft_s=0.001), _run(ttft_s=0.001, ttft=1.3)))["ttft"]
    assert ttft.p_value < 1e-6 and ttft.change_p50 == pytest.approx(0.3)
    assert ttft.verdict == "unchanged"


def test_tiny_samples_are_inconclusive() -> None:
    ttft = _by_name(compare_records(_run(5), _run(5, ttft=1.5)))["ttft"]
    assert ttft.verdict == "inconclusive" and "too few samples" in ttft.reason
    assert ttft.change_p50 == pytest.approx(0.5)


def test_practical_but_not_significant_is_inconclusive() -> None:
    ttft = _by_name(compare_records(BASE, _run(ttft=1.3), alpha=1e-300))["ttft"]
    assert ttft.verdict == "inconclusive" and "not significant" in ttft.reason


def test_p50_better_but_p95_worse_is_a_regression() -> None:
    # Most requests 30 % faster, every tenth 3.5× slower: the median improves, the tail does not.
    ttft = _by_name(compare_records(BASE, _run(ttft=0.7, tail=5.0)))["ttft"]
    assert ttft.change_p50 is not None and ttft.change_p50 < -0.1
    assert ttft.change_p95 is not None and ttft.change_p95 > 0.1
    assert ttft.verdict == "regression" and "disagree" in ttft.reason


def test_error_rate_up_is_a_regression() -> None:
    result = compare_records(BASE, _run(failed=30))
    errors = _by_name(result)["error_rate"]
    assert errors.verdict == "regression" and errors.p_value < 1e-6
    assert errors.base is not None and errors.base.mean == 0.0
    assert errors.run is not None and errors.run.mean == pytest.approx(0.1)
    assert errors.change_p50 is None  # relative to a base of 0
    assert errors.p50_diff_ci is not None and errors.p50_diff_ci[0] > 0.0
    assert errors.base_n == errors.run_n == 300
    assert _by_name(result)["ttft"].run_n == 270  # latencies of ok requests only


def test_slower_decoding_lowers_output_throughput() -> None:
    # Closed loop: 50 % longer gaps mean fewer tokens per second, a drop in a higher-is-better
    # metric, hence a regression.
    throughput = _by_name(compare_records(BASE, _run(itl=1.5)))["output_throughput"]
    assert throughput.verdict == "regression" and not throughput.lower_is_better
    assert throughput.change_p50 is not None and throughput.change_p50 < -0.1
    assert throughput.base_n >= 20 and throughput.unit == "tokens/s"


def test_one_empty_side_is_inconclusive() -> None:
    failures = _run(30, failed=30)
    ttft = _by_name(compare_records(BASE, failures))["ttft"]
    assert ttft.run_n == 0 and ttft.run is None and ttft.verdict == "inconclusive"
    assert ttft.p50_diff_ci is None and ttft.change_p95 is None


# --- traffic shape -------------------------------------------------------------------------


def test_traffic_shape_is_silent_on_like_for_like() -> None:
    assert traffic_shape(BASE, BASE) == ()
    assert traffic_shape(BASE, _run(seed=4)) == ()


def test_traffic_shape_warns_on_doubled_prompts() -> None:
    warnings = traffic_shape(BASE, _run(prompt=2.0))
    assert len(warnings) == 1 and warnings[0].startswith("Prompt tokens differ")
    assert compare_records(BASE, _run(prompt=2.0)).shape == warnings


def test_traffic_shape_warns_on_rate_and_count() -> None:
    slower = [
        RequestRecord(id=r.id, scheduled_ts=2 * r.sent_ts, sent_ts=2 * r.sent_ts) for r in BASE
    ]
    assert any(w.startswith("Offered request rate differs") for w in traffic_shape(BASE, slower))
    few = traffic_shape(BASE, BASE[:100])
    assert any(w.startswith("Request counts differ") for w in few)
    assert not any("counts" in w for w in traffic_shape(BASE, BASE[:150]))


# --- config --------------------------------------------------------------------------------


def test_config_diff() -> None:
    base = {
        "engine": {"gpu_memory_utilization": 0.9, "max_num_seqs": 256, "args": ["--a", "1"]},
        "perf_counter_start_ns": 123,
        "client": {"pid": 10, "hostname": "h1", "run_started_at": "t0"},
        "first_send_ts": 1.0,
    }
    run = {
        "engine": {"gpu_memory_utilization": 0.95, "max_num_seqs": 256, "args": ["--a", "2"]},
        "perf_counter_start_ns": 456,
        "client": {"pid": 11, "hostname": "h1", "run_started_at": "t1"},
        "first_send_ts": 2.0,
        "enable_prefix_caching": True,
    }
    assert config_diff(base, run) == (
        ConfigChange("enable_prefix_caching", None, True),
        ConfigChange("engine.args", ["--a", "1"], ["--a", "2"]),
        ConfigChange("engine.gpu_memory_utilization", 0.9, 0.95),
    )
    hosts = config_diff({"client": {"hostname": "h1"}}, {"client": {"hostname": "h2"}})
    assert hosts == (ConfigChange("client.hostname", "h1", "h2"),)  # not volatile
    assert "perf_counter_start_ns" in DEFAULT_IGNORED
    assert config_diff(base, run, ignore=()) != config_diff(base, run)
    assert config_diff({"a": {"b": 1}}, {}) == (ConfigChange("a.b", 1, None),)


def test_config_diff_drops_nested_echoes_and_model_card_times() -> None:
    base = {"gpu_memory_utilization": 0.9, "details": {"cache": {"gpu_memory_utilization": 0.9}}}
    run = {"gpu_memory_utilization": 0.5, "details": {"cache": {"gpu_memory_utilization": 0.5}}}
    base["details"]["/v1/models"] = {"created": 1}  # type: ignore[index]
    run["details"]["/v1/models"] = {"created": 2}  # type: ignore[index]
    assert config_diff(base, run) == (ConfigChange("gpu_memory_utilization", 0.9, 0.5),)
