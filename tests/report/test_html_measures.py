"""The HTML report of what bench's searches and standards and an A/B run's plan add.

Real run directories, made by the real commands against a loopback server whose model
name is hostile: `bench --find-max-rate` gives the goodput search's headline and steps;
`bench --standard mlperf` LoadGen's block per level with its INVALID (and `validate
--standard mlperf` its performance level's); `compare --url A
--url B --until-decided` the sample plan and the looks. An over-saturated level (which
takes 10 s of real load to call) is written into a real short bench run by bench's own
writer (`report.bench.level_to_json`). A page of hostile strings in every new field
renders none of them as markup; a run from before these keys renders without them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from infertriage.analyze.stats.latency import summarize
from infertriage.api.bench import run_bench
from infertriage.api.specs import BenchSpec, ClientSpec
from infertriage.cli import main
from infertriage.loadgen.saturation import Saturation
from infertriage.report.bench import level_to_json
from infertriage.report.html import (
    AbPlan,
    LevelView,
    Look,
    MaxRateView,
    RateStep,
    RunReport,
    render_report,
)
from infertriage.schemas import BenchRunInfo, BenchSummary, RequestRecord, RunDir
from infertriage_testing.testserver import Behavior, ServerConfig, serve_in_thread

EVIL = "<img src=x onerror=alert(1)><script>alert(2)</script>\"'&"
ESCAPED = "&lt;img src=x onerror=alert(1)&gt;&lt;script&gt;"
SMALL = ["--workload", "synthetic:input=8,output=4"]


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    behavior = Behavior(ttft_s=0.02, itl_s=0.002, num_tokens=4)
    with serve_in_thread(ServerConfig(model=EVIL, behavior=behavior)) as (base, _):
        yield base


def _page(run: Path, capsys: pytest.CaptureFixture[str]) -> tuple[list[str], str]:
    capsys.readouterr()
    assert main(["report", str(run), "--json"]) == 0, capsys.readouterr().err
    document = json.loads(capsys.readouterr().out)
    html = (run / "report.html").read_text(encoding="utf-8")
    assert "<script" not in html and "<img" not in html
    return list(document["sections"]), html


def test_a_goodput_search_shows_its_headline_and_every_step(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "search"
    result = run_bench(
        BenchSpec(
            url=url, find_max_rate=True, goodput="ttft=1s", max_concurrency=4,
            num_requests=30, rate_tolerance=0.5, out=run,
            workload="synthetic:input=8,output=4",
            client=ClientSpec(endpoint="completions"), check_tokens=False,
        )
    )  # fmt: skip
    search = result.max_rate
    assert search is not None and search.steps
    sections, html = _page(run, capsys)
    assert sections.index("maxrate") < sections.index("levels")
    assert "Goodput search" in html and "ttft ≤ 1000 ms" in html
    low, high = (f"{v:.3g}" if v is not None else "—" for v in search.bracket)
    assert f"bracket [{low}, {high}] req/s" in html
    if search.max_rate is not None:
        assert f"Max rate {search.max_rate:.3g} req/s (attainment " in html
    else:
        assert "No rate held" in html
    steps_table = html.split("Steps, in the order run")[1].split("</table>")[0]
    assert steps_table.count("<tr>") == len(search.steps) + 1  # the head, and a row a step
    for step in search.steps:
        assert f"<td>{step.rate:.3g}</td><td>{step.num_judged:,}</td>" in steps_table
    assert ("holds" in steps_table) == any(s.holds for s in search.steps)
    assert ESCAPED in html  # the server's model, among the run's facts


def test_an_mlperf_run_shows_loadgens_block_per_level_with_its_verdict(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "mlperf"
    args = ["bench", "--url", url, "--standard", "mlperf", "--mlperf-model", "llama3_1-8b"]
    args += ["--rate", "4,8", "--duration", "1", *SMALL, "--no-tokenize-check"]
    assert main([*args, "--out", str(run), "--json"]) == 0
    sections, html = _page(run, capsys)
    assert sections.index("levels") < sections.index("mlperf")
    mlperf = html.split('<section id="mlperf">')[1].split("</section>")[0]
    for level in ("rate=4", "rate=8"):
        assert f'<h3>{level} <span class="status s-fail">INVALID</span></h3>' in mlperf
    assert mlperf.count("<pre>") == 2 and mlperf.count("MLPerf Results Summary") == 2
    assert "Result is : INVALID" in mlperf and "Min duration satisfied : NO" in mlperf
    assert f"SUT name : {ESCAPED}" in mlperf  # the server's model, as text
    # without the summary file, run.json's `mlperf` still gives the verdict
    (run / "mlperf_log_summary.txt").unlink()
    _, html = _page(run, capsys)
    assert html.count('<span class="status s-fail">INVALID</span></h3>') == 2
    assert "mlperf_log_summary.txt is missing" in html and "TTFT Early Stopping Result:" in html


def test_validate_with_the_standard_shows_its_performance_levels_block(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "validate"
    args = ["validate", "--url", url, "--standard", "mlperf", "--mlperf-model", "llama3_1-8b"]
    args += ["--rate", "4", "--duration", "1", "--skip-functional", *SMALL]
    assert main([*args, "--out", str(run), "--json"]) == 1  # far too short: NOT READY
    sections, html = _page(run, capsys)
    assert "mlperf" in sections and "checks" in sections
    mlperf = html.split('<section id="mlperf">')[1].split("</section>")[0]
    assert mlperf.count("<pre>") == 1 and "Result is : INVALID" in mlperf
    assert '<span class="status s-fail">INVALID</span></h3>' in mlperf


def test_an_over_saturated_level_shows_its_verdict_and_evidence(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "saturated"
    result = run_bench(
        BenchSpec(
            url=url, rates=(50.0,), num_requests=12, out=run,
            workload="synthetic:input=8,output=4", check_tokens=False,
        )
    )  # fmt: skip
    verdict = Saturation(
        rule="queue", at_s=12.5, window_s=6.0, queue_start=3, queue_end=41, queue_slope=6.3,
        in_flight_start=5, in_flight_end=44, achieved_rate=8.1, target_rate=50.0,
        ttft_slope=0.8, num_due=600, num_finished=90,
    )  # fmt: skip
    level = replace(result.levels[0], saturation=verdict)
    store = RunDir.open(run)
    info = store.read_info()
    assert isinstance(info, BenchRunInfo)
    summary = info.summary.model_dump(mode="json", by_alias=True)
    summary["levels"] = [json.loads(json.dumps(level_to_json(level, result.thresholds)))]
    store.write_info(info.model_copy(update={"summary": BenchSummary.model_validate(summary)}))
    _, html = _page(run, capsys)
    levels = html.split('<section id="levels">')[1].split("</section>")[0]
    assert '<span class="status s-fail">over-saturated</span>' in levels.split("</table>")[0]
    assert "rate=50: " in levels and verdict.describe() in levels
    assert "the queue grew from 3 to 41 requests" in levels


def test_an_until_decided_ab_run_shows_its_plan_and_looks(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "ab"
    args = ["compare", "--url", url, "--url", url, "--num-requests", "8", "--blocks", "2"]
    args += ["--until-decided", *SMALL]
    assert main([*args, "--out", str(run), "--json"]) in (0, 1)
    saved = json.loads((run / "compare.json").read_text(encoding="utf-8"))
    _, html = _page(run, capsys)
    ab = html.split('<section id="ab">')[1].split("</section>")[0]
    plan = saved["levels"][0]["plan"]
    if plan is not None:
        assert f"planned: ~{plan['requests_per_arm']} requests per arm" in ab
    assert saved["looks"], saved
    looks = ab.split("Looks (<code>--until-decided</code>)")[1].split("</table>")[0]
    assert looks.count("<tr>") == len(saved["looks"]) + 1
    for look in saved["looks"]:
        assert f"<tr><td>{look['look']}</td><td>{look['block']}</td>" in looks
    for note in saved["notes"]:
        assert note.replace("&", "&amp;").replace("'", "&#x27;") in ab


def test_every_new_field_is_text(tmp_path: Path) -> None:
    summary = summarize([RequestRecord(id="r", scheduled_ts=0.0, sent_ts=0.0)])
    level = LevelView(
        EVIL, summary, (), np.asarray([0.1]), np.asarray([0.01]), saturation=EVIL, mlperf=EVIL
    )
    step = RateStep(2.0, 30, 0.9, (0.8, 0.97), None, False, EVIL)
    search = MaxRateView(
        rule="attainment", target=0.9, slos=((EVIL, 0.3),), max_rate=None, attainment=None,
        interval=None, bracket=(None, 2.0), converged=False, why=EVIL, steps=(step,),
    )  # fmt: skip
    plan = AbPlan(EVIL, ((EVIL, 40),), (Look(1, 2, 8, 0.01, (EVIL,)),), (EVIL,), EVIL)
    report = RunReport(
        command="bench", target="t", run_dir=tmp_path, created_unix_s=0.0, status="complete",
        levels=(level,), max_rate=search, ab_plan=plan,
    )  # fmt: skip
    page = render_report(report)
    assert {"maxrate", "levels", "mlperf"} <= set(page.sections)
    assert "<img" not in page.html and "<script" not in page.html
    assert page.html.count(ESCAPED) >= 5  # the step's why, the rule, the search's why, …
    assert "No rate held" in page.html and "undecided" in page.html and "INVALID" in page.html


def test_a_run_without_these_keys_renders_without_their_sections(tmp_path: Path) -> None:
    report = RunReport(
        command="bench", target="t", run_dir=tmp_path, created_unix_s=0.0, status="complete"
    )
    page = render_report(report)
    assert not {"maxrate", "mlperf"} & set(page.sections)
    assert "over-saturated" not in page.html and "Sample plan" not in page.html
