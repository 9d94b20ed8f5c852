"""`bench --find-max-rate` wired through bench: the probe, one level a step, run.json.

A loopback server answers every request in about 60 ms, however many arrive; the client
caps its requests in flight at 4 (`--max-concurrency`), so about 60 req/s is all it can
offer. Above that the sends queue in the client: TTFT from the send still meets the SLO,
but TTFT from the intended start grows, so the level is unstable (INVALID) and the rate
does not hold. The search must bracket that capacity, each step a level of its own.
"""

from __future__ import annotations

from pathlib import Path

from infertriage.api.bench import run_bench
from infertriage.api.specs import BenchSpec, ClientSpec
from infertriage.schemas import RequestRecord, RunDir
from infertriage_testing.testserver import Behavior, ServerConfig, serve_in_thread


def test_the_search_runs_a_level_per_step_and_keeps_them_in_the_run(tmp_path: Path) -> None:
    behavior = Behavior(ttft_s=0.05, itl_s=0.002, num_tokens=4)
    with serve_in_thread(ServerConfig(behavior=behavior)) as (url, _):
        result = run_bench(
            BenchSpec(
                url=url,
                find_max_rate=True,
                goodput="ttft=1s",
                max_concurrency=4,
                num_requests=60,
                rate_tolerance=0.2,
                out=tmp_path / "run",
                workload="synthetic:input=8,output=4",
                client=ClientSpec(endpoint="completions"),
                check_tokens=False,
            )
        )
    search = result.max_rate
    assert search is not None
    steps = [(round(s.rate, 1), s.holds, s.why) for s in search.steps]
    probe = result.levels[0]
    assert probe.name == "probe concurrency=4" and probe.mode == "concurrency"
    assert search.probe_rps == probe.summary.request_throughput > 0
    # every later level is one step, at its rate, open loop
    rates = list(result.levels[1:])
    assert [lv.value for lv in rates] == [s.rate for s in search.steps], steps
    assert all(lv.mode == "rate" for lv in rates)
    assert search.steps[0].rate == round(0.8 * search.probe_rps, 4)
    low, high = search.bracket
    assert low is not None and high is not None and low < high <= 1.25 * low, steps
    assert search.max_rate == low and search.at_max is not None
    assert all(not s.holds for s in search.steps if s.rate >= high), steps
    run = RunDir.open(tmp_path / "run")
    saved = run.read_info().summary.max_rate
    assert saved is not None and saved["max_rate"] == low and len(saved["steps"]) == len(steps)  # type: ignore[arg-type]
    labels = {r.labels["level"] for r in run.iter_records(run.requests, RequestRecord)}
    assert labels == {lv.name for lv in result.levels}
