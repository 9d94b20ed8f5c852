"""Baselines, regressions and A/B end to end against twins on 127.0.0.1.

The base and the "same" run are two runs of the healthy twin with the same
seed; the degraded run is the kv-pressure twin (a quarter of the GPU memory,
so ~11k KV tokens): at the load below it preempts and queues.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from infertriage.api.compare import compare_ab, compare_runs
from infertriage.api.specs import CompareABSpec, CompareRunsSpec, ValidateSpec
from infertriage.api.validate import validate
from infertriage.cli.app import main
from infertriage.report.compare import (
    CompareResult,
    compare_markdown,
    compare_to_json,
    verdict_line,
)
from infertriage.schemas import BenchRunInfo, RequestRecord, RunDir, UserError
from infertriage.schemas.errors import EXIT_INCONCLUSIVE
from infertriage.twin.process import TwinProcess

from ..analyze.compare_helpers import closed_loop_run, with_failures, write_run

# 1,500-token prompts and 128-token outputs at 6 requests/s: ~20k tokens in flight, twice
# what the kv-pressure twin holds; short outputs keep every drain short.
_WORKLOAD = "synthetic:input=1500,output=128"
_LOAD = {"rate": 6.0, "duration_s": 6.0, "functional": False, "seed": 3, "workload": _WORKLOAD}


def _verdicts(document: dict) -> dict[str, str]:  # type: ignore[type-arg]
    return {m["metric"]: m["verdict"] for m in document["levels"][0]["metrics"]}


@pytest.mark.e2e
def test_same_scenario_no_regression_and_a_degraded_one_regresses(tmp_path: Path) -> None:
    store = tmp_path / "store"
    base = validate(ValidateSpec(scenario="healthy", out=tmp_path / "base", **_LOAD))  # type: ignore[arg-type]
    same = validate(ValidateSpec(scenario="healthy", out=tmp_path / "same", **_LOAD))  # type: ignore[arg-type]
    worse = validate(ValidateSpec(scenario="kv-pressure", out=tmp_path / "worse", **_LOAD))  # type: ignore[arg-type]
    assert main(["baseline", "save", "prod", str(base.run_dir), "--store", str(store)]) == 0

    same_md = tmp_path / "same.md"
    args = ["compare", "prod", str(same.run_dir), "--store", str(store), "--fail-on-regression"]
    # Six seconds a run leave ~4 one-second throughput bins a side: a regression takes 6 and
    # "unchanged" 10, so the same twin is INCONCLUSIVE (exit 3), never "No regression".
    assert main([*args, "--markdown", str(same_md)]) == EXIT_INCONCLUSIVE
    same_text = same_md.read_text()
    assert "**INCONCLUSIVE: " in same_text and "No regression" not in same_text
    assert "output_throughput (performance) needs about 10 vs 10 seconds" in same_text

    worse_md = tmp_path / "worse.md"
    args = ["compare", "prod", str(worse.run_dir), "--store", str(store), "--fail-on-regression"]
    assert main([*args, "--markdown", str(worse_md)]) == 1
    result = compare_runs(CompareRunsSpec(base="prod", run=worse.run_dir, store=store))
    regressed = {m.metric for _, m in result.regressions}
    assert "ttft" in regressed, result.levels[0].comparison.metrics
    changed = {c.key: (c.base, c.run) for c in result.server_config}
    assert changed["gpu_memory_utilization"] == (0.9, 0.228)  # the kv-pressure scenario's
    text = worse_md.read_text()
    assert "REGRESSION" in text and "gpu_memory_utilization" in text
    # A run directory serves as the base as well as a saved name.
    assert (
        compare_runs(CompareRunsSpec(base=str(base.run_dir), run=same.run_dir)).verdict
        == "inconclusive"
    )


@pytest.mark.e2e
def test_ab_interleaves_the_same_schedule_and_finds_the_degraded_arm(tmp_path: Path) -> None:
    with (
        TwinProcess("healthy", load_time_s=0.2) as a,
        TwinProcess("kv-pressure", load_time_s=0.2) as b,
    ):
        result = compare_ab(
            CompareABSpec(
                urls=(a.url, b.url),
                rate=6.0,
                duration_s=12.0,
                blocks=2,
                workload=_WORKLOAD,
                out=tmp_path / "ab",
                seed=3,
            )
        )
    assert result.regressed
    assert "ttft" in {m.metric for _, m in result.regressions}
    run = RunDir.open(tmp_path / "ab")
    records = list(run.iter_records(run.requests, RequestRecord))
    arms = {arm: [r for r in records if r.labels["arm"] == arm] for arm in ("A", "B")}
    # The same seeded schedule went to both: the same prompts, block by block, in A B / B A order.
    for block in ("0", "1"):
        lengths = [
            sorted(r.prompt_tokens or 0 for r in arms[arm] if r.labels["block"] == block)
            for arm in ("A", "B")
        ]
        assert lengths[0] == lengths[1] and lengths[0]
    first_b = min(r.sent_ts for r in arms["B"] if r.labels["block"] == "1")
    first_a = min(r.sent_ts for r in arms["A"] if r.labels["block"] == "1")
    assert first_b < first_a
    document = json.loads((run.root / "compare.json").read_text())
    assert document["schema"] == "infertriage.compare/v1" and document["regressed"] is True
    assert _verdicts(document)["ttft"] == "regression"


# --until-decided (issue 34): blocks of 16 requests per arm, one at a time (a closed loop of
# four lines its requests up in the twin's steps: a TTFT of two modes, its p50 between them);
# the slower twin is the healthy one with every engine step 1.2× as long (a rank's speed).
_UNTIL_DECIDED = {
    "concurrency": 1,
    "num_requests": 64,
    "blocks": 4,
    "workload": "synthetic:input=200,output=32",
    "until_decided": True,
    "seed": 1,
}
_SLOWER = """\
description: the healthy twin, every engine step 1.2x as long
data_parallel:
  size: 1
  rank_speed: [0.8333333]
