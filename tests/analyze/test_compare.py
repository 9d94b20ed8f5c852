"""Run-versus-baseline verdicts on synthetic closed-loop runs, traffic shape and config diffs."""

from __future__ import annotations

import math

import pytest

from infertriage.analyze.compare.comparison import (
    DEFAULT_IGNORED,
    METRICS,
    Comparison,
    ConfigChange,
    MetricComparison,
    compare_records,
    config_diff,
    tail_min_p,
    traffic_shape,
)
from infertriage.analyze.stats.significance import fisher_exact
from infertriage.schemas import RequestRecord

from .compare_helpers import closed_loop_run as _run
from .compare_helpers import with_failures

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
    assert ttft.verdict == "inconclusive" and "too few requests" in ttft.reason
    assert ttft.change_p50 == pytest.approx(0.5)


def test_practical_but_not_significant_is_inconclusive_and_says_how_many_would_settle_it() -> None:
    ttft = _by_name(compare_records(_run(20), _run(20, seed=1, ttft=1.3)))["ttft"]
    assert ttft.verdict == "inconclusive" and "not significant" in ttft.reason
    assert 0.0042 < ttft.p_value < 0.05
    # The p50's z grows as √n: (z at 0.05/12 ÷ z seen)² ≈ 2.05 times the requests.
    assert ttft.settle_n == (41, 41) and "about 41 vs 41 requests would settle it" in ttft.reason


# --- small samples: the exact tests (issue 15, item 5) -------------------------------------


def test_ttft_448x_with_35_vs_15_requests_is_a_regression() -> None:
    # Measured on a real server: `compare` called this "No regression." (too few samples).
    result = compare_records(_run(35), _run(15, seed=5, ttft=448.0))
    ttft = _by_name(result)["ttft"]
    assert ttft.verdict == "regression" and (ttft.base_n, ttft.run_n) == (35, 15)
    # Exact Mann–Whitney: every run TTFT above every base TTFT is 2 of the C(50, 15) splits.
    assert ttft.p_value == pytest.approx(2 / math.comb(50, 15), rel=1e-9)
    assert ttft in result.regressions


def test_error_rate_0_to_86_percent_with_35_vs_15_requests_is_a_regression() -> None:
    run = with_failures(_run(2, seed=5), 13)  # 13 of 15 failed: 86.7 %
    errors = _by_name(compare_records(_run(35), run))["error_rate"]
    assert errors.verdict == "regression" and (errors.base_n, errors.run_n) == (35, 15)
    assert errors.run is not None and errors.run.mean == pytest.approx(13 / 15)
    # Fisher: given 13 failures in 50, the one table as extreme is all 13 in the run's 15.
    assert errors.p_value == pytest.approx(math.comb(15, 13) / math.comb(50, 13), rel=1e-9)
    assert errors.p_value == pytest.approx(fisher_exact(0, 35, 13, 15), rel=1e-12)


@pytest.mark.parametrize("n", [3, 5])
def test_too_few_for_any_verdict_is_inconclusive_whatever_the_change(n: int) -> None:
    # 2/C(2n, n) is the best p of n against n: 0.1 at 3, 0.0079 at 5, not the 0.05/12 needed.
    result = compare_records(_run(n), _run(n, seed=1, ttft=400.0))
    ttft = _by_name(result)["ttft"]
    assert ttft.verdict == "inconclusive" and ttft.p_value == pytest.approx(2 / math.comb(2 * n, n))
    assert f"{n} vs {n} can reach p = {2 / math.comb(2 * n, n):.2g} at best" in ttft.reason
    assert "a regression takes at least 6 on each side, no regression 10" in ttft.reason
    assert ttft.settle_n == (10, 10)
    errors = _by_name(result)["error_rate"]
    assert errors.verdict == "inconclusive" and errors.settle_n == (10, 10)
    assert result.regressions == ()


def test_six_against_six_is_the_least_for_a_verdict() -> None:
    ttft = _by_name(compare_records(_run(6), _run(6, seed=1, ttft=400.0)))["ttft"]
    assert ttft.verdict == "regression" and ttft.p_value == pytest.approx(2 / math.comb(12, 6))


@pytest.mark.parametrize(
    ("num_base", "num_run", "verdict"), [(35, 1, "inconclusive"), (35, 2, "regression")]
)
def test_unequal_sizes_need_fewer_on_the_small_side(
    num_base: int, num_run: int, verdict: str
) -> None:
    # 2/C(36, 1) = 0.056 cannot reach 0.05/12; 2/C(37, 2) = 0.003 can.
    ttft = _by_name(compare_records(_run(num_base), _run(num_run, seed=1, ttft=400.0)))["ttft"]
    assert ttft.verdict == verdict


def test_a_handful_of_requests_cannot_rule_a_regression_out() -> None:
    # 2 against 85 could show a regression (2/C(87, 2) < 0.05/12), but two TTFTs that match the
    # base say little: "unchanged" takes 10 a side (a bootstrap of two values is two values).
    result = compare_records(_run(85), _run(2, seed=1))
    ttft, errors = _by_name(result)["ttft"], _by_name(result)["error_rate"]
    assert ttft.verdict == errors.verdict == "inconclusive"
    assert "too few requests to rule a regression out: 85 vs 2" in ttft.reason
    assert ttft.settle_n == errors.settle_n == (85, 10)


def test_a_regression_not_ruled_out_is_inconclusive() -> None:
    # Same distribution, 100 requests a side: the p50 moved +8 %, but its one-sided 95 % bound
    # reaches past +10 %: the data cannot say "no regression".
    ttft = _by_name(compare_records(_run(100, seed=6), _run(100, seed=106)))["ttft"]
    assert ttft.verdict == "inconclusive" and ttft.change_p50 == pytest.approx(0.08, abs=0.005)
    assert "could be +12.4%" in ttft.reason and "not ruled out" in ttft.reason
    assert ttft.settle_n is not None and ttft.settle_n[0] > 100


def test_a_p95_that_moved_but_cannot_be_tested_is_inconclusive() -> None:
    # Below ~80 samples a side no split of the few values above the pooled p95 is significant
    # at 0.05/12: a p95 that moved more than 10 % is undecided, and settling it takes at least
    # the size at which its test could tell.
    assert tail_min_p(40, 40) > 0.05 / 12 > tail_min_p(100, 100)
    ttft = _by_name(compare_records(_run(40, seed=1), _run(40, seed=101)))["ttft"]
    assert ttft.verdict == "inconclusive" and ttft.reason.startswith("p95 +38.6%")
    assert ttft.settle_n is not None and min(ttft.settle_n) >= 81


def test_p50_better_but_p95_worse_is_a_regression() -> None:
    # Most requests 30 % faster, every tenth 3.5× slower: the median improves, the tail does not.
    ttft = _by_name(compare_records(BASE, _run(ttft=0.7, tail=5.0)))["ttft"]
    assert ttft.change_p50 is not None and ttft.change_p50 < -0.1
    assert ttft.change_p95 is not None and ttft.change_p95 > 0.1
    assert ttft.verdict == "regression" and "disagree" in ttft.reason


def test_p50_better_but_p95_worse_unconfirmed_is_inconclusive_not_an_improvement() -> None:
    # Most requests 30 % faster, every tenth 2.1× slower: the p95 rose 16 %, not significantly.
    ttft = _by_name(compare_records(BASE, _run(ttft=0.7, tail=3.0)))["ttft"]
    assert ttft.change_p50 is not None and ttft.change_p50 < -0.2
    assert ttft.verdict == "inconclusive" and ttft.reason.startswith("p95 +16.0%")


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
