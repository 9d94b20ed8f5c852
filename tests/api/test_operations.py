"""validate's operations checks against the real twin on 127.0.0.1: the longest generation
through a real cutting gateway (tests/api/test_diagnose_proxy.py run as a script: it drops
each connection a set time after the request arrived, as a gateway's read timeout does),
and the cold start of a twin validate starts itself, which `plan --from-run` takes as its
scale-up lead time."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from infertriage.api.operations import cold_start_check, long_generation_check
from infertriage.api.specs import ValidateSpec
from infertriage.api.target import Target
from infertriage.api.validate import validate
from infertriage.cli import main
from infertriage.schemas import CheckGroup, CheckStatus, Deployment, Thresholds
from infertriage.twin.process import TwinProcess

from .test_diagnose_proxy import cutting_proxy

# A short context: the longest generation the twin allows (~480 tokens) takes ~4 s.
_SHORT = "description: short context\nmodel: llama-3.1-8b\nengine: {max_model_len: 512}\n"
_LOADING = "description: slow load\nmodel: llama-3.1-8b\nengine: {load_time_s: 1.5}\n"


@pytest.fixture(scope="module")
def short_twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinProcess]:
    scenario = tmp_path_factory.mktemp("scenario") / "short.yaml"
    scenario.write_text(_SHORT, encoding="utf-8")
    with TwinProcess(str(scenario), load_time_s=0.2) as twin:
        yield twin


def _check(url: str, max_s: float, out: Path):  # type: ignore[no-untyped-def]
    spec = ValidateSpec(url=url, long_generation_max_s=max_s)
    return long_generation_check(url, spec, out, Thresholds())


def test_a_gateway_that_cuts_streams_fails_with_the_second_it_cuts_at(
    short_twin: TwinProcess, tmp_path: Path
) -> None:
    with cutting_proxy(short_twin.url, 1.5) as url:
        check, run_dir = _check(url, 20.0, tmp_path / "lg")
    assert check.status is CheckStatus.FAIL and check.group is CheckGroup.OPERATIONS
    assert 1.4 <= check.figures["cut_at_s"] <= 2.5  # the cut, plus a busy machine's lag
    assert check.figures["cut_fraction"] == 1.0
    assert check.figures["estimated_s"] > check.figures["cut_at_s"]  # ~4 s of tokens, cut at 1.5
    assert "application.stream_cut" in check.detail
    assert "raise the gateway's read/idle timeout above the longest generation" in check.detail
    assert 400 < check.figures["max_tokens"] <= 512  # the server's limit, not a guess
    assert (run_dir / "requests.jsonl").is_file()


def test_the_same_generation_uncut_passes(short_twin: TwinProcess, tmp_path: Path) -> None:
    with cutting_proxy(short_twin.url, 0) as url:
        check, _ = _check(url, 30.0, tmp_path / "lg")
    assert check.status is CheckStatus.PASS, check.detail
    assert check.figures["output_tokens"] == check.figures["max_tokens"]
    assert "uncut" in check.detail


def test_a_cap_shorter_than_the_generation_says_how_long_to_allow(
    short_twin: TwinProcess, tmp_path: Path
) -> None:
    check, _ = _check(short_twin.url, 2.5, tmp_path / "lg")
    assert check.status is CheckStatus.WARN, check.detail
    assert "rerun with --long-generation-max-s" in check.detail
    assert check.figures["estimated_s"] > check.figures["ran_s"]


def test_validate_measures_the_twins_cold_start_and_plan_leads_with_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "loading.yaml"
    scenario.write_text(_LOADING, encoding="utf-8")
    result = validate(
        ValidateSpec(
            scenario=str(scenario),
            concurrency=2,
            num_requests=4,
            workload="synthetic:input=32,output=16",
            functional=False,
            long_generation_max_s=1.0,
            out=tmp_path / "run",
        )
    )
    checks = {c.name: c for c in result.checks}
    cold = checks["operations.cold_start"]
    assert cold.status is CheckStatus.PASS, cold.detail
    figures = cold.figures
    assert figures["health_ready_s"] >= 1.5  # the scenario's model load time, at least
    assert figures["health_ready_s"] < figures["first_token_s"] < figures["health_ready_s"] + 5
    # a 2,048-token prefix: prefilled once, then found in the cache
    assert figures["prefix_tokens"] == 2048
    assert figures["warm_ttft_s"] < figures["cold_ttft_s"]
    assert checks["operations.gateway_timeout"].status is CheckStatus.WARN  # capped at 1 s
    curve = tmp_path / "day.csv"
    curve.write_text("time,requests_per_s\n00:00,5\n12:00,50\n", encoding="utf-8")
    args = ["plan", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--traffic", str(curve)]
    assert main([*args, "--from-run", str(tmp_path / "run"), "--json"]) == 0
    traffic = json.loads(capsys.readouterr().out)["traffic"]
    assert traffic["lead_time_s"] == pytest.approx(figures["first_token_s"])
    assert main([*args, "--from-run", str(tmp_path / "run"), "--cold-start", "600", "--json"]) == 0
    traffic = json.loads(capsys.readouterr().out)["traffic"]
    assert traffic["lead_time_s"] == 600 and traffic["scale_down_window_s"] == 600


def test_a_server_already_up_has_no_measurable_cold_start() -> None:
    target = Target(
        "http://127.0.0.1:9", None, None, None, Deployment(), "http://127.0.0.1:9", False
    )
    check = cold_start_check(target, ValidateSpec(url=target.url))
    assert check.status is CheckStatus.SKIP
    assert "already running" in check.detail and "plan --cold-start" in check.detail