"""


def _until_decided(a: str, b: str, out: Path) -> tuple[CompareResult, list[str]]:
    said: list[str] = []
    spec = CompareABSpec(urls=(a, b), out=out, **_UNTIL_DECIDED)  # type: ignore[arg-type]
    return compare_ab(spec, announce=said.append), said


@pytest.mark.e2e
def test_until_decided_calls_twin_servers_unchanged_within_the_planned_sample(
    tmp_path: Path,
) -> None:
    with (
        TwinProcess("healthy", load_time_s=0.2) as a,
        TwinProcess("healthy", load_time_s=0.2) as b,
    ):
        result, said = _until_decided(a.url, b.url, tmp_path / "ab")
    plan = result.levels[0].plan
    assert plan is not None
    # Said before the rest ran: the plan after the pilot block, then each look.
    assert said[0] == f"{plan.describe()}; at most {4 * plan.requests_per_arm} per arm"
    assert said[1].startswith("look 1 (block ")
    assert result.verdict == "no regression", [m.reason for _, m in result.undecided]
    assert {m.verdict for m in result.levels[0].comparison.metrics} == {"unchanged"}
    last = result.looks[-1]
    # Decided by the bound: the plan is an estimate at 80 % power, so one run in five may
    # need a look past it (64 planned, 256 on a busy host once); never past the bound.
    assert last.undecided == () and last.per_arm <= 4 * plan.requests_per_arm
    document = json.loads((tmp_path / "ab" / "compare.json").read_text())
    assert document["levels"][0]["plan"]["requests_per_arm"] == plan.requests_per_arm
    assert document["looks"][-1]["undecided"] == []


@pytest.mark.e2e
def test_until_decided_finds_a_20_percent_slower_twin_within_the_planned_sample(
    tmp_path: Path,
) -> None:
    slower = tmp_path / "slower.yaml"
    slower.write_text(_SLOWER)
    with (
        TwinProcess("healthy", load_time_s=0.2) as a,
        TwinProcess(str(slower), load_time_s=0.2) as b,
    ):
        result, _ = _until_decided(a.url, b.url, tmp_path / "ab")
    plan = result.levels[0].plan
    assert plan is not None and result.verdict == "regression"
    regressed = {m.metric: m for _, m in result.regressions}
    assert {"tpot", "e2e"} <= regressed.keys()
    # Decided at the look that first showed it: within the plan.
    assert regressed["e2e"].run_n <= plan.requests_per_arm
    assert regressed["e2e"].change_p50 is not None and regressed["e2e"].change_p50 > 0.1


def test_compare_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no baseline 'nope'"):
        compare_runs(CompareRunsSpec(base="nope", run=tmp_path, store=tmp_path / "store"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="not a run directory"):
        compare_runs(CompareRunsSpec(base=str(tmp_path / "empty"), run=tmp_path))
    assert main(["compare", "--url", "http://127.0.0.1:9"]) == 2


def _bench_like_run(root: Path, lines: list[bytes]) -> Path:
    run = RunDir.create(root)
    run.write_info(BenchRunInfo(wall_anchor_s=0.0))
    run.requests.write_bytes(b"".join(lines))
    return root


def _line(i: int) -> bytes:
    record = RequestRecord(
        id=str(i), scheduled_ts=i, sent_ts=i, first_token_ts=i + 0.1, last_token_ts=i + 0.2,
        end_ts=i + 0.2, labels={"level": "c=1"},
    )  # fmt: skip
    return json.dumps(dataclasses.asdict(record)).encode() + b"\n"


def test_a_garbage_line_names_file_and_line_and_a_cut_tail_is_dropped(tmp_path: Path) -> None:
    good = [_line(i) for i in range(30)]
    base = _bench_like_run(tmp_path / "base", good)
    cut = _bench_like_run(tmp_path / "cut", [*good, b'{"id": "30", "sched'])
    result = compare_runs(CompareRunsSpec(base=str(base), run=cut))
    assert result.levels[0].comparison.metrics[0].run_n == 30
    broken = _bench_like_run(tmp_path / "broken", [*good[:5], b"not json\n", *good[5:]])
    with pytest.raises(UserError, match=r"requests\.jsonl.*6"):
        compare_runs(CompareRunsSpec(base=str(base), run=broken))


# --- small samples on synthetic run directories (issue 15, item 5) -------------------------


def test_448x_ttft_with_35_vs_15_requests_is_a_regression(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", closed_loop_run(35))
    run = write_run(tmp_path / "run", closed_loop_run(15, seed=5, ttft=448.0))
    result = compare_runs(CompareRunsSpec(base=str(base), run=run))
    assert result.regressed and result.verdict == "regression"
    assert "ttft" in {m.metric for _, m in result.regressions}
    assert verdict_line(result).startswith("REGRESSION: ")
    assert compare_to_json(result)["verdict"] == "regression"


def test_error_rate_0_to_86_percent_is_a_regression(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", closed_loop_run(35))
    run = write_run(tmp_path / "run", with_failures(closed_loop_run(2, seed=5), 13))
    result = compare_runs(CompareRunsSpec(base=str(base), run=run))
    errors = {m.metric: m for _, m in result.regressions}["error_rate"]
    assert errors.run is not None and errors.run.mean == pytest.approx(13 / 15)
    assert "error_rate (c=4)" in verdict_line(result)


def test_tiny_equal_samples_are_inconclusive_never_no_regression(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", closed_loop_run(3))
    run = write_run(tmp_path / "run", closed_loop_run(3, seed=1))
    result = compare_runs(CompareRunsSpec(base=str(base), run=run))
    assert not result.regressed and result.inconclusive and result.verdict == "inconclusive"
    line = verdict_line(result)
    assert line.startswith("INCONCLUSIVE: ") and "No regression" not in line
    assert "ttft (c=4) needs about 10 vs 10 requests" in line
    assert "error_rate (c=4) needs about 10 vs 10 requests" in line
    document = compare_to_json(result)
    assert document["inconclusive"] is True and document["regressed"] is False
    ttft = next(m for m in document["levels"][0]["metrics"] if m["metric"] == "ttft")
    assert ttft["settle_n"] == (10, 10) and ttft["sample_unit"] == "requests"


def test_same_distribution_with_many_requests_is_no_regression(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", closed_loop_run(400, seed=1))
    run = write_run(tmp_path / "run", closed_loop_run(400, seed=2))
    result = compare_runs(CompareRunsSpec(base=str(base), run=run))
    assert result.verdict == "no regression", [m.reason for _, m in result.undecided]
    assert verdict_line(result) == "No regression."


def test_compare_runs_says_whether_the_runs_were_big_enough(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", closed_loop_run(600, seed=1))
    small = write_run(tmp_path / "small", closed_loop_run(12, seed=2))
    big = compare_runs(CompareRunsSpec(base=str(base), run=base))
    plan = big.levels[0].plan
    assert plan is not None and plan.pilot_per_arm == 600 and plan.requests_per_arm < 600
    line = big.levels[0].sample_line()
    assert line is not None and line.startswith(f"planned: ~{plan.requests_per_arm} requests")
    assert "from the base's 600 requests per arm" in line
    assert "the sample is big enough: 600 vs 600 requests" in line
    short = compare_runs(CompareRunsSpec(base=str(base), run=small, power=0.9))
    short_line = short.levels[0].sample_line()
    assert short_line is not None and "too small to decide reliably: 600 vs 12" in short_line
    assert "at 90% power" in short_line
    markdown = compare_markdown(short)
    assert "planned: " in markdown and "too small to decide reliably" in markdown
    document = compare_to_json(short)
    assert document["levels"][0]["plan"]["power"] == 0.9 and document["looks"] == []


def test_until_decided_flags_are_for_ab(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="--max-requests bounds --until-decided"):
        compare_ab(CompareABSpec(urls=("http://127.0.0.1:9", "http://127.0.0.1:9"), max_requests=9))
    args = ["compare", str(tmp_path), str(tmp_path), "--until-decided"]
    assert main(args) == 2
