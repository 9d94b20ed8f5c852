"""`compare --until-decided` against servers that go bad (issue 34's hostile sweep).

Two loopback servers answer alike until B fails every request from the sequential run's
plan on: the verdict must be B's error-rate regression, judged on every request sent, not
the "unchanged" of what B answered before; B failing from
the start leaves nothing to plan by, and the run says it runs the fixed blocks instead;
and a bound (`--max-requests`) far below the planned sample gives a verdict, not a
traceback.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from infertriage.api.compare import compare_ab
from infertriage.api.specs import ClientSpec, CompareABSpec
from infertriage_testing.testserver import Behavior, PathServer, ServerConfig, serve_in_thread

_OK = Behavior(ttft_s=0.01, itl_s=0.002, num_tokens=4)


def _fail(server: PathServer) -> None:
    server.config = dataclasses.replace(server.config, behavior=Behavior(status=500))


def _spec(urls: tuple[str, str], out: Path, max_requests: int) -> CompareABSpec:
    return CompareABSpec(
        urls=urls,
        client=ClientSpec(endpoint="completions"),
        concurrency=4,
        num_requests=40,  # blocks of 10 per arm
        until_decided=True,
        max_requests=max_requests,
        workload="synthetic:input=8,output=4",
        out=out,
    )


def test_an_arm_that_dies_mid_run_is_a_regression_not_unchanged(tmp_path: Path) -> None:
    with (
        serve_in_thread(ServerConfig(behavior=_OK)) as (url_a, _),
        serve_in_thread(ServerConfig(behavior=_OK)) as (url_b, server_b),
    ):
        # B fails every request from the plan on (the pilot block answered alike): the run
        # goes on past it whatever the host's speed. (Failing from the first look on left it
        # to that look to leave a metric undecided; on a busy host it decided every one, the
        # run ended there, and B's failures were never sent: one run of `make test` in ~10.)
        result = compare_ab(
            _spec((url_a, url_b), tmp_path / "run", max_requests=1000),
            announce=lambda line: _fail(server_b) if line.startswith("planned:") else None,
        )
    verdicts = {m.metric: m.verdict for m in result.levels[0].comparison.metrics}
    assert verdicts["error_rate"] == "regression", (verdicts, result.notes)
    assert result.regressed
    assert any("answered no request" in note for note in result.notes), result.notes


def test_a_bound_far_below_the_plan_still_gives_a_verdict(tmp_path: Path) -> None:
    with (
        serve_in_thread(ServerConfig(behavior=_OK)) as (url_a, _),
        serve_in_thread(ServerConfig(behavior=_OK)) as (url_b, _),
    ):
        result = compare_ab(_spec((url_a, url_b), tmp_path / "run", max_requests=1))
    assert not result.regressed  # like servers; the one look at the bound takes all of alpha
    assert result.looks and result.looks[-1].alpha > 0


def test_an_arm_failing_from_the_start_says_the_blocks_are_fixed(tmp_path: Path) -> None:
    lines: list[str] = []
    with (
        serve_in_thread(ServerConfig(behavior=_OK)) as (url_a, _),
        serve_in_thread(ServerConfig(behavior=Behavior(status=500))) as (url_b, _),
    ):
        result = compare_ab(
            _spec((url_a, url_b), tmp_path / "run", max_requests=200), announce=lines.append
        )
    assert any("runs the 4 fixed blocks instead" in line for line in lines), lines
    verdicts = {m.metric: m.verdict for m in result.levels[0].comparison.metrics}
    assert verdicts["error_rate"] == "regression" and result.regressed
